"""raso.retrieval.retrievers: the kind switch RASI/RASU use."""

from __future__ import annotations

import pytest

from raso.retrieval.retrievers import SectionSearcher, build_retriever
from raso.retrieval.vetting import VettedSearcher


class _TinyIndex:
    def __init__(self) -> None:
        self.queries: list[str] = []

    def search(self, query, k=5, exclude_repos=(), exclude_skills=()):
        self.queries.append(query)
        return []


def test_bm25_kind_returns_the_index_itself_vetted_unless_vetting_is_off():
    index = _TinyIndex()
    retriever = build_retriever("bm25", index=index, gateway=None)
    assert isinstance(retriever, VettedSearcher) and retriever.inner is index
    assert isinstance(retriever, SectionSearcher)
    assert build_retriever({"kind": "bm25", "vet": False}, index=index) is index


def test_unknown_kind_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown retriever kind 'nope'"):
        build_retriever("nope", index=_TinyIndex())


def test_missing_index_is_a_clear_error():
    with pytest.raises(ValueError, match="section index"):
        build_retriever("bm25", index=None)


def test_dreamer_without_gateway_is_a_clear_error():
    with pytest.raises(ValueError, match="gateway"):
        build_retriever("dreamer", index=_TinyIndex(), gateway=None)
