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


def test_the_search_command_rating_counts_gold_skills_and_repeated_texts() -> None:
    """`--search-command`'s rating of what `corpus search -k 5` prints, on a scripted stand-in retriever."""
    from corpus_tools.index import Hit
    from corpus_tools.retrieval.dataset import RetrievalQuery
    from corpus_tools.sections import Section
    from experiments.retrieval_benchmark import top_sections_rating

    def hit(i: int, skill: str, text: str) -> Hit:
        return Hit(Section(id=f"{skill}#{i}", skill_id=skill, skill_name=skill, heading_path=skill, text=text,
                           repo=f"o/{skill}", path="SKILL.md", commit="c", license="MIT"), 1.0 / (i + 1))

    class ScriptedRetriever:
        def search(self, query, k=5, exclude_repos=(), exclude_skills=()):
            return [hit(0, "xlsx", "Recalculate formulas with LibreOffice."),
                    hit(1, "xlsx-fork", "recalculate  FORMULAS with libreoffice"),  # the same normalised text
                    hit(2, "charts", "Add a chart.")][:k]

    queries = [RetrievalQuery(id="q1", text="recalc", gold=["xlsx", "pdf"]),
               RetrievalQuery(id="q2", text="recalc", gold=["charts"])]
    rating = top_sections_rating(ScriptedRetriever(), queries, k=5)
    assert rating == {"gold@5": (0.5 + 1.0) / 2, "skills": 3.0, "repeats": 1.0}
    assert top_sections_rating(ScriptedRetriever(), queries, k=1) == {"gold@1": 0.25, "skills": 1.0, "repeats": 0.0}
