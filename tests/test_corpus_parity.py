"""rank-bm25 (BM25Okapi) is the correctness oracle: same top-5 and scores at the same parameters."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from corpus_tools.index import SectionIndex, index_text
from corpus_tools.ingest import load_corpus
from corpus_tools.sections import Section, split_corpus
from corpus_tools.tokenizer import tokenize

QUERIES = [
    "read excel workbook and write formulas with openpyxl",
    "pivot table summary of spreadsheet columns",
    "plan a multi-step task as a checklist and verify each step",
    "search products filter by price add to cart and checkout",
    "write unit tests with pytest fixtures",
    "git commit message conventions",
    "pick up an object and put it in the fridge",
    "parse csv files with pandas dataframe groupby",
    "debug failing build error logs",
    "security review of authentication tokens",
    "react component state hooks",
    "sql query performance index",
    "markdown documentation style guide headings",
    "docker container deployment kubernetes",
    "summarize a long document into bullet points",
    "chart matplotlib plot axis labels",
    "api rate limit retry backoff",
    "prompt engineering examples for language models",
    "data validation rules for cell ranges",
    "navigate a website and click buttons",
]


def assert_same_top5(index: SectionIndex, oracle: BM25Okapi, query: str) -> None:
    oracle_scores = oracle.get_scores(tokenize(query))
    docs, scores = index.top_k(query, k=5)
    expected = np.argsort(-oracle_scores, kind="stable")[:5]
    expected = expected[oracle_scores[expected] > 0]
    # Same scores at every rank, and the same sections wherever the oracle's scores are not tied.
    assert np.allclose(scores, oracle_scores[expected], rtol=1e-9, atol=1e-12), query
    assert np.allclose(oracle_scores[docs], scores, rtol=1e-9, atol=1e-12), query
    ties = {round(float(s), 9) for s in oracle_scores[expected]
            if np.sum(np.isclose(oracle_scores, s, rtol=1e-12, atol=0)) > 1}
    for ours, theirs in zip(docs, expected):
        if round(float(oracle_scores[theirs]), 9) not in ties:
            assert ours == theirs, query


def test_parity_on_a_synthetic_corpus() -> None:
    rng = np.random.default_rng(3)
    words = [f"term{i}" for i in range(300)] + ["excel", "workbook", "formulas", "cart", "checklist"]
    # Zipf-like word frequencies so some terms sit in over half the documents (negative raw idf).
    probs = 1.0 / np.arange(1, len(words) + 1)
    probs /= probs.sum()
    sections = [Section(id=f"s{i}", skill_id=f"k{i}", skill_name=f"k{i}", heading_path=f"k{i}",
                        text=" ".join(rng.choice(words, size=int(rng.integers(5, 60)), p=probs)),
                        repo="r/r", path="p", commit="c", license="MIT") for i in range(1500)]
    index = SectionIndex.build(sections, k1=1.2, b=0.7, idf="okapi", dtype=np.float64)
    oracle = BM25Okapi([tokenize(index_text(s)) for s in sections], k1=1.2, b=0.7, epsilon=0.25)
    assert (np.asarray(list(oracle.idf.values())) > 0).all()
    for query in ["term0 term1", "excel workbook formulas", "cart checklist term2 term2", "term5 term50 term150"]:
        assert_same_top5(index, oracle, query)
        assert np.allclose(index.scores(query), oracle.get_scores(tokenize(query)))


@pytest.mark.shared
def test_parity_on_the_shared_corpus(shared_corpus: Path) -> None:
    records, _ = load_corpus(shared_corpus)
    sections = list(split_corpus(records[::6]))
    index = SectionIndex.build(sections, idf="okapi", dtype=np.float64)
    oracle = BM25Okapi([tokenize(index_text(s)) for s in sections], k1=1.5, b=0.75, epsilon=0.25)
    for query in QUERIES:
        assert_same_top5(index, oracle, query)
    # The default (float32, Lucene idf) ranks the same few sections near the top for plain queries.
    default = SectionIndex.build(sections)
    overlap = [len(set(default.top_k(q, 5)[0]) & set(index.top_k(q, 5)[0])) for q in QUERIES]
    assert np.mean(overlap) >= 3.5
