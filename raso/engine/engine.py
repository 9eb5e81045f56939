"""The optimization loop (docs/design.md §1 and §4): s0 by RASI/RFSI (or a file), then RASU/RFSU iterations behind a
validation gate, within rollout and USD budgets, checkpointed after every unit of work so `resume` continues.

Units of work, each followed by an atomic checkpoint: the initial skill; s0's val evaluation; per iteration the
train minibatch rollouts, the proposal, and the candidate's val evaluation with the gate's decision. The val
score of s_t is kept in the state and reused, never re-rolled.
"""

from __future__ import annotations

import json
import logging
import statistics
import threading
import time
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from raso.errors import RunError
from raso.harness import Rollout, Task
from raso.llm.errors import LLMAuthError, failure_kind
from raso.llm.ledger import priced_usd
from raso.llm.view import UnitGateway
from raso.optimizer.context import RunContext
from raso.optimizer.types import Lesson
from raso.safe_files import remove_tree
from raso.skill import Skill, SkillParseError, check_skill_name

from .budget import TEST_UNITS, Budget
from .config import OptimizeConfig
from .errors import CheckError, InfrastructureError, ModelUnusableError, OptimizerUnavailableError
from .events import (
    BatchDone,
    BatchStarted,
    CheckpointWritten,
    Decision,
    Emitter,
    Event,
    EventLog,
    HoldoutDone,
    InfraRetry,
    InitDone,
    ParentSelected,
    ProposalDone,
    ReportFailed,
    Resumed,
    RolloutDone,
    RunFinished,
    RunStarted,
    Snapshot,
    Stopped,
    TestDone,
)
from .gate import overall_mean, task_means
from .loop import LoopView
from .protocols import RunComponents
from .run_dir import RunDir, atomic_write_json, atomic_write_text, read_jsonl
from .schedule import Schedule, ScheduleEnd
from .state import (
    OLDEST_READABLE_VERSION,
    STATE_VERSION,
    CandidateRecord,
    CurvePoint,
    HoldoutScore,
    PendingIteration,
    RunState,
    TestScore,
    UnitCost,
)

#: A task id -> its rewards, one per repeat (GateOptions.rollouts_per_task).
Scores = dict[str, list[float]]


class OptimizeResult(BaseModel):
    """What a finished (or stopped) run produced."""

    run_dir: str
    best_version: int | None
    best_skill_path: str | None
    best_val: float | None
    initial_val: float | None
    rollouts_used: int
    train_rollouts: int
    val_rollouts: int
    iterations: int
    accepted: int
    cost_usd: float = Field(description="USD of the calls with a known price")
    unpriced_calls: int = Field(default=0, description="calls to a model without a known price: when > 0 the "
                                "run's cost is unknown, not cost_usd")
    prompt_tokens: int
    completion_tokens: int
    model_calls: int
    stop_reason: str | None
    wall_time_s: float
    finished: bool
    candidates: list[CandidateRecord] = Field(default_factory=list)
    test: list[TestScore] = Field(default_factory=list, description="s0 and the best skill on the test split "
                                  "(reported only; never used for selection)")
    test_rollouts: int = 0
    holdout: HoldoutScore | None = None
    curve: list[CurvePoint] = Field(default_factory=list, description="best val after each evaluation (s0's first)")

    @property
    def initial_test(self) -> float | None:
        return next((t.mean_reward for t in self.test if t.version == 0), None)

    @property
    def best_test(self) -> float | None:
        return next((t.mean_reward for t in self.test if t.version == self.best_version), None)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "OptimizeResult":
        return cls.model_validate(data)


class _DegradationLog(logging.Handler):
    """Collects the warnings the retrieval and optimizer code log when they fall back to something weaker, so
    the run report shows them (not only a terminal that scrolled away)."""

    LOGGERS = ("raso.retrieval", "raso.optimizer", "corpus_tools.retrieval")

    def __init__(self, state: RunState) -> None:
        super().__init__(level=logging.WARNING)
        self.state = state
        self._lock_degradations = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        key = f"{record.name}: {record.msg}"[:200]
        with self._lock_degradations:
            entry = self.state.degradations.setdefault(key, {"count": 0, "example": record.getMessage()[:400]})
            entry["count"] += 1

    def __enter__(self) -> "_DegradationLog":
        for name in self.LOGGERS:
            logging.getLogger(name).addHandler(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        for name in self.LOGGERS:
            logging.getLogger(name).removeHandler(self)


class _BudgetStop(Exception):
    """The USD budget refused a model call in the middle of a unit of work: the unit is dropped uncounted and
    the optimization ends (the message is the stop reason)."""


def _first_line(text: str | None, limit: int = 300) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0][:limit] if lines else ""


def _folder_name(skill: Skill) -> str:
    """The skill's name as its folder's name in the run directory. A model's name never fails here (draft_to_skill
    slugifies it) and the initial file's is checked on load; a hand-edited run directory can still hold a name that
    is a path, and nothing is written for it (RunError): nothing outside the run directory is written or deleted."""
    try:
        return check_skill_name(skill.name, "a skill of this run")
    except SkillParseError as exc:
        raise RunError(str(exc)) from None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Engine:
    """Runs (or continues) one optimization in one run directory."""

    def __init__(self, config: OptimizeConfig, run_dir: RunDir, state: RunState, components: RunComponents) -> None:
        self.config = config
        self.run_dir = run_dir
        self.state = state
        self.parts = components
        self.budget = Budget(rollouts=config.budget.rollouts, usd=config.budget.usd, test_usd=config.budget.test_usd)
        self.gateway = components.gateway
        self.harness = components.harness
        self._session_start = time.perf_counter()
        self._wall_base = state.wall_time_s
        self.emit = Emitter([EventLog(run_dir), *components.sinks])
        self.loop = components.loop.resolved(config)
        self.train_tasks = self._limited("train", config.schedule.train_limit)
        all_val = self._limited("val", config.schedule.val_limit)
        self.schedule = Schedule.of_run(config, self.loop, [t.id for t in self.train_tasks], [t.id for t in all_val])
        gated = set(self.schedule.val_ids)
        self.val_tasks = [t for t in all_val if t.id in gated]
        self.holdout_tasks = [t for t in all_val if t.id not in gated]
        self._tasks_by_id = {t.id: t for t in self.train_tasks}
        if not self.val_tasks:
            raise RunError(f"harness {self.harness.name!r} has no val tasks: the validation gate needs some")
        if not self.train_tasks:
            raise RunError(f"harness {self.harness.name!r} has no train tasks to optimize on")
        self._check_pending_tasks()
        from raso.execution.executors import make_executor

        try:
            self.executor = make_executor(config.execution, gateway=self.gateway, harness=self.harness,
                                          harness_name=config.harness, harness_options=config.harness_options,
                                          default_workers=config.schedule.workers)
        except ValueError as exc:
            raise RunError(f"executor {config.execution.executor}: {exc}") from None

    def _check_pending_tasks(self) -> None:
        """A checkpoint whose pending minibatch names tasks this harness does not have (its data changed since the
        run started) is refused before anything is written."""
        pending = self.state.pending
        unknown = [i for i in (pending.task_ids if pending is not None else []) if i not in self._tasks_by_id]
        if unknown:
            shown = ", ".join(repr(i) for i in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
            raise RunError(f"{self.run_dir.root}: the checkpoint's pending iteration names {len(unknown)} train "
                           f"task(s) that harness {self.harness.name!r} does not have ({shown}); was the harness "
                           "started with other data or options? Resume it with the data the run was started with")

    # ------------------------------------------------------------------ helpers
    def _limited(self, split: str, limit: int | None) -> list[Task]:
        tasks = list(self.harness.tasks(split))
        return tasks[:limit] if limit is not None else tasks

    @property
    def cost(self) -> float:
        """USD of the calls with a known price (what the USD budget counts; `unpriced_calls` says what it leaves out)."""
        return self.gateway.ledger.priced_cost()

    @property
    def unpriced_calls(self) -> int:
        return int(self.gateway.ledger.totals().get("unpriced_calls", 0) or 0)

    def snapshot(self) -> Snapshot:
        s = self.state
        iteration = s.iterations_done + (1 if s.pending is not None else 0)
        unpriced = self.unpriced_calls
        return Snapshot(iteration=iteration, rollouts_used=s.rollouts_used, budget_rollouts=self.budget.rollouts,
                        best_val=s.current_val, cost_usd=None if unpriced else self.cost, phase=s.phase,
                        priced_cost_usd=self.cost, unpriced_calls=unpriced)

    def _event(self, kind: type[Event], **data: Any) -> None:
        self.emit(kind(snapshot=self.snapshot(), **data))

    def _view(self) -> LoopView:
        return LoopView(state=self.state, cost_usd=self.cost, val_task_ids=tuple(t.id for t in self.val_tasks))

    def _unit(self, name: str) -> str:
        """A unit's cache tag; a unit that raised before gets a fresh tag, so a retry is a fresh sample
        (a kill -9 is not a failure: it replays)."""
        failures = self.state.failed_attempts.get(name, 0)
        return name if failures == 0 else f"{name}#retry{failures}"

    def _skill(self, version: int) -> Skill:
        """The version as written: its folder (SKILL.md and files; written before the flat SKILL.md copy), or
        the flat file alone in a run made before skills carried files."""
        folder = self.run_dir.skill_folder(version)
        if (folder / "SKILL.md").is_file():
            return Skill.load_folder(folder)
        return Skill.load(self.run_dir.skill_path(version))

    def _save_version(self, version: int, skill: Skill) -> None:
        """Folder first: once the flat file exists, its folder is complete."""
        _folder_name(skill)
        skill.save_folder(self.run_dir.skill_folder(version))
        skill.save(self.run_dir.skill_path(version))

    def _add_missing_skill_folders(self) -> None:
        """A run made before skills were kept as folders (its skills carried no files) gets the folder form of
        each version on resume, so every version of the finished run has one. A folder missing because a kill
        fell inside its rewrite is added too and then rewritten by the unit that replays."""
        for flat in sorted(self.run_dir.skills.glob("skill_v*.md")):
            folder = flat.with_suffix("")
            if not (folder / "SKILL.md").is_file():
                Skill.load(flat).save_folder(folder)
        if self.run_dir.best_skill.is_file() and not self.run_dir.best_skill_folders.exists():
            best = Skill.load(self.run_dir.best_skill)
            best.save_folder(self.run_dir.best_skill_folders / _folder_name(best))

    def _save_best(self, skill: Skill) -> None:
        """SKILL.md at the top (as always) and `skill/<name>/` with the files beside it. A view only: a resume
        reads the versions."""
        skill.save(self.run_dir.best_skill)
        folders = self.run_dir.best_skill_folders
        name = _folder_name(skill)
        skill.save_folder(folders / name)
        for stale in folders.iterdir():  # another name (never within one run's engine; a hand-edited run dir)
            if stale.name != name and not stale.name.startswith(".") and not stale.is_symlink() \
                    and (stale / "SKILL.md").is_file():
                remove_tree(stale)

    def checkpoint(self) -> None:
        """Views first, then the checkpoint itself: a kill in between leaves the previous checkpoint valid."""
        s = self.state
        s.wall_time_s = self._wall_base + (time.perf_counter() - self._session_start)
        self.run_dir.rewrite_jsonl(self.run_dir.candidates, (c.model_dump(mode="json") for c in s.candidates))
        self.run_dir.rewrite_jsonl(self.run_dir.lessons, s.lessons)
        self.gateway.ledger.save(self.run_dir.ledger)
        atomic_write_json(self.run_dir.checkpoint, s.model_dump(mode="json"))
        self._event(CheckpointWritten)

    def _stop(self, reason: str) -> None:
        """End the optimization; the test evaluation (if configured) still follows."""
        self.state.stop_reason = reason
        self.state.phase = "test" if self.config.schedule.test else "done"
        self.state.pending = None
        self._event(Stopped, reason=reason)

    def _evaluate(self, batch: str, skill: Skill, tasks: Sequence[Task]) -> list[Rollout]:
        """Roll out `tasks` with `skill` in parallel. A rollout the agent or the harness failed scores 0 and
        counts; one the harness's check could not score stops the run uncounted (CheckError). One whose model
        call failed for infrastructure reasons (after the gateway's own retries) is re-run up to `infra_retries`
        times; if some still fail, nothing of the batch is written or counted and InfrastructureError stops the
        run (resumable). A call the USD budget refused ends the batch uncounted (_BudgetStop)."""
        from raso.agent.evaluate import evaluate, trajectory_filename

        tasks = list(tasks)
        agent = self.executor.agent(self.parts.agent_factory, self.gateway, batch)
        self._event(BatchStarted, batch=batch, size=len(tasks))
        result = evaluate(
            self.harness, agent, tasks, skills=[skill], executor=self.executor,
            trajectories_dir=self.run_dir.trajectories_dir(batch),
            on_rollout=lambda r: self._event(RolloutDone, batch=batch, task_id=r.task_id, reward=r.reward,
                                             error=bool(r.error)),
        )
        rollouts = list(result.rollouts)
        for attempt in range(1, self.config.budget.infra_retries + 1):
            failed = [i for i, r in enumerate(rollouts) if r.outcome == "infrastructure"]
            if not failed or any(r.outcome in ("budget", "unusable") for r in rollouts):
                break
            self.state.infra_failed_rollouts += len(failed)
            self.state.infra_reruns += len(failed)
            self._event(InfraRetry, batch=batch, attempt=attempt, rollouts=len(failed),
                        error=_first_line(rollouts[failed[0]].error))
            if self.config.budget.infra_retry_wait_s:
                time.sleep(self.config.budget.infra_retry_wait_s * attempt)
            # the same unit tag: the turns that succeeded replay from the cache, the failed call is made afresh
            again = evaluate(self.harness, agent, [tasks[i] for i in failed], skills=[skill], executor=self.executor)
            for index, rollout in zip(failed, again.rollouts):
                rollouts[index] = rollout
                rollout.save(self.run_dir.trajectories_dir(batch) / trajectory_filename(index, tasks[index].id))
        self._refuse_incomplete(batch, rollouts)
        self.run_dir.rewrite_jsonl(self.run_dir.rollouts_path(batch), (r.model_dump(mode="json") for r in rollouts))
        mean = statistics.fmean(r.reward for r in rollouts) if rollouts else 0.0
        self._event(BatchDone, batch=batch, size=len(rollouts), mean_reward=mean,
                    errors=sum(1 for r in rollouts if r.error))
        return rollouts

    def _evaluate_repeated(self, batch: str, skill: Skill, tasks: Sequence[Task]) -> tuple[Scores, int]:
        """`tasks` rolled out `rollouts_per_task` times with `skill`; each repeat is its own unit (`batch`, then
        `batch_r2`, ...), so its calls have their own cache keys and seeds: distinct samples, each replayable.
        Returns the rewards per task and the number of rollouts."""
        scores: Scores = {t.id: [] for t in tasks}
        count = 0
        for repeat in range(self.schedule.repeats):
            rollouts = self._evaluate(batch if repeat == 0 else f"{batch}_r{repeat + 1}", skill, tasks)
            for task, rollout in zip(tasks, rollouts):
                scores[task.id].append(rollout.reward)
            count += len(rollouts)
        return scores, count

    def _unit_costs(self, units: dict[str, tuple[str, ...]]) -> dict[str, UnitCost]:
        """The ledger's records summed per step: `units` maps a step name to the unit tags (prefixes) it ran
        under."""
        out = {step: UnitCost() for step in units}
        for rec in self.gateway.ledger.records():
            head = (rec.unit or "").split("|", 1)[0]
            step = next((name for name, prefixes in units.items() if any(head.startswith(p) for p in prefixes)),
                        None)
            if step is None:
                continue
            cost = out[step]
            if rec.cached:
                cost.cache_hits += 1
            else:
                cost.calls += 1
            cost.prompt_tokens += rec.prompt_tokens
            cost.completion_tokens += rec.completion_tokens
            cost.cost_usd += rec.cost_usd
            cost.unpriced_calls += int(rec.unpriced)
        return out

    def _refuse_incomplete(self, batch: str, rollouts: list[Rollout]) -> None:
        """A batch with rollouts that did not get an agent result is never scored: scoring the infrastructure's
        failures as 0 would bias the gate against whatever skill was being evaluated during an outage, and
        show the outage to the gradient agent as the skill's failure modes."""
        budget = [r for r in rollouts if r.outcome == "budget"]
        if budget:
            raise _BudgetStop(f"USD budget reached during {batch} ({_first_line(budget[0].error)}); "
                              "that batch was not counted")
        unscored = [r for r in rollouts if r.outcome == "check_error"]
        if unscored:
            self.checkpoint()
            raise CheckError(
                f"the harness's check could not score {len(unscored)} of {len(rollouts)} rollouts of {batch} (task "
                f"{unscored[0].task_id}: {_first_line(unscored[0].error)}); the batch was not scored or counted: fix "
                "the task's check or remove the task, then `raso resume` the run")
        infra = [r for r in rollouts if not r.counts]
        if not infra:
            return
        self.state.infra_failed_rollouts += len(infra)
        self.state.infra_stops += 1
        self.checkpoint()  # the counts only: the phase and the pending step are unchanged, so resume redoes it
        first = _first_line(infra[0].error)
        if len(infra) == len(rollouts):
            raise ModelUnusableError(f"every rollout of {batch} failed because the model is unusable ({first}); "
                                     "nothing was counted: fix the cause and `raso resume` the run")
        raise InfrastructureError(
            f"{len(infra)} of {len(rollouts)} rollouts of {batch} failed because model calls kept failing after "
            f"the gateway's retries and {self.config.budget.infra_retries} re-run(s) ({first}); the batch was not scored "
            "or counted: `raso resume` the run when the model is reachable again")

    def _load_rollouts(self, batch: str) -> list[Rollout]:
        return [Rollout.model_validate(r) for r in read_jsonl(self.run_dir.rollouts_path(batch))]

    def _add_curve(self, label: str) -> None:
        if self.state.current_val is not None:
            self.state.curve.append(CurvePoint(rollouts_used=self.state.rollouts_used, cost_usd=self.cost,
                                               best_val=self.state.current_val, label=label,
                                               unpriced_calls=self.unpriced_calls))

    def _count(self, n: int, split: str) -> None:
        self.state.rollouts_used += n
        if split == "train":
            self.state.train_rollouts += n
        else:
            self.state.val_rollouts += n

    def _record_lessons(self, lessons: Sequence[Lesson], *, stage: str, iteration: int, version: int) -> None:
        for lesson in lessons:
            self.state.lessons.append({"stage": stage, "iteration": iteration, "skill_version": version,
                                       **lesson.to_dict()})

    # ------------------------------------------------------------------ phases
    def run(self) -> OptimizeResult:
        try:
            with _DegradationLog(self.state):
                return self._run()
        finally:
            self.executor.close()

    def _run(self) -> OptimizeResult:
        try:
            if self.state.phase == "init":
                try:
                    self._initialize()
                except Exception as exc:
                    kind = failure_kind(exc)
                    if kind == "budget":
                        raise RunError(f"the USD budget ran out before the initial skill was written ({exc}); "
                                       "raise budget.usd in config.resolved.json and `raso resume`") from exc
                    if kind == "agent_error" and not isinstance(exc, RunError):
                        # junk from a working model: the cache would replay the same junk, so key the retry afresh;
                        # after an outage the calls that did succeed replay for free
                        self.state.failed_attempts["init"] = self.state.failed_attempts.get("init", 0) + 1
                    self.checkpoint()
                    raise
            try:
                if self.state.phase == "s0_val":
                    self._evaluate_s0()
                while self.state.phase == "iterate":
                    self._iterate_once()
            except _BudgetStop as stop:
                self._stop(str(stop))
                self.checkpoint()
            if (self.state.phase in ("test", "done") and self.holdout_tasks and self.state.holdout is None
                    and self.state.holdout_note is None and self.state.finished_at is None):
                self._evaluate_holdout()
            if self.state.phase == "test":
                self._evaluate_test()
            if self.state.finished_at is None:
                self.state.finished_at = _now()
                self.checkpoint()
        finally:
            self.gateway.ledger.save(self.run_dir.ledger)  # every stop leaves ledger.json equal to the calls paid
            self._write_report()
        result = result_of(self.run_dir, self.state, self.gateway.ledger.totals())
        self._event(RunFinished, reason=self.state.stop_reason, best_val=result.best_val)
        return result

    def _write_report(self) -> None:
        from .report import write_report

        try:
            write_report(self.run_dir)
        except Exception as exc:  # a plotting problem must not lose the run; `raso report` can retry
            self._event(ReportFailed, error=f"{type(exc).__name__}: {exc}")

    def _initialize(self) -> None:
        cfg = self.config
        if cfg.init_kind == "file":
            try:
                skill = load_initial_skill(cfg)
            except SkillParseError as exc:
                raise RunError(f"{exc} (then `raso resume {self.run_dir.root}`)") from None
            atomic_write_json(self.run_dir.proposals / "init.json", {"mode": "file", "source": cfg.init.method})
        else:
            if self.parts.initializer is None:
                raise RunError(f"init {cfg.init.method!r} needs an initializer and the run was given none")
            init_context = self.parts.context.with_gateway(UnitGateway(self.gateway, self._unit("init")))
            result = self.parts.initializer.init(init_context)
            skill = result.skill
            atomic_write_json(self.run_dir.proposals / "init.json", result.to_dict())
            self._record_lessons(result.lessons, stage="init", iteration=0, version=0)
        self._save_version(0, skill)
        self._save_best(skill)
        self.state.current_version = 0
        self.state.next_version = 1
        self.state.phase = "s0_val"
        self._event(InitDone, version=0, lessons=len(self.state.lessons))
        self.checkpoint()

    def _evaluate_s0(self) -> None:
        n_val = self.schedule.s0_val_rollouts
        if not self.schedule.s0_fits(self.state.rollouts_used):
            self._stop(f"rollout budget {self.budget.rollouts} cannot cover evaluating s0 on {len(self.val_tasks)} "
                       f"val tasks ({n_val} rollouts); s0 is the result, unevaluated")
            self.checkpoint()
            return
        if self.budget.usd_exhausted(self.cost):
            self._stop(self.budget.stop_reason(self.state.rollouts_used, self.cost) or "USD budget reached")
            self.checkpoint()
            return
        scores, count = self._evaluate_repeated("s0_val", self._skill(0), self.val_tasks)
        self._count(count, "val")
        self.state.current_val = overall_mean(scores)
        self.state.val_scores[0] = task_means(scores)
        self._add_curve("s0")
        self.state.phase = "iterate"
        self.checkpoint()

    def _evaluate_holdout(self) -> None:
        """The final skill on the val tasks the gate never saw (GateOptions.val_holdout): reported beside its gated
        val score, so overfitting to val shows; counted apart from the optimization budget, like test."""
        s = self.state
        version = s.current_version
        if version is None or s.current_val is None or not self.run_dir.skill_path(version).exists():
            s.holdout_note = "not scored: the final skill has no gated val score"
        elif self.budget.usd_exhausted(self.cost):
            s.holdout_note = "not scored: USD budget reached"
        else:
            try:
                scores, count = self._evaluate_repeated(f"holdout_v{version:03d}", self._skill(version),
                                                        self.holdout_tasks)
            except _BudgetStop:
                s.holdout_note = "cut short: USD budget reached"
            else:
                s.holdout = HoldoutScore(version=version, mean_reward=overall_mean(scores), gated_val=s.current_val,
                                         tasks=len(self.holdout_tasks), rollouts=count)
                self._event(HoldoutDone, version=version, mean_reward=s.holdout.mean_reward,
                            gated_val=s.current_val, tasks=len(self.holdout_tasks))
        self.checkpoint()

    def _evaluate_test(self) -> None:
        """s0 and the best skill on the test split: reported, never used for selection, counted apart from the
        optimization budget. Each version is its own checkpointed unit, so a resume does not repeat it."""
        s = self.state
        try:
            tasks = self._limited("test", self.config.schedule.test_limit)
        except ValueError:
            tasks = []
        versions: list[int] = [0] if s.current_version is None or s.current_version == 0 else [0, s.current_version]
        if not tasks:
            s.test_note = f"harness {self.harness.name!r} has no test tasks"
        for version in versions:
            if not tasks or any(t.version == version for t in s.test):
                continue
            if not self.run_dir.skill_path(version).exists():
                s.test_note = f"skill v{version} was never written; nothing to test"
                break
            if self.budget.test_exhausted(self.cost, self.gateway.ledger.cost_of_units(TEST_UNITS)):
                s.test_note = f"test evaluation cut short: {self.budget.test_limit_text()} reached"
                break
            try:
                scores, count = self._evaluate_repeated(f"{TEST_UNITS}{version:03d}", self._skill(version), tasks)
            except _BudgetStop:
                s.test_note = f"test evaluation cut short: {self.budget.test_limit_text()} reached"
                break
            mean = overall_mean(scores)
            s.test_rollouts += count
            s.test.append(TestScore(version=version, label="s0" if version == 0 else "best", mean_reward=mean,
                                    tasks=len(tasks), rollouts=count))
            self._event(TestDone, version=version, mean_reward=mean, tasks=len(tasks))
            self.checkpoint()
        s.phase = "done"
        self.checkpoint()

    def _next_pending(self) -> PendingIteration | None:
        """Plan the next iteration from the schedule, the USD budget and the stoppers, or stop the run; the
        selector picks the version it proposes from."""
        s = self.state
        nxt = self.schedule.next_batch(s.epoch, s.batch_index, s.iterations_done, s.rollouts_used)
        s.epoch, s.batch_index = nxt.epoch, nxt.batch_index
        if isinstance(nxt, ScheduleEnd):
            self._stop(nxt.reason)
            return None
        if self.budget.usd_exhausted(self.cost):
            self._stop(self.budget.stop_reason(s.rollouts_used, self.cost) or "USD budget reached")
            return None
        view = self._view()
        reason = next((r for r in (stopper.stop_reason(view) for stopper in self.loop.stoppers) if r), None)
        if reason:
            self._stop(reason)
            return None
        tasks = self.schedule.fit(nxt, s.rollouts_used)
        if isinstance(tasks, ScheduleEnd):
            self._stop(tasks.reason)
            return None
        parent = self.loop.selector.select(view)
        if not isinstance(parent, int) or isinstance(parent, bool) or not 0 <= parent < s.next_version \
                or not self.run_dir.skill_path(parent).is_file():
            raise RunError(f"the candidate selector {self.loop.selector!r} chose {parent!r}, which is not a skill "
                           f"version this run has written (0 to {s.next_version - 1})")
        iteration = s.iterations_done + 1
        self._event(ParentSelected, iteration=iteration, version=parent)
        return PendingIteration(iteration=iteration, epoch=s.epoch, batch_index=s.batch_index,
                                task_ids=list(tasks), parent_version=parent)

    def _iterate_once(self) -> None:
        s = self.state
        if s.pending is None:
            s.pending = self._next_pending()
            if s.pending is None:
                self.checkpoint()
                return
        p = s.pending
        tag = f"iter{p.iteration:03d}"
        if p.step == "start":
            tasks = [self._tasks_by_id[i] for i in p.task_ids]
            rollouts = self._evaluate(f"{tag}_train", self._skill(self._parent(p)), tasks)
            self._count(len(rollouts), "train")
            p.train_mean_reward = statistics.fmean(r.reward for r in rollouts)
            p.step = "rolled_out"
            self.checkpoint()
        if p.step == "rolled_out":
            if self.budget.usd_exhausted(self.cost):
                self._stop(self.budget.stop_reason(s.rollouts_used, self.cost) or "USD budget reached")
                self.checkpoint()
                return
            self._propose(p, tag)
            p.step = "proposed"
            self.checkpoint()
        if p.step == "proposed":
            self._decide(p, tag)
            self.checkpoint()

    def _parent(self, p: PendingIteration) -> int:
        """The version iteration `p` proposes from (a checkpoint written before selectors existed: the incumbent)."""
        return p.parent_version if p.parent_version is not None else self.state.current_version or 0

    def _propose(self, p: PendingIteration, tag: str) -> None:
        s = self.state
        parent = self._skill(self._parent(p))
        rollouts = self._load_rollouts(f"{tag}_train")
        try:
            proposal = self.parts.proposer.propose(
                self.parts.context.with_gateway(UnitGateway(self.gateway, f"{tag}/propose")), parent, rollouts)
        except RunError:  # the run cannot go on as configured (e.g. its retriever cannot be built): not junk
            raise
        except Exception as exc:
            kind = failure_kind(exc)
            if kind == "budget":
                raise _BudgetStop(f"USD budget reached while proposing iteration {p.iteration} ({exc})") from exc
            if kind == "infrastructure" or isinstance(exc, LLMAuthError):  # unreachable or unauthorised: not junk
                self.state.infra_stops += 1
                self.checkpoint()
                raise OptimizerUnavailableError(
                    f"the optimizer model could not be used while proposing iteration {p.iteration} "
                    f"({type(exc).__name__}: {_first_line(str(exc))}); the iteration's train rollouts are kept: "
                    "fix the cause and `raso resume` the run") from exc
            # junk from a working model (invalid output, a context overflow): this iteration yields no candidate
            p.propose_error = f"{type(exc).__name__}: {exc}"
            atomic_write_json(self.run_dir.proposals / f"{tag}.json",
                              {"error": p.propose_error, "traceback": traceback.format_exc(limit=8)})
            self._event(ProposalDone, error=p.propose_error)
            return
        version = s.next_version
        s.next_version += 1
        self._save_version(version, proposal.candidate)
        atomic_write_json(self.run_dir.proposals / f"{tag}.json", proposal.to_dict())
        self._record_lessons(proposal.lessons, stage="update", iteration=p.iteration, version=version)
        p.candidate_version = version
        p.proposal_unchanged = bool(getattr(proposal, "unchanged", False))
        self._event(ProposalDone, version=version, gradients=len(proposal.gradients))

    def _decide(self, p: PendingIteration, tag: str) -> None:
        s = self.state
        current_version = s.current_version or 0
        parent_version = self._parent(p)
        record: dict[str, Any] = dict(iteration=p.iteration, epoch=p.epoch, batch_index=p.batch_index,
                                      train_task_ids=p.task_ids, train_mean_reward=p.train_mean_reward or 0.0,
                                      current_version=current_version, current_val=s.current_val,
                                      parent_version=parent_version)
        gate = self.loop.gate
        candidate_val: float | None = None
        if p.propose_error is not None or p.candidate_version is None:
            accepted, reason = False, f"no candidate: proposal failed ({p.propose_error})"
        else:
            candidate = self._skill(p.candidate_version)
            current = self._skill(current_version)
            parent = current if parent_version == current_version else self._skill(parent_version)
            if p.proposal_unchanged and candidate.to_markdown() == parent.to_markdown():
                why = ("every train rollout succeeded, so there was no failure to learn from"
                       if (p.train_mean_reward or 0.0) >= 1.0 else "the proposer found no failure mode to fix")
                accepted, reason = False, f"no new candidate: {why}; the current skill is kept (not re-evaluated)"
            elif candidate.to_markdown() == current.to_markdown():
                accepted, reason = False, "candidate identical to the current skill (a tie never passes); not evaluated"
            elif candidate.to_markdown() == parent.to_markdown():
                accepted, reason = False, f"candidate identical to its parent v{parent_version}; not evaluated"
            elif self.budget.usd_exhausted(self.cost):
                accepted, reason = False, "not evaluated: USD budget reached"
                self._stop(self.budget.stop_reason(s.rollouts_used, self.cost) or reason)
            else:
                scores, count = self._evaluate_repeated(f"{tag}_val", candidate, self.val_tasks)
                incumbent = None
                if gate.paired:  # the incumbent re-scored on the same tasks, in this iteration
                    incumbent, inc_count = self._evaluate_repeated(f"{tag}_val_incumbent", current, self.val_tasks)
                    count += inc_count
                self._count(count, "val")
                s.val_scores[p.candidate_version] = task_means(scores)
                decision = gate.decide(scores, incumbent=incumbent,
                                       stored_incumbent_val=s.current_val if s.current_val is not None else 0.0)
                candidate_val, accepted, reason = decision.candidate_val, decision.accepted, decision.reason
                record.update(statistic=decision.statistic, interval=decision.interval, p_value=decision.p_value,
                              incumbent_val=decision.incumbent_val if incumbent is not None else None,
                              gate_rollouts=count)
        cand = CandidateRecord(
            version=p.candidate_version, candidate_val=candidate_val, accepted=accepted, reason=reason,
            rollouts_used=s.rollouts_used, cost_usd=self.cost, unpriced_calls=self.unpriced_calls,
            error=p.propose_error, gate_mode=gate.mode,
            cost=self._unit_costs({"train": (f"{tag}_train",), "propose": (f"{tag}/propose",),
                                   "val": (f"{tag}_val",)}),
            **record,
        )
        s.candidates.append(cand)
        if accepted and p.candidate_version is not None:
            s.current_version = p.candidate_version
            s.current_val = candidate_val
            self._save_best(self._skill(p.candidate_version))
        if candidate_val is not None:
            self._add_curve(f"v{p.candidate_version}")
        s.iterations_done += 1
        s.batch_index += 1
        s.pending = None
        self._event(Decision, version=p.candidate_version, candidate_val=candidate_val,
                    current_val=record["current_val"], accepted=accepted, reason=reason)


def load_initial_skill(config: OptimizeConfig) -> Skill:
    """s0 from the SKILL.md or folder `init.method` names, as a run may start from it: within
    `init.skill_max_chars`, named as a folder may be (the user's own file: their name to fix, not ours to rename),
    and with a body (front matter alone would send every rollout out with no instructions). SkillParseError if not."""
    skill = Skill.load_with_folder(config.init.method, max_chars=config.init.skill_max_chars)
    check_skill_name(skill.name, f"the initial skill {config.init.method}")
    if not skill.body.strip():
        raise SkillParseError(f"{config.init.method}: front matter only, no body: write the skill's instructions "
                              "below the front matter")
    return skill


def result_of(run_dir: RunDir, state: RunState, totals: dict[str, Any]) -> OptimizeResult:
    best = state.current_version
    initial = state.curve[0].best_val if state.curve else None
    return OptimizeResult(
        run_dir=str(run_dir.root), best_version=best,
        best_skill_path=str(run_dir.best_skill) if best is not None else None,
        best_val=state.current_val, initial_val=initial, rollouts_used=state.rollouts_used,
        train_rollouts=state.train_rollouts, val_rollouts=state.val_rollouts, iterations=state.iterations_done,
        accepted=sum(1 for c in state.candidates if c.accepted), cost_usd=priced_usd(totals),
        unpriced_calls=int(totals.get("unpriced_calls", 0) or 0), prompt_tokens=int(totals.get("prompt_tokens", 0)),
        completion_tokens=int(totals.get("completion_tokens", 0)),
        model_calls=int(totals.get("calls", 0)), stop_reason=state.stop_reason, wall_time_s=state.wall_time_s,
        finished=state.phase == "done", candidates=list(state.candidates), test=list(state.test),
        test_rollouts=state.test_rollouts, holdout=state.holdout, curve=list(state.curve),
    )


def _write_descriptions(run_dir: RunDir, context: RunContext) -> None:
    """T and H as the run's roles read them (H depends on the agent backend: raso.api.harness_description_for)."""
    atomic_write_text(run_dir.root / "task_description.md", context.task_description.strip() + "\n")
    atomic_write_text(run_dir.root / "harness_description.md", context.harness_description.strip() + "\n")


def _write_plan(config: OptimizeConfig, run_dir: RunDir, components: RunComponents) -> None:
    """plan.json: the cost plan made before any model call (raso.engine.plan) with the run's own strategies, for
    the report to set against the spend. A plan that cannot be made (an unreadable previous run) is noted, never a
    reason to stop."""
    from .plan import plan_run

    try:
        plan = plan_run(config, components.harness, initializer=components.initializer,
                        proposer=components.proposer, loop=components.loop)
        atomic_write_json(run_dir.plan, plan.model_dump(mode="json"))
    except Exception as exc:
        atomic_write_json(run_dir.plan, {"error": f"{type(exc).__name__}: {exc}"})


def start_run(config: OptimizeConfig, run_dir: RunDir, components: RunComponents) -> OptimizeResult:
    """Start a new run in `run_dir` (created here; the caller checked it holds no run) and run it to the end."""
    run_dir.create()
    from corpus_tools.identity import corpus_record

    digest = run_dir.write_config(config.to_json_dict(), corpus=corpus_record(config.retrieval.index))
    state = RunState(started_at=_now(), config_digest=digest)
    engine = Engine(config, run_dir, state, components)
    _write_descriptions(run_dir, components.context)
    _write_plan(config, run_dir, components)
    engine._event(RunStarted, run_dir=str(run_dir.root))
    engine.checkpoint()
    return engine.run()


def load_state(run_dir: RunDir) -> RunState:
    if not run_dir.checkpoint.exists():
        raise RunError(f"{run_dir.root} has no checkpoint.json: not a RASO run directory (or it never started)")
    try:
        raw = json.loads(run_dir.checkpoint.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunError(f"{run_dir.checkpoint} is unreadable: {exc}") from None
    version = raw.get("version") if isinstance(raw, dict) else None
    if not isinstance(version, int) or version < OLDEST_READABLE_VERSION:
        raise RunError(f"{run_dir.root} has run-directory format {version!r}, which this RASO cannot read "
                       f"(it reads formats {OLDEST_READABLE_VERSION} to {STATE_VERSION})")
    if version > STATE_VERSION:
        raise RunError(f"{run_dir.root} was written by a newer RASO (run-directory format {version}; this one "
                       f"reads formats {OLDEST_READABLE_VERSION} to {STATE_VERSION}): upgrade RASO to resume it")
    try:
        state = RunState.model_validate(raw)
    except Exception as exc:
        raise RunError(f"{run_dir.checkpoint} is unreadable: {exc}") from None
    if version < STATE_VERSION:  # an older format: the new fields took their defaults; continue in this format
        state.upgraded_from = version
        state.version = STATE_VERSION
    return state


def continue_run(config: OptimizeConfig, run_dir: RunDir, state: RunState, components: RunComponents) -> OptimizeResult:
    """Continue the run in `run_dir` from its checkpointed `state` (a finished run only gets its report rewritten)."""
    if state.phase != "done":
        state.resumes += 1
    engine = Engine(config, run_dir, state, components)
    if state.phase != "done":
        engine._add_missing_skill_folders()
        engine._event(Resumed, resumes=state.resumes)
    return engine.run()


__all__ = ["Engine", "Event", "OptimizeResult", "RunError", "continue_run", "load_initial_skill", "load_state",
           "result_of", "start_run"]
