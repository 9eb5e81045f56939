"""GEPA (Agrawal et al.) through the `gepa` package, over raso's Harness protocol.

The candidate is `{"skill": <SKILL.md text>}`. `HarnessGEPAAdapter.evaluate` rolls the skill out with raso's
execution agent (every rollout counted), `make_reflective_dataset` turns each rollout into GEPA's
inputs/outputs/feedback record, and GEPA's own reflective proposer writes new skill texts with a reflection model
that is called through raso's gateway, so its tokens and cost land in the same ledger as every other call.

Equal information: the reflection prompt carries the task and harness descriptions (T, H) as RASO's roles do, and
each rollout in the reflective dataset is rendered within the same per-trajectory budget as RASU's gradient chunks
(`PromptLimits.trajectory_chars_each`).

Budget: GEPA counts metric calls (= rollouts here) and gets the cell's whole rollout budget as `max_metric_calls`.
It checks that stopper only between iterations, and it records a candidate's discovery count *before* that
candidate's validation run (gepa 0.1.4, core/engine.py), so on its own its last iteration runs past the budget and
a candidate validated past it looks found within it. The adapter therefore refuses any evaluation that would pass
the budget (`GEPABudgetReached`): GEPA stops there, and the result is read from the state GEPA saved at the start
of that iteration, so every candidate in it was validated within the budget. The reported candidate is the best
(by val score) among those whose validation *ended* within the budget (`best_within_budget`), and the adapter's
count of the rollouts it really ran (never more than the budget) is what the cell reports.
Reflection: gepa catches a failed reflection call and goes on to the next iteration (reflective_mutation.py), so an
unreachable optimizer would spend the whole budget on minibatches and return the seed with no word. The reflection
model here records every call and failure (`ReflectionLog`: "reflection failed: N of M"); an unreachable or
unauthorised optimizer stops GEPA at once and the run raises OptimizerUnavailableError, as the engine's methods do.
Infrastructure: a rollout that got no agent result (`not rollout.counts`: an outage, an unusable model, the USD
budget) is never scored as 0: the adapter raises InfrastructureError, nothing of that evaluation enters GEPA's
state, and the next run resumes.
Resume: GEPA saves its state in its run directory at the start of every iteration and continues from it when given
the same directory again. Two things of gepa 0.1.4 would make a resumed run pay twice: it evaluates the seed on the
whole val set again before it loads its state (and drops that evaluation), and it reruns the interrupted iteration.
The cell's gateway caches every reply in the run directory, so those rollouts replay their model calls for free; the
adapter counts them once: the seed's val evaluation, and each (candidate, task) rollout paid after the state's last
save, are replays (`trajectories/replay*`, not counted, never refused by the budget), every other rollout is paid
(`trajectories/gepa*`). A rollout of the interrupted iteration that the rerun does not ask for again stays counted (it
was spent).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from raso.engine.errors import CheckError, InfrastructureError, ModelUnusableError, OptimizerUnavailableError
from raso.engine.run_dir import atomic_write_json
from raso.harness import Harness, Rollout, RolloutRunner, Task
from raso.llm import LLMGateway
from raso.llm.errors import LLMAuthError, failure_kind
from raso.optimizer.render import PromptLimits, limits_for
from raso.skill import Skill

from .common import rollout_feedback, score_feedback, skill_from_text, task_and_harness

COMPONENT = "skill"
REFLECTION_LOG = "reflection.json"  # the ReflectionLog's counts, beside GEPA's state
SAVES_FILE = "saves.json"  # GEPA iteration of each state save -> the adapter's batches done by then
#: trajectories/<gepa (paid) | replay><index>-<candidate digest> (folders of older runs carry no digest)
_BATCH_DIR = re.compile(r"^(gepa|replay)(\d+)(?:-([0-9a-f]+))?$")

#: GEPA's reflection instruction, preceded by T and H (`{context}`); `<curr_param>` and `<side_info>` are GEPA's
#: placeholders (the current skill and the reflective dataset).
REFLECTION_TEMPLATE = (Path(__file__).with_name("gepa_reflection.md")).read_text(encoding="utf-8").strip()


def reflection_template(task_description: str, harness_description: str, limits: PromptLimits | None = None) -> str:
    """GEPA's reflection prompt template with T and H filled in (GEPA fills in the skill and the dataset)."""
    return REFLECTION_TEMPLATE.replace("{context}", task_and_harness(task_description, harness_description, limits))


class GEPABudgetReached(Exception):
    """The adapter's refusal to run an evaluation that would pass the rollout budget; it ends the GEPA run."""


class HarnessGEPAAdapter:
    """A GEPA adapter over a raso harness. It does not inherit gepa's GEPAAdapter protocol class (a Protocol),
    so it must say `propose_new_texts = None`: gepa 0.1.4 treats a missing attribute as "no custom proposer" only
    when it is None, and then uses its reflective proposer with our reflection model."""

    propose_new_texts = None

    def __init__(self, harness: Harness, agent: RolloutRunner, *, seed_skill: Skill, workers: int = 2,
                 trajectories_dir: Path | None = None, limits: PromptLimits | None = None,
                 budget: int | None = None, replays: Counter[tuple[str, str]] | None = None) -> None:
        self.harness = harness
        self.budget = budget  # rollouts this adapter may run in all (None: no limit of its own)
        self.limits = limits or PromptLimits()
        self.agent = agent
        self.seed_skill = seed_skill
        self.workers = workers
        self.trajectories_dir = trajectories_dir
        # (candidate digest, task id) rollouts already paid that this run will ask for again: run, never counted
        self.replays: Counter[tuple[str, str]] = Counter(replays or {})
        # a resumed run continues the numbering and the count: rollouts of an interrupted run were spent too
        batches = list_batches(trajectories_dir)
        self._batches = max((b.index for b in batches), default=0)
        self.rollouts_used = sum(len(b.task_ids) for b in batches if b.paid)
        self._in_flight = 0
        self._lock = threading.Lock()

    @property
    def batches_done(self) -> int:
        """The number of the last batch started (what a state save records)."""
        with self._lock:
            return self._batches

    def skill_of(self, candidate: Mapping[str, str]) -> Skill:
        return skill_from_text(candidate.get(COMPONENT, ""), fallback=self.seed_skill)

    def evaluate(self, batch: list[Task], candidate: dict[str, str], capture_traces: bool = False) -> Any:
        from gepa import EvaluationBatch

        digest = candidate_digest(candidate)
        with self._lock:
            replayed = []
            for position, task in enumerate(batch):
                if self.replays[(digest, str(task.id))] > 0:
                    self.replays[(digest, str(task.id))] -= 1
                    replayed.append(position)
            new = [position for position in range(len(batch)) if position not in replayed]
            if self.budget is not None and self.rollouts_used + self._in_flight + len(new) > self.budget:
                for position in replayed:  # nothing runs: the replays stay owed
                    self.replays[(digest, str(batch[position].id))] += 1
                raise GEPABudgetReached(f"{len(new)} more rollouts would pass the budget of {self.budget} "
                                        f"({self.rollouts_used} used)")
            self._in_flight += len(new)
        rollouts: list[Rollout | None] = [None] * len(batch)
        try:
            # the replays first, in their own folder (their model calls come from the cache), then the paid ones
            for paid, positions in ((False, replayed), (True, new)):
                if not positions:
                    continue
                with self._lock:
                    self._batches += 1
                    index = self._batches
                result = self._run([batch[p] for p in positions], candidate, index, paid=paid, digest=digest)
                for position, rollout in zip(positions, result.rollouts):
                    rollouts[position] = rollout
                if paid:
                    with self._lock:
                        self.rollouts_used += len(result.rollouts)
        finally:
            with self._lock:
                self._in_flight -= len(new)
        done = [r for r in rollouts if r is not None]
        refuse_uncounted(done)
        return EvaluationBatch(outputs=done, scores=[r.reward for r in done],
                               trajectories=done if capture_traces else None)

    def _run(self, batch: list[Task], candidate: dict[str, str], index: int, *, paid: bool = True,
             digest: str = "") -> Any:
        from raso.agent.evaluate import evaluate

        name = f"{'gepa' if paid else 'replay'}{index:04d}-{digest or candidate_digest(candidate)}"
        out_dir = self.trajectories_dir / name if self.trajectories_dir is not None else None
        return evaluate(self.harness, self.agent, batch, skills=[self.skill_of(candidate)],
                        max_workers=self.workers, trajectories_dir=out_dir)

    def on_state_saved(self, event: Mapping[str, Any]) -> None:
        """GEPA's callback after each state save: the state of iteration i accounts for every batch started so
        far (kept as first recorded: a resumed run saves the loaded state again before rerunning its iteration)."""
        if self.trajectories_dir is None:
            return
        path = self.trajectories_dir.parent / SAVES_FILE
        saves = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        saves.setdefault(str(int(event["iteration"]) - 1), self.batches_done)
        atomic_write_json(path, saves)

    def make_reflective_dataset(self, candidate: dict[str, str], eval_batch: Any,
                                components_to_update: list[str]) -> dict[str, list[dict[str, Any]]]:
        rollouts: Sequence[Rollout] = eval_batch.trajectories or eval_batch.outputs
        records = [{"Inputs": r.trajectory[0].observation if r.trajectory else r.task_id,
                    "Generated Outputs": rollout_feedback(r, self.limits),
                    "Feedback": score_feedback(r)} for r in rollouts]
        return {name: records for name in components_to_update}


def candidate_digest(candidate: Mapping[str, str]) -> str:
    """A short digest of a GEPA candidate's text (names its trajectory folders; matches replays on resume)."""
    return hashlib.sha256(json.dumps(dict(candidate), sort_keys=True).encode()).hexdigest()[:12]


class BatchRecord(BaseModel):
    """One evaluation batch of the adapter, read back from its trajectory folder."""

    index: int
    paid: bool
    candidate: str
    task_ids: list[str]


def list_batches(trajectories_dir: Path | None) -> list[BatchRecord]:
    """The adapter's batches so far (each rollout file written when its rollout finished: a killed batch lists
    the rollouts that ran), in order."""
    if trajectories_dir is None or not trajectories_dir.is_dir():
        return []
    out = []
    for folder in trajectories_dir.iterdir():
        match = _BATCH_DIR.match(folder.name)
        if match is None or not folder.is_dir():
            continue
        tasks = [str(json.loads(f.read_text(encoding="utf-8"))["task_id"]) for f in sorted(folder.glob("*.json"))]
        out.append(BatchRecord(index=int(match[2]), paid=match[1] == "gepa", candidate=match[3] or "",
                               task_ids=tasks))
    return sorted(out, key=lambda b: b.index)


def owed_replays(run_dir: Path, seed_candidate: Mapping[str, str], val: Sequence[Task]) -> Counter[tuple[str, str]]:
    """What a resumed GEPA run will ask for again that was paid already: the seed's val evaluation (gepa 0.1.4
    reruns it before loading its state) and the rollouts paid after the saved state's last save (the interrupted
    iteration, which it reruns). Empty for a fresh run."""
    from gepa.core.state import GEPAState

    state_dir = run_dir / "gepa_state"
    if not (state_dir / "gepa_state.bin").is_file():
        return Counter()
    saves_path = run_dir / SAVES_FILE
    saves = json.loads(saves_path.read_text(encoding="utf-8")) if saves_path.is_file() else {}
    batches = list_batches(run_dir / "trajectories")
    # a save whose record is missing was the last thing that happened (killed right after it): nothing after it
    saved_at = int(saves.get(str(GEPAState.load(str(state_dir)).i), max((b.index for b in batches), default=0)))
    owed: Counter[tuple[str, str]] = Counter((b.candidate, task) for b in batches
                                             if b.paid and b.index > saved_at for task in b.task_ids)
    seed = candidate_digest(seed_candidate)
    owed.update((seed, str(task.id)) for task in val)
    return owed


def refuse_uncounted(rollouts: Sequence[Rollout]) -> None:
    """Raise when a rollout got no agent result, as the engine does: GEPA would score it 0 and learn from an
    outage as if it were the skill's failure."""
    bad = [r for r in rollouts if not r.counts]
    if not bad:
        return
    unscored = [r for r in bad if r.outcome == "check_error"]
    if unscored:  # the harness's check, not the model: the same stop as the engine's
        raise CheckError(f"the harness's check could not score {len(unscored)} of {len(rollouts)} GEPA rollouts (task "
                         f"{unscored[0].task_id}: {(unscored[0].error or '').splitlines()[0][:200]}); nothing was "
                         "scored: fix the task's check, then rerun the experiment")
    first = (bad[0].error or bad[0].outcome).splitlines()[0][:200]
    kind = ModelUnusableError if len(bad) == len(rollouts) else InfrastructureError
    raise kind(f"{len(bad)} of {len(rollouts)} GEPA rollouts got no agent result ({bad[0].outcome}: {first}); "
               "nothing was scored: rerun the experiment to resume GEPA from its saved state")


class ReflectionLog:
    """Every reflection call of a GEPA run and how it ended. gepa swallows a failed reflection (that iteration
    proposes nothing), so this log is how the run knows: `failures` of `calls` failed, `first_error` says why,
    and `fatal` holds an error that means the optimizer cannot be used at all (unreachable, refused credentials,
    the USD budget): GEPA is stopped at once (`should_stop`) instead of spending its budget on minibatches."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path  # where `on_state_saved` keeps the counts
        self.calls = 0
        self.failures = 0
        self.first_error: str | None = None
        self.fatal: BaseException | None = None
        self._lock = threading.Lock()

    @classmethod
    def load(cls, path: Path) -> "ReflectionLog":
        """The counts a previous (interrupted) run of the same GEPA state saved, or a fresh log."""
        log = cls(path)
        if path.is_file():
            saved = json.loads(path.read_text(encoding="utf-8"))
            log.calls, log.failures, log.first_error = int(saved["calls"]), int(saved["failures"]), saved["first_error"]
        return log

    def save(self, path: Path) -> None:
        atomic_write_json(path, {"calls": self.calls, "failures": self.failures, "first_error": self.first_error})

    def record(self, error: BaseException | None) -> None:
        with self._lock:
            self.calls += 1
            if error is None:
                return
            self.failures += 1
            if self.first_error is None:
                self.first_error = f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:200]}"
            if self.fatal is None and (failure_kind(error) in ("infrastructure", "unusable", "budget")
                                       or isinstance(error, LLMAuthError)):
                self.fatal = error

    def on_state_saved(self, _event: Mapping[str, Any]) -> None:
        """GEPA's callback after each state save: the counts the saved state resumes with. A run killed mid-
        iteration reruns that iteration from this state, its reflections replayed from the cache and recorded
        again, so the counts at the kill would count them twice."""
        if self.path is not None:
            self.save(self.path)

    def should_stop(self, _state: Any = None) -> bool:
        """GEPA's stopper protocol: stop once the optimizer is known to be unusable."""
        return self.fatal is not None

    @property
    def note(self) -> str:
        """ "reflection failed: N of M iterations (first error)" when any failed, else "". """
        if not self.failures:
            return ""
        return f"reflection failed: {self.failures} of {self.calls} iterations ({self.first_error})"


def gateway_reflection_lm(gateway: LLMGateway, *, role: str = "optimizer", stage: str = "gepa.reflection",
                          log: ReflectionLog | None = None) -> Callable[[str | list[dict[str, Any]]], str]:
    """GEPA's LanguageModel protocol ((prompt | messages) -> text) over raso's gateway; each call and its failure,
    if any, is recorded in `log`."""

    def reflect(prompt: str | list[dict[str, Any]]) -> str:
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        try:
            text = gateway.complete(role, messages, stage=stage).text
        except Exception as exc:
            if log is not None:
                log.record(exc)
            raise  # gepa logs it and proposes nothing this iteration; `log` keeps the count
        if log is not None:
            log.record(None)
        return text

    return reflect


def best_within_budget(val_scores: Sequence[float], validated_at: Sequence[int], budget: int) -> int:
    """Index of the best-scoring candidate whose validation ended within `budget` metric calls (`validated_at`:
    the metric calls spent once each candidate's val evaluation was done, not GEPA's discovery count, which is
    taken before it). The seed, index 0, always counts; ties go to the earlier one."""
    best = 0
    for index, (score, cost) in enumerate(zip(val_scores, validated_at)):
        if cost <= budget and score > val_scores[best]:
            best = index
    return best


def validated_at(discovery_eval_counts: Sequence[int], val_subscores: Sequence[Mapping[Any, float]]) -> list[int]:
    """Per candidate, the metric calls spent once its val evaluation was done: GEPA's discovery count (taken before
    that evaluation) plus the val tasks it scored (an upper bound when GEPA's cache served some of them)."""
    return [int(found) + len(scores) for found, scores in zip(discovery_eval_counts, val_subscores)]


class GEPAOutcome(BaseModel):
    """What a GEPA run produced, in the numbers an experiment cell reports."""

    best_skill: str
    best_val: float | None
    initial_val: float | None
    candidates: int
    rollouts_used: int
    gepa_metric_calls: int | None
    max_metric_calls: int
    chosen: int = Field(default=0, description="index of the reported candidate: the best found within budget")
    gepa_best: int = Field(default=0, description="GEPA's own best index (may have been found past the budget)")
    val_scores: list[float] = Field(default_factory=list, description="per candidate, in discovery order")
    discovery_eval_counts: list[int] = Field(default_factory=list, description="metric calls when each was found")
    validated_at: list[int] = Field(default_factory=list, description="metric calls once each one's val run ended")
    stop_reason: str = "GEPA budget"
    reflection_calls: int = 0
    reflection_failures: int = 0
    reflection_note: str = Field(default="", description='"reflection failed: N of M iterations (...)" or ""')


def run_gepa(harness: Harness, agent: RolloutRunner, gateway: LLMGateway, *, seed_skill: Skill,
             train: Sequence[Task], val: Sequence[Task], budget_rollouts: int, run_dir: Path, seed: int = 0,
             reflection_minibatch: int = 3, workers: int = 2) -> GEPAOutcome:
    """Optimize `seed_skill` with GEPA on `train`, selecting on `val`, within `budget_rollouts` rollouts."""
    import gepa
    from gepa.core.result import GEPAResult
    from gepa.core.state import GEPAState

    if budget_rollouts < len(val):
        raise ValueError(f"a GEPA budget of {budget_rollouts} rollouts cannot pay for the seed's validation on "
                         f"{len(val)} val tasks")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    limits = limits_for(gateway)
    seed_candidate = {COMPONENT: seed_skill.to_markdown()}
    adapter = HarnessGEPAAdapter(harness, agent, seed_skill=seed_skill, workers=workers,
                                 trajectories_dir=run_dir / "trajectories", limits=limits, budget=budget_rollouts,
                                 replays=owed_replays(run_dir, seed_candidate, val))
    log = ReflectionLog.load(run_dir / REFLECTION_LOG)  # a resumed run keeps counting
    state_dir = run_dir / "gepa_state"
    stop_reason = "GEPA budget"
    try:
        # gepa's adapter, language-model and stopper types are Protocols that these objects meet structurally (and
        # at run time: tests/test_experiments_baselines.py); mypy cannot match gepa's generic parameters to them
        result: GEPAResult = gepa.optimize(
            seed_candidate=seed_candidate, trainset=list(train), valset=list(val),
            adapter=adapter,  # type: ignore[arg-type]
            callbacks=[adapter, log],  # type: ignore[list-item]  # on_state_saved
            reflection_lm=gateway_reflection_lm(gateway, log=log),  # type: ignore[arg-type]
            max_metric_calls=budget_rollouts,
            stop_callbacks=[log.should_stop],  # type: ignore[list-item]
            reflection_prompt_template=reflection_template(harness.task_description, harness.harness_description,
                                                           limits),
            reflection_minibatch_size=reflection_minibatch, run_dir=str(state_dir), seed=seed,
            track_best_outputs=False, display_progress_bar=False,
        )
    except GEPABudgetReached:
        log.save(run_dir / REFLECTION_LOG)
        # the iteration that would have passed the budget is dropped; GEPA saved its state at that iteration's
        # start, so every candidate in it was validated within the budget
        result = GEPAResult.from_state(GEPAState.load(str(state_dir)), run_dir=str(state_dir), seed=seed)
        stop_reason = "GEPA budget (the next evaluation would have passed it)"
    else:  # (an exception leaves the counts of the last state save: what a resumed run reruns from)
        log.save(run_dir / REFLECTION_LOG)
    if log.fatal is not None:
        if failure_kind(log.fatal) != "budget":
            raise OptimizerUnavailableError(
                f"the optimizer model could not be used for GEPA's reflection ({log.first_error}); GEPA stopped "
                f"after {adapter.rollouts_used} rollouts and its state is saved: fix the cause and rerun the "
                "experiment to resume it") from log.fatal
        stop_reason = f"USD budget reached ({log.first_error})"
    # GEPAResult has no best_score in 0.1.4: the best candidate's score is val_aggregate_scores[best_idx].
    scores = [float(s) for s in result.val_aggregate_scores]
    found_at = [int(n) for n in result.discovery_eval_counts]
    done_at = validated_at(found_at, result.val_subscores)
    chosen = best_within_budget(scores, done_at, budget_rollouts) if scores else 0
    best_skill = adapter.skill_of(result.candidates[chosen])
    return GEPAOutcome(
        best_skill=best_skill.to_markdown(), best_val=scores[chosen] if scores else None,
        initial_val=scores[0] if scores else None, candidates=len(result.candidates),
        rollouts_used=adapter.rollouts_used, gepa_metric_calls=result.total_metric_calls,
        max_metric_calls=budget_rollouts, chosen=chosen, gepa_best=int(result.best_idx), val_scores=scores,
        discovery_eval_counts=found_at, validated_at=done_at, stop_reason=stop_reason,
        reflection_calls=log.calls, reflection_failures=log.failures, reflection_note=log.note,
    )


__all__ = ["COMPONENT", "REFLECTION_TEMPLATE", "BatchRecord", "GEPABudgetReached", "GEPAOutcome", "HarnessGEPAAdapter",
           "ReflectionLog", "best_within_budget", "candidate_digest", "gateway_reflection_lm", "list_batches",
           "owed_replays", "reflection_template", "refuse_uncounted", "run_gepa", "validated_at"]
