"""The validation gate: whether a candidate skill replaces the incumbent s_t (docs/design.md §4).

Three rules (`GateOptions.mode`):

* `strict` — the candidate's val mean is strictly above the incumbent's stored val mean (the paper's rule; the
  incumbent is never re-rolled).
* `paired` — the incumbent is re-scored on the same val tasks in the same iteration; the statistic is the mean
  per-task difference (candidate - incumbent), accepted when it is above 0.
* `significant` — paired, and the improvement must be significant: a one-sided paired sign-flip permutation test
  at `level`.

Why the sign-flip permutation test: per-task rewards are often 0/1 or bounded and far from normal, and val sets
are
small (4-40 tasks), where a t-test's normal approximation is poor. Under "the skill makes no difference" each
per-task difference is as likely positive as negative, so flipping signs gives the exact null distribution with no
distributional assumption; it is enumerated exactly for up to 16 non-zero differences and sampled (fixed seed) above.
The interval is a percentile paired bootstrap of the mean difference (fixed seed), two-sided at 1 - 2·level, so its
lower end is the one-sided bound the test speaks of.

`rollouts_per_task` repeats every val (and test) rollout with distinct samples; a task's score is its mean over
repeats, and the test works on those per-task means.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from raso.choices import GateMode

#: Above this many non-zero differences the permutation distribution is sampled rather than enumerated.
EXACT_LIMIT = 16
RESAMPLES = 20_000
_SEED = 20260125  # fixed: the same scores always give the same decision


class GateOptions(BaseModel):
    """The validation gate's rule and how much evaluation each decision gets."""

    model_config = ConfigDict(extra="forbid")

    mode: GateMode = Field(default="strict", description="strict: candidate val mean > the incumbent's stored "
                           "mean; paired: the incumbent re-scored on the same val tasks, mean per-task difference "
                           "> 0; significant: paired, and a one-sided sign-flip permutation test at `level`")
    rollouts_per_task: int = Field(default=1, ge=1, description="rollouts per val and test task (distinct samples); "
                                   "a task's score is their mean")
    level: float = Field(default=0.05, gt=0.0, lt=0.5, description="significance level of the `significant` gate")
    val_holdout: float = Field(default=0.0, ge=0.0, description="part of val the gate never sees, scored for the "
                               "final skill at the end: a fraction (< 1) or a number of tasks (>= 1)")

    @property
    def paired(self) -> bool:
        return self.mode != "strict"

    def decision_rollouts(self, n_val: int) -> int:
        """Rollouts one gate decision costs on `n_val` gated val tasks."""
        return n_val * self.rollouts_per_task * (2 if self.paired else 1)

    def holdout_count(self, n_val: int) -> int:
        """How many of `n_val` val tasks are held out (at least one stays for the gate)."""
        h = self.val_holdout
        count = int(h) if h >= 1 else math.ceil(h * n_val - 1e-9) if h > 0 else 0
        return min(count, max(n_val - 1, 0))


class GateDecision(BaseModel):
    accepted: bool
    reason: str
    candidate_val: float
    incumbent_val: float  # the stored mean (strict) or the re-score of this iteration (paired modes)
    statistic: float  # candidate - incumbent (per-task mean difference in the paired modes)
    interval: tuple[float, float] | None = None
    p_value: float | None = None


def split_holdout(task_ids: Sequence[str], options: GateOptions, seed: int) -> tuple[list[str], list[str]]:
    """(gated, held out): the held-out ids are drawn by the run's seed; both keep the val order."""
    count = options.holdout_count(len(task_ids))
    if count == 0:
        return list(task_ids), []
    drawn = list(task_ids)
    random.Random(f"raso:{seed}:holdout").shuffle(drawn)
    held = set(drawn[:count])
    return [t for t in task_ids if t not in held], [t for t in task_ids if t in held]


def task_means(scores: Mapping[str, Sequence[float]]) -> dict[str, float]:
    return {task: statistics.fmean(values) for task, values in scores.items()}


def overall_mean(scores: Mapping[str, Sequence[float]]) -> float:
    """The mean over tasks of the per-task means (equal weight per task)."""
    return statistics.fmean(task_means(scores).values())


def sign_flip_p_value(differences: Sequence[float]) -> float:
    """One-sided p-value of mean(differences) > 0 under sign symmetry (exact up to EXACT_LIMIT non-zero values)."""
    d = np.array([x for x in differences if x != 0.0], dtype=float)
    if d.size == 0:
        return 1.0
    observed = d.sum()
    if d.size <= EXACT_LIMIT:
        signs = ((np.arange(2 ** d.size)[:, None] >> np.arange(d.size)) & 1) * 2 - 1
    else:
        signs = np.random.default_rng(_SEED).choice([-1, 1], size=(RESAMPLES, d.size))
    sums = signs @ d
    return float(np.mean(sums >= observed - 1e-12))


def bootstrap_interval(differences: Sequence[float], level: float) -> tuple[float, float]:
    """Percentile paired-bootstrap interval of the mean difference, two-sided at 1 - 2·level."""
    d = np.asarray(differences, dtype=float)
    if d.size == 0:
        return (0.0, 0.0)
    idx = np.random.default_rng(_SEED).integers(0, d.size, size=(RESAMPLES, d.size))
    means = d[idx].mean(axis=1)
    return (float(np.quantile(means, level)), float(np.quantile(means, 1.0 - level)))


def decide(options: GateOptions, candidate: Mapping[str, Sequence[float]], *, stored_incumbent_val: float,
           incumbent: Mapping[str, Sequence[float]] | None = None) -> GateDecision:
    """The gate's decision on `candidate`'s val scores (task id -> rewards, one per repeat). The paired modes need
    `incumbent`'s scores on the same tasks from this iteration."""
    cand_val = overall_mean(candidate)
    if not options.paired:
        stat = cand_val - stored_incumbent_val
        accepted = cand_val > stored_incumbent_val  # strictly higher; ties keep s_t
        relation = ">" if stat > 0 else ("=" if stat == 0 else "<")
        return GateDecision(accepted=accepted, candidate_val=cand_val, incumbent_val=stored_incumbent_val,
                            statistic=stat, reason=f"val {cand_val:.4f} {relation} current {stored_incumbent_val:.4f}: "
                            f"{'accepted' if accepted else 'rejected'}")
    if incumbent is None or set(incumbent) != set(candidate):
        raise ValueError("the paired gate needs the incumbent scored on the same val tasks")
    cand_means, inc_means = task_means(candidate), task_means(incumbent)
    diffs = [cand_means[t] - inc_means[t] for t in candidate]
    stat = statistics.fmean(diffs)
    interval = bootstrap_interval(diffs, options.level)
    p_value = sign_flip_p_value(diffs)
    inc_val = statistics.fmean(inc_means.values())
    wins = sum(1 for x in diffs if x > 0)
    losses = sum(1 for x in diffs if x < 0)
    detail = (f"paired diff {stat:+.4f} [{interval[0]:+.4f}, {interval[1]:+.4f}] over {len(diffs)} tasks "
              f"({wins} better, {losses} worse), p={p_value:.3f}; val {cand_val:.4f} vs incumbent re-scored "
              f"{inc_val:.4f}")
    if options.mode == "paired":
        accepted = stat > 0
        verdict = "accepted" if accepted else "rejected (no per-task gain)"
    else:
        accepted = stat > 0 and p_value <= options.level
        verdict = "accepted" if accepted else f"rejected (not significant at {options.level:g})"
    return GateDecision(accepted=accepted, candidate_val=cand_val, incumbent_val=inc_val, statistic=stat,
                        interval=interval, p_value=p_value, reason=f"{detail}: {verdict}")


@runtime_checkable
class Gate(Protocol):
    """The gate as a loop strategy (raso.engine.loop.LoopStrategies.gate): whether a candidate replaces the
    incumbent. `paired` asks the engine to re-score the incumbent on the same val tasks in the same iteration;
    `decision_rollouts(n_val)` is what one decision costs on `n_val` gated val tasks (the schedule reserves it
    before each minibatch and the cost plan counts it); `mode` is recorded with each candidate."""

    @property
    def mode(self) -> str: ...

    @property
    def paired(self) -> bool: ...

    def decision_rollouts(self, n_val: int) -> int: ...

    def decide(self, candidate: Mapping[str, Sequence[float]], *, stored_incumbent_val: float,
               incumbent: Mapping[str, Sequence[float]] | None = None) -> GateDecision: ...


@dataclass(frozen=True)
class ValidationGate:
    """The configured gate (`GateOptions.mode`: strict, paired or significant), the default of every run."""

    options: GateOptions

    @property
    def mode(self) -> str:
        return self.options.mode

    @property
    def paired(self) -> bool:
        return self.options.paired

    def decision_rollouts(self, n_val: int) -> int:
        return self.options.decision_rollouts(n_val)

    def decide(self, candidate: Mapping[str, Sequence[float]], *, stored_incumbent_val: float,
               incumbent: Mapping[str, Sequence[float]] | None = None) -> GateDecision:
        return decide(self.options, candidate, stored_incumbent_val=stored_incumbent_val, incumbent=incumbent)


__all__ = ["Gate", "GateDecision", "GateOptions", "ValidationGate", "bootstrap_interval", "decide",
           "overall_mean", "sign_flip_p_value", "split_holdout", "task_means"]
