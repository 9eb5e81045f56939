"""The run directory (docs/run-directory.md): where every file lives, and writes that a kill never leaves half-done.

Layout::

    config.resolved.json / config.resolved.yaml   the configuration actually used, and the corpus it names
    task_description.md, harness_description.md   T and H as given to every agent role
    SKILL.md                                      the best skill so far (s_t; s* at the end)
    skill/<name>/                                 the same as a skill folder (SKILL.md + its files), ready to copy
                                                  into an agent's skills directory
    skills/skill_v000.md ...                      s0 and every candidate, by version
    skills/skill_v000/ ...                        each as a folder: SKILL.md and the files carried beside it
    candidates.jsonl                              every candidate: val score, current score, accept/reject, why
    lessons.jsonl                                 every lesson with the corpus sections it came from
    proposals/                                    the full init result and every update proposal (JSON)
    trajectories/<batch>/ , <batch>.rollouts.jsonl the rollouts of each batch (train minibatch or val eval)
    ledger.json, ledger.calls.jsonl               gateway usage: aggregated, and one line per model call
    cache/                                        the gateway's response cache (replayed on resume)
    events.jsonl                                  progress events
    checkpoint.json                               the run state, rewritten atomically after each unit of work
    report.md, report.html, plots/*.png           the final report (markdown; one self-contained page)
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from raso.fileio import atomic_write_text

from .config import CORPUS_KEY


def atomic_write_json(path: Path, data: Any) -> Path:
    return atomic_write_text(path, json.dumps(data, indent=1, ensure_ascii=False, default=str) + "\n")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """All complete lines; a torn last line (a kill during an append) is skipped."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def default_run_dir(harness: str, root: Path = Path("runs")) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in harness)[:40]
    return root / f"{safe}-{stamp}"


class RunDir:
    """Paths and writers of one run directory."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._append_lock = threading.Lock()

    # ------------------------------------------------------------------ paths
    @property
    def checkpoint(self) -> Path:
        return self.root / "checkpoint.json"

    @property
    def config_json(self) -> Path:
        return self.root / "config.resolved.json"

    @property
    def config_yaml(self) -> Path:
        return self.root / "config.resolved.yaml"

    @property
    def skills(self) -> Path:
        return self.root / "skills"

    @property
    def best_skill(self) -> Path:
        return self.root / "SKILL.md"

    @property
    def candidates(self) -> Path:
        return self.root / "candidates.jsonl"

    @property
    def lessons(self) -> Path:
        return self.root / "lessons.jsonl"

    @property
    def proposals(self) -> Path:
        return self.root / "proposals"

    @property
    def trajectories(self) -> Path:
        return self.root / "trajectories"

    @property
    def ledger(self) -> Path:
        return self.root / "ledger.json"

    @property
    def ledger_calls(self) -> Path:
        return self.root / "ledger.calls.jsonl"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def plan(self) -> Path:
        """The cost plan made before the run (raso.engine.plan)."""
        return self.root / "plan.json"

    @property
    def report(self) -> Path:
        return self.root / "report.md"

    @property
    def report_html(self) -> Path:
        return self.root / "report.html"

    @property
    def plots(self) -> Path:
        return self.root / "plots"

    @property
    def best_skill_folders(self) -> Path:
        """Holds one folder, named after the best skill, in the Agent Skills layout."""
        return self.root / "skill"

    def skill_path(self, version: int) -> Path:
        return self.skills / f"skill_v{version:03d}.md"

    def skill_folder(self, version: int) -> Path:
        """The version's skill folder: its SKILL.md and the files beside it (the source a resume reads)."""
        return self.skills / f"skill_v{version:03d}"

    def rollouts_path(self, batch: str) -> Path:
        return self.trajectories / f"{batch}.rollouts.jsonl"

    def trajectories_dir(self, batch: str) -> Path:
        return self.trajectories / batch

    # ------------------------------------------------------------------ writers
    def create(self) -> None:
        for folder in (self.root, self.skills, self.proposals, self.trajectories, self.plots):
            folder.mkdir(parents=True, exist_ok=True)

    def exists(self) -> bool:
        return self.checkpoint.exists()

    def write_config(self, config_dict: dict[str, Any], *, corpus: dict[str, Any] | None = None) -> None:
        """config.resolved.json / .yaml; `corpus` (corpus_tools.identity.corpus_record of the configured index) is
        recorded beside the options under the key `corpus`, which reading the config back drops (a record, not an
        option)."""
        record = {**config_dict, CORPUS_KEY: corpus} if corpus is not None else config_dict
        atomic_write_json(self.config_json, record)
        atomic_write_text(self.config_yaml, yaml.safe_dump(record, sort_keys=False, allow_unicode=True))

    def recorded_corpus(self) -> dict[str, Any] | None:
        """The corpus recorded in config.resolved.json when the run started (None for a run made before runs
        recorded it, or an unreadable file)."""
        try:
            data = json.loads(self.config_json.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        record = data.get(CORPUS_KEY) if isinstance(data, dict) else None
        return record if isinstance(record, dict) else None

    def append_jsonl(self, path: Path, row: dict[str, Any]) -> None:
        """Append one line and flush it to the OS (a SIGKILL cannot lose it after this returns)."""
        line = json.dumps(row, ensure_ascii=False, default=str) + "\n"
        with self._append_lock:
            with path.open("a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()

    def rewrite_jsonl(self, path: Path, rows: Iterable[dict[str, Any]]) -> None:
        atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows))
