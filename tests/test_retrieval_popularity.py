"""The popularity prior of two_stage retrieval (`retrieval.popularity_weight`, issue 35): the number of
repositories that carry a skill's content, recorded in the index's `repos` column by `raso corpus build`,
re-ranks skills that match about equally; weight 0, or an index that counts no repositories, ranks as before."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from corpus_tools.build import POPULARITY_COLUMN, build_corpus_index
from corpus_tools.index import SectionIndex
from raso.engine.config import build_config
from raso.retrieval.retrievers import RetrievalOptions, build_retriever

# Two contents that match the query equally (same words; only the name differs) and filler on other topics.
TWIN = ("---\nname: {name}\ndescription: Reconcile a ledger export against the bank statement\n---\n"
        "# {name}\n\nUse this to reconcile ledger exports.\n\n## Steps\n\n1. Load the ledger export and the bank "
        "statement.\n2. Match each ledger row to a statement line and list the unmatched rows.\n")
FILLER_TOPICS = ["resize product photos for a shop listing", "write unit tests for a parser",
                 "plan a database migration with rollback", "summarise meeting notes into action items",
                 "convert a slide deck to speaker notes", "tune a web server cache policy"]
QUERY = "reconcile the ledger export with the bank statement and list unmatched rows"


def filler(i: int, topic: str) -> str:
    return (f"---\nname: filler-{i}\ndescription: Helps {topic}\n---\n# Filler {i}\n\nUse this to {topic}.\n\n"
            f"## Steps\n\n1. Start the task: {topic}.\n2. Check the result of step one.\n")


def write_release(file: Path, *, rare_repos: int = 1, popular_repos: int = 6) -> Path:
    """A GitSkills-shaped SQLite release: every occurrence (repo, path, hash) and one representative per content.
    The rare twin is stored first, so it ranks first whenever the two tie."""
    db = sqlite3.connect(file)
    db.execute("CREATE TABLE occurrences (repo TEXT, path TEXT, content_hash TEXT)")
    db.execute("CREATE TABLE representatives (content_hash TEXT PRIMARY KEY, content TEXT, frontmatter TEXT)")
    contents = [("rare", TWIN.format(name="ledger-reconcile-a"), "ledger-reconcile-a", rare_repos),
                ("popular", TWIN.format(name="ledger-reconcile-b"), "ledger-reconcile-b", popular_repos)]
    contents += [(f"filler{i}", filler(i, t), f"filler-{i}", 1 + i % 3) for i, t in enumerate(FILLER_TOPICS)]
    for content_hash, text, name, repos in contents:
        db.execute("INSERT INTO representatives VALUES (?, ?, ?)", (content_hash, text, json.dumps({"name": name})))
        for r in range(repos):
            db.execute("INSERT INTO occurrences VALUES (?, ?, ?)",
                       (f"{content_hash}-owner{r}/repo{r}", f"skills/{name}/SKILL.md", content_hash))
    db.commit()
    db.close()
    return file


@pytest.fixture(scope="module")
def popular_index(tmp_path_factory: pytest.TempPathFactory) -> SectionIndex:
    folder = tmp_path_factory.mktemp("popularity")
    build_corpus_index([write_release(folder / "release.sqlite")], folder / "index")
    return SectionIndex.load(folder / "index")


def ranked_skills(index: Any, **options: object) -> list[str]:
    retriever = build_retriever(RetrievalOptions(kind="two_stage", vet=False, per_skill=1, **options), index=index)
    return [hit.section.skill_name for hit in retriever.search(QUERY, k=4)]


def hits(index: SectionIndex, query: str, **options: object) -> list[tuple[str, int, float]]:
    retriever = build_retriever(RetrievalOptions(kind="two_stage", **options), index=index)
    return [(h.section.skill_id, h.section.heading_path, h.score) for h in retriever.search(query, k=6)]


def test_the_index_counts_repositories_per_content(popular_index: SectionIndex) -> None:
    counts = {popular_index.section(d).skill_name: int(c)
              for d, c in enumerate(np.asarray(popular_index.doc_columns[POPULARITY_COLUMN]))}
    assert counts["ledger-reconcile-a"] == 1 and counts["ledger-reconcile-b"] == 6


@pytest.mark.parametrize("scoring", ["fused", "bm25", "tfidf"])
def test_the_more_popular_of_two_equal_skills_ranks_first(popular_index: SectionIndex, scoring: str) -> None:
    assert ranked_skills(popular_index, skill_scoring=scoring)[:2] == ["ledger-reconcile-a", "ledger-reconcile-b"]
    assert ranked_skills(popular_index, skill_scoring=scoring, popularity_weight=0.5)[:2] == \
        ["ledger-reconcile-b", "ledger-reconcile-a"]


def test_popularity_does_not_lift_a_skill_that_does_not_match(popular_index: SectionIndex) -> None:
    # filler skills sit in up to 3 repositories; even a large weight keeps both matching twins on top
    assert set(ranked_skills(popular_index, popularity_weight=50.0)[:2]) == {"ledger-reconcile-a",
                                                                              "ledger-reconcile-b"}


def test_weight_0_ranks_exactly_as_an_index_without_the_column(popular_index: SectionIndex) -> None:
    without = SectionIndex.load(popular_index.directory)
    del without.doc_columns[POPULARITY_COLUMN]
    for query in (QUERY, "resize photos for the shop", "database migration rollback plan"):
        assert hits(popular_index, query) == hits(without, query)
        assert hits(popular_index, query, popularity_weight=0.0) == hits(without, query)


@pytest.mark.parametrize("column", ["missing", "all zero"])
def test_an_index_that_counts_no_repositories_ignores_the_weight(popular_index: SectionIndex, column: str) -> None:
    uncounted = SectionIndex.load(popular_index.directory)
    if column == "missing":
        del uncounted.doc_columns[POPULARITY_COLUMN]
    else:
        uncounted.doc_columns[POPULARITY_COLUMN] = np.zeros(len(uncounted), dtype=np.int64)
    for query in (QUERY, "resize photos for the shop"):
        assert hits(uncounted, query, popularity_weight=2.0) == hits(uncounted, query)
    assert ranked_skills(uncounted, popularity_weight=2.0)[:2] == ["ledger-reconcile-a", "ledger-reconcile-b"]


def test_popularity_weight_is_a_declared_config_option() -> None:
    assert RetrievalOptions().popularity_weight == 0.0
    assert build_config(overrides={"retrieval.popularity_weight": 0.3}).retrieval.popularity_weight == 0.3
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        RetrievalOptions(popularity_weight=-1)
    with pytest.raises(ValueError, match=r"skill_candidates \(10\) must be at least top_skills \(20\)"):
        RetrievalOptions(popularity_weight=0.3, skill_candidates=10)


def test_a_sharded_index_reads_the_counts_of_every_shard(tmp_path: Path) -> None:
    from corpus_tools.shards import load_index

    build_corpus_index([write_release(tmp_path / "release.sqlite")], tmp_path / "index", shards=2)
    sharded = load_index(tmp_path / "index")
    assert len(getattr(sharded, "shards", ())) == 2
    assert ranked_skills(sharded)[:2] == ["ledger-reconcile-a", "ledger-reconcile-b"]
    assert ranked_skills(sharded, popularity_weight=0.5)[:2] == ["ledger-reconcile-b", "ledger-reconcile-a"]


def test_bm25_sections_take_the_prior_too(popular_index: SectionIndex) -> None:
    def bm25_skills(index: Any, **options: object) -> list[str]:
        retriever = build_retriever(RetrievalOptions(kind="bm25", vet=False, **options), index=index)
        return [hit.section.skill_name for hit in retriever.search(QUERY, k=4)]

    # the twins' sections tie, the rare twin's first (index order); the prior puts the popular twin's ahead
    assert bm25_skills(popular_index) == ["ledger-reconcile-a", "ledger-reconcile-b"] * 2
    assert bm25_skills(popular_index, popularity_weight=0.5) == ["ledger-reconcile-b"] * 2 + ["ledger-reconcile-a"] * 2
    # weight 0, or an index that counts no repositories: the section index itself, unchanged
    assert build_retriever(RetrievalOptions(kind="bm25", vet=False), index=popular_index) is popular_index
    uncounted = SectionIndex.load(popular_index.directory)
    del uncounted.doc_columns[POPULARITY_COLUMN]
    assert build_retriever(RetrievalOptions(kind="bm25", vet=False, popularity_weight=0.5),
                           index=uncounted) is uncounted
