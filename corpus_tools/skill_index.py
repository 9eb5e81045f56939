"""The skill level of a section index, and two-stage section search (skills first, then their sections).

`corpus_tools.index_build.IndexWriter` writes, in the same streaming pass as the section index, a
second index whose documents are whole skills (`skills/` beside the section files, sharded like
them): one document per run of consecutive sections of a skill, holding the skill's name and the
text of the sections from its own file. Its files are a `SectionIndex` (BM25 weights with
k1 2.0, b 1.0, memory-mapped on load) plus `tfidf_weights.npy` / `tfidf_idf.npy` (TF-IDF with
sublinear tf, cosine-normalised) and, per skill document, the range of its sections in the section
index (`section_start`, `section_count`).

`two_stage_top_k` ranks skills on that index, then scores only the sections of the best
`top_skills` skills with the section index's exact BM25, and returns the best `k` sections with at
most `per_skill` from one skill (`sections_of_skills` is that second stage alone, for skills ranked
some other way, e.g. raso's lexical + dense fusion). A section's score is its BM25 score divided by the best candidate's
plus `skill_weight` times its skill's score min-max scaled over the chosen skills, so a good section
of a good skill wins. An index written before the skill level existed has no `skills/` folder: `write_skill_index`
builds one from the index's sections (into any folder), and `skill_index_for` says which applies.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from corpus_tools.index import SectionIndex
from corpus_tools.index_build import (
    SHARDS_FILE,
    SKILL_B,
    SKILL_BATCH,
    SKILL_K1,
    IndexWriter,
    _SkillLevel,
)
from corpus_tools.sections import Section
from corpus_tools.tokenizer import tokenize

SKILL_SCORINGS = ("bm25", "tfidf", "fused")
#: "fused": each lexical score's best this many skills are pooled (min-max scaled, averaged; a skill the other
#: score did not propose counts 0 there).
FUSION_CANDIDATES = 100


class SkillIndex:
    """The skill-level index: `top` ranks skill documents, `sections_of` gives their section numbers."""

    def __init__(self, shards: Sequence[SectionIndex], offsets: Sequence[int]) -> None:
        from corpus_tools.shards import ShardedIndex

        self.shards = list(shards)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.index: SectionIndex | ShardedIndex = self.shards[0] if len(self.shards) == 1 else \
            ShardedIndex(self.shards, self.offsets)
        for shard in self.shards:
            missing = {"section_start", "section_count"} - set(shard.doc_columns)
            if missing:
                raise ValueError(f"not a skill-level index: no {', '.join(sorted(missing))} columns")
        self.section_start = np.concatenate([np.asarray(s.doc_columns["section_start"]) for s in self.shards])
        self.section_count = np.concatenate([np.asarray(s.doc_columns["section_count"]) for s in self.shards])
        self.has_tfidf = all("tfidf" in s.meta for s in self.shards)
        self._tfidf = ([(np.asarray(np.load(Path(s.meta["_dir"]) / "tfidf_weights.npy", mmap_mode="r")),
                         np.load(Path(s.meta["_dir"]) / "tfidf_idf.npy")) for s in self.shards]
                       if self.has_tfidf and all("_dir" in s.meta for s in self.shards) else None)

    @classmethod
    def load(cls, directory: str | Path) -> "SkillIndex":
        directory = Path(directory)
        if (directory / SHARDS_FILE).is_file():
            manifest = json.loads((directory / SHARDS_FILE).read_text(encoding="utf-8"))
            dirs = [directory / e["dir"] for e in manifest["shards"]]
            offsets = [e["doc_offset"] for e in manifest["shards"]]
        else:
            dirs, offsets = [directory], [0]
        shards = []
        for folder in dirs:
            shard = SectionIndex.load(folder)
            shard.meta["_dir"] = str(folder)
            shards.append(shard)
        return cls(shards, offsets)

    def __len__(self) -> int:
        return len(self.section_start)

    def sections_of(self, skill_doc: int) -> np.ndarray:
        start = int(self.section_start[skill_doc])
        return np.arange(start, start + int(self.section_count[skill_doc]), dtype=np.int64)

    def skill(self, skill_doc: int) -> Section:
        """The skill document (id = skill id, heading = name, text = its description column)."""
        return self.index.section(skill_doc)

    def top(self, query: str, n: int, exclude_repos: Iterable[str] = (), exclude_skills: Iterable[str] = (),
            scoring: str = "bm25") -> tuple[np.ndarray, np.ndarray]:
        """(skill documents, scores) of the best `n` skills for `query`, best first: by BM25, by TF-IDF (cosine,
        sublinear tf), or `fused` (the mean of both, each min-max scaled over its own best FUSION_CANDIDATES)."""
        if scoring == "bm25":
            return self.index.top_k(query, n, exclude_repos, exclude_skills)
        if scoring == "fused":
            return self._fused(query, n, tuple(exclude_repos), tuple(exclude_skills))
        if scoring != "tfidf":
            raise ValueError(f"unknown skill scoring {scoring!r}; choose one of {', '.join(SKILL_SCORINGS)}")
        if self._tfidf is None:
            raise ValueError("this skill index has no TF-IDF weights; rebuild it")
        from corpus_tools.shards import merge_top_k

        exclude_repos, exclude_skills = tuple(exclude_repos), tuple(exclude_skills)
        results = []
        for shard, (weights, idf) in zip(self.shards, self._tfidf):
            terms, qtf = shard.query_terms(query)
            acc = np.zeros(len(shard), dtype=np.float64)
            for term, count in zip(terms, qtf):
                lo, hi = shard.indptr[term], shard.indptr[term + 1]
                acc[shard.postings[lo:hi]] += weights[lo:hi] * ((1.0 + np.log(count)) * idf[term])
            cand = np.flatnonzero(acc)
            cand, scores = shard._filter(cand, acc[cand], exclude_repos, exclude_skills)
            results.append(SectionIndex._select(cand, scores, n))
        return merge_top_k(results, self.offsets, n)


    def _fused(self, query: str, n: int, exclude_repos: tuple[str, ...], exclude_skills: tuple[str, ...]
               ) -> tuple[np.ndarray, np.ndarray]:
        pool = max(n, FUSION_CANDIDATES)
        fused: dict[int, float] = {}
        for scoring in ("bm25", "tfidf"):
            docs, scores = self.top(query, pool, exclude_repos, exclude_skills, scoring)
            scores = np.asarray(scores, dtype=np.float64)
            if len(scores) == 0:
                continue
            span = scores.max() - scores.min()
            scaled = (scores - scores.min()) / span if span > 0 else np.ones(len(scores))
            for doc, value in zip(np.asarray(docs).tolist(), scaled.tolist()):
                fused[doc] = fused.get(doc, 0.0) + value / 2
        ranked = sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:n]
        return (np.asarray([d for d, _ in ranked], dtype=np.int64), np.asarray([v for _, v in ranked], dtype=np.float64))


def section_scores(index: Any, query: str, docs: np.ndarray) -> np.ndarray:
    """Exact BM25 scores of the given (sorted, unique) section numbers of a SectionIndex or ShardedIndex:
    each query term's posting row is binary-searched for the candidates only."""
    docs = np.asarray(docs, dtype=np.int64)
    if hasattr(index, "shards"):
        out = np.zeros(len(docs), dtype=np.float64)
        shard_of = np.searchsorted(index.offsets, docs, side="right") - 1
        for number, shard in enumerate(index.shards):
            mine = shard_of == number
            if mine.any():
                out[mine] = section_scores(shard, query, docs[mine] - index.offsets[number])
        return out
    scores = np.zeros(len(docs), dtype=np.float64)
    if len(docs) == 0:
        return scores
    needles = docs.astype(index.postings.dtype)
    terms, qtf = index.query_terms(query)
    for term, count in zip(terms, qtf):
        lo, hi = index.indptr[term], index.indptr[term + 1]
        row = index.postings[lo:hi]
        pos = np.searchsorted(row, needles)
        inside = pos < len(row)
        found = np.zeros(len(docs), dtype=bool)
        found[inside] = row[pos[inside]] == needles[inside]
        scores[found] += index.weights[lo + pos[found]].astype(np.float64) * count
    return scores


def doc_flags(index: Any, docs: np.ndarray) -> np.ndarray | None:
    """The vetting flag of each section (None when the index stores none)."""
    return doc_column(index, "flags", docs)


def doc_column(index: Any, name: str, docs: np.ndarray) -> np.ndarray | None:
    """The doc column `name` of each section in `docs`, over a section index or a sharded one (None when
    the index, or one of its shards, stores no such column)."""
    docs = np.asarray(docs, dtype=np.int64)
    if hasattr(index, "shards"):
        columns = [getattr(s, "doc_columns", {}).get(name) for s in index.shards]
        if any(c is None for c in columns):
            return None
        out = np.zeros(len(docs), dtype=np.asarray(columns[0]).dtype)
        shard_of = np.searchsorted(index.offsets, docs, side="right") - 1
        for number, column in enumerate(columns):
            mine = shard_of == number
            out[mine] = np.asarray(column)[docs[mine] - index.offsets[number]]
        return out
    column = index.doc_columns.get(name) if hasattr(index, "doc_columns") else None
    return None if column is None else np.asarray(column)[docs]


def two_stage_top_k(sections: Any, skills: SkillIndex, query: str, k: int = 5, *, top_skills: int = 10,
                    per_skill: int = 2, exclude_repos: Iterable[str] = (), exclude_skills: Iterable[str] = (),
                    scoring: str = "bm25", skip_flagged: bool = False, skill_weight: float = 1.0
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(section numbers, scores, flagged section numbers left out) of the best `k` sections of the best
    `top_skills` skills, at most `per_skill` per skill. See the module docstring for the score."""
    if k <= 0:
        empty = np.zeros(0, np.int64)
        return empty, np.zeros(0), empty
    skill_docs, skill_scores = skills.top(query, top_skills, exclude_repos, exclude_skills, scoring)
    return sections_of_skills(sections, skills, query, skill_docs, skill_scores, k, per_skill=per_skill,
                              skip_flagged=skip_flagged, skill_weight=skill_weight)


def sections_of_skills(sections: Any, skills: SkillIndex, query: str, skill_docs: np.ndarray,
                       skill_scores: np.ndarray, k: int = 5, *, per_skill: int = 2, skip_flagged: bool = False,
                       skill_weight: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stage two of `two_stage_top_k` for skills already ranked by any score (higher is better):
    (section numbers, scores, flagged section numbers left out) of the best `k` sections of
    `skill_docs`, at most `per_skill` per skill."""
    empty = np.zeros(0, np.int64)
    skill_scores = np.asarray(skill_scores)
    if k <= 0 or len(skill_docs) == 0:
        return empty, np.zeros(0), empty
    span = skill_scores.max() - skill_scores.min()
    prior = (skill_scores - skill_scores.min()) / span if span > 0 else np.ones(len(skill_scores))
    ranges = [skills.sections_of(int(d)) for d in skill_docs]
    owner = np.repeat(np.arange(len(skill_docs)), [len(r) for r in ranges])
    cand = np.concatenate(ranges)
    dropped = empty
    if skip_flagged:
        flags = doc_flags(sections, cand)
        if flags is not None and flags.any():
            dropped, cand, owner = cand[flags != 0], cand[flags == 0], owner[flags == 0]
    order = np.argsort(cand, kind="stable")
    cand, owner = cand[order], owner[order]
    bm25 = section_scores(sections, query, cand)
    top = bm25.max() if len(bm25) else 0.0
    combined = (bm25 / top if top > 0 else np.zeros_like(bm25)) + skill_weight * prior[owner]
    ranked = np.lexsort((cand, -combined))
    taken: dict[int, int] = {}
    keep = []
    for i in ranked:
        skill = int(owner[i])
        if taken.get(skill, 0) >= per_skill:
            continue
        taken[skill] = taken.get(skill, 0) + 1
        keep.append(i)
        if len(keep) == k:
            break
    keep_arr = np.asarray(keep, dtype=np.int64)
    return cand[keep_arr], combined[keep_arr], dropped


def skill_index_dir(index_dir: str | Path) -> Path | None:
    """The skill-level index folder of a saved section index, or None (built before it existed)."""
    index_dir = Path(index_dir)
    for meta_file in (index_dir / SHARDS_FILE, index_dir / "meta.json"):
        if meta_file.is_file():
            entry = json.loads(meta_file.read_text(encoding="utf-8")).get("skill_index")
            if entry and (index_dir / entry["dir"]).is_dir():
                return (index_dir / entry["dir"]).resolve()
    return None


def write_skill_index(sections: Iterable[Section], directory: str | Path, *, k1: float = SKILL_K1,
                      b: float = SKILL_B) -> Path:
    """Build only the skill level from sections in index order (for an index built without it)."""
    writer = IndexWriter(directory, k1=k1, b=b, batch_sections=SKILL_BATCH, skill_level=False, tfidf=True,
                         doc_columns={"section_start": np.int64, "section_count": np.int32})
    level = _SkillLevel(writer)
    try:
        for doc, section in enumerate(sections):
            level.feed(section, tokenize(section.text), doc)
        level.emit()
        return writer.finish()
    except BaseException:
        writer.abort()
        raise
