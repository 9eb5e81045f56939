"""The serialisable state of a run: everything `resume` needs, rewritten atomically as checkpoint.json.

The state is the single source of truth; candidates.jsonl and lessons.jsonl are views of it, rewritten with it,
so a kill between two writes can never leave a decision recorded twice.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

#: The run-directory format this code writes (checkpoint.json's `version`). 1: the first release; 2: adds the
#: infrastructure-failure accounting and `upgraded_from`. A run of an older format is read (new fields take
#: their defaults) and continues in this format; a newer one is refused (see engine.load_state).
STATE_VERSION = 2
OLDEST_READABLE_VERSION = 1

Phase = Literal["init", "s0_val", "iterate", "test", "done"]
Step = Literal["start", "rolled_out", "proposed"]


class UnitCost(BaseModel):
    """The model calls of one unit of work, from the ledger's records tagged with it."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0  # of the calls with a known price
    unpriced_calls: int = 0  # calls without one: when > 0 the unit's cost is unknown, cost_usd only its priced part


class HoldoutScore(BaseModel):
    """The final skill's mean reward on the held-out part of val (GateOptions.val_holdout), measured at the end."""

    version: int
    mean_reward: float
    gated_val: float | None  # the same skill's score on the gated val tasks, for comparison
    tasks: int
    rollouts: int


class CandidateRecord(BaseModel):
    """One candidate skill and the validation gate's decision about it."""

    version: int | None  # None when the proposal step failed (no candidate)
    iteration: int
    epoch: int
    batch_index: int
    train_task_ids: list[str]
    train_mean_reward: float
    candidate_val: float | None = None
    current_val: float | None = None
    current_version: int
    accepted: bool = False
    reason: str
    rollouts_used: int
    cost_usd: float  # the run's spend so far on calls with a known price
    unpriced_calls: int = 0  # the run's calls so far without one (cost_usd leaves them out)
    error: str | None = None
    # the gate's decision (raso.engine.gate); defaults read checkpoints written before these fields existed
    gate_mode: str = "strict"
    statistic: float | None = None  # candidate - incumbent (the mean per-task difference in the paired modes)
    interval: tuple[float, float] | None = None  # the statistic's bootstrap interval (paired modes)
    p_value: float | None = None  # the one-sided sign-flip test's p-value (paired modes)
    incumbent_val: float | None = None  # the incumbent re-scored in this iteration (paired modes)
    parent_version: int | None = None  # the version the candidate was proposed from (the selector's choice)
    gate_rollouts: int = 0  # val rollouts this decision cost (candidate and, when paired, the incumbent)
    cost: dict[str, UnitCost] = Field(default_factory=dict, description="this candidate's model calls by step: "
                                      "train, propose, val (the ledger's records of its units)")


class CurvePoint(BaseModel):
    """The best val score after some rollouts and some spend (one point per evaluation)."""

    rollouts_used: int
    cost_usd: float  # the spend so far on calls with a known price
    best_val: float
    label: str
    unpriced_calls: int = 0  # the calls so far without one (cost_usd leaves them out)


class TestScore(BaseModel):
    """A skill's mean reward on the test split, measured once at the end of a run (never used for selection)."""

    version: int
    label: str  # "s0" or "best"
    mean_reward: float
    tasks: int
    rollouts: int


class PendingIteration(BaseModel):
    """An iteration in progress: which step finished last, so resume redoes only the rest."""

    iteration: int
    epoch: int
    batch_index: int
    task_ids: list[str]
    step: Step = "start"
    train_mean_reward: float | None = None
    candidate_version: int | None = None
    propose_error: str | None = None
    proposal_unchanged: bool = False  # the proposer found nothing to change (no failure mode): no update was made
    parent_version: int | None = None  # the version this iteration proposes from (None: a checkpoint of before)


class RunState(BaseModel):
    version: int = STATE_VERSION
    phase: Phase = "init"
    current_version: int | None = None
    current_val: float | None = None
    next_version: int = 0
    rollouts_used: int = 0
    train_rollouts: int = 0
    val_rollouts: int = 0
    iterations_done: int = 0
    epoch: int = 0
    batch_index: int = 0
    pending: PendingIteration | None = None
    candidates: list[CandidateRecord] = Field(default_factory=list)
    val_scores: dict[int, dict[str, float]] = Field(default_factory=dict, description="version -> its mean reward "
                                                     "per gated val task (s0 and every evaluated candidate), for "
                                                     "the candidate selector")
    lessons: list[dict[str, Any]] = Field(default_factory=list)
    curve: list[CurvePoint] = Field(default_factory=list)
    stop_reason: str | None = None
    wall_time_s: float = 0.0
    started_at: str = ""
    finished_at: str | None = None
    resumes: int = 0
    failed_attempts: dict[str, int] = Field(default_factory=dict, description="unit -> attempts that raised")
    test: list[TestScore] = Field(default_factory=list)
    test_rollouts: int = 0  # counted apart from the optimization budget
    test_note: str | None = None  # why the test evaluation was skipped or cut short
    infra_failed_rollouts: int = 0  # rollouts whose model calls failed for infrastructure reasons (never scored)
    infra_reruns: int = 0  # of those, how many were re-run (each re-run is a fresh rollout)
    infra_stops: int = 0  # times the run stopped because a batch or a proposal could not be completed
    upgraded_from: int | None = None  # the format this run directory was written in before an upgrade
    # run_dir.config_digest of config.resolved.* as the run wrote them: a resume refuses an edited twin (None: a
    # run from before this was recorded; raso migrate, when it converts a run's config, must record the new one)
    config_digest: str | None = None
    # fallbacks the retrieval and optimizer code logged (a dense encoder missing, SkillDreamer ranking by the
    # query alone, ...): "logger: message template" -> {"count": n, "example": the first message}
    degradations: dict[str, dict[str, Any]] = Field(default_factory=dict)
    holdout: HoldoutScore | None = None  # the final skill on the val part the gate never saw
    holdout_note: str | None = None  # why the held-out check was skipped or cut short
