"""Retrieval metrics against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from corpus_tools.retrieval.metrics import (
    completeness_at_k,
    format_table,
    hit_at_1,
    mean_metrics,
    ndcg_at_k,
    query_metrics,
    recall_at_k,
    reciprocal_rank,
)

RANKED = ["a", "g1", "b", "c", "g2", "d"]
GOLD = {"g1", "g2"}


def test_hit_at_1():
    assert hit_at_1(RANKED, GOLD) == 0.0
    assert hit_at_1(["g2", "a"], GOLD) == 1.0
    assert hit_at_1([], GOLD) == 0.0


def test_recall_and_completeness():
    assert recall_at_k(RANKED, GOLD, 1) == 0.0
    assert recall_at_k(RANKED, GOLD, 2) == 0.5
    assert recall_at_k(RANKED, GOLD, 5) == 1.0
    assert completeness_at_k(RANKED, GOLD, 4) == 0.0
    assert completeness_at_k(RANKED, GOLD, 5) == 1.0


def test_ndcg_by_hand():
    # gold at ranks 2 and 5: DCG = 1/log2(3) + 1/log2(6); ideal = 1/log2(2) + 1/log2(3)
    expected = (1 / math.log2(3) + 1 / math.log2(6)) / (1 + 1 / math.log2(3))
    assert ndcg_at_k(RANKED, GOLD, 5) == pytest.approx(expected)
    # K=2 cuts the second gold off; ideal over min(2, 2) positions
    assert ndcg_at_k(RANKED, GOLD, 2) == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    assert ndcg_at_k(["g1"], {"g1"}, 10) == 1.0


def test_duplicate_ids_earn_credit_once():
    assert ndcg_at_k(["g1", "g1"], {"g1", "g2"}, 2) == pytest.approx(1 / (1 + 1 / math.log2(3)))


def test_reciprocal_rank():
    assert reciprocal_rank(RANKED, GOLD) == 0.5
    assert reciprocal_rank(["x", "y"], GOLD) == 0.0


def test_mean_over_queries():
    means = mean_metrics([["g", "x"], ["x", "y", "g"]], [["g"], ["g"]], ks=(1, 2))
    assert means["Hit@1"] == 0.5
    assert means["R@2"] == 0.5
    assert means["MRR"] == pytest.approx((1 + 1 / 3) / 2)
    assert set(query_metrics(["g"], ["g"])) == {"Hit@1", "R@5", "R@10", "nDCG@5", "nDCG@10", "C@5", "C@10", "MRR"}


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="gold"):
        hit_at_1(["a"], [])
    with pytest.raises(ValueError, match="K must be"):
        recall_at_k(["a"], ["a"], 0)
    with pytest.raises(ValueError, match="rankings"):
        mean_metrics([["a"]], [])


def test_table_formats_percentages_and_mrr():
    table = format_table({"bm25": {"Hit@1": 0.5, "MRR": 0.6666, "ms/query": 1.234}})
    assert "| bm25 | 50.00 | 0.667 | 1.23 |" in table
