"""A section index cut into shards, searched shard by shard and merged into one top K.

`corpus_tools.index_build.IndexWriter(..., shards=n)` writes `shards.json` plus one complete
`SectionIndex` per contiguous range of sections. Every shard carries the global vocabulary, idf,
average section length and per-term weight bounds, so a shard scores a section with exactly the
bits the single index would, and orders and prunes query terms alike. The top K of the whole index
is then the top K of the union of each shard's top K, ties broken by global section number -- the
single index's order (tests/test_corpus_index_build.py checks equality).

Here the shards are searched by a thread pool in one process (numpy releases the GIL in the heavy
parts); docs/retrieval-at-scale.md describes running one shard per worker on Ray or Dask instead,
with the same `merge_top_k`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from corpus_tools.index import Hit, SectionIndex
from corpus_tools.index_build import SHARDS_FILE
from corpus_tools.sections import Section


def merge_top_k(results: Sequence[tuple[np.ndarray, np.ndarray]], offsets: Sequence[int] | np.ndarray, k: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """Merge per-shard (local section numbers, scores) into the global top `k`: best score first,
    ties by global section number (the order a single index uses)."""
    docs = [np.asarray(d, dtype=np.int64) + off for (d, _), off in zip(results, offsets)]
    if not docs:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    all_docs = np.concatenate(docs)
    all_scores = np.concatenate([np.asarray(s, dtype=np.float64) for _, s in results])
    order = np.lexsort((all_docs, -all_scores))[:k]
    return all_docs[order], all_scores[order]


class ShardedIndex:
    """The shards of one index, searched together. Same search API as `SectionIndex`."""

    def __init__(self, shards: Sequence[SectionIndex], offsets: Sequence[int] | np.ndarray, *,
                 workers: int | None = None) -> None:
        if len(shards) != len(offsets) or not shards:
            raise ValueError("need one doc offset per shard and at least one shard")
        self.shards = list(shards)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self._pool = ThreadPoolExecutor(max_workers=workers or len(shards)) if len(shards) > 1 else None
        self.directory: Path | None = None  # where `load` read it from
        self.meta = dict(self.shards[0].meta)
        self.meta["sections"] = len(self)

    @classmethod
    def load(cls, directory: str | Path, *, mmap: bool = True, workers: int | None = None) -> "ShardedIndex":
        directory = Path(directory)
        manifest_file = directory / SHARDS_FILE
        if not manifest_file.is_file():
            raise FileNotFoundError(f"{directory} is not a sharded index (no {SHARDS_FILE})")
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
        entries = manifest["shards"]
        shards = [SectionIndex.load(directory / e["dir"], mmap=mmap) for e in entries]
        for entry, shard in zip(entries, shards):
            if len(shard) != entry["sections"]:
                raise ValueError(f"{directory / entry['dir']}: {len(shard)} sections, manifest says {entry['sections']}")
        sharded = cls(shards, [e["doc_offset"] for e in entries], workers=workers)
        sharded.directory = directory
        return sharded

    def __len__(self) -> int:
        return int(sum(len(s) for s in self.shards))

    def top_k(self, query: str, k: int = 5, exclude_repos: Iterable[str] = (),
              exclude_skills: Iterable[str] = ()) -> tuple[np.ndarray, np.ndarray]:
        """Global (section numbers, scores) of the top `k`, as `SectionIndex.top_k` over all shards."""
        exclude_repos, exclude_skills = tuple(exclude_repos), tuple(exclude_skills)
        if self._pool is None:
            results = [self.shards[0].top_k(query, k, exclude_repos, exclude_skills)]
        else:
            results = list(self._pool.map(lambda s: s.top_k(query, k, exclude_repos, exclude_skills), self.shards))
        return merge_top_k(results, self.offsets, k)

    def search(self, query: str, k: int = 5, exclude_repos: Iterable[str] = (),
               exclude_skills: Iterable[str] = ()) -> list[Hit]:
        docs, scores = self.top_k(query, k, exclude_repos, exclude_skills)
        return [Hit(self.section(int(d)), float(s)) for d, s in zip(docs, scores)]

    def section(self, doc: int) -> Section:
        shard = int(np.searchsorted(self.offsets, doc, side="right")) - 1
        if shard < 0 or doc - self.offsets[shard] >= len(self.shards[shard]):
            raise IndexError(f"section {doc} out of range")
        return self.shards[shard].section(int(doc - self.offsets[shard]))

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every section (concatenated over the shards)."""
        return np.concatenate([s.scores(query) for s in self.shards])

    @property
    def repos(self) -> list[str]:
        return sorted({r for s in self.shards for r in s.repos})

    @property
    def skills(self) -> list[str]:
        return sorted({k for s in self.shards for k in s.skills})

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)


def load_index(directory: str | Path, *, mmap: bool = True) -> SectionIndex | ShardedIndex:
    """A saved index: sharded when the folder has `shards.json`, else a single `SectionIndex`."""
    directory = Path(directory)
    if (directory / SHARDS_FILE).is_file():
        return ShardedIndex.load(directory, mmap=mmap)
    return SectionIndex.load(directory, mmap=mmap)
