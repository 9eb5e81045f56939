"""SkillRouter per task, the paper's baseline: every evaluated task gets the one whole corpus skill that best matches
its own instruction, used as-is (no adaptation, no decomposition).

The routes are made once and kept in the cell's folder (`routing/routes.json`, each routed skill's SKILL.md in
`routing/skills/`), so a resumed cell gives every task the skill it got before (and replays its cached model
replies); the cell's result.json lists them (`routing`: task, skill id, name, repository, path). The router reads
the cell's corpus index only after the leakage guard accepted it for the cell's harness (raso.api.
check_index_blocklist: an index built without the benchmark's blocklist is refused, as for RASI).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raso.engine.config import OptimizeConfig
from raso.engine.run_dir import atomic_write_json
from raso.harness import Harness, Task
from raso.skill import Skill

from .results import RoutedSkill

ROUTES_FILE = "routes.json"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class CorpusSkill:
    """A whole skill rebuilt from a section index, with where it came from (what SkillRouter ranks and returns)."""

    id: str
    name: str
    description: str
    body: str
    repo: str = ""
    path: str = ""
    commit: str = ""
    license: str = ""


def corpus_skills(index: Any) -> list[CorpusSkill]:
    """The whole skills of a SectionIndex (raso.retrieval.retrievers.skills_from_index) with each one's repository,
    SKILL.md path, commit and license (from its first section, which comes from its SKILL.md)."""
    from raso.retrieval.retrievers import skills_from_index

    origin: dict[str, Any] = {}
    for section in index.iter_sections():
        origin.setdefault(section.skill_id, section)
    pool = []
    for skill in skills_from_index(index):
        first = origin.get(skill.id)
        pool.append(CorpusSkill(
            id=skill.id, name=skill.name, description=skill.description, body=skill.body, repo=skill.repo,
            path=getattr(first, "path", "") or "", commit=getattr(first, "commit", "") or "",
            license=getattr(first, "license", "") or ""))
    return pool


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def index_label(cfg: OptimizeConfig) -> str:
    """The corpus index a cell routes over, as routes.json records it."""
    return str(Path(cfg.retrieval.index).resolve()) if cfg.retrieval.index is not None else "starter corpus"


class TaskRouter:
    """Routes each task to a whole corpus skill (raso.retrieval.skillrouter.SkillRouter over the cell's index, the
    task's instruction as the query) and remembers it under `folder`. Called with a task, it returns the task's
    skills: what `raso.api.evaluate(task_skills=...)` takes. Refuses (ConfigError) an index the leakage guard
    refuses for `harness`, before reading it."""

    def __init__(self, cfg: OptimizeConfig, harness: Harness, folder: Path) -> None:
        from raso.api import check_index_blocklist

        check_index_blocklist(cfg, harness)
        self.cfg = cfg
        self.folder = Path(folder)
        self.index = index_label(cfg)
        self._lock = threading.Lock()
        self._router: Any = None
        self._records: dict[str, CorpusSkill] = {}
        self._skills: dict[str, Skill] = {}
        self._saved = self._load()
        self.method: str = self._saved.get("method") or ""
        self._routes: dict[str, dict[str, Any]] = dict(self._saved.get("routes") or {})

    # ------------------------------------------------------------------ the record
    def _load(self) -> dict[str, Any]:
        path = self.folder / ROUTES_FILE
        if not path.exists():
            return {}
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved.get("index") != self.index:
            raise RuntimeError(f"{path}: its routes were made over {saved.get('index')}, this cell now retrieves "
                               f"from {self.index}; delete {self.folder} to route its tasks again")
        return saved

    def _save(self) -> None:
        atomic_write_json(self.folder / ROUTES_FILE, {"method": self.method, "index": self.index,
                                                      "routes": self._routes})

    # ------------------------------------------------------------------ routing
    def _skill_router(self) -> Any:
        if self._router is None:
            from raso.api import load_index
            from raso.retrieval.skillrouter import SkillRouter

            pool = corpus_skills(load_index(self.cfg))
            self._records = {skill.id: skill for skill in pool}
            self._router = SkillRouter(pool)
            self.method = self._router.method
        return self._router

    def _route(self, task: Task) -> dict[str, Any]:
        from raso.retrieval.skillrouter import as_skill

        router = self._skill_router()
        ranked = router.rank(task.instruction, 1)
        if not ranked:
            raise LookupError(f"the corpus index {self.index} holds no skill to route task {task.id!r} to")
        skill_id, score = ranked[0]
        record = self._records[skill_id]
        file = f"skills/{_UNSAFE.sub('_', skill_id).strip('._')[:80] or 'skill'}-{_sha1(skill_id)[:10]}.md"
        if not (self.folder / file).exists():
            as_skill(record).save(self.folder / file)
        route = RoutedSkill(task_id=task.id, skill_id=skill_id, name=record.name, repo=record.repo,
                            path=record.path, commit=record.commit, score=score, method=self.method).to_dict()
        return {**route, "file": file, "instruction_sha1": _sha1(task.instruction)}

    def __call__(self, task: Task) -> list[Skill]:
        """The task's skill: the one routed to it before, else the best match of its instruction (recorded)."""
        with self._lock:
            route = self._routes.get(task.id)
            if route is None:
                route = self._routes[task.id] = self._route(task)
                self._save()
            elif route.get("instruction_sha1") != _sha1(task.instruction):
                raise RuntimeError(f"task {task.id!r} was routed under another instruction; delete {self.folder} "
                                   "to route its tasks again")
            file = route["file"]
            if file not in self._skills:
                # always the saved file, so a task's prompt is the same on the first run and on a resumed one
                self._skills[file] = Skill.load(self.folder / file)
            return [self._skills[file]]

    def routes(self, task_ids: Iterable[str]) -> list[RoutedSkill]:
        """The recorded routes of these tasks, in their order (tasks never routed are left out)."""
        return [RoutedSkill.from_dict(self._routes[t]) for t in task_ids if t in self._routes]


__all__ = ["CorpusSkill", "ROUTES_FILE", "TaskRouter", "corpus_skills", "index_label"]
