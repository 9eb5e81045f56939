"""The retrieval benchmark's per-text vector store: a text is encoded once across runs."""

from __future__ import annotations

import numpy as np

from experiments.retrieval_benchmark import SavedTextVectors


class CountingHashEncoder:
    """Test double: a vector per text from its characters, counting how many texts it was asked for."""

    model_id = "counting-hash-test-encoder"

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def encode(self, texts):
        self.encoded.extend(texts)
        return np.array([[len(t), sum(map(ord, t)) % 97, 1.0] for t in texts], dtype=np.float32)


def test_saved_text_vectors_encode_each_text_once_across_instances(tmp_path):
    base = CountingHashEncoder()
    store = SavedTextVectors(base, tmp_path)
    first = store.encode(["alpha", "beta", "alpha"])
    assert base.encoded == ["alpha", "beta"]  # the repeat in one call is encoded once
    np.testing.assert_array_equal(first[0], first[2])
    store.save()

    again = CountingHashEncoder()
    reopened = SavedTextVectors(again, tmp_path)
    second = reopened.encode(["beta", "gamma", "alpha"])
    assert again.encoded == ["gamma"]  # alpha and beta came from the saved file
    np.testing.assert_array_equal(second[0], first[1])
    np.testing.assert_array_equal(second[2], first[0])
    assert reopened.computed == 1 and reopened.model_id == base.model_id


def test_saved_text_vectors_are_kept_per_encoder_model(tmp_path):
    store = SavedTextVectors(CountingHashEncoder(), tmp_path)
    store.encode(["alpha"])
    store.save()
    other = CountingHashEncoder()
    other.model_id = "another-model"
    fresh = SavedTextVectors(other, tmp_path)
    fresh.encode(["alpha"])
    assert other.encoded == ["alpha"]
