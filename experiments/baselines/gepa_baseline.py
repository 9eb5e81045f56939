"""GEPA (Agrawal et al.) through the `gepa` package, over raso's Harness protocol.

The candidate is `{"skill": <SKILL.md text>}`. `HarnessGEPAAdapter.evaluate` rolls the skill out with raso's
execution agent (every rollout counted), `make_reflective_dataset` turns each rollout into GEPA's
inputs/outputs/feedback record, and GEPA's own reflective proposer writes new skill texts with a reflection model
that is called through raso's gateway, so its tokens and cost land in the same ledger as every other call.

Budget: GEPA counts metric calls (= rollouts here) and checks its `max_metric_calls` stopper only between
iterations, so one iteration can overshoot it (gepa 0.1.4). `run_gepa` therefore hands GEPA the budget less one
iteration's worst case (2 reflection minibatches + the val set) plus one, so the rollouts it spends never exceed the
cell's budget; the adapter counts the rollouts it really ran and that count is what the cell reports.
Resume: GEPA saves its state in its run directory after every iteration and continues from it when given the same
directory again; the rollout count includes those of an interrupted iteration (they were spent).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from raso.harness import Harness, Rollout, RolloutRunner, Task
from raso.llm import LLMGateway
from raso.skill import Skill

from .common import rollout_feedback, score_feedback, skill_from_text

COMPONENT = "skill"


class HarnessGEPAAdapter:
    """A GEPA adapter over a raso harness. It does not inherit gepa's GEPAAdapter protocol class (a Protocol),
    so it must say `propose_new_texts = None`: gepa 0.1.4 treats a missing attribute as "no custom proposer" only
    when it is None, and then uses its reflective proposer with our reflection model."""

    propose_new_texts = None

    def __init__(self, harness: Harness, agent: RolloutRunner, *, seed_skill: Skill, workers: int = 2,
                 trajectories_dir: Path | None = None) -> None:
        self.harness = harness
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
        return EvaluationBatch(outputs=rollouts, scores=[r.reward for r in rollouts],
                               trajectories=rollouts if capture_traces else None)

    def make_reflective_dataset(self, candidate: dict[str, str], eval_batch: Any,
                                components_to_update: list[str]) -> dict[str, list[dict[str, Any]]]:
        rollouts: Sequence[Rollout] = eval_batch.trajectories or eval_batch.outputs
        records = [{"Inputs": r.trajectory[0].observation if r.trajectory else r.task_id,
                    "Generated Outputs": rollout_feedback(r),
                    "Feedback": score_feedback(r)} for r in rollouts]
        return {name: records for name in components_to_update}


def gateway_reflection_lm(gateway: LLMGateway, *, role: str = "optimizer",
                          stage: str = "gepa.reflection") -> Callable[[str | list[dict[str, Any]]], str]:
    """GEPA's LanguageModel protocol ((prompt | messages) -> text) over raso's gateway."""

    def reflect(prompt: str | list[dict[str, Any]]) -> str:
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        return gateway.complete(role, messages, stage=stage).text

    return reflect


def gepa_metric_budget(budget_rollouts: int, *, n_val: int, reflection_minibatch: int) -> int:
    """The `max_metric_calls` that keeps GEPA within `budget_rollouts` despite its once-per-iteration check:
    the budget less one iteration's worst case (minibatch before and after the mutation, then the val set) plus 1."""
    worst_iteration = 2 * reflection_minibatch + n_val
    return max(budget_rollouts - worst_iteration + 1, n_val)


class GEPAOutcome(BaseModel):
    """What a GEPA run produced, in the numbers an experiment cell reports."""

    best_skill: str
    best_val: float | None
    initial_val: float | None
    candidates: int
    rollouts_used: int
    gepa_metric_calls: int | None
    max_metric_calls: int
    val_scores: list[float] = Field(default_factory=list, description="per candidate, in discovery order")
    discovery_eval_counts: list[int] = Field(default_factory=list, description="metric calls when each was found")


def run_gepa(harness: Harness, agent: RolloutRunner, gateway: LLMGateway, *, seed_skill: Skill,
             train: Sequence[Task], val: Sequence[Task], budget_rollouts: int, run_dir: Path, seed: int = 0,
             reflection_minibatch: int = 3, workers: int = 2) -> GEPAOutcome:
    """Optimize `seed_skill` with GEPA on `train`, selecting on `val`, within `budget_rollouts` rollouts."""
    import gepa

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    adapter = HarnessGEPAAdapter(harness, agent, seed_skill=seed_skill, workers=workers,
                                 trajectories_dir=run_dir / "trajectories")
    max_calls = gepa_metric_budget(budget_rollouts, n_val=len(val), reflection_minibatch=reflection_minibatch)
    result = gepa.optimize(
        seed_candidate={COMPONENT: seed_skill.to_markdown()}, trainset=list(train), valset=list(val),
        adapter=adapter, reflection_lm=gateway_reflection_lm(gateway), max_metric_calls=max_calls,
        reflection_minibatch_size=reflection_minibatch, run_dir=str(run_dir / "gepa_state"), seed=seed,
        track_best_outputs=False, display_progress_bar=False,
    )
    # GEPAResult has no best_score in 0.1.4: the best candidate's score is val_aggregate_scores[best_idx].
    scores = [float(s) for s in result.val_aggregate_scores]
    best_skill = adapter.skill_of(result.best_candidate)
    return GEPAOutcome(
        best_skill=best_skill.to_markdown(), best_val=scores[result.best_idx] if scores else None,
        initial_val=scores[0] if scores else None, candidates=len(result.candidates),
        rollouts_used=adapter.rollouts_used, gepa_metric_calls=result.total_metric_calls,
        max_metric_calls=max_calls, val_scores=scores,
        discovery_eval_counts=[int(n) for n in result.discovery_eval_counts],
    )


__all__ = ["COMPONENT", "GEPAOutcome", "HarnessGEPAAdapter", "gateway_reflection_lm", "gepa_metric_budget",
           "run_gepa"]
