"""Paired differences with bootstrap confidence intervals, for the tables and report.html (one computation).

A method is compared with its row's reference (the `none` method of an init table: no skill; the `rfsi` method of an
update table: the s0 every update starts from; in an ablation or a sweep, the full method the config names as its
`reference`, at its `reference_setting`) on the same test tasks and seeds: d[seed, task] = reward of the
method − reward of the reference. The 95 % interval is a paired bootstrap over seeds and tasks (both resampled with
replacement, a fixed generator seed, so a table is reproducible); an interval that excludes 0 is marked. `n` is
test tasks × seeds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .results import CellResult

#: Which method a row is compared with, in order of preference (init tables: no skill; update tables: RFSI's s0).
REFERENCES = ("none", "rfsi")
RESAMPLES = 2000
BOOTSTRAP_SEED = 20240


@dataclass(frozen=True)
class PairedDifference:
    """Mean paired difference (method − reference) in reward units, its 95 % bootstrap interval and its n."""

    reference: str
    mean: float
    low: float
    high: float
    tasks: int
    seeds: int

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    @property
    def n(self) -> int:
        return self.tasks * self.seeds

    def text(self, scale: float = 100.0) -> str:
        mark = "*" if self.excludes_zero else ""
        return f"{self.mean * scale:+.2f} [{self.low * scale:+.2f}, {self.high * scale:+.2f}]{mark}"


def reference_for(methods: Sequence[str], configured: str | None = None) -> str | None:
    """The reference method among `methods`: the `configured` one (an experiment's `reference`) when given,
    else the first of REFERENCES present (None when the table has none: no differences are shown)."""
    if configured is not None:
        return configured if configured in methods else None
    return next((m for m in REFERENCES if m in methods), None)


def is_baseline(method: str) -> bool:
    """Whether a method (a parsed name such as `rfsi+gepa`, `textgrad`, `none`) uses no part of RASO (no
    retrieval-augmented init or update): the methods the headline compares RASO with."""
    from .config import Method

    parsed = Method.parse(method)
    return not parsed.init.startswith("rasi") and not (parsed.update or "").startswith("rasu")


#: The method a table's headline is about, in order of preference (update tables: full RASO; init tables: RASI).
HEADLINE_METHODS = ("raso", "rasi+rasu", "rasi")


CellLike = CellResult | Mapping[str, Any]


def per_task(cell: CellLike) -> dict[str, float]:
    return {t.task_id: t.reward for t in CellResult.from_dict(cell).test_per_task}


def paired_difference(cells: Sequence[CellLike], reference_cells: Sequence[CellLike], reference: str,
                      *, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> PairedDifference | None:
    """The paired difference of `cells` (one per seed) against `reference_cells` over the seeds both have and the
    test tasks every one of those seeds scored; None when nothing pairs."""
    typed = [CellResult.from_dict(c) for c in cells]
    ref_by_seed = {c.seed: per_task(c) for c in (CellResult.from_dict(r) for r in reference_cells)}
    pairs = [(per_task(c), ref_by_seed[c.seed]) for c in sorted(typed, key=lambda c: c.seed)
             if c.seed in ref_by_seed]
    if not pairs:
        return None
    tasks = sorted(set.intersection(*(set(m) & set(r) for m, r in pairs)))
    if not tasks:
        return None
    import numpy as np

    diffs = np.array([[m[t] - r[t] for t in tasks] for m, r in pairs], dtype=float)  # seeds x tasks
    n_seeds, n_tasks = diffs.shape
    rng = np.random.default_rng(seed)
    picked_seeds = rng.integers(n_seeds, size=(resamples, n_seeds))
    picked_tasks = rng.integers(n_tasks, size=(resamples, n_tasks))
    # per resample: the mean over its seeds of each seed's mean over its tasks (= the mean over the grid)
    seed_means = diffs[:, picked_tasks].mean(axis=2)  # seeds x resamples
    means = np.take_along_axis(seed_means.T, picked_seeds, axis=1).mean(axis=1)
    low, high = (float(q) for q in np.quantile(means, [0.025, 0.975]))
    observed = float(diffs.mean())
    return PairedDifference(reference=reference, mean=observed, low=low, high=high, tasks=n_tasks, seeds=n_seeds)


def cell_n(cells: Sequence[CellLike]) -> tuple[int, int]:
    """(test tasks, seeds) of a table cell: the most tasks any seed scored, and the number of seeds."""
    return max((len(CellResult.from_dict(c).test_per_task) for c in cells), default=0), len(cells)


__all__ = ["BOOTSTRAP_SEED", "HEADLINE_METHODS", "PairedDifference", "REFERENCES", "cell_n", "is_baseline",
           "paired_difference", "reference_for"]
