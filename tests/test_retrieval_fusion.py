"""Field-aware fusion: per-field scores, uniform average, learned MLP."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from corpus_tools.retrieval.fields import FieldSparseIndex, tokenize
from corpus_tools.retrieval.fusion import FieldAwareRetriever, FusionMLP, minmax_rows


@dataclass
class S:
    id: str
    name: str
    description: str
    body: str


POOL = [
    S("all", "pivot-table-builder", "Build pivot tables from spreadsheet ranges.",
      "# Pivot tables\nSelect the range, insert a pivot table, drag fields."),
    S("body-only", "chart-styling", "Style charts and axis labels.",
      "# Charts\nColours, fonts. A pivot table can feed a chart."),
    S("none1", "git-rebase", "Rewrite commit history safely.", "# Rebase\nUse interactive rebase."),
    S("none2", "docker-compose", "Run multi-container apps.", "# Compose\nWrite a compose file."),
]


def test_tokenize_splits_camel_case_and_drops_stopwords():
    assert tokenize("The pivotTable of a Sheet2") == ["pivot", "table", "sheet2"]


def test_sparse_field_scores():
    idx = FieldSparseIndex.build(POOL)
    name = idx.tfidf_scores(["pivot table"], "name")[0]
    body = idx.tfidf_scores(["pivot table"], "body")[0]
    assert name[0] > 0 and name[1] == 0  # only the first skill's name matches
    assert body[0] > 0 and body[1] > 0 and body[2] == 0
    assert idx.tfidf_scores(["pivot table"], "concat")[0].argmax() == 0
    bm25f = idx.bm25f_scores(["pivot table"])[0]
    assert bm25f[0] > bm25f[1] > 0 == bm25f[2]
    with pytest.raises(ValueError, match="unknown field"):
        idx.tfidf_scores(["x"], "title")


def test_uniform_fusion_ranks_all_fields_match_above_one_field():
    r = FieldAwareRetriever(POOL)
    assert r.rank("tfidf-fields", ["pivot table"], k=2) == [["all", "body-only"]]
    feats = r.features(("tfidf:name", "tfidf:description", "tfidf:body"), ["pivot table"])
    assert feats.shape == (1, 4, 3)
    assert feats[0, 0].tolist() == [1.0, 1.0, 1.0]
    assert feats[0, 1, 0] == 0.0 and feats[0, 1, 2] > 0


def test_exclusion_removes_ids_from_the_ranking():
    r = FieldAwareRetriever(POOL)
    assert r.rank("bm25", ["pivot table"], k=2, exclude=[["all"]])[0][0] == "body-only"


def test_minmax_rows():
    out = minmax_rows(np.array([[1.0, 3.0, 2.0], [5.0, 5.0, 5.0]]))
    assert out.tolist() == [[0.0, 1.0, 0.5], [0.0, 0.0, 0.0]]


def test_mlp_learns_which_feature_matters():
    rng = np.random.default_rng(0)
    lists, labels = [], []
    for _ in range(200):  # gold is the item with the highest feature 2; feature 0 is noise
        x = rng.random((10, 3)).astype(np.float32)
        lists.append(x)
        labels.append(np.arange(10) == x[:, 2].argmax())
    mlp = FusionMLP(3, seed=1).fit(lists, labels, epochs=15)
    assert mlp.losses[-1] < mlp.losses[0] * 0.6
    x = rng.random((50, 10, 3)).astype(np.float32)
    accuracy = np.mean(mlp.score(x).argmax(axis=1) == x[:, :, 2].argmax(axis=1))
    assert accuracy > 0.9


def test_mlp_round_trip(tmp_path):
    mlp = FusionMLP(6, seed=3)
    x = np.random.default_rng(1).random((4, 6)).astype(np.float32)
    loaded = FusionMLP.load(mlp.save(tmp_path / "fusion.npz"))
    assert np.allclose(loaded.score(x), mlp.score(x))


def test_train_mlp_on_sparse_fields_and_rank():
    r = FieldAwareRetriever(POOL)
    r.mlps.clear()
    with pytest.raises(RuntimeError, match="train_mlp"):
        r.scores("mlp", ["x"])
    # an MLP over the three sparse field scores stands in for the six (no encoder here)
    from corpus_tools.retrieval import fusion

    names = ("tfidf:name", "tfidf:description", "tfidf:body")
    fusion.METHODS["mlp-sparse-test"] = (names, "mlp")
    try:
        queries = ["pivot table", "rebase history", "compose containers", "chart colours"]
        golds = [["all"], ["none1"], ["none2"], ["body-only"]]
        r.train_mlp("mlp-sparse-test", queries, golds, candidates=3, random_negatives=2, epochs=200)
        assert r.rank("mlp-sparse-test", queries, k=1) == golds
    finally:
        del fusion.METHODS["mlp-sparse-test"]
