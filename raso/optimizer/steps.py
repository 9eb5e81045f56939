"""The algorithm steps' protocols: what the engine calls to write s0 and to propose candidates (docs/design.md §7).

An algorithm step is an object with one method that takes the run's context (raso.optimizer.context.RunContext:
gateway view, task and harness descriptions, retriever, prompts, limits, retrieval options, profile, workers).
Its own options are its attributes, set when it is built (raso.optimizer.options), so the engine never passes
them and a new option touches only the options model and the step that reads it. The protocols live in the
optimizer's package, beside the steps that implement them; the engine (raso.engine.protocols.RunComponents)
imports them from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from raso.harness import Rollout
from raso.skill import Skill

from .context import RunContext
from .types import InitResult, Lesson


@runtime_checkable
class Initializer(Protocol):
    """Writes the initial skill s0 with zero rollouts (RASI / RFSI: raso.optimizer.rasi).

    `init(ctx)` makes its model calls through `ctx.gateway` (already tagged with the unit of work), asks
    `ctx.retriever()` only if it retrieves, and returns an InitResult; the engine saves `result.skill` as s0,
    `result.to_dict()` as proposals/init.json and `result.lessons` in lessons.jsonl. Exceptions: a budget or
    infrastructure failure of the gateway stops the run resumably; anything else fails the init unit (a
    resume retries it with fresh cache keys)."""

    def init(self, ctx: RunContext) -> InitResult: ...


class ProposalLike(Protocol):
    """What the engine reads of a proposal: raso.optimizer.types.UpdateProposal, or a baseline's own record."""

    candidate: Skill
    lessons: list[Lesson]

    @property
    def gradients(self) -> Sequence[Any]: ...

    def to_dict(self) -> dict[str, Any]: ...


@runtime_checkable
class Proposer(Protocol):
    """Proposes candidate s_{t+1} from s_t and its train rollouts (RASU / RFSU: raso.optimizer.rasu).

    `propose(ctx, skill, rollouts)` gets s_t and the minibatch's rollouts (rewards, trajectories) and returns a
    proposal whose `candidate` the engine evaluates on val behind the strict gate. Model calls go through
    `ctx.gateway`; junk from a working model (any exception that is not a budget, infrastructure or
    authentication failure) costs the iteration its candidate, nothing more."""

    def propose(self, ctx: RunContext, skill: Skill, rollouts: Sequence[Rollout]) -> ProposalLike: ...


__all__ = ["Initializer", "ProposalLike", "Proposer"]
