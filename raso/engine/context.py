"""What every algorithm step of a run works with, in one object: `RunContext`.

An initializer gets `init(ctx)`, a proposer `propose(ctx, skill, rollouts)` (raso.engine.protocols); what a step
needs beyond its own options (raso.optimizer.options) it reads from the context: the gateway view, the task
description T and harness description H, the retriever, the prompt templates and limits, the retrieval options
(k, exclusions), the model profile and the worker count. raso.api builds one per run; the engine hands each unit
of work a view of it whose model calls carry the unit's cache tag (`for_unit`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from raso.optimizer.render import PromptLimits, limits_for
from raso.prompts import DEFAULT_PROMPTS, PromptLibrary
from raso.retrieval.retrievers import RetrievalOptions

from .errors import RunError
from .replay import UnitGateway

if TYPE_CHECKING:
    from raso.llm.gateway import Gateway
    from raso.retrieval.retrievers import SectionSearcher

#: Builds the retriever on first need (loading an index costs seconds; RFSI + RFSU never need one).
RetrieverFactory = Callable[[], "SectionSearcher"]


class NoRetrieverError(RunError):
    """A step asked for the retriever of a context that has none (a retrieval-free run or test)."""


class LazyRetriever:
    """The retriever, built by `factory` on the first call and shared by every view of the context after that
    (the views of parallel units may ask at the same time: one builds it, the others wait)."""

    def __init__(self, factory: RetrieverFactory) -> None:
        self._factory = factory
        self._retriever: SectionSearcher | None = None
        self._lock = threading.Lock()

    def __call__(self) -> "SectionSearcher":
        with self._lock:
            if self._retriever is None:
                self._retriever = self._factory()
            return self._retriever


@dataclass(frozen=True)
class RunContext:
    """The shared inputs of RASI/RFSI and RASU/RFSU (and of any user strategy). Immutable: a view for a unit
    of work is a copy with another gateway (`for_unit`), sharing the same lazily built retriever.

    `limits` None = `raso.optimizer.render.limits_for(gateway)`; `prompts` None = the package's templates.
    `profile` is the model profile when the run has one (None otherwise)."""

    gateway: "Gateway"
    task_description: str
    harness_description: str
    retriever_factory: RetrieverFactory | None = None
    prompts: PromptLibrary = DEFAULT_PROMPTS
    limits: PromptLimits | None = None
    retrieval: RetrievalOptions = field(default_factory=RetrievalOptions)
    exclude_repos: tuple[str, ...] = ()
    exclude_skills: tuple[str, ...] = ()
    profile: Any = None
    workers: int = 1

    def __post_init__(self) -> None:
        # frozen: fill the derived defaults once, through object.__setattr__ (dataclasses' documented way)
        if self.retriever_factory is not None and not isinstance(self.retriever_factory, LazyRetriever):
            object.__setattr__(self, "retriever_factory", LazyRetriever(self.retriever_factory))
        if self.limits is None:
            object.__setattr__(self, "limits", limits_for(self.gateway))
        object.__setattr__(self, "exclude_repos", tuple(self.exclude_repos))
        object.__setattr__(self, "exclude_skills", tuple(self.exclude_skills))
        if self.workers < 1:
            raise ValueError("workers must be at least 1")

    @property
    def prompt_limits(self) -> PromptLimits:
        """The prompt and reply budgets of every optimizer call (never None after construction)."""
        return self.limits if self.limits is not None else limits_for(self.gateway)

    @property
    def k(self) -> int:
        """Corpus sections retrieved per query."""
        return self.retrieval.k

    def retriever(self) -> "SectionSearcher":
        """The run's retriever, built on the first call. NoRetrieverError when the context has none."""
        if self.retriever_factory is None:
            raise NoRetrieverError("this run has no retriever: a retrieval-augmented step (RASI, RASU) needs one")
        return self.retriever_factory()

    def for_unit(self, unit: str) -> "RunContext":
        """This context with every model call tagged with `unit` (its cache key: a resumed unit replays the
        replies its first attempt got, and two units never share one)."""
        return replace(self, gateway=UnitGateway(self.gateway, unit))


__all__ = ["LazyRetriever", "NoRetrieverError", "RetrieverFactory", "RunContext"]
