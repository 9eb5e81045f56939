"""The run's schedule, kept once: the engine walks it, the cost plan (raso.engine.plan) and the experiments'
rollout accounting (experiments/accounting.py) replay it.

A run evaluates s0 on the gated val tasks (when the rollout budget covers it), then walks `epochs` passes over
train in the sampler's minibatches; each iteration rolls its minibatch out and costs the gate one decision on val.
The walk stops at the iteration cap or when the rollout budget is spent, and a minibatch is cut to what is left
after reserving the gate's decision. After it, the held-out val tasks and the test split are scored (apart from
the rollout budget). The engine asks `s0_fits`, `next_batch` and `fit` as it goes; `steps()` replays the whole
walk for a run whose every proposal yields a candidate the gate evaluates.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from .budget import Budget
from .errors import RunError
from .gate import split_holdout

if TYPE_CHECKING:
    from .config import OptimizeConfig
    from .gate import Gate
    from .loop import BatchSampler, ResolvedLoop

StepPhase = Literal["s0_val", "train", "val", "holdout", "test"]
PHASES: tuple[StepPhase, ...] = ("s0_val", "train", "val", "holdout", "test")


@dataclass(frozen=True)
class Step:
    """One batch of rollouts of the schedule: its phase, where it sits (epoch and minibatch for train and val),
    its tasks, the repeats per task and the rollouts it costs (a paired gate's decision rolls the incumbent too)."""

    phase: StepPhase
    tasks: tuple[str, ...]
    repeats: int
    rollouts: int
    epoch: int | None = None
    batch_index: int | None = None


@dataclass(frozen=True)
class NextBatch:
    """The next iteration's minibatch (before the rollout budget cuts it: `Schedule.fit`)."""

    epoch: int
    batch_index: int
    task_ids: tuple[str, ...]


@dataclass(frozen=True)
class ScheduleEnd:
    """The schedule has no next iteration, and why; (epoch, batch_index) is where its walk stopped."""

    reason: str
    epoch: int
    batch_index: int


@dataclass
class Schedule:
    """The steps of one run. `train_ids` and `val_ids` (the gated ones) are task ids; `n_holdout` and `n_test` the
    sizes of the held-out val part and of the test split (0: none, or not scored)."""

    train_ids: Sequence[str]
    val_ids: Sequence[str]
    sampler: BatchSampler
    gate: Gate
    epochs: int
    repeats: int = 1
    max_iterations: int | None = None
    budget_rollouts: int | None = None
    n_holdout: int = 0
    n_test: int = 0
    _batches: dict[int, list[list[str]]] = field(default_factory=dict, repr=False)

    @classmethod
    def of_run(cls, config: OptimizeConfig, loop: ResolvedLoop, train_ids: Sequence[str], val_ids: Sequence[str],
               n_test: int = 0) -> Schedule:
        """The schedule of `config` with these train and val tasks (the held-out part is taken out of `val_ids`
        here, by the run's seed)."""
        gated, held = split_holdout(list(val_ids), config.gate, config.schedule.seed)
        return cls(train_ids=list(train_ids), val_ids=gated, sampler=loop.sampler, gate=loop.gate,
                   epochs=config.schedule.epochs, repeats=config.gate.rollouts_per_task,
                   max_iterations=config.schedule.max_iterations, budget_rollouts=config.budget.rollouts,
                   n_holdout=len(held), n_test=n_test if config.schedule.test else 0)

    @property
    def budget(self) -> Budget:
        return Budget(rollouts=self.budget_rollouts)

    def batches(self, epoch: int) -> list[list[str]]:
        """Epoch `epoch`'s minibatches (the sampler's; asked once per epoch)."""
        if epoch not in self._batches:
            batches = [list(b) for b in self.sampler.batches(list(self.train_ids), epoch)]
            known = set(self.train_ids)
            for index, batch in enumerate(batches):
                strangers = [i for i in batch if i not in known]
                if not batch or strangers:
                    what = "an empty batch" if not batch else f"ids that are not train tasks ({strangers[:3]!r})"
                    raise RunError(f"the batch sampler {self.sampler!r} gave {what} as minibatch {index} of epoch "
                                   f"{epoch}")
            self._batches[epoch] = batches
        return self._batches[epoch]

    @property
    def s0_val_rollouts(self) -> int:
        return len(self.val_ids) * self.repeats

    @property
    def decision_rollouts(self) -> int:
        """What one gate decision costs."""
        return self.gate.decision_rollouts(len(self.val_ids))

    def s0_fits(self, rollouts_used: int) -> bool:
        """Whether the rollout budget covers s0's val evaluation."""
        return self.budget.allows_val(rollouts_used, self.s0_val_rollouts)

    def next_batch(self, epoch: int, batch_index: int, iterations_done: int,
                   rollouts_used: int) -> NextBatch | ScheduleEnd:
        """The minibatch at (epoch, batch_index) or the first one after it, or why there is none: every epoch
        walked, the iteration cap reached, or the rollout budget spent."""
        while True:
            if epoch >= self.epochs:
                return ScheduleEnd(f"schedule complete ({self.epochs} epoch(s))", epoch, batch_index)
            batches = self.batches(epoch)
            if batch_index < len(batches):
                break
            epoch, batch_index = epoch + 1, 0
        if self.max_iterations is not None and iterations_done >= self.max_iterations:
            return ScheduleEnd(f"iteration limit reached ({self.max_iterations})", epoch, batch_index)
        if self.budget_rollouts is not None and rollouts_used >= self.budget_rollouts:
            return ScheduleEnd(f"rollout budget reached ({rollouts_used}/{self.budget_rollouts})", epoch, batch_index)
        return NextBatch(epoch=epoch, batch_index=batch_index, task_ids=tuple(batches[batch_index]))

    def fit(self, batch: NextBatch, rollouts_used: int) -> tuple[str, ...] | ScheduleEnd:
        """The minibatch cut to what the rollout budget leaves after reserving the gate's decision."""
        decision = self.decision_rollouts
        size = self.budget.train_batch_size(rollouts_used, len(batch.task_ids), decision)
        if size == 0:
            return ScheduleEnd(f"rollout budget reached: {rollouts_used}/{self.budget_rollouts} used, no room for a "
                               f"minibatch plus the gate's {decision} val rollouts", batch.epoch, batch.batch_index)
        return batch.task_ids[:size]

    def steps(self) -> Iterator[Step]:
        """The whole run's steps when every proposal yields a candidate that the gate evaluates (an upper bound
        of the optimization's rollouts: a proposal that changes nothing costs no decision)."""
        used, iterations = 0, 0
        if not self.s0_fits(used):
            if self.n_test:
                yield Step("test", (), self.repeats, self.n_test * self.repeats)
            return
        yield Step("s0_val", tuple(self.val_ids), self.repeats, self.s0_val_rollouts)
        used = self.s0_val_rollouts
        epoch, batch_index = 0, 0
        while True:
            nxt = self.next_batch(epoch, batch_index, iterations, used)
            if isinstance(nxt, ScheduleEnd):
                break
            tasks = self.fit(nxt, used)
            if isinstance(tasks, ScheduleEnd):
                break
            yield Step("train", tasks, 1, len(tasks), epoch=nxt.epoch, batch_index=nxt.batch_index)
            yield Step("val", tuple(self.val_ids), self.repeats, self.decision_rollouts, epoch=nxt.epoch,
                       batch_index=nxt.batch_index)
            used += len(tasks) + self.decision_rollouts
            iterations += 1
            epoch, batch_index = nxt.epoch, nxt.batch_index + 1
        if self.n_holdout:
            yield Step("holdout", (), self.repeats, self.n_holdout * self.repeats)
        if self.n_test:  # s0, and the best skill when an iteration ran (it may be accepted)
            versions = 2 if iterations else 1
            yield Step("test", (), self.repeats, versions * self.n_test * self.repeats)

    def rollouts(self) -> tuple[dict[str, int], int]:
        """(rollouts per phase, iterations) of `steps()`."""
        phases: dict[str, int] = dict.fromkeys(PHASES, 0)
        iterations = 0
        for step in self.steps():
            phases[step.phase] += step.rollouts
            iterations += step.phase == "train"
        return phases, iterations


__all__ = ["PHASES", "NextBatch", "Schedule", "ScheduleEnd", "Step", "StepPhase"]
