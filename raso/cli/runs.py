"""`raso optimize`, `raso resume RUN_DIR` and `raso report RUN_DIR`: optimization runs from the command line.

`raso optimize` options may also come from a TOML/YAML config file (`--config`); flags given on the command
line override the file. With the embedded local model and no schedule or budget given, small quick defaults
apply (see raso.engine.config.QUICK_LOCAL_DEFAULTS) so the run finishes in minutes on a laptop CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from raso.engine.config import QUICK_LOCAL_DEFAULTS, ConfigError, build_config


def _harness_kwargs(pairs: list[str]) -> dict[str, Any] | None:
    if not pairs:
        return None
    kwargs: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--harness-arg {pair!r}: expected KEY=VALUE")
        try:
            kwargs[key.strip()] = json.loads(value)
        except ValueError:
            kwargs[key.strip()] = value
    return kwargs


def add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--harness", default=None, help="registered harness name or 'package.module:Class' "
                        "(default: spreadsheet)")
    parser.add_argument("--harness-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="keyword argument for the harness constructor (repeatable; VALUE parsed as JSON if it can be)")
    parser.add_argument("--model", default=None, help="target model M, any litellm string (default: the embedded "
                        "local/qwen2.5-coder-0.5b)")
    parser.add_argument("--optimizer-model", default=None, help="model for every RASO role (default: --model)")
    parser.add_argument("--api-base", default=None, help="OpenAI-compatible server URL for --model (vLLM, llama.cpp, ...)")
    parser.add_argument("--optimizer-api-base", default=None, help="server URL for --optimizer-model")


def register(subparsers: argparse._SubParsersAction) -> None:
    opt = subparsers.add_parser(
        "optimize",
        help="optimize a skill for a harness: RASI/RFSI init, then RASU/RFSU updates behind a validation gate",
        description="Write an initial skill (RASI: retrieval-augmented, zero rollouts), then improve it from rollouts "
        "(RASU), accepting a candidate only if its mean val reward is strictly higher. Everything lands in a run "
        "directory that `raso resume` continues and `raso report` summarizes. With the embedded model and no "
        "schedule/budget options, quick defaults apply: "
        + ", ".join(f"{k}={v}" for k, v in QUICK_LOCAL_DEFAULTS.items()) + ".",
    )
    add_model_options(opt)
    opt.add_argument("--config", type=Path, default=None, help="a TOML/YAML/JSON file of options (flags override it)")
    opt.add_argument("--init", default=None, help="rasi | rfsi | FILE (a SKILL.md to start from); default rasi")
    opt.add_argument("--update", choices=("rasu", "rfsu"), default=None, help="default rasu")
    opt.add_argument("--no-adapt", dest="adapt", action="store_const", const=False, default=None,
                     help="paste raw corpus sections instead of adapted lessons (ablation)")
    opt.add_argument("--retrieval", choices=("bm25", "dreamer", "field"), default=None, help="default bm25")
    opt.add_argument("--index", type=Path, default=None, help="a saved section index (default: the starter corpus)")
    opt.add_argument("--epochs", type=int, default=None, help="passes over train (default 2)")
    opt.add_argument("--minibatch", type=int, default=None, help="train tasks per iteration (default 40)")
    opt.add_argument("--chunk-size", type=int, default=None, help="trajectories per gradient call (default 8)")
    opt.add_argument("-k", "--k", dest="k", type=int, default=None, help="sections retrieved per query (default 5)")
    opt.add_argument("--num-requirements", type=int, default=None, help="M requirement-query pairs (default 5)")
    opt.add_argument("--max-iterations", type=int, default=None)
    opt.add_argument("--train-limit", type=int, default=None, help="use only the first N train tasks")
    opt.add_argument("--val-limit", type=int, default=None, help="use only the first N val tasks")
    opt.add_argument("--budget-rollouts", type=int, default=None, help="train + val rollouts; never exceeded")
    opt.add_argument("--budget-usd", type=float, default=None, help="stop once this much has been spent")
    opt.add_argument("--seed", type=int, default=None)
    opt.add_argument("--workers", type=int, default=None, help="rollouts in parallel (default 4)")
    opt.add_argument("--agent-mode", choices=("none", "full", "select", "progressive"), default=None)
    opt.add_argument("--max-steps", dest="agent_max_steps", type=int, default=None,
                     help="environment actions per rollout (default: the harness's)")
    opt.add_argument("--max-reply-tokens", dest="agent_max_tokens", type=int, default=None,
                     help="reply tokens per agent turn (default: the harness's)")
    opt.add_argument("--run-dir", type=Path, default=None, help="default runs/<harness>-<time>")
    opt.add_argument("--no-progress", action="store_true", help="no live progress display")
    opt.set_defaults(func=run_optimize)

    res = subparsers.add_parser("resume", help="continue an interrupted optimization run from its checkpoint",
                                description="Continue the run in RUN_DIR from checkpoint.json. Model calls that "
                                "completed before the interruption are replayed from the run's cache, not re-paid.")
    res.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    res.add_argument("--no-progress", action="store_true")
    res.set_defaults(func=run_resume)

    rep = subparsers.add_parser("report", help="(re)write report.md and the PNG plots of a run directory")
    rep.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    rep.set_defaults(func=run_report)


_OVERRIDE_KEYS = ("harness", "model", "optimizer_model", "api_base", "optimizer_api_base", "init", "update", "adapt",
                  "retrieval", "index", "epochs", "minibatch", "chunk_size", "k", "num_requirements", "max_iterations",
                  "train_limit", "val_limit", "budget_rollouts", "budget_usd", "seed", "workers", "agent_mode",
                  "agent_max_steps", "agent_max_tokens", "run_dir")


def overrides_from_args(args: argparse.Namespace) -> dict[str, Any]:
    out = {key: getattr(args, key, None) for key in _OVERRIDE_KEYS}
    out["harness_options"] = _harness_kwargs(getattr(args, "harness_arg", []) or [])
    return {k: v for k, v in out.items() if v is not None}


def _error(message: str) -> None:
    print(f"raso: error: {message}", file=sys.stderr)


def _summary(result: Any) -> str:
    best = "-" if result.best_val is None else f"{result.best_val:.3f}"
    init = "-" if result.initial_val is None else f"{result.initial_val:.3f}"
    return (
        f"run directory: {result.run_dir}\n"
        f"best skill: {result.best_skill_path} (val {best}; s0 val {init})\n"
        f"iterations: {result.iterations}, accepted: {result.accepted}, rollouts: {result.rollouts_used} "
        f"({result.train_rollouts} train + {result.val_rollouts} val)\n"
        f"tokens: {result.prompt_tokens} prompt + {result.completion_tokens} completion, "
        f"cost ${result.cost_usd:.4f}, wall {result.wall_time_s:.1f}s\n"
        f"stopped: {result.stop_reason}\n"
        f"report: {Path(result.run_dir) / 'report.md'}"
    )


def _run_with_progress(fn: Any, no_progress: bool, title: str) -> Any:
    from raso.engine import Hooks, RichProgress

    if no_progress:
        return fn(Hooks())
    progress = RichProgress(title=title)
    with progress:
        return fn(Hooks(sinks=[progress]))


def run_optimize(args: argparse.Namespace) -> int:
    from raso.engine import run_optimization

    try:
        config = build_config(args.config, overrides_from_args(args))
    except ConfigError as exc:
        _error(str(exc))
        return 2
    if config.run_dir is None:
        from raso.engine.run_dir import default_run_dir

        config.run_dir = default_run_dir(config.harness)
    print(f"run directory: {config.run_dir}", file=sys.stderr)
    if config.quick_defaults_applied:
        print("quick defaults for the embedded model: "
              + ", ".join(f"{k}={getattr(config, k)}" for k in config.quick_defaults_applied)
              + " (give --epochs/--minibatch/--budget-rollouts to choose your own)", file=sys.stderr)
    return _execute(lambda hooks: run_optimization(config, hooks), args.no_progress,
                    f"raso optimize: {config.harness}", config.run_dir,
                    "the run directory keeps everything done so far; fix the cause and `raso resume` it")


def _execute(run: Any, no_progress: bool, title: str, run_dir: Any, llm_hint: str) -> int:
    """Run an optimization (new or resumed) with progress; map its failures to exit codes and hints."""
    from raso.engine import RunError
    from raso.llm import LLMError

    try:
        result = _run_with_progress(run, no_progress, title)
    except (RunError, ConfigError) as exc:
        _error(str(exc))
        return 2
    except LLMError as exc:
        _error(f"{exc} ({llm_hint})")
        return 1
    except KeyboardInterrupt:
        _error(f"interrupted; continue with `raso resume {run_dir}`")
        return 130
    print(_summary(result))
    return 0


def run_resume(args: argparse.Namespace) -> int:
    from raso.engine import resume

    return _execute(lambda hooks: resume(args.run_dir, hooks), args.no_progress,
                    f"raso resume: {args.run_dir}", args.run_dir, "fix the cause and `raso resume` again")


def run_report(args: argparse.Namespace) -> int:
    from raso.engine import RunDir, write_report

    rd = RunDir(args.run_dir)
    if not rd.checkpoint.exists() or not rd.config_json.exists():
        _error(f"{args.run_dir} is not a RASO run directory (no checkpoint.json / config.resolved.json)")
        return 2
    try:
        path = write_report(rd)
    except (ValueError, OSError) as exc:
        _error(f"cannot write the report for {args.run_dir}: {exc}")
        return 2
    print(path.read_text(encoding="utf-8"))
    print(f"report: {path}", file=sys.stderr)
    return 0
