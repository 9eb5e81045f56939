"""GEPA (Agrawal et al.) through the `gepa` package, over raso's Harness protocol.

The candidate is `{"skill": <SKILL.md text>}`. `HarnessGEPAAdapter.evaluate` rolls the skill out with raso's
execution agent (every rollout counted), `make_reflective_dataset` turns each rollout into GEPA's
inputs/outputs/feedback record, and GEPA's own reflective proposer writes new skill texts with a reflection model
that is called through raso's gateway, so its tokens and cost land in the same ledger as every other call.

Equal information: the reflection prompt carries the task and harness descriptions (T, H) as RASO's roles do, and
each rollout in the reflective dataset is rendered within the same per-trajectory budget as RASU's gradient chunks
(`PromptLimits.trajectory_chars_each`).

Budget: GEPA counts metric calls (= rollouts here) and gets the cell's whole rollout budget as `max_metric_calls`.
It checks that stopper only between iterations, so its last iteration can run past the budget (gepa 0.1.4); the
reported candidate is therefore the best (by val score) among those *discovered within the budget*
(`discovery_eval_counts` <= budget), so no method gets more rollouts than another. The adapter counts the rollouts
it really ran and the cell reports that count too.
Infrastructure: a rollout that got no agent result (`not rollout.counts`: an outage, an unusable model, the USD
budget) is never scored as 0: the adapter raises InfrastructureError, nothing of that evaluation enters GEPA's
state, and the next run resumes.
Resume: GEPA saves its state in its run directory after every iteration and continues from it when given the same
directory again; the rollout count includes those of an interrupted iteration (they were spent).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from raso.engine.errors import InfrastructureError, ModelUnusableError
from raso.harness import Harness, Rollout, RolloutRunner, Task
from raso.llm import LLMGateway
from raso.optimizer.render import PromptLimits, limits_for
from raso.skill import Skill

from .common import rollout_feedback, score_feedback, skill_from_text, task_and_harness

COMPONENT = "skill"

#: GEPA's reflection instruction, preceded by T and H (`{context}`); `<curr_param>` and `<side_info>` are GEPA's
#: placeholders (the current skill and the reflective dataset).
REFLECTION_TEMPLATE = (Path(__file__).with_name("gepa_reflection.md")).read_text(encoding="utf-8").strip()


def reflection_template(task_description: str, harness_description: str, limits: PromptLimits | None = None) -> str:
    """GEPA's reflection prompt template with T and H filled in (GEPA fills in the skill and the dataset)."""
    return REFLECTION_TEMPLATE.replace("{context}", task_and_harness(task_description, harness_description, limits))


class HarnessGEPAAdapter:
    """A GEPA adapter over a raso harness. It does not inherit gepa's GEPAAdapter protocol class (a Protocol),
    so it must say `propose_new_texts = None`: gepa 0.1.4 treats a missing attribute as "no custom proposer" only
    when it is None, and then uses its reflective proposer with our reflection model."""

    propose_new_texts = None

    def __init__(self, harness: Harness, agent: RolloutRunner, *, seed_skill: Skill, workers: int = 2,
                 trajectories_dir: Path | None = None, limits: PromptLimits | None = None) -> None:
        self.harness = harness
        self.limits = limits or PromptLimits()
        self.agent = agent
        self.seed_skill = seed_skill
        self.workers = workers
        self.trajectories_dir = trajectories_dir
        # a resumed run continues the numbering and the count: rollouts of an interrupted run were spent too
        done = sorted(trajectories_dir.glob("gepa[0-9]*")) if trajectories_dir is not None else []
        self._batches = len(done)
        self.rollouts_used = sum(len(list(d.glob("*.json"))) for d in done)
        self._lock = threading.Lock()

    def skill_of(self, candidate: Mapping[str, str]) -> Skill:
        return skill_from_text(candidate.get(COMPONENT, ""), fallback=self.seed_skill)

    def evaluate(self, batch: list[Task], candidate: dict[str, str], capture_traces: bool = False) -> Any:
        from gepa import EvaluationBatch

        from raso.agent.evaluate import evaluate

        with self._lock:
            self._batches += 1
            index = self._batches
        out_dir = self.trajectories_dir / f"gepa{index:04d}" if self.trajectories_dir is not None else None
        result = evaluate(self.harness, self.agent, batch, skills=[self.skill_of(candidate)],
                          max_workers=self.workers, trajectories_dir=out_dir)
        rollouts = list(result.rollouts)
        with self._lock:
            self.rollouts_used += len(rollouts)
        refuse_uncounted(rollouts)
        return EvaluationBatch(outputs=rollouts, scores=[r.reward for r in rollouts],
                               trajectories=rollouts if capture_traces else None)

    def make_reflective_dataset(self, candidate: dict[str, str], eval_batch: Any,
                                components_to_update: list[str]) -> dict[str, list[dict[str, Any]]]:
        rollouts: Sequence[Rollout] = eval_batch.trajectories or eval_batch.outputs
        records = [{"Inputs": r.trajectory[0].observation if r.trajectory else r.task_id,
                    "Generated Outputs": rollout_feedback(r, self.limits),
                    "Feedback": score_feedback(r)} for r in rollouts]
        return {name: records for name in components_to_update}


def refuse_uncounted(rollouts: Sequence[Rollout]) -> None:
    """Raise when a rollout got no agent result, as the engine does: GEPA would score it 0 and learn from an
    outage as if it were the skill's failure."""
    bad = [r for r in rollouts if not r.counts]
    if not bad:
        return
    first = (bad[0].error or bad[0].outcome).splitlines()[0][:200]
    kind = ModelUnusableError if len(bad) == len(rollouts) else InfrastructureError
    raise kind(f"{len(bad)} of {len(rollouts)} GEPA rollouts got no agent result ({bad[0].outcome}: {first}); "
               "nothing was scored: rerun the experiment to resume GEPA from its saved state")


def gateway_reflection_lm(gateway: LLMGateway, *, role: str = "optimizer",
                          stage: str = "gepa.reflection") -> Callable[[str | list[dict[str, Any]]], str]:
    """GEPA's LanguageModel protocol ((prompt | messages) -> text) over raso's gateway."""

    def reflect(prompt: str | list[dict[str, Any]]) -> str:
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        return gateway.complete(role, messages, stage=stage).text

    return reflect


def best_within_budget(val_scores: Sequence[float], discovery_eval_counts: Sequence[int], budget: int) -> int:
    """Index of the best-scoring candidate discovered within `budget` metric calls (the seed, index 0, always
    is; ties go to the earlier one)."""
    best = 0
    for index, (score, cost) in enumerate(zip(val_scores, discovery_eval_counts)):
        if cost <= budget and score > val_scores[best]:
            best = index
    return best


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


def run_gepa(harness: Harness, agent: RolloutRunner, gateway: LLMGateway, *, seed_skill: Skill,
             train: Sequence[Task], val: Sequence[Task], budget_rollouts: int, run_dir: Path, seed: int = 0,
             reflection_minibatch: int = 3, workers: int = 2) -> GEPAOutcome:
    """Optimize `seed_skill` with GEPA on `train`, selecting on `val`, within `budget_rollouts` rollouts."""
    import gepa

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    limits = limits_for(gateway)
    adapter = HarnessGEPAAdapter(harness, agent, seed_skill=seed_skill, workers=workers,
                                 trajectories_dir=run_dir / "trajectories", limits=limits)
    max_calls = budget_rollouts
    result = gepa.optimize(
        seed_candidate={COMPONENT: seed_skill.to_markdown()}, trainset=list(train), valset=list(val),
        adapter=adapter, reflection_lm=gateway_reflection_lm(gateway), max_metric_calls=max_calls,
        reflection_prompt_template=reflection_template(harness.task_description, harness.harness_description, limits),
        reflection_minibatch_size=reflection_minibatch, run_dir=str(run_dir / "gepa_state"), seed=seed,
        track_best_outputs=False, display_progress_bar=False,
    )
    # GEPAResult has no best_score in 0.1.4: the best candidate's score is val_aggregate_scores[best_idx].
    scores = [float(s) for s in result.val_aggregate_scores]
    found_at = [int(n) for n in result.discovery_eval_counts]
    chosen = best_within_budget(scores, found_at, budget_rollouts) if scores else 0
    best_skill = adapter.skill_of(result.candidates[chosen])
    return GEPAOutcome(
        best_skill=best_skill.to_markdown(), best_val=scores[chosen] if scores else None,
        initial_val=scores[0] if scores else None, candidates=len(result.candidates),
        rollouts_used=adapter.rollouts_used, gepa_metric_calls=result.total_metric_calls,
        max_metric_calls=max_calls, chosen=chosen, gepa_best=int(result.best_idx), val_scores=scores,
        discovery_eval_counts=found_at,
    )


__all__ = ["COMPONENT", "REFLECTION_TEMPLATE", "GEPAOutcome", "HarnessGEPAAdapter", "best_within_budget",
           "gateway_reflection_lm", "reflection_template", "refuse_uncounted", "run_gepa"]
