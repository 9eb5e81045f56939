"""The loop's strategies: how train minibatches are drawn, which skill an iteration proposes from, whether a
candidate replaces the incumbent, and when the run stops early (docs/design.md, "Seams").

They plug in like the initializer and the proposer: `raso.optimize(..., loop=LoopStrategies(selector=...))`. A
field left None takes the configured default, which is the paper's loop:

* `sampler` (`BatchSampler`): `ShuffledMinibatches` — train shuffled by (seed, epoch), cut into minibatches;
* `selector` (`CandidateSelector`): `CurrentBest` — propose from the incumbent s_t;
* `gate` (raso.engine.gate.Gate): `ValidationGate` — the configured strict / paired / significant gate;
* `stoppers` (`Stopper`s): none — the run ends when the schedule, the iteration cap or a budget says so.

The sampler and the gate also shape the schedule (raso.engine.schedule.Schedule), so the cost plan and the
experiments' rollout accounting read them too. A selector or a stopper sees the run through a `LoopView`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .gate import Gate, ValidationGate

if TYPE_CHECKING:
    from .config import OptimizeConfig
    from .state import RunState


@dataclass(frozen=True)
class LoopView:
    """What a selector or a stopper sees of the run (read it, never change it). `state.val_scores` holds the
    per-task val score of every evaluated version (s0 and each candidate); `state.candidates` the gate's
    decisions; `val_task_ids` the tasks the gate scores on."""

    state: RunState
    cost_usd: float
    val_task_ids: tuple[str, ...]


@runtime_checkable
class BatchSampler(Protocol):
    """The train minibatches of one epoch, in order. It must give the same batches for the same epoch on every
    call (a resumed run asks again), and each batch's ids must be train ids."""

    def batches(self, train_ids: Sequence[str], epoch: int) -> list[list[str]]: ...


@runtime_checkable
class CandidateSelector(Protocol):
    """The version of the skill the next iteration rolls out on train and proposes from (its parent); the gate
    still compares the candidate with the incumbent. It must return a version the run has written."""

    def select(self, view: LoopView) -> int: ...


@runtime_checkable
class Stopper(Protocol):
    """Checked before each iteration: a reason ends the optimization (the test evaluation still follows)."""

    def stop_reason(self, view: LoopView) -> str | None: ...


@dataclass(frozen=True)
class ShuffledMinibatches:
    """Train shuffled by (seed, epoch) — the same on every resume — and cut into minibatches of `size`."""

    size: int
    seed: int

    def batches(self, train_ids: Sequence[str], epoch: int) -> list[list[str]]:
        ids = list(train_ids)
        random.Random(f"raso:{self.seed}:{epoch}").shuffle(ids)
        return [ids[i:i + self.size] for i in range(0, len(ids), self.size)]


@dataclass(frozen=True)
class CurrentBest:
    """Propose from the incumbent s_t (the paper's loop)."""

    def select(self, view: LoopView) -> int:
        return view.state.current_version or 0


@dataclass(frozen=True)
class LoopStrategies:
    """The loop's strategies of a run; None takes the configured default (`resolved`)."""

    sampler: BatchSampler | None = None
    selector: CandidateSelector | None = None
    gate: Gate | None = None
    stoppers: tuple[Stopper, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "stoppers", tuple(self.stoppers))
        for name, value, kind in (("sampler", self.sampler, BatchSampler), ("selector", self.selector,
                                                                           CandidateSelector),
                                  ("gate", self.gate, Gate)):
            if value is not None and not isinstance(value, kind):
                raise TypeError(f"loop {name} {value!r} is not a {kind.__name__} (see raso.engine.loop)")
        for stopper in self.stoppers:
            if not isinstance(stopper, Stopper):
                raise TypeError(f"loop stopper {stopper!r} has no stop_reason(view) method (see raso.engine.loop)")

    def resolved(self, config: OptimizeConfig) -> ResolvedLoop:
        """These strategies with every unset one the configured default."""
        schedule = config.schedule
        return ResolvedLoop(sampler=self.sampler or ShuffledMinibatches(schedule.minibatch, schedule.seed),
                            selector=self.selector or CurrentBest(), gate=self.gate or ValidationGate(config.gate),
                            stoppers=self.stoppers)


@dataclass(frozen=True)
class ResolvedLoop:
    """A run's loop strategies, every one set (LoopStrategies.resolved)."""

    sampler: BatchSampler
    selector: CandidateSelector
    gate: Gate
    stoppers: tuple[Stopper, ...] = ()


__all__ = ["BatchSampler", "CandidateSelector", "CurrentBest", "LoopStrategies", "LoopView", "ResolvedLoop",
           "ShuffledMinibatches", "Stopper"]
