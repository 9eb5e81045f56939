"""Retrievers: the one place RASI/RASU ask for corpus sections.

Every retriever satisfies `SectionSearcher` (a `search(query, k, exclude_repos, exclude_skills)`
method returning `corpus_tools.index.Hit`s), so the algorithm switches methods by a config string:

* ``"bm25"``  — the section-level BM25 index itself (the paper's default).
* ``"field"`` — field-aware skill retrieval (name / description / body, sparse + dense fused),
  whose top skills are then searched section-wise with BM25.
* ``"dreamer"`` — SkillDreamer prospective retrieval (capabilities + pseudo-skills through the
  gateway), again narrowing the section search to the skills it finds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # imported lazily so `raso` starts without the corpus index built
    from corpus_tools.index import Hit

RETRIEVER_KINDS: tuple[str, ...] = ("bm25", "field", "dreamer")


@runtime_checkable
class SectionSearcher(Protocol):
    """Anything that returns the top-k corpus sections for a query."""

    def search(
        self,
        query: str,
        k: int = 5,
        exclude_repos: Sequence[str] = (),
        exclude_skills: Sequence[str] = (),
    ) -> list[Hit]: ...


def build_retriever(kind: str, *, index: Any, gateway: Any = None, **options: Any) -> SectionSearcher:
    """Return a section searcher of the given kind over `index` (a `corpus_tools.index.SectionIndex`).

    `gateway` is needed by "dreamer" (its model calls); `options` go to the retriever's constructor
    (for "field": `skills=` records, `method=`; for "dreamer": `skills=`, Kc/Kr/K/alpha/beta/gamma).
    """
    kind = (kind or "").strip().lower()
    if kind not in RETRIEVER_KINDS:
        raise ValueError(f"unknown retriever kind {kind!r}; choose one of {', '.join(RETRIEVER_KINDS)}")
    if index is None:
        raise ValueError("build_retriever needs a section index (corpus_tools.index.SectionIndex)")
    if kind == "bm25":
        if options:
            raise ValueError(f"the bm25 retriever takes no options, got {sorted(options)}")
        return index
    if kind == "field":
        return FieldSectionRetriever.from_index(index, **options)
    # kind == "dreamer"
    if gateway is None:
        raise ValueError("the dreamer retriever calls the model: pass gateway=LLMGateway(...)")
    from raso.dreamer import DreamerSectionRetriever

    return DreamerSectionRetriever.from_index(index, gateway=gateway, **options)


class FieldSectionRetriever:  # filled in below once corpus_tools.retrieval lands
    @classmethod
    def from_index(cls, index: Any, **options: Any) -> SectionSearcher:
        raise NotImplementedError("the field-aware retriever is not available yet")
