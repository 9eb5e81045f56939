"""SectionIndex: ranking, filters that still fill K, both merge paths, save/load."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from corpus_tools.index import SectionIndex
from corpus_tools.sections import Section
from corpus_tools.tokenizer import tokenize


def sec(i: int, text: str, repo: str = "acme/a", skill: str | None = None, heading: str = "h") -> Section:
    skill_id = skill or f"{repo}/s{i}/SKILL.md"
    return Section(id=f"{skill_id}#{i}", skill_id=skill_id, skill_name=f"s{i}", heading_path=f"s{i} › {heading}",
                   text=text, repo=repo, path=f"s{i}/SKILL.md", commit="c", license="MIT")


@pytest.fixture
def small_sections() -> list[Section]:
    texts = [
        ("Use openpyxl to load a workbook and write formulas into cells.", "acme/excel"),
        ("Formulas in Excel: prefer absolute references like $A$1 when copying formulas.", "acme/excel"),
        ("Pandas can read_excel and to_excel for tabular data frames.", "other/data"),
        ("Plan the task as a checklist before acting; verify each step.", "other/plan"),
        ("Search the shop for products, compare prices, then add to cart.", "shop/web"),
        ("Excel workbook formulas recalculate; openpyxl does not evaluate formulas.", "third/excel"),
        ("Workbook sheets, formulas and charts with openpyxl.", "fourth/excel"),
    ]
    return [sec(i, t, repo) for i, (t, repo) in enumerate(texts)]


def brute_force(index: SectionIndex, query: str, k: int) -> list[int]:
    scores = index.scores(query)
    order = sorted((-s, d) for d, s in enumerate(scores) if s > 0)
    return [d for _, d in order[:k]]


def test_ranks_matching_sections_first(small_sections: list[Section]) -> None:
    index = SectionIndex.build(small_sections)
    hits = index.search("openpyxl workbook formulas", k=3)
    assert len(hits) == 3
    assert hits[0].score >= hits[1].score >= hits[2].score > 0
    assert {h.section.id for h in hits} <= {small_sections[i].id for i in (0, 1, 5, 6)}
    assert hits[0].section.text in {s.text for s in small_sections}
    assert hits[0].section.repo and hits[0].section.commit == "c"
    assert index.search("shopping cart products", k=5)[0].section.repo == "shop/web"


def test_only_matching_sections_and_unknown_words(small_sections: list[Section]) -> None:
    index = SectionIndex.build(small_sections)
    assert len(index.search("checklist", k=5)) == 1
    assert index.search("zebra quantum", k=5) == []
    assert index.search("the and of", k=5) == []  # stop words only
    assert index.search("openpyxl", k=0) == []


def test_filters_still_return_k(small_sections: list[Section]) -> None:
    index = SectionIndex.build(small_sections)
    unfiltered = index.search("excel formulas workbook openpyxl", k=3)
    assert "acme/excel" in {h.section.repo for h in unfiltered}
    hits = index.search("excel formulas workbook openpyxl", k=3, exclude_repos=["acme/excel"])
    assert len(hits) == 3
    assert "acme/excel" not in {h.section.repo for h in hits}
    excluded_skill = unfiltered[0].section.skill_id
    hits = index.search("excel formulas workbook openpyxl", k=4, exclude_skills=[excluded_skill, "not/a/skill"])
    assert len(hits) == 4 and excluded_skill not in {h.section.skill_id for h in hits}


def test_ties_break_by_section_order() -> None:
    sections = [sec(i, "identical text about spreadsheets", repo=f"r/{i}") for i in range(6)]
    index = SectionIndex.build(sections)
    assert [h.section.repo for h in index.search("spreadsheets", k=3)] == ["r/0", "r/1", "r/2"]


def test_sparse_and_dense_merge_paths_agree() -> None:
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(400)]
    sections = [sec(i, " ".join(rng.choice(words, size=30)), repo=f"r/{i % 13}") for i in range(3000)]
    index = SectionIndex.build(sections, dtype=np.float64)
    rare = "w1 w2"  # few postings -> sort-merge path
    common = " ".join(words[:60])  # many postings -> dense accumulator path
    for query in (rare, common, "w5"):
        docs, scores = index.top_k(query, k=10)
        assert list(docs) == brute_force(index, query, 10)
        assert np.allclose(scores, index.scores(query)[docs])
    docs, _ = index.top_k(common, k=10, exclude_repos=["r/0", "r/1"])
    assert len(docs) == 10 and not ({int(index.doc_repo[d]) for d in docs} &
                                    {index._repo_ids["r/0"], index._repo_ids["r/1"]})


def test_save_load_roundtrip(tmp_path: Path, small_sections: list[Section]) -> None:
    index = SectionIndex.build(small_sections, k1=1.2, b=0.6)
    out = index.save(tmp_path / "idx")
    for mmap in (True, False):
        loaded = SectionIndex.load(out, mmap=mmap)
        assert loaded.meta["k1"] == 1.2 and len(loaded) == len(small_sections)
        a = index.search("openpyxl formulas", k=4)
        b = loaded.search("openpyxl formulas", k=4)
        assert [(h.section, round(h.score, 5)) for h in a] == [(h.section, round(h.score, 5)) for h in b]
    # Saving again replaces the folder atomically.
    SectionIndex.build(small_sections[:2]).save(out)
    assert len(SectionIndex.load(out)) == 2


def test_load_rejects_other_tokenizer_and_missing(tmp_path: Path, small_sections: list[Section]) -> None:
    out = SectionIndex.build(small_sections).save(tmp_path / "idx")
    meta = json.loads((out / "meta.json").read_text())
    meta["tokenizer"] = "something-else"
    (out / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="Rebuild"):
        SectionIndex.load(out)
    with pytest.raises(FileNotFoundError):
        SectionIndex.load(tmp_path / "nothing")


def test_bad_parameters() -> None:
    with pytest.raises(ValueError):
        SectionIndex.build([], idf="tfidf")
    with pytest.raises(ValueError):
        SectionIndex.build([], b=2.0)
    empty = SectionIndex.build([])
    assert len(empty) == 0 and empty.search("anything") == []


def test_tokenizer_rules() -> None:
    assert tokenize("Use openpyxl.load_workbook() on THE file_name.xlsx, 2 times in 2024") == [
        "use", "openpyxl", "load", "workbook", "file", "name", "xlsx", "times", "2024"]
    assert tokenize("x" * 41 + " ok") == ["ok"]


def test_pruned_search_matches_exhaustive_scores() -> None:
    # Zipf-like word use, so some terms sit in most sections (the pruned path) and others are rare.
    rng = np.random.default_rng(11)
    words = np.asarray([f"w{i}" for i in range(2000)])
    probs = 1.0 / np.arange(1, len(words) + 1) ** 1.1
    probs /= probs.sum()
    sections = [sec(i, " ".join(rng.choice(words, size=int(rng.integers(10, 80)), p=probs)), repo=f"r/{i % 7}")
                for i in range(8000)]
    index = SectionIndex.build(sections, dtype=np.float64)
    assert (np.diff(index.indptr) > 1024).sum() >= 5  # there are common terms to prune
    pruned_used = 0
    for trial in range(60):
        query = " ".join(rng.choice(words[:10], size=2).tolist() + rng.choice(words[50:2000], size=3).tolist())
        exclude = ["r/1", "r/2"] if trial % 3 == 0 else []
        docs, scores = index.top_k(query, k=5, exclude_repos=exclude)
        full = index.scores(query)
        if exclude:
            full[np.isin(index.doc_repo, [index._repo_ids[r] for r in exclude])] = 0
        expected = [d for _, d in sorted((-s, d) for d, s in enumerate(full) if s > 0)[:5]]
        assert list(docs) == expected, query
        assert np.allclose(scores, full[docs])
        pruned_used += len(docs) == 5
    assert pruned_used == 60
