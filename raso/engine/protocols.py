"""The engine's seam: what it receives instead of building (docs/design.md §2). raso.api builds the product's
own parts; tests and experiments pass their own through the same types.

The algorithm steps (Initializer, Proposer) and the context they take (RunContext) are the optimizer's
(raso.optimizer.steps, raso.optimizer.context), one layer below the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from raso.harness import Harness, RolloutRunner
from raso.optimizer.context import RunContext
from raso.optimizer.steps import Initializer, Proposer

from .loop import LoopStrategies

if TYPE_CHECKING:
    from raso.llm.gateway import Gateway

    from .events import EventSink


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


__all__ = ["AgentFactory", "RunComponents"]
