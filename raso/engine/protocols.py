"""The engine's seam: what it receives instead of building (docs/design.md §2). raso.api builds the product's
own parts; tests and experiments pass their own through the same types."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from raso.harness import Harness, Rollout, RolloutRunner
from raso.optimizer.types import InitResult, UpdateProposal
from raso.skill import Skill

if TYPE_CHECKING:
    from raso.llm import LLMGateway
    from raso.retrieval.retrievers import SectionSearcher

    from .events import EventSink


class Initializer(Protocol):
    """Writes the initial skill s0 with zero rollouts (RASI / RFSI: raso.optimizer.rasi.initialize_skill)."""

    def __call__(
        self, gw: "LLMGateway", *, task_description: str, harness_description: str,
        retriever: "SectionSearcher | None", k: int, num_requirements: int, adapt: bool,
    ) -> InitResult: ...


class Proposer(Protocol):
    """Proposes candidate s_{t+1} from s_t and its train rollouts (RASU / RFSU: raso.optimizer.rasu.propose_update)."""

    def __call__(
        self, gw: "LLMGateway", *, task_description: str, harness_description: str, skill: Skill,
        rollouts: Sequence[Rollout], retriever: "SectionSearcher | None", k: int, chunk_size: int, adapt: bool,
    ) -> UpdateProposal: ...


#: Builds the execution agent for one batch of rollouts, on the batch's gateway view (its calls are tagged).
AgentFactory = Callable[["LLMGateway"], RolloutRunner]
#: Builds the retriever on first need (loading an index costs seconds; RFSI + RFSU never need one).
RetrieverFactory = Callable[[], "SectionSearcher"]


@dataclass
class RunComponents:
    """Everything a run works with, built by raso.api from the config (or given by a caller)."""

    harness: Harness
    gateway: "LLMGateway"
    agent_factory: AgentFactory
    initializer: Initializer
    proposer: Proposer
    retriever_factory: RetrieverFactory
    sinks: list["EventSink"] = field(default_factory=list)


__all__ = ["AgentFactory", "Initializer", "Proposer", "RetrieverFactory", "RunComponents"]
