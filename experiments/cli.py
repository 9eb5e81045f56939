"""`raso experiment run CONFIG` (also `python -m experiments run CONFIG`): run one of the paper's tables
(experiments/configs/*.yaml) as resumable cells; `raso experiment report RESULTS_DIR --html`: the experiment's
page (experiments/html_report.py).

The command is registered by this package through the `raso.commands` entry point group, which raso's CLI
reads: raso never imports experiments (the layer order is corpus_tools <- raso <- harnesses <- experiments).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def register(subparsers: argparse._SubParsersAction) -> None:
    add_actions(subparsers.add_parser("experiment", help="run a paper table's experiment (cells in parallel, "
                                      "resumable)", description=DESCRIPTION))


DESCRIPTION = ("Run the experiment a config describes: every (method, harness, seed, setting) cell, skipping finished "
               "cells and resuming interrupted ones; then write the tables (CSV, markdown, PNG) under "
               "<results_dir>/<name>/.")


CONFIGS = Path(__file__).resolve().parent / "configs"
#: The paper's tables by name: `raso experiment table NAME` runs configs/NAME_table.yaml or configs/NAME.yaml.
TABLES = ("init", "update", "stage_ablation", "adaptation_ablation", "k_sweep", "corpus_fraction", "cost")


def add_actions(parser: argparse.ArgumentParser) -> None:
    """The experiment command's actions (`run`, `table`, `report`) on `parser`."""
    commands = parser.add_subparsers(dest="experiment_command", metavar="ACTION")
    run = commands.add_parser("run", help="run (or continue) an experiment from its config file")
    run.add_argument("config", type=Path, help="experiment config (.yaml, .toml or .json), e.g. "
                     "experiments/configs/init_table.yaml")
    _run_options(run)
    run.set_defaults(func=run_command)
    table = commands.add_parser(
        "table", help="run (or continue) one of the paper's tables by name: " + ", ".join(TABLES),
        description="The paper's table NAME from its shipped config (experiments/configs/), given the data "
        "folders (--harness-arg NAME.data_dir=PATH --harness-arg NAME.split=paper), a model and a corpus index "
        "(--set retrieval.index=DIR). Start with --dry-run: it prints every cell, its rollouts and calls and an "
        "estimate of its USD before anything is paid for.")
    table.add_argument("table", choices=TABLES, metavar="NAME", help=", ".join(TABLES))
    _run_options(table)
    table.set_defaults(func=table_command)
    report = commands.add_parser("report", help="write report.html of an experiment's results folder",
                                 description="Write RESULTS_DIR/report.html (the score table with CIs, per-task "
                                 "paired differences, links to each cell's run report) and print its path.")
    report.add_argument("results_dir", type=Path, metavar="RESULTS_DIR",
                        help="an experiment's results folder, <results_dir>/<name> (holds config.json and cells/)")
    report.add_argument("--html", action="store_true", help="the page (the only report this command writes)")
    report.set_defaults(func=report_command)
    def _help(args: argparse.Namespace) -> int:
        parser.print_help()
        return 2

    parser.set_defaults(func=_help)


def _run_options(run: argparse.ArgumentParser) -> None:
    """The options `run` and `table` share."""
    run.add_argument("--model", help="target model (any litellm model string); overrides the config's")
    run.add_argument("--optimizer-model", help="model of every optimizer role (RASO, TextGrad, GEPA reflection)")
    run.add_argument("--api-base", help="server URL for the target model")
    run.add_argument("--harness", action="append", dest="harnesses", metavar="NAME",
                     help="run only on this harness (repeatable); overrides the config's list")
    run.add_argument("--harness-arg", action="append", default=[], metavar="HARNESS.KEY=VALUE",
                     help="an option of one harness, e.g. --harness-arg webshop.data_dir=PATH --harness-arg "
                     "webshop.split=paper (repeatable; VALUE parsed as JSON/YAML; a key the harness does not take "
                     "is an error)")
    run.add_argument("--seeds", help="comma-separated seeds, e.g. 0,1,2")
    run.add_argument("--jobs", type=int, help="cells in parallel")
    run.add_argument("--backend", choices=("loky", "threading", "sequential", "ray", "dask"))
    run.add_argument("--cluster", help="Ray or Dask scheduler address (with --backend ray/dask)")
    run.add_argument("--results-dir", type=Path, help="default experiments/results")
    run.add_argument("--test-limit", type=int, help="score on the first N test tasks")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="an optimize option of every cell by its dotted name, e.g. --set schedule.epochs=1 "
                     "--set agent.max_steps=8 (repeatable; VALUE parsed as JSON/YAML)")
    run.add_argument("--allow-starter-corpus", action="store_true", default=None,
                     help="let split=paper harnesses retrieve from the starter corpus (a demo; refused otherwise)")
    run.add_argument("--dry-run", action="store_true",
                     help="print every cell (its data, models, budget, rollouts, expected model calls and "
                     "estimated USD) and exit without calling a model")


def table_config(name: str) -> Path:
    """The shipped config of the paper's table `name`."""
    return CONFIGS / f"{name}_table.yaml" if (CONFIGS / f"{name}_table.yaml").is_file() else CONFIGS / f"{name}.yaml"


def table_command(args: argparse.Namespace) -> int:
    args.config = table_config(args.table)
    return run_command(args)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    from raso.engine.config import merge, nested, parse_assignments, read_config_file

    values: dict[str, Any] = {
        "model": args.model, "optimizer_model": args.optimizer_model, "api_base": args.api_base,
        "harnesses": args.harnesses, "jobs": args.jobs, "backend": args.backend, "cluster": args.cluster,
        "results_dir": str(args.results_dir) if args.results_dir else None, "test_limit": args.test_limit,
        "allow_starter_corpus": args.allow_starter_corpus,
    }
    if args.harness_arg:
        values["harness_args"] = list(args.harness_arg)
    if args.seeds:
        values["seeds"] = [int(s) for s in args.seeds.split(",") if s.strip()]
    if args.set:
        optimize = nested(read_config_file(args.config).get("optimize") or {})
        values["optimize"] = merge(optimize, nested(parse_assignments(args.set)))
    return values


def run_command(args: argparse.Namespace) -> int:
    from raso.errors import ConfigError

    from .config import load_experiment
    from .plan import format_experiment_plan, plan_experiment
    from .runner import preflight, run_experiment

    try:
        if args.dry_run:
            config = load_experiment(args.config, _overrides(args))
            preflight(config)
            print(format_experiment_plan(plan_experiment(config)))
            return 0
        summary = run_experiment(args.config, _overrides(args))
    except (ConfigError, ValueError) as exc:
        print(f"raso: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(summary.model_dump(mode="json"), indent=1))
    if summary.failed:
        print(f"{len(summary.failed)} cell(s) failed (details in {summary.results_dir}/failures.json); rerun the "
              "same command to retry them", file=sys.stderr)
        return 1
    return 0


def report_command(args: argparse.Namespace) -> int:
    from .html_report import NotAnExperimentError, write_experiment_html

    try:
        path = write_experiment_html(args.results_dir)
    except (NotAnExperimentError, OSError) as exc:
        print(f"raso: error: cannot write the report of {args.results_dir}: {exc}", file=sys.stderr)
        return 2
    print(path)
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m experiments ACTION ...`: the `raso experiment` command without the raso CLI around it."""
    parser = argparse.ArgumentParser(prog="python -m experiments", description=DESCRIPTION)
    add_actions(parser)
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)
