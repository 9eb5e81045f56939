"""Typed experiment results: what a cell writes to its `result.json` (CellResult) and what a table is made of
(TableRow, one per harness x method x setting, seeds pooled).

`to_dict()` gives the JSON-ready form; `from_dict()` reads it back, including result files written before these
models existed (their missing fields take the defaults below: no data label, no proposal or init notes).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

#: What an old result.json (written before cells recorded their data) says about its data.
DATA_NOT_RECORDED = "data not recorded (result made before cells named their data)"

R = TypeVar("R", bound="Record")


class Record(BaseModel):
    """A JSON record: `to_dict` / `from_dict`; fields added later have defaults so older files still load."""

    model_config = ConfigDict(extra="ignore")

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls: type[R], data: Mapping[str, Any] | R) -> R:
        return data if isinstance(data, cls) else cls.model_validate(dict(data))


class Usage(Record):
    """Model usage of one stage (a ledger's totals)."""

    model_config = ConfigDict(extra="allow")  # a ledger may count more than these; they are kept

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class StageUsage(Record):
    """Usage per stage: making s0 (init), the update run, the test evaluation."""

    init: Usage = Field(default_factory=Usage)
    update: Usage = Field(default_factory=Usage)
    test: Usage = Field(default_factory=Usage)

    def stage(self, name: str) -> Usage:
        return {"init": self.init, "update": self.update, "test": self.test}[name]


class TaskScore(Record):
    model_config = ConfigDict(extra="ignore", coerce_numbers_to_str=True)

    task_id: str
    reward: float
    error: bool = False


class CurvePoint(Record):
    """The best val score so far after `rollouts` rollouts (and `cost_usd` spent, when known)."""

    rollouts: int
    cost_usd: float | None = None
    val: float


class GitInfo(Record):
    commit: str | None = None
    dirty: bool | None = None


class CellNotes(Record):
    """What a cell says beside its scores (experiments.proposals.cell_notes): how often the update produced no
    candidate, and the init's share of requirements with a supported lesson and whether its fallback made s0."""

    iterations: int | None = None
    no_candidate: int | None = None
    no_candidate_note: str = ""
    produced_nothing: bool = Field(default=False, description="the update's optimizer produced no candidate at all: "
                                   "the reported skill is s0")
    supported_share: float | None = None
    assembled_fallback: bool | None = None


class UpdateSummary(Record):
    """The update run's own numbers (engine methods; GEPA fills `gepa` and leaves the engine's counts None)."""

    model_config = ConfigDict(extra="allow")

    val_best: float | None = None
    val_initial: float | None = None
    rollouts_used: int = 0
    train_rollouts: int | None = None
    val_rollouts: int | None = None
    iterations: int | None = None
    accepted: int | None = None
    stop_reason: str | None = None
    s0_evaluated: bool = False
    gepa: dict[str, Any] | None = None


class RoutedSkill(Record):
    """The whole corpus skill SkillRouter gave one task, routed from that task's own instruction."""

    task_id: str
    skill_id: str
    name: str
    repo: str = ""
    path: str = ""
    commit: str = ""
    score: float | None = None
    method: str = ""


class CellResult(Record):
    """One finished cell: its identity, test score (per task), val scores, rollouts, usage per stage, curve,
    the data it ran on, its notes, and where and from which code it ran."""

    experiment: str = ""
    table: str = ""
    cell: str
    method: str
    label: str
    harness: str
    harness_label: str = ""
    data: str = DATA_NOT_RECORDED
    demo_data: bool = False
    corpus: dict[str, Any] = Field(default_factory=dict, description="the corpus of the cell's index "
                                   "(corpus_tools.identity.corpus_record: name, skills, digest, demo); empty in results "
                                   "made before cells named their corpus")
    seed: int
    setting: dict[str, Any] = Field(default_factory=dict)
    setting_label: str = ""
    setting_index: int = 0
    test_mean: float | None = None
    test_success_rate: float | None = None
    test_per_task: list[TaskScore] = Field(default_factory=list)
    val_best: float | None = None
    val_initial: float | None = None
    rollouts_used: int = 0
    rollout_convention: str = "candidates"
    rollouts: int = 0
    budget_rollouts: int = 0
    n_train: int | None = None
    n_val: int | None = None
    n_test: int | None = None
    usage: StageUsage = Field(default_factory=StageUsage)
    update: UpdateSummary | None = None
    notes: CellNotes = Field(default_factory=CellNotes)
    curve: list[CurvePoint] = Field(default_factory=list)
    routing: list[RoutedSkill] = Field(default_factory=list, description="SkillRouter: each test task's routed skill")
    wall_time_s: float = 0.0
    ran_on: dict[str, Any] = Field(default_factory=dict)
    finished_at: str | None = None
    git: GitInfo = Field(default_factory=GitInfo)
    config: dict[str, Any] = Field(default_factory=dict)
    mlflow_run_id: str | None = None

    def model_post_init(self, __context: Any) -> None:
        if not self.harness_label:
            self.harness_label = self.harness

    @property
    def corpus_label(self) -> str:
        """The cell's corpus in one line ("starter corpus, 266 skills, demo"), or that it was not recorded."""
        from corpus_tools.card import record_label

        return record_label(self.corpus)

    @property
    def demo_corpus(self) -> bool:
        """Whether the cell retrieved from the starter corpus (a demo, never the paper's corpus)."""
        return bool(self.corpus.get("demo"))

    def cost_usd(self, *stages: str) -> float:
        """USD of the given stages (all three when none is named)."""
        return sum(self.usage.stage(s).cost_usd for s in (stages or ("init", "update", "test")))


class TableRow(Record):
    """One row of an experiment's table: a (harness, method, setting) with its seeds pooled, its paired difference
    from the row's reference and its cost per stage."""

    harness: str
    harness_label: str
    data: str
    method: str
    label: str
    setting: str
    setting_index: int
    seeds: int
    test_mean: float | None
    test_se: float | None
    val_best_mean: float | None
    val_best_se: float | None
    rollouts_mean: float
    rollouts_used_mean: float
    rollouts_used_max: int = Field(default=0, description="the most rollouts any seed's update ran")
    budget_rollouts: int = Field(default=0, description="the update's rollout budget (0: no update)")
    cost_usd_mean: float
    wall_time_s_mean: float
    commit: str | None
    n_tasks: int
    n_seeds: int
    reference: str | None = None
    diff_mean: float | None = None
    diff_low: float | None = None
    diff_high: float | None = None
    diff_excludes_zero: bool | None = None
    diff_n: int | None = None
    diff_tasks: int | None = None
    diff_seeds: int | None = None
    reference_setting: str | None = Field(default=None, description="sweeps: the setting of the reference row")
    no_candidate_note: str = ""
    produced_nothing_seeds: int = Field(default=0, description="seeds whose optimizer produced no candidate at all")
    failed_seeds: int = Field(default=0, description="seeds whose cell failed (not in the scores)")
    failure: str = Field(default="", description="the first failed seed's error, when any failed")
    supported_share_mean: float | None = None
    assembled_fallbacks: int = 0
    init_cost_usd: float = 0.0
    update_cost_usd: float = 0.0
    test_cost_usd: float = 0.0
    init_tokens: float = 0.0
    update_tokens: float = 0.0
    test_tokens: float = 0.0


class Headline(Record):
    """The headline claim of a table for one harness (and setting): `method` (full RASO) minus the strongest
    `baseline`, paired over test tasks and seeds, with its 95 % bootstrap interval."""

    harness: str
    harness_label: str
    setting: str
    setting_index: int
    method: str
    label: str
    baseline: str
    baseline_label: str
    mean: float
    low: float
    high: float
    excludes_zero: bool
    tasks: int
    seeds: int


class TableResult(Record):
    """A table as data: its rows, the data each harness ran on, and whether any of it was demo data."""

    name: str
    table: str
    model: str
    rows: list[TableRow]
    data: dict[str, str] = Field(default_factory=dict, description="harness key -> the data its cells ran on")
    demo_harnesses: list[str] = Field(default_factory=list)
    corpora: dict[str, str] = Field(default_factory=dict, description="setting label -> the corpus its cells "
                                    "retrieved from (one label per distinct corpus of the setting)")
    demo_corpus: bool = Field(default=False, description="whether any cell used the starter corpus (a demo)")
    commits: list[str] = Field(default_factory=list)
    headline: list[Headline] = Field(default_factory=list, description="RASO vs the strongest baseline per harness")


def read_results(results_root: Path) -> list[CellResult]:
    """Every finished cell's result under an experiment's results directory (older result files too)."""
    return [CellResult.from_dict(json.loads(p.read_text(encoding="utf-8")))
            for p in sorted(Path(results_root).glob("cells/**/result.json"))]


__all__ = ["CellNotes", "CellResult", "CurvePoint", "DATA_NOT_RECORDED", "GitInfo", "Headline", "Record", "RoutedSkill",
           "StageUsage", "TableResult", "TableRow", "TaskScore", "UpdateSummary", "Usage", "read_results"]
