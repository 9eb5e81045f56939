"""`raso optimize`, `raso resume RUN_DIR` and `raso report RUN_DIR [--html]`: optimization runs from the command line.

`raso optimize` options may also come from a TOML/YAML config file (`--config`); flags and `--set KEY=VALUE`
given on the command line override the file. With the embedded local model, each option of the quick schedule
that nothing sets takes its small value (see raso.engine.config.quick_schedule) so the run finishes in minutes
on a laptop CPU.
"""

from __future__ import annotations

import argparse
import errno
import sys
from pathlib import Path
from typing import Any

from raso.cli.options import add_config_options, config_overrides
from raso.engine.config import QUICK_LOCAL_DEFAULTS
from raso.errors import ConfigError
from raso.fileio import atomic_write_text


def register(subparsers: argparse._SubParsersAction) -> None:
    opt = subparsers.add_parser(
        "optimize",
        help="optimize a skill for a harness: RASI/RFSI init, then RASU/RFSU updates behind a validation gate",
        description="Write an initial skill (RASI: retrieval-augmented, zero rollouts), then improve it from rollouts "
        "(RASU), accepting a candidate only if its mean val reward is strictly higher; at the end s0 and the best "
        "skill are scored on test. Everything lands in a run directory that `raso resume` continues and "
        "`raso report` summarizes. With the embedded model, quick defaults fill each of these options that is not "
        "given: " + ", ".join(f"{k}={v}" for k, v in QUICK_LOCAL_DEFAULTS.items()) + ". Only the common options "
        "have a flag; `raso options [SECTION]` lists every option that --set KEY=VALUE and --config take.",
    )
    opt.add_argument("--config", type=Path, default=None, help="a TOML/YAML/JSON file of options (flags override it)")
    opt.set_defaults(func=run_optimize, config_fields=add_config_options(opt))
    opt.add_argument("--no-progress", action="store_true", help="no live progress display")
    opt.add_argument("--plan", action="store_true", help="print the run's cost plan (rollouts per phase, model "
                     "calls, tokens and USD per role) without calling any model, and exit")

    res = subparsers.add_parser("resume", help="continue an interrupted optimization run from its checkpoint",
                                description="Continue the run in RUN_DIR from checkpoint.json. Model calls that "
                                "completed before the interruption are replayed from the run's cache, not re-paid.")
    res.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    res.add_argument("--no-progress", action="store_true")
    res.set_defaults(func=run_resume)

    rep = subparsers.add_parser("report", help="(re)write report.md, report.html and the PNG plots of a run directory",
                                description="Rewrite the run's report.md, its PNG plots and report.html (one "
                                "self-contained page: lineage, diffs, lesson provenance, per-task scores with "
                                "trajectories); print the markdown, or with --html the page's path.")
    rep.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    rep.add_argument("--html", action="store_true", help="print the path of report.html instead of the markdown")
    rep.set_defaults(func=run_report)


def _error(message: str) -> None:
    print(f"raso: error: {message}", file=sys.stderr)


#: How much of a rejected reply is shown on the terminal (the whole reply is saved in the run directory).
REPLY_PREVIEW_CHARS = 600
MAX_VALIDATION_LINES = 12


def describe_structured_failure(exc: Any, run_dir: Any = None) -> str:
    """A StructuredOutputError for a person: what failed, the validation errors, the start of the raw reply;
    the whole reply is saved as `failed_replies/<n>.txt` in `run_dir` (when it exists) and named."""
    validation = [line for line in str(getattr(exc, "validation_error", "")).splitlines() if line.strip()]
    raw = str(getattr(exc, "raw_text", "") or "")
    lines = [str(exc).splitlines()[0] if str(exc) else type(exc).__name__, "validation errors:"]
    lines += [f"  {line}" for line in validation[:MAX_VALIDATION_LINES]]
    if len(validation) > MAX_VALIDATION_LINES:
        lines.append(f"  ... {len(validation) - MAX_VALIDATION_LINES} more line(s)")
    preview = raw[:REPLY_PREVIEW_CHARS] + (" [...]" if len(raw) > REPLY_PREVIEW_CHARS else "")
    lines += ["start of the model's reply:", *[f"  | {line}" for line in (preview or "(empty)").splitlines()]]
    if run_dir is not None and Path(run_dir).is_dir():
        folder = Path(run_dir) / "failed_replies"
        folder.mkdir(exist_ok=True)
        path = folder / f"{len(list(folder.glob('*.txt'))) + 1:03d}.txt"
        atomic_write_text(path, raw)
        lines.append(f"the whole reply ({len(raw)} characters) is saved in {path}")
    lines.append("a model behind an OpenAI-compatible server (vLLM, llama.cpp, Ollama) can be asked to enforce the "
                 "schema: --structured-output json_schema (--optimizer-structured-output for the optimizer)")
    return "\n".join(lines)


def _summary(result: Any, announced: bool = False) -> str:
    """The closing lines; the run directory is named unless `announced` already did at the start."""
    from raso.llm.ledger import cost_text

    best = "-" if result.best_val is None else f"{result.best_val:.3f}"
    init = "-" if result.initial_val is None else f"{result.initial_val:.3f}"
    return (
        ("" if announced else f"run directory: {result.run_dir}\n") +
        f"best skill: {result.best_skill_path} (val {best}; s0 val {init})\n"
        f"iterations: {result.iterations}, accepted: {result.accepted}, rollouts: {result.rollouts_used} "
        f"({result.train_rollouts} train + {result.val_rollouts} val)\n"
        f"test: {_test_line(result)}\n"
        f"tokens: {result.prompt_tokens} prompt + {result.completion_tokens} completion, "
        f"cost {cost_text(result.cost_usd, result.unpriced_calls)}, wall {result.wall_time_s:.1f}s\n"
        f"stopped: {result.stop_reason}\n"
        f"report: {Path(result.run_dir) / 'report.md'} (page: {Path(result.run_dir) / 'report.html'})"
    )


def _test_line(result: Any) -> str:
    if not result.test:
        return "not evaluated"
    parts = [f"{t.label} (v{t.version}) {t.mean_reward:.3f}" for t in result.test]
    return ", ".join(parts) + f" on {result.test[0].tasks} task(s), {result.test_rollouts} rollouts (not in the budget)"


def _run_with_progress(fn: Any, no_progress: bool, title: str) -> Any:
    """Call `fn(sinks)` with a live progress display unless `no_progress`."""
    if no_progress:
        return fn([])
    from raso.engine import RichProgress

    progress = RichProgress(title=title)
    with progress:
        return fn([progress])


def run_optimize(args: argparse.Namespace) -> int:
    import raso.api as api

    try:
        config = api.resolve_config(config_file=args.config, overrides=config_overrides(args, args.config_fields))
    except ConfigError as exc:
        _error(str(exc))
        return 2
    if config.quick_defaults_applied:
        print("quick defaults for the embedded model: "
              + ", ".join(f"{k}={config.get(k)}" for k in config.quick_defaults_applied)
              + " (give --set KEY=VALUE, or --epochs/--minibatch/--budget-rollouts, to choose your own)",
              file=sys.stderr)
    if args.plan:
        from raso.engine.plan import format_plan

        try:
            print(format_plan(api.plan(config=config)))
        except ConfigError as exc:
            _error(str(exc))
            return 2
        return 0
    if config.run_dir is None:
        from raso.engine.run_dir import default_run_dir

        config.run_dir = default_run_dir(config.harness)
    from raso.engine.events import RunStarted

    def announce(event: Any) -> None:  # once the run directory exists: a run refused before it starts makes none
        if isinstance(event, RunStarted):
            print(f"run directory: {event.run_dir}", file=sys.stderr)

    return _execute(lambda sinks: api.optimize(config=config, sinks=[announce, *sinks]), args.no_progress,
                    f"raso optimize: {config.harness}", config.run_dir,
                    "the run directory keeps everything done so far; fix the cause and `raso resume` it",
                    announced=True)


def _execute(run: Any, no_progress: bool, title: str, run_dir: Any, llm_hint: str, announced: bool = False) -> int:
    """Run an optimization (new or resumed) with progress; map its failures to exit codes and hints. `announced`:
    the run names its run directory when it starts, so the summary need not."""
    from raso.errors import RunError
    from raso.llm import LLMError, StructuredOutputError

    try:
        result = _run_with_progress(run, no_progress, title)
    except (RunError, ConfigError) as exc:
        _error(str(exc))
        return 2
    except StructuredOutputError as exc:
        _error(describe_structured_failure(exc, run_dir) + f"\n({llm_hint})")
        return 1
    except LLMError as exc:
        _error(f"{exc} ({llm_hint})")
        return 1
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        # every run file is written to a temporary sibling and renamed into place: what was saved is whole
        where = f" (writing {exc.filename})" if exc.filename else ""
        if (Path(run_dir) / "checkpoint.json").is_file():
            _error(f"the disk is full{where}; free some space, then `raso resume {run_dir}` continues from the last "
                   "checkpoint")
        else:
            _error(f"the disk is full{where} before the run started; free some space and run the command again")
        return 1
    except KeyboardInterrupt:
        if (Path(run_dir) / "checkpoint.json").is_file():
            _error(f"interrupted; continue with `raso resume {run_dir}`")
        else:  # before the run started: there is no run directory to resume
            _error("interrupted before the run started (nothing to resume); run the command again")
        return 130
    print(_summary(result, announced=announced))
    _warn_unusable_best(result.run_dir)
    return 0


def _warn_unusable_best(run_dir: Any) -> None:
    """The report's warning about an unusable best skill, on the terminal too (never fatal: the run is done)."""
    from raso.engine import RunDir
    from raso.engine.config import load_resolved
    from raso.engine.report_facts import best_skill_warning
    from raso.engine.state import RunState

    rd = RunDir(run_dir)
    try:
        state = RunState.model_validate_json(rd.checkpoint.read_text(encoding="utf-8"))
        warning = best_skill_warning(rd, state, load_resolved(rd.config_json).resolved_optimizer_model())
    except (OSError, ValueError):
        return
    if warning:
        print("warning: " + warning.replace("**", ""), file=sys.stderr)


def run_resume(args: argparse.Namespace) -> int:
    import raso.api as api

    return _execute(lambda sinks: api.resume(args.run_dir, sinks=sinks), args.no_progress,
                    f"raso resume: {args.run_dir}", args.run_dir, "fix the cause and `raso resume` again")


def run_report(args: argparse.Namespace) -> int:
    from raso.engine import RunDir, write_report

    rd = RunDir(args.run_dir)
    if not rd.checkpoint.exists() or not rd.config_json.exists():
        _error(f"{args.run_dir} is not a RASO run directory (no checkpoint.json / config.resolved.json)")
        return 2
    from raso.errors import RunError

    try:
        with rd.lock("report"):  # a command still working in the run writes its own report when it ends
            path = write_report(rd)
    except RunError as exc:
        _error(str(exc))
        return 2
    except (ValueError, OSError) as exc:
        _error(f"cannot write the report for {args.run_dir}: {exc}")
        return 2
    if args.html:
        print(rd.report_html)
        return 0
    print(path.read_text(encoding="utf-8"))
    print(f"report: {path} (and {rd.report_html.name})", file=sys.stderr)
    return 0
