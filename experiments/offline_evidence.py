"""Offline evidence (issue 16): does a skill move an embedded model's score, and does a reply grammar help?

Each cell is one evaluation on a harness's val split: an embedded model as the agent, a skill (none, or the
harness's hand-written expert skill), and the reply grammar on or off. Every rollout is saved as JSON under
--out/<cell>/trajectories; a finished cell is skipped when the script runs again, and the table is built from
every rollout saved there (an interrupted cell shows with the rollouts it finished).

    nice -n 10 python experiments/offline_evidence.py --harness webshop --model local/qwen2.5-coder-0.5b \
        --skill none --skill expert --grammar on --grammar off --limit 4 --max-steps 8 --out runs/evidence
    python experiments/offline_evidence.py --out runs/evidence --table-only

Per cell: n rollouts, mean reward ± standard error, the valid-action rate (actions the harness's
`action_is_valid` accepted, over all actions it could judge), tokens per rollout and wall time per rollout.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from raso.llm.config import DEFAULT_LOCAL_MODEL

EXPERT = "expert"
NO_SKILL = "none"


class CellResult(BaseModel):
    harness: str
    model: str
    skill: str
    grammar: bool
    max_steps: int
    rewards: list[float]
    valid_actions: int
    judged_actions: int
    prompt_tokens: int
    completion_tokens: int
    wall_s: list[float]
    cpu_s: list[float]
    errors: int
    stop_reasons: dict[str, int]

    @property
    def n(self) -> int:
        return len(self.rewards)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.rewards) if self.rewards else 0.0

    @property
    def stderr(self) -> float:
        return statistics.stdev(self.rewards) / math.sqrt(self.n) if self.n > 1 else 0.0

    @property
    def valid_rate(self) -> float | None:
        return self.valid_actions / self.judged_actions if self.judged_actions else None


def expert_skill_path(harness: str) -> Path:
    import importlib

    module = importlib.import_module(f"harnesses.{harness}")
    return Path(module.__file__).resolve().parent / "expert_skill" / "SKILL.md"


def cell_name(harness: str, model: str, skill: str, grammar: bool, max_steps: int, limit: int) -> str:
    return f"{harness}__{model.replace('/', '_')}__{skill}__{'grammar' if grammar else 'free'}__s{max_steps}__n{limit}"


def parse_cell_name(name: str) -> dict[str, Any]:
    harness, model, skill, grammar, steps, limit = name.split("__")
    return {"harness": harness, "model": model.replace("_", "/", 1), "skill": skill, "grammar": grammar == "grammar",
            "max_steps": int(steps[1:]), "limit": int(limit[1:])}


def summarize(cell_dir: Path) -> CellResult | None:
    """The cell's numbers from the rollouts saved in `cell_dir` (None when it has none yet)."""
    from raso.harness import Rollout

    rollouts = [Rollout.load(p) for p in sorted((cell_dir / "trajectories").glob("*.json"))]
    if not rollouts:
        return None
    meta = parse_cell_name(cell_dir.name)
    stops: dict[str, int] = {}
    for r in rollouts:
        key = str(r.metadata.get("stop_reason"))
        stops[key] = stops.get(key, 0) + 1
    valid = sum(int(r.metadata.get("valid_actions", 0)) for r in rollouts)
    invalid = sum(int(r.metadata.get("invalid_actions", 0)) for r in rollouts)
    return CellResult(
        harness=meta["harness"], model=meta["model"], skill=meta["skill"], grammar=meta["grammar"],
        max_steps=meta["max_steps"], rewards=[r.reward for r in rollouts], valid_actions=valid,
        judged_actions=valid + invalid, prompt_tokens=sum(r.prompt_tokens for r in rollouts),
        completion_tokens=sum(r.completion_tokens for r in rollouts), wall_s=[r.wall_time_s for r in rollouts],
        cpu_s=list(json.loads(cpu_file.read_text()).values()) if (cpu_file := cell_dir / "cpu_s.json").is_file() else [],
        errors=sum(1 for r in rollouts if r.error), stop_reasons=stops,
    )


def option_label(name: str, options: dict[str, Any]) -> str:
    """A column of a cell: a harness or model name, plus the options given for it (a path option by
    its last component, so the cell stays one folder)."""
    def shown(value: Any) -> str:
        return str(value).rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]

    return name + (f"[{','.join(f'{k}={shown(v)}' for k, v in sorted(options.items()))}]" if options else "")


def skill_label(skill: str) -> str:
    """The skill column of a cell: 'none', 'expert', or a skill file's folder (SKILL.md) or stem."""
    if skill in (NO_SKILL, EXPERT):
        return skill
    path = Path(skill)
    return path.parent.name if path.name == "SKILL.md" and path.parent.name else path.stem


def run_cell(harness: str, model: str, skill: str, grammar: bool, *, limit: int, max_steps: int,
             max_tokens: int | None, out: Path, harness_options: dict[str, Any] | None = None,
             agent_options: dict[str, Any] | None = None, options: dict[str, Any] | None = None) -> None:
    import raso

    harness_options = dict(harness_options or {})
    agent_options = dict(agent_options or {})
    name = cell_name(option_label(harness, harness_options), option_label(model, agent_options),
                     skill_label(skill), grammar, max_steps, limit)
    skill_arg = None if skill == NO_SKILL else (expert_skill_path(harness) if skill == EXPERT else Path(skill))

    (out / name).mkdir(parents=True, exist_ok=True)
    cpu_file = out / name / "cpu_s.json"
    last = [time.process_time()]

    def progress(rollout: Any) -> None:
        # CPU seconds of this process (every llama.cpp thread) per rollout: the wall time of a shared machine
        # says more about the other users than about the model.
        now = time.process_time()
        spent = json.loads(cpu_file.read_text()) if cpu_file.is_file() else {}
        spent[rollout.task_id] = round(now - last[0], 1)
        cpu_file.write_text(json.dumps(spent), encoding="utf-8")
        last[0] = now
        print(f"  [{name}] {rollout.task_id}: reward {rollout.reward:.2f} in {rollout.wall_time_s:.0f} s "
              f"({spent[rollout.task_id]:.0f} CPU s; {rollout.metadata.get('stop_reason')})", flush=True)

    raso.evaluate(harness, skill_arg, split="val", limit=limit, out_dir=out / name, on_rollout=progress,
                  **{**(options or {}), "models.target": model, "schedule.workers": 1,
                     "agent": {**agent_options, "max_steps": max_steps, "max_tokens": max_tokens,
                               "constrain_replies": grammar},
                     **({"harness_options": harness_options} if harness_options else {})})
    (out / name / "DONE").write_text("", encoding="utf-8")


def load_cells(out: Path) -> list[CellResult]:
    cells = [summarize(d) for d in sorted(out.iterdir()) if d.is_dir() and d.name.count("__") == 5]
    return [c for c in cells if c is not None]


def table(cells: list[CellResult]) -> str:
    lines = ["| harness | agent model | skill | grammar | steps | n | mean reward ± s.e. | valid actions | "
             "tokens / rollout (prompt + completion) | wall s / rollout | CPU s / rollout | stops |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        valid = f"{c.valid_rate:.0%} ({c.valid_actions}/{c.judged_actions})" if c.valid_rate is not None else "n/a"
        n = max(c.n, 1)
        stops = ", ".join(f"{k} {v}" for k, v in sorted(c.stop_reasons.items()))
        lines.append(
            f"| {c.harness} | {c.model} | {c.skill} | {'on' if c.grammar else 'off'} | {c.max_steps} | {c.n} | "
            f"{c.mean:.3f} ± {c.stderr:.3f} | {valid} | {c.prompt_tokens // n:,} + {c.completion_tokens // n:,} | "
            f"{statistics.fmean(c.wall_s) if c.wall_s else 0:.0f} | "
            f"{f'{statistics.fmean(c.cpu_s):.0f}' if c.cpu_s else 'n/a'} | {stops} |")
    return "\n".join(lines)


def key_values(parser: argparse.ArgumentParser, items: list[str], flag: str, *, check: bool = False
               ) -> dict[str, Any]:
    """KEY=VALUE options as a dict (raso's one parser: VALUE as JSON/YAML); a malformed one is a usage error."""
    from raso.engine.config import ConfigError, parse_assignments

    try:
        return parse_assignments(items, flag, check=check)
    except ConfigError as exc:
        parser.error(str(exc))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--harness", action="append", default=None, help="harness name (repeatable)")
    parser.add_argument("--model", action="append", default=None, help="agent model (repeatable)")
    parser.add_argument("--skill", action="append", default=None,
                        help="'none', 'expert' (the harness's expert_skill/SKILL.md) or a SKILL.md path (repeatable)")
    parser.add_argument("--grammar", action="append", choices=["on", "off"], default=None, help="repeatable")
    parser.add_argument("--limit", type=int, default=4, help="val tasks per cell (the first N)")
    parser.add_argument("--max-steps", type=int, default=8, help="environment actions per rollout")
    parser.add_argument("--max-tokens", type=int, default=None, help="reply tokens per turn (default: the harness's)")
    parser.add_argument("--harness-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="a harness constructor option for every cell (repeatable; VALUE parsed as JSON if it can "
                        "be), e.g. reply_thought=false; it shows in the harness column")
    parser.add_argument("--agent-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="an AgentConfig option for every cell (repeatable; VALUE parsed as JSON if it can be), "
                        "e.g. history_thoughts=false; it shows in the model column")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="any other raso option of every cell by its dotted name, e.g. --set agent.temperature=0 "
                        "(repeatable; not part of the cell's name)")
    parser.add_argument("--out", type=Path, default=Path("runs/offline_evidence"))
    parser.add_argument("--table-only", action="store_true", help="print the table of the saved cells and exit")
    args = parser.parse_args(argv)
    options = key_values(parser, args.harness_arg, "--harness-arg")
    agent_options = key_values(parser, args.agent_arg, "--agent-arg")
    shared = key_values(parser, args.set, "--set", check=True)
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.table_only:
        for harness in args.harness or ["webshop"]:
            for model in args.model or [DEFAULT_LOCAL_MODEL]:
                for grammar in args.grammar or ["on", "off"]:
                    for skill in args.skill or [NO_SKILL, EXPERT]:
                        on = grammar == "on"
                        name = cell_name(option_label(harness, options), option_label(model, agent_options),
                                         skill_label(skill), on, args.max_steps, args.limit)
                        if (args.out / name / "DONE").is_file():
                            print(f"cell done already: {name}", flush=True)
                            continue
                        run_cell(harness, model, skill, on, limit=args.limit, max_steps=args.max_steps,
                                 max_tokens=args.max_tokens, out=args.out, harness_options=options,
                                 agent_options=agent_options, options=shared)
                        print(table([summarize(args.out / name)]).splitlines()[-1], flush=True)
    print(table(load_cells(args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
