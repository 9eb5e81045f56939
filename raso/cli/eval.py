"""`raso eval`: run real rollouts of a skill on a harness split and write trajectories and a summary.

Output directory layout:
    config.json            the resolved command (harness, split, model, mode, skills, agent config)
    skills/<name>.md       the skills given to the agent, as run
    trajectories/NNNN_<task>.json   one Rollout per task, in task order (readable with raso.agent.evaluate.load_trajectories)
    summary.json           mean reward, success rate, soft score, tokens, cost, wall time, per-task rows
    ledger.json            the gateway's usage ledger (every model call)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from raso.cli.heartbeat import Heartbeat
from raso.cli.options import add_config_options, config_overrides
from raso.engine.config import merge, nested
from raso.errors import ConfigError
from raso.skill import SKILL_FILE, Skill

_EVAL_FIELDS = ("harness", "harness_options", "models.target", "models.api_base", "models.structured_output",
                "models.prices", "agent", "program", "schedule.workers")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="run a skill on a harness split through the LLM gateway and write trajectories + a summary",
        description="Run the execution agent with a skill (or none) on every task of a harness split, in parallel, "
        "and write each trajectory as JSON plus a summary (mean reward, tokens, cost).",
    )
    parser.set_defaults(func=run_eval, config_fields=add_config_options(parser, _EVAL_FIELDS))
    parser.add_argument("--skill", action="append", default=[], metavar="FILE|FOLDER|none",
                        help="a skill folder or its SKILL.md (repeatable; the files beside it travel with it, as "
                        "with optimize --init), or 'none' for the no-skill baseline")
    parser.add_argument("--skills-dir", type=Path, default=None,
                        help="a folder of skill folders (each sub-folder holding a SKILL.md, with its files); "
                        "the candidate pool for --agent-mode select/progressive")
    parser.add_argument("--split", default="test", help="train | val | test (default: test)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N tasks of the split")
    parser.add_argument("--cache-dir", type=Path, default=None, help="opt-in on-disk response cache")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: runs/eval/<harness>-<split>-<mode>-<time>)")


class UsageError(Exception):
    """A bad command line; the message is printed and the exit status is 2."""


def _skill_folders(skills_dir: Path) -> list[Path]:
    """The skill folders below `skills_dir`: each folder holding a SKILL.md (the outermost where they nest; hidden
    folders such as .git skipped). Loose *.md files (a README, AGENTS.md) are not skills."""
    if not skills_dir.is_dir():
        raise UsageError(f"--skills-dir {skills_dir}: not a folder")
    if (skills_dir / SKILL_FILE).is_file():
        raise UsageError(f"--skills-dir {skills_dir}: this folder is itself a skill (it holds {SKILL_FILE}); pass it "
                         f"as --skill {skills_dir}")
    folders: list[Path] = []
    for document in sorted(skills_dir.rglob(SKILL_FILE)):
        relative = document.parent.relative_to(skills_dir)
        if any(part.startswith(".") for part in relative.parts) or document.is_symlink():
            continue
        if any(found in document.parents for found in folders):
            continue  # a SKILL.md inside a skill folder is one of that skill's files
        folders.append(document.parent)
    if not folders:
        raise UsageError(f"--skills-dir {skills_dir}: no skill folders (sub-folders holding a {SKILL_FILE}) found")
    return folders


def skill_paths(skill_args: list[str], skills_dir: Path | None) -> list[Path]:
    """The skills of --skill FILE|FOLDER (in order; 'none' contributes nothing) then --skills-dir's skill folders."""
    paths: list[Path] = []
    for item in skill_args:
        if item.strip().lower() == "none":
            continue
        path = Path(item)
        if not path.exists():
            raise UsageError(f"--skill {item}: no such file or folder")
        paths.append(path)  # read as `optimize --init` reads one (Skill.load_with_folder, in api.load_skills)
    if skills_dir is not None:
        paths.extend(_skill_folders(skills_dir))
    return paths


def load_skills(skill_args: list[str], skills_dir: Path | None, max_chars: int | None = None) -> list[Skill]:
    """Skills from --skill FILE|FOLDER then --skills-dir; with `max_chars`, a longer SKILL.md is refused."""
    import raso.api as api

    return api.load_skills(skill_paths(skill_args, skills_dir), max_chars=max_chars)


def resolve_mode(mode: str | None, has_skills: bool) -> str:
    if mode is None:
        return "full" if has_skills else "none"
    if mode == "none" and has_skills:
        raise UsageError("--agent-mode none runs without a skill; drop --skill/--skills-dir (or use --skill none)")
    if mode != "none" and not has_skills:
        raise UsageError(f"--agent-mode {mode} needs at least one skill (--skill FILE or --skills-dir DIR)")
    return mode


def _safe_name(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text).strip("._") or "skill"


def _default_out(harness: str, split: str, mode: str) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return Path("runs") / "eval" / f"{_safe_name(harness)}-{split}-{mode}-{stamp}"


def run_eval(args: argparse.Namespace) -> int:
    try:
        return _run_eval(args)
    except (UsageError, ConfigError) as exc:
        print(f"raso eval: {exc}", file=sys.stderr)
        return 2


def _run_eval(args: argparse.Namespace) -> int:
    import raso.api as api
    from raso.errors import RunError

    paths = skill_paths(args.skill, args.skills_dir)
    overrides = nested(config_overrides(args, args.config_fields))
    mode_given = overrides.get("agent", {}).get("mode")
    overrides = merge(overrides, {"agent": {"mode": resolve_mode(mode_given, bool(paths))}})
    config = api.resolve_config(overrides=overrides, quick_defaults=False)
    # the limit of an initial skill (`optimize --init`): a skill is sent whole in every agent prompt either way
    skills = api.load_skills(paths, max_chars=config.init.skill_max_chars)
    harness = api.load_harness(config.harness, config.harness_options)
    tasks = api.eval_tasks(harness, args.split, args.limit)
    gateway = api.make_gateway(config, cache_dir=args.cache_dir)
    api.check_budget_prices(config, gateway)  # before the output folder is made
    from raso.llm import LLMError

    try:
        gateway.preflight()  # an unknown provider, a missing key or install: before the output folder too
    except LLMError as exc:
        raise UsageError(f"the model cannot be used: {exc}") from None
    mode = config.agent.mode
    out = args.out or _default_out(harness.name, args.split, mode)
    out.mkdir(parents=True, exist_ok=True)
    for skill in skills:
        skill.save(out / "skills" / f"{_safe_name(skill.name)}.md")
    run_config = {
        "harness": harness.name, "harness_target": config.harness, "harness_options": config.harness_options,
        "split": args.split, "tasks": [t.id for t in tasks], "model": config.models.target,
        "api_base": config.models.api_base, "mode": mode, "skills": [s.name for s in skills],
        "workers": config.schedule.workers, "agent": config.agent.model_dump(mode="json"),
        "program": config.program.model_dump(mode="json"),
        "started_at": datetime.now(UTC).isoformat(),
    }
    (out / "config.json").write_text(json.dumps(run_config, indent=1), encoding="utf-8")

    print(f"raso eval: {len(tasks)} task(s) of {harness.name}/{args.split}, model {config.models.target}, mode {mode}, "
          f"skills {[s.name for s in skills] or 'none'} -> {out}", file=sys.stderr)
    done = [0]
    started = time.perf_counter()

    def progress(rollout: Any) -> None:
        done[0] += 1
        if rollout.outcome == "check_error":  # its error reads "check error: <reason>"; there is no reward
            status = (rollout.error or "check error").splitlines()[0][:200]
        elif rollout.error:
            status = f"error: {rollout.error.splitlines()[0][:120]}"
        else:
            status = f"reward {rollout.reward:.2f}"
        print(f"  [{done[0]}/{len(tasks)}] {rollout.task_id}: {status} ({rollout.env_steps} steps, "
              f"{rollout.wall_time_s:.1f} s)", file=sys.stderr)

    try:
        with Heartbeat("raso eval", gateway.ledger.totals):  # one rollout may take minutes before its line
            result = api.evaluate(harness, skills, split=args.split, config=config, limit=args.limit, out_dir=out,
                                  on_rollout=progress, gateway=gateway)
    except RunError as exc:
        raise UsageError(str(exc)) from None
    summary = unknown_cost({**result.summary(), "model": config.models.target, "mode": mode, "split": args.split,
                            "ledger_totals": gateway.ledger.totals(), "elapsed_s": time.perf_counter() - started})
    (out / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    gateway.ledger.save(out / "ledger.json")

    _print_summary(summary, out)
    if result.check_errors:
        first_check = result.check_errors[0]
        print(f"raso eval: the harness's check could not score {len(result.check_errors)} of {len(result.rollouts)} "
              f"rollout(s) (first, {first_check.task_id}: {(first_check.error or '').splitlines()[0][:200]}); they "
              "are errors, left out of the mean reward: fix the task's check", file=sys.stderr)
        return 1
    if result.rollouts and result.errors == len(result.rollouts):
        first = next(r.error for r in result.rollouts if r.error)
        print(f"raso eval: every rollout failed; first error: {first.splitlines()[0]}", file=sys.stderr)
        return 1
    if result.infrastructure_failures:
        completed = result.mean_reward_of_completed
        print(f"raso eval: {result.infrastructure_failures} of {len(result.rollouts)} rollout(s) got no agent result "
              f"(first: {result.first_infrastructure_error}); they count 0 in the mean reward, which therefore "
              f"understates the skill; mean over the rest: "
              f"{'-' if completed is None else f'{completed:.3f}'}. Re-run when the model is reachable.",
              file=sys.stderr)
        return 1
    return 0


def unknown_cost(summary: dict[str, Any]) -> dict[str, Any]:
    """`summary` with its costs null where a call had no known price: an unpriced model's calls cost something
    nobody knows, never $0 (the ledger counts them as unpriced_calls). Every rollout of an eval calls the same
    target model, so a single unpriced call makes each rollout's cost unknown too. `priced_cost_usd` is the part
    that is known (a lower bound of the cost when some calls are unpriced)."""
    from raso.llm.ledger import priced_usd

    totals = summary.get("ledger_totals", {})
    unpriced = int(totals.get("unpriced_calls", 0) or 0)
    summary["unpriced_calls"] = unpriced
    summary["priced_cost_usd"] = priced_usd(totals)
    if unpriced:
        summary["cost_usd"] = None
        summary["per_task"] = [{**row, "cost_usd": None} for row in summary.get("per_task", [])]
    return summary


def _print_summary(summary: dict[str, Any], out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    from raso.llm.ledger import cost_text

    table = Table(title=f"raso eval: {summary['harness']} / {summary['split']} / {summary['mode']}")
    table.add_column("tasks", justify="right")
    table.add_column("mean reward", justify="right")
    table.add_column("soft score", justify="right")
    table.add_column("errors (infra, check)", justify="right")
    table.add_column("prompt tok", justify="right")
    table.add_column("completion tok", justify="right")
    table.add_column("cost", justify="right")
    table.add_column("wall s", justify="right")
    soft = summary["mean_soft_score"]
    table.add_row(str(summary["tasks"]), f"{summary['mean_reward']:.3f}", "-" if soft is None else f"{soft:.3f}",
                  f"{summary['errors']} ({summary['infrastructure_failures']}, {summary['check_errors']})",
                  str(summary["prompt_tokens"]),
                  str(summary["completion_tokens"]),
                  cost_text(summary["priced_cost_usd"] if summary["unpriced_calls"] else summary["cost_usd"],
                            summary["unpriced_calls"]),
                  f"{summary['wall_time_s']:.1f}")
    Console().print(table)
    if summary["unpriced_calls"]:
        print(f"cost: {cost_text(summary['priced_cost_usd'], summary['unpriced_calls'], hint=True)}")
    print(f"trajectories and summary written to {out}")
