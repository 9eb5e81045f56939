"""The engine's seam: what it receives instead of building (docs/design.md §2). raso.api builds the product's
own parts; tests and experiments pass their own through the same types.

An algorithm step is an object with one method that takes the run's context (raso.engine.context.RunContext:
gateway view, task and harness descriptions, retriever, prompts, limits, retrieval options, profile, workers).
Its own options are its attributes, set when it is built (raso.optimizer.options), so the engine never passes
them and a new option touches only the options model and the step that reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from raso.harness import Harness, Rollout, RolloutRunner
from raso.optimizer.types import InitResult, Lesson
from raso.skill import Skill

from .context import RetrieverFactory, RunContext
from .loop import LoopStrategies

if TYPE_CHECKING:
    from raso.llm.gateway import Gateway

    from .events import EventSink


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


#: Builds the execution agent for one batch of rollouts, on the batch's gateway view (its calls are tagged).
AgentFactory = Callable[["Gateway"], RolloutRunner]


@dataclass
class RunComponents:
    """Everything a run works with, built by raso.api from the config (or given by a caller). The gateway and
    the retriever are the context's; `initializer` is None when s0 is a SKILL.md file the engine loads."""

    harness: Harness
    context: RunContext
    agent_factory: AgentFactory
    initializer: Initializer | None
    proposer: Proposer
    sinks: list["EventSink"] = field(default_factory=list)
    loop: LoopStrategies = field(default_factory=LoopStrategies)  # sampler, selector, gate, stoppers (raso.engine.loop)

    @property
    def gateway(self) -> "Gateway":
        return self.context.gateway


__all__ = ["AgentFactory", "Initializer", "ProposalLike", "Proposer", "RetrieverFactory", "RunComponents",
           "RunContext"]
