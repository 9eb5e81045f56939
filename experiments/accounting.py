"""Rollout accounting: how many rollouts an update schedule costs, counted the paper's way.

The paper counts train minibatch rollouts plus the candidates' val evaluations (RASO summary, Table 10). With
`epochs` passes over `n_train` tasks in minibatches of `minibatch`, there are `epochs * ceil(n_train / minibatch)`
iterations, each rolling its minibatch out and evaluating one candidate on the `n_val` val tasks. Whether s0's own
val evaluation is counted differs between the paper's benchmarks (see `PAPER_TABLE10` and the test that finds which
convention gives each count):

* ``candidates`` — train minibatches + one val evaluation per candidate (s0's val score is not counted);
* ``candidates+s0`` — the same plus one val evaluation of s0 (what `raso.engine` runs: the gate needs s0's score).

Every update method in an experiment is given the same budget under the same convention, so rollout counts are
identical across methods by construction. The counts are the engine's own schedule (raso.engine.schedule.Schedule)
walked with no budget, one rollout per val task and the strict gate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from raso.engine.gate import GateOptions, ValidationGate
from raso.engine.loop import BatchSampler, ShuffledMinibatches
from raso.engine.schedule import Schedule

Convention = Literal["candidates", "candidates+s0"]
CONVENTIONS: tuple[Convention, ...] = ("candidates", "candidates+s0")


@dataclass(frozen=True)
class RolloutCount:
    iterations: int
    train: int
    val: int

    @property
    def total(self) -> int:
        return self.train + self.val


def schedule_rollouts(n_train: int, n_val: int, *, epochs: int = 2, minibatch: int = 40,
                      convention: Convention = "candidates", sampler: BatchSampler | None = None) -> RolloutCount:
    """Rollouts of a full schedule: `epochs` passes over train in the sampler's minibatches (default: the engine's,
    of `minibatch` tasks), one candidate val evaluation per iteration."""
    if n_train < 1 or n_val < 1 or epochs < 1 or minibatch < 1:
        raise ValueError("n_train, n_val, epochs and minibatch must all be at least 1")
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown rollout convention {convention!r}; choose one of {', '.join(CONVENTIONS)}")
    schedule = Schedule(train_ids=[f"train-{i}" for i in range(n_train)], val_ids=[f"val-{i}" for i in range(n_val)],
                        sampler=sampler or ShuffledMinibatches(size=minibatch, seed=0),
                        gate=ValidationGate(GateOptions()), epochs=epochs)
    phases, iterations = schedule.rollouts()
    s0 = phases["s0_val"] if convention == "candidates+s0" else 0
    return RolloutCount(iterations=iterations, train=phases["train"], val=phases["val"] + s0)


def engine_budget(n_train: int, n_val: int, *, epochs: int = 2, minibatch: int = 40,
                  convention: Convention = "candidates", sampler: BatchSampler | None = None) -> int:
    """The `budget_rollouts` to give raso's engine (which always evaluates s0 on val and counts it) so that the
    run spends exactly the schedule's rollouts under `convention` plus s0's val evaluation where the convention
    leaves it out: the same rollouts the schedule runs, whichever convention reports them."""
    count = schedule_rollouts(n_train, n_val, epochs=epochs, minibatch=minibatch, convention=convention,
                              sampler=sampler)
    return count.total + (n_val if convention == "candidates" else 0)


def reported_rollouts(rollouts_used: int, n_val: int, *, s0_evaluated: bool, convention: Convention) -> int:
    """Rollouts a run used, as the convention reports them (the engine's count includes s0's val evaluation)."""
    if convention == "candidates" and s0_evaluated:
        return rollouts_used - n_val
    return rollouts_used


#: The paper's splits (train, val) and its Table 10 rollout counts for 2 epochs, minibatch 40.
PAPER_TABLE10: dict[str, tuple[int, int, int]] = {
    "officeqa": (50, 24, 196),
    "spreadsheetbench": (80, 40, 320),
    "alfworld": (39, 18, 114),
    "webshop": (80, 40, 360),
}


def matching_conventions(n_train: int, n_val: int, total: int, *, epochs: int = 2,
                         minibatch: int = 40) -> list[Convention]:
    """The conventions under which the schedule costs exactly `total` rollouts."""
    return [c for c in CONVENTIONS
            if schedule_rollouts(n_train, n_val, epochs=epochs, minibatch=minibatch, convention=c).total == total]


__all__ = ["CONVENTIONS", "Convention", "PAPER_TABLE10", "RolloutCount", "engine_budget", "matching_conventions",
           "reported_rollouts", "schedule_rollouts"]
