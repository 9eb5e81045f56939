"""Dense embeddings with the real int8 ONNX MiniLM, the on-disk cache and brute-force search."""

from __future__ import annotations

import numpy as np
import pytest

from corpus_tools.retrieval.dense import (
    CallableEncoder,
    EmbeddingCache,
    OnnxMiniLMEncoder,
    cosine_topk,
    make_encoder,
)


@pytest.fixture(scope="module")
def encoder() -> OnnxMiniLMEncoder:
    return OnnxMiniLMEncoder(threads=1)


def test_embeddings_are_deterministic_and_normalised(encoder):
    texts = ["Create a pivot table from a sales sheet", "Rebase a git branch onto main"]
    first, second = encoder.encode(texts), encoder.encode(list(reversed(texts)))[::-1]
    assert first.shape == (2, 384) and first.dtype == np.float32
    assert np.allclose(first, second, atol=1e-5)  # batch order does not change a vector
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-4)


def test_similar_texts_score_higher_than_unrelated(encoder):
    q, near, far = encoder.encode([
        "How do I summarise spreadsheet rows with a pivot table?",
        "Build pivot tables in Excel to aggregate sales data by region.",
        "Configure nginx as a reverse proxy with TLS certificates.",
    ])
    assert float(q @ near) > float(q @ far) + 0.2


def test_cache_reuses_and_memory_maps(tmp_path):
    calls = []

    def fake_embedding_api(texts):  # stands in for a remote embedding model
        calls.append(list(texts))
        return [[len(t), 1.0, 0.0] for t in texts]

    enc = CallableEncoder(fake_embedding_api, "scripted/emb", batch_size=2)
    cache = EmbeddingCache(tmp_path)
    texts = ["a", "bbb", "cc"]
    first = cache.embed(enc, texts)
    again = cache.embed(enc, texts)
    assert isinstance(again, np.memmap)
    assert np.array_equal(np.asarray(first), np.asarray(again))
    assert (cache.hits, cache.misses) == (1, 1) and len(calls) == 2  # two batches, once
    cache.embed(enc, ["a", "bbb", "changed"])
    assert cache.misses == 2
    expected = np.array([1.0, 1.0, 0.0]) / np.sqrt(2)
    assert np.allclose(first[0], expected)


def test_callable_encoder_rejects_wrong_shapes():
    enc = CallableEncoder(lambda texts: [[1.0, 0.0]], "scripted/bad")
    with pytest.raises(ValueError, match="returned shape"):
        enc.encode(["x", "y"])


def test_cosine_topk_matches_a_full_sort():
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(1000, 16)).astype(np.float32)
    queries = rng.normal(size=(3, 16)).astype(np.float32)
    idx, vals = cosine_topk(queries, matrix, 7, chunk_rows=128)
    full = queries @ matrix.T
    assert np.array_equal(idx, np.argsort(-full, axis=1)[:, :7])
    assert np.allclose(vals, np.sort(full, axis=1)[:, ::-1][:, :7])
    mask = np.ones(1000, bool)
    mask[idx[0, 0]] = False
    assert cosine_topk(queries[:1], matrix, 1, mask=mask)[0][0, 0] == idx[0, 1]


def test_unknown_encoder_spec():
    with pytest.raises(ValueError, match="unknown encoder"):
        make_encoder("word2vec")
