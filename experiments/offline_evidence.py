"""Offline evidence (issue 16): does a skill move an embedded model's score, and does a reply grammar help?

Each cell is one evaluation on a harness's val split: an embedded model as the agent, a skill (none, or the
harness's hand-written expert skill), and the reply grammar on or off. Every rollout is saved as JSON under
--out/<cell>/trajectories; a finished cell is skipped when the script runs again, and the table is built from
every rollout saved there (an interrupted cell shows with the rollouts it finished).

    nice -n 10 python experiments/offline_evidence.py --harness webshop --model local/qwen2.5-coder-0.5b \
        --skill none --skill expert --grammar on --grammar off --limit 4 --max-steps 8 --out runs/evidence
    python experiments/offline_evidence.py --config evidence.yaml --set agent.temperature=0
    python experiments/offline_evidence.py --out runs/evidence --table-only

The cells come from an EvidenceConfig: a config file (`--config`, YAML/TOML/JSON with the fields below), then the
flags, then `--set` for any other raso option. Each cell's parameters are written to <cell>/cell.json (its folder
name is a readable prefix and a digest of them, never parsed back); folders written before cell.json existed
(parameters encoded in the name) are still read.

Per cell: n rollouts, mean reward ± standard error, the valid-action rate (actions the harness's
`action_is_valid` accepted, over all actions it could judge), tokens per rollout and wall time per rollout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from raso.llm.config import DEFAULT_LOCAL_MODEL

EXPERT = "expert"
NO_SKILL = "none"
CELL_FILE = "cell.json"


class EvidenceCell(BaseModel):
    """One evaluation: harness (with options), agent model (with agent options), skill, grammar, budget, and any
    other raso option (`options`, from --set)."""

    harness: str
    harness_options: dict[str, Any] = Field(default_factory=dict)
    model: str
    agent_options: dict[str, Any] = Field(default_factory=dict)
    skill: str
    grammar: bool
    max_steps: int
    limit: int
    max_tokens: int | None = None
    options: dict[str, Any] = Field(default_factory=dict)

    @property
    def harness_label(self) -> str:
        return option_label(self.harness, self.harness_options)

    @property
    def model_label(self) -> str:
        return option_label(self.model, self.agent_options)

    @property
    def folder(self) -> str:
        """The cell's folder: readable, and unique per parameters (their digest)."""
        digest = hashlib.sha1(json.dumps(self.model_dump(mode="json"), sort_keys=True, default=str).encode())
        grammar = "grammar" if self.grammar else "free"
        return f"{self.harness}-{skill_label(self.skill)}-{grammar}-{digest.hexdigest()[:10]}"


class EvidenceConfig(BaseModel):
    """The cells of an offline-evidence run: every (harness, model, grammar, skill) combination."""

    model_config = ConfigDict(extra="forbid")

    harnesses: list[str] = Field(default_factory=lambda: ["webshop"])
    models: list[str] = Field(default_factory=lambda: [DEFAULT_LOCAL_MODEL])
    skills: list[str] = Field(default_factory=lambda: [NO_SKILL, EXPERT],
                              description="'none', 'expert' (the harness's expert_skill/SKILL.md) or a SKILL.md path")
    grammar: list[bool] = Field(default_factory=lambda: [True, False])
    limit: int = Field(default=4, ge=1, description="val tasks per cell (the first N)")
    max_steps: int = Field(default=8, ge=1, description="environment actions per rollout")
    max_tokens: int | None = Field(default=None, ge=1, description="reply tokens per turn (default: the harness's)")
    harness_options: dict[str, Any] = Field(default_factory=dict, description="constructor options of every harness")
    agent_options: dict[str, Any] = Field(default_factory=dict, description="AgentConfig options of every cell")
    options: dict[str, Any] = Field(default_factory=dict, description="any other raso option by its dotted name")
    out: Path = Path("runs/offline_evidence")

    def cells(self) -> list[EvidenceCell]:
        return [EvidenceCell(harness=h, harness_options=self.harness_options, model=m,
                             agent_options=self.agent_options, skill=skill, grammar=g, max_steps=self.max_steps,
                             limit=self.limit, max_tokens=self.max_tokens, options=self.options)
                for h in self.harnesses for m in self.models for g in self.grammar for skill in self.skills]


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
    import inspect

    module = importlib.import_module(f"harnesses.{harness}")
    return Path(inspect.getfile(module)).resolve().parent / "expert_skill" / "SKILL.md"


def cell_name(harness: str, model: str, skill: str, grammar: bool, max_steps: int, limit: int) -> str:
    """The folder name cells had before cell.json (parameters encoded in it; read back by parse_cell_name)."""
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
    if (cell_dir / CELL_FILE).is_file():
        cell = EvidenceCell.model_validate_json((cell_dir / CELL_FILE).read_text(encoding="utf-8"))
        meta: dict[str, Any] = {"harness": cell.harness_label, "model": cell.model_label, "skill": skill_label(cell.skill),
                                "grammar": cell.grammar, "max_steps": cell.max_steps}
    else:  # a folder written before cell.json: its parameters are in its name
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


def run_cell(cell: EvidenceCell, out: Path) -> Path:
    """Evaluate one cell into out/<cell.folder> (its parameters in cell.json, its rollouts in trajectories/, DONE
    when finished); returns the folder."""
    import raso

    folder = out / cell.folder
    skill_arg = None if cell.skill == NO_SKILL else (
        expert_skill_path(cell.harness) if cell.skill == EXPERT else Path(cell.skill))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CELL_FILE).write_text(cell.model_dump_json(indent=1), encoding="utf-8")
    cpu_file = folder / "cpu_s.json"
    last = [time.process_time()]

    def progress(rollout: Any) -> None:
        # CPU seconds of this process (every llama.cpp thread) per rollout: the wall time of a shared machine
        # says more about the other users than about the model.
        now = time.process_time()
        spent = json.loads(cpu_file.read_text()) if cpu_file.is_file() else {}
        spent[rollout.task_id] = round(now - last[0], 1)
        cpu_file.write_text(json.dumps(spent), encoding="utf-8")
        last[0] = now
        print(f"  [{cell.folder}] {rollout.task_id}: reward {rollout.reward:.2f} in {rollout.wall_time_s:.0f} s "
              f"({spent[rollout.task_id]:.0f} CPU s; {rollout.metadata.get('stop_reason')})", flush=True)

    raso.evaluate(cell.harness, skill_arg, split="val", limit=cell.limit, out_dir=folder, on_rollout=progress,
                  **{**cell.options, "models.target": cell.model, "schedule.workers": 1,
                     "agent": {**cell.agent_options, "max_steps": cell.max_steps, "max_tokens": cell.max_tokens,
                               "constrain_replies": cell.grammar},
                     **({"harness_options": cell.harness_options} if cell.harness_options else {})})
    (folder / "DONE").write_text("", encoding="utf-8")
    return folder


def run_evidence(config: EvidenceConfig) -> list[CellResult]:
    """Run every unfinished cell of `config` (a finished one, DONE in its folder, is skipped); the results of every
    cell saved under `config.out`."""
    config.out.mkdir(parents=True, exist_ok=True)
    for cell in config.cells():
        if (config.out / cell.folder / "DONE").is_file():
            print(f"cell done already: {cell.folder}", flush=True)
            continue
        folder = run_cell(cell, config.out)
        done = summarize(folder)
        if done is not None:
            print(table([done]).splitlines()[-1], flush=True)
    return load_cells(config.out)


def load_cells(out: Path) -> list[CellResult]:
    """Every cell saved under `out`: folders with a cell.json, and older ones named by their parameters."""
    folders = [d for d in sorted(out.iterdir())
               if d.is_dir() and ((d / CELL_FILE).is_file() or d.name.count("__") == 5)]
    cells = [summarize(d) for d in folders]
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
    from raso.engine.config import parse_assignments
    from raso.errors import ConfigError

    try:
        return parse_assignments(items, flag, check=check)
    except ConfigError as exc:
        parser.error(str(exc))


def load_evidence_config(args: argparse.Namespace, parser: argparse.ArgumentParser) -> EvidenceConfig:
    """The config file (if any), then the flags that were given, then --set: one EvidenceConfig. A bad file or
    value is a usage error naming it."""
    from raso.engine.config import read_config_file
    from raso.errors import ConfigError

    data: dict[str, Any] = {}
    if args.config is not None:
        try:
            data = dict(read_config_file(args.config))
        except (ConfigError, OSError) as exc:
            parser.error(f"--config {args.config}: {exc}")
    flags = {"harnesses": args.harness, "models": args.model, "skills": args.skill,
             "grammar": [g == "on" for g in args.grammar] if args.grammar else None, "limit": args.limit,
             "max_steps": args.max_steps, "max_tokens": args.max_tokens, "out": args.out}
    data.update({k: v for k, v in flags.items() if v is not None})
    for field, items, flag, check in (("harness_options", args.harness_arg, "--harness-arg", False),
                                      ("agent_options", args.agent_arg, "--agent-arg", False),
                                      ("options", args.set, "--set", True)):
        if items:
            data[field] = {**(data.get(field) or {}), **key_values(parser, items, flag, check=check)}
    try:
        return EvidenceConfig.model_validate(data)
    except ValidationError as exc:
        parser.error("; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, help="an EvidenceConfig file (YAML/TOML/JSON: harnesses, models, "
                        "skills, grammar, limit, max_steps, max_tokens, harness_options, agent_options, options, out)")
    parser.add_argument("--harness", action="append", default=None, help="harness name (repeatable)")
    parser.add_argument("--model", action="append", default=None, help="agent model (repeatable)")
    parser.add_argument("--skill", action="append", default=None,
                        help="'none', 'expert' (the harness's expert_skill/SKILL.md) or a SKILL.md path (repeatable)")
    parser.add_argument("--grammar", action="append", choices=["on", "off"], default=None, help="repeatable")
    parser.add_argument("--limit", type=int, default=None, help="val tasks per cell (the first N; default 4)")
    parser.add_argument("--max-steps", type=int, default=None, help="environment actions per rollout (default 8)")
    parser.add_argument("--max-tokens", type=int, default=None, help="reply tokens per turn (default: the harness's)")
    parser.add_argument("--harness-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="a harness constructor option for every cell (repeatable; VALUE parsed as JSON if it can "
                        "be), e.g. reply_thought=false; it shows in the harness column")
    parser.add_argument("--agent-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="an AgentConfig option for every cell (repeatable; VALUE parsed as JSON if it can be), "
                        "e.g. history_thoughts=false; it shows in the model column")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="any other raso option of every cell by its dotted name, e.g. --set agent.temperature=0 "
                        "(repeatable; recorded in each cell's cell.json)")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default runs/offline_evidence)")
    parser.add_argument("--table-only", action="store_true", help="print the table of the saved cells and exit")
    args = parser.parse_args(argv)
    config = load_evidence_config(args, parser)
    config.out.mkdir(parents=True, exist_ok=True)
    cells = load_cells(config.out) if args.table_only else run_evidence(config)
    print(table(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
