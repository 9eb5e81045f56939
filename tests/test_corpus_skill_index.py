"""The skill-level index written beside the section index, and two-stage section search."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from corpus_tools.index import SectionIndex
from corpus_tools.index_build import SKILL_B, SKILL_K1, write_index
from corpus_tools.sections import Section
from corpus_tools.shards import load_index
from corpus_tools.skill_index import SkillIndex, skill_index_dir, two_stage_top_k, write_skill_index
from corpus_tools.tokenizer import tokenize

TOPICS = {
    "pivot": "pivot table group rows quarter spreadsheet totals",
    "chart": "chart axis title legend palette workbook plot",
    "git": "git rebase squash commits reflog branch history",
    "csv": "csv header whitespace duplicate rows parse dates",
    "docker": "docker image container compose volume port deploy",
}


def skill_sections() -> list[Section]:
    """Five topics x 3 skills each; every skill has 4 SKILL.md sections and one reference-file section."""
    out = []
    n = 0
    for topic, words in TOPICS.items():
        vocab = words.split()
        for j in range(3):
            sid = f"o/{topic}{j}/SKILL.md"
            name = f"{topic}-helper-{j}"
            for part in range(5):
                path = "SKILL.md" if part < 4 else "references/more.md"
                text = " ".join(vocab[(part + i * (j + 1)) % len(vocab)] for i in range(6 + 3 * part + j)) + f" filler{n % 7}"
                out.append(Section(id=f"{sid}#{part}", skill_id=sid, skill_name=name,
                                   heading_path=f"{name} › part {part}", text=text, repo=f"o/{topic}{j}",
                                   path=path, commit="c", license="MIT"))
                n += 1
    return out


def skill_docs(sections: list[Section]) -> dict[str, list[str]]:
    """Skill documents = name + the texts of the sections from the skill's own file."""
    docs: dict[str, list[str]] = {}
    first_path: dict[str, str] = {}
    for s in sections:
        first_path.setdefault(s.skill_id, s.path)
        docs.setdefault(s.skill_id, tokenize(s.skill_name))
        if s.path == first_path[s.skill_id]:
            docs[s.skill_id] += tokenize(s.text)
    return docs


def brute_skill_tfidf(sections: list[Section], query: str) -> dict[str, float]:
    """Sub-linear tf x smoothed idf, documents L2-normalised, query weighted the same (not normalised)."""
    docs = skill_docs(sections)
    n = len(docs)
    df = Counter(t for toks in docs.values() for t in set(toks))
    idf = {t: math.log((1 + n) / (1 + d)) + 1 for t, d in df.items()}
    qtf = Counter(t for t in tokenize(query) if t in idf)
    out = {}
    for sid, toks in docs.items():
        w = {t: (1 + math.log(c)) * idf[t] for t, c in Counter(toks).items()}
        norm = math.sqrt(sum(v * v for v in w.values()))
        out[sid] = sum(w.get(t, 0.0) / norm * (1 + math.log(c)) * idf[t] for t, c in qtf.items())
    return out


def brute_skill_bm25(sections: list[Section], query: str) -> dict[str, float]:
    """BM25 (k1 2.0, b 1.0, lucene idf) over the skill documents."""
    docs = skill_docs(sections)
    n = len(docs)
    avgdl = sum(map(len, docs.values())) / n
    df = Counter(t for toks in docs.values() for t in set(toks))
    out = {}
    for sid, toks in docs.items():
        tf = Counter(toks)
        score = 0.0
        for q in tokenize(query):
            if tf[q]:
                idf = math.log1p((n - df[q] + 0.5) / (df[q] + 0.5))
                score += idf * tf[q] * (SKILL_K1 + 1) / (tf[q] + SKILL_K1 * (1 - SKILL_B + SKILL_B * len(toks) / avgdl))
        out[sid] = score
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, list[Section]]:
    sections = skill_sections()
    directory = tmp_path_factory.mktemp("idx") / "index"
    write_index(sections, directory, batch_sections=7)
    return directory, sections


def test_streaming_build_writes_a_skill_level_with_the_skills_section_ranges(built) -> None:
    directory, sections = built
    meta = json.loads((directory / "meta.json").read_text())
    assert meta["skill_index"]["documents"] == 15 and meta["skill_index"]["k1"] == SKILL_K1
    skills = SkillIndex.load(skill_index_dir(directory))
    assert len(skills) == 15
    for doc in range(len(skills)):
        skill = skills.skill(doc)
        owned = {sections[i].skill_id for i in skills.sections_of(doc)}
        assert owned == {skill.id} and len(skills.sections_of(doc)) == 5
        assert skill.heading_path == skill.skill_name  # the name column


def test_skill_bm25_and_tfidf_scores_match_a_direct_computation(built) -> None:
    directory, sections = built
    skills = SkillIndex.load(skill_index_dir(directory))
    query = "squash commits with git rebase and the reflog"
    expected = brute_skill_bm25(sections, query)
    docs, scores = skills.top(query, 15)
    got = {skills.skill(int(d)).id: float(s) for d, s in zip(docs, scores)}
    assert got.keys() == {k for k, v in expected.items() if v > 0}
    for sid, score in got.items():
        assert score == pytest.approx(expected[sid], rel=1e-5)
    tf_expected = brute_skill_tfidf(sections, query)
    tf_docs, tf_scores = skills.top(query, 15, scoring="tfidf")
    assert [skills.skill(int(d)).id for d in tf_docs[:3]] == sorted(tf_expected, key=lambda k: -tf_expected[k])[:3]
    for d, score in zip(tf_docs, tf_scores):
        assert score == pytest.approx(tf_expected[skills.skill(int(d)).id], rel=1e-5)


def test_fused_skill_scoring_is_the_mean_of_both_min_max_scaled_scores(built) -> None:
    directory, sections = built
    skills = SkillIndex.load(skill_index_dir(directory))
    query = "pivot table totals in a spreadsheet chart"

    def scaled(scores: dict[str, float]) -> dict[str, float]:
        present = {k: v for k, v in scores.items() if v > 0}
        low, high = min(present.values()), max(present.values())
        return {k: (v - low) / (high - low) for k, v in present.items()}

    bm25, tfidf = scaled(brute_skill_bm25(sections, query)), scaled(brute_skill_tfidf(sections, query))
    expected = {k: (bm25.get(k, 0.0) + tfidf.get(k, 0.0)) / 2 for k in bm25.keys() | tfidf.keys()}
    docs, scores = skills.top(query, 4, scoring="fused")
    got = {skills.skill(int(d)).id: float(v) for d, v in zip(docs, scores)}
    assert len(expected) > 4 and len(got) == 4 and list(scores) == sorted(scores, reverse=True)
    for sid, score in got.items():
        assert score == pytest.approx(expected[sid], abs=1e-6)
    left_out = [v for k, v in expected.items() if k not in got]
    assert max(left_out) <= min(got.values()) + 1e-6  # the best four by the fused score
    excluded = skills.top(query, 6, exclude_skills=[next(iter(got))], scoring="fused")[0]
    assert next(iter(got)) not in {skills.skill(int(d)).id for d in excluded}
    with pytest.raises(ValueError, match="unknown skill scoring"):
        skills.top(query, 3, scoring="bm25f")


def test_two_stage_returns_the_best_sections_of_the_top_skills_with_a_per_skill_cap(built) -> None:
    directory, _ = built
    index = SectionIndex.load(directory)
    skills = SkillIndex.load(skill_index_dir(directory))
    query = "docker compose volume port"
    docs, scores, dropped = two_stage_top_k(index, skills, query, 6, top_skills=3, per_skill=2)
    hits = [index.section(int(d)) for d in docs]
    assert len(hits) == 6 and len(dropped) == 0
    assert {h.skill_id for h in hits} == {f"o/docker{j}/SKILL.md" for j in range(3)}
    assert max(Counter(h.skill_id for h in hits).values()) == 2
    assert np.all(np.diff(scores) <= 0)
    capped, _, _ = two_stage_top_k(index, skills, query, 6, top_skills=3, per_skill=1)
    assert len(capped) == 3
    excluded, _, _ = two_stage_top_k(index, skills, query, 6, top_skills=3, exclude_repos=["o/docker0"],
                                     exclude_skills=["o/docker1/SKILL.md"])
    assert {index.section(int(d)).skill_id for d in excluded} >= {"o/docker2/SKILL.md"}
    assert not {index.section(int(d)).repo for d in excluded} & {"o/docker0", "o/docker1"}


def test_sharded_build_gives_the_same_two_stage_results(built, tmp_path: Path) -> None:
    directory, sections = built
    write_index(sections, tmp_path / "sharded", shards=3, batch_sections=5)
    sharded = load_index(tmp_path / "sharded")
    sharded_skills = SkillIndex.load(skill_index_dir(tmp_path / "sharded"))
    assert len(sharded_skills.shards) == 3
    single = SectionIndex.load(directory)
    single_skills = SkillIndex.load(skill_index_dir(directory))
    for query in ("pivot table quarter totals", "csv dates header", "chart legend"):
        a = two_stage_top_k(single, single_skills, query, 5, top_skills=4)
        b = two_stage_top_k(sharded, sharded_skills, query, 5, top_skills=4)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
        tf_a, tf_b = single_skills.top(query, 4, scoring="tfidf"), sharded_skills.top(query, 4, scoring="tfidf")
        assert np.array_equal(tf_a[0], tf_b[0]) and np.allclose(tf_a[1], tf_b[1])


def test_skill_level_built_later_equals_the_one_built_in_the_same_pass(built, tmp_path: Path) -> None:
    directory, sections = built
    later = SkillIndex.load(write_skill_index(iter(sections), tmp_path / "skills"))
    same_pass = SkillIndex.load(skill_index_dir(directory))
    assert np.array_equal(later.section_start, same_pass.section_start)
    for name in ("postings", "weights"):
        assert np.array_equal(np.asarray(getattr(later.index, name)), np.asarray(getattr(same_pass.index, name)))


def test_two_stage_retriever_over_an_old_index_builds_the_skill_level(built, tmp_path: Path, caplog) -> None:
    from raso.retrieval.retrievers import TwoStageSectionRetriever

    directory, sections = built
    old = SectionIndex.build(sections)
    old.save(tmp_path / "old")  # an index written without a skill level
    assert skill_index_dir(tmp_path / "old") is None
    with caplog.at_level("WARNING"):
        retriever = TwoStageSectionRetriever.from_index(SectionIndex.load(tmp_path / "old"), top_skills=3)
    assert "no skill level" in caplog.text and "raso corpus build" in caplog.text
    current = TwoStageSectionRetriever.from_index(SectionIndex.load(directory), top_skills=3)
    query = "git history branch"
    assert [h.section.id for h in retriever.search(query, 5)] == [h.section.id for h in current.search(query, 5)]
