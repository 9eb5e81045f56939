"""BM25 index over skill sections: build, save, load, top-K search with repository/skill filters.

Engine (chosen by measurement, see benchmarks/bench_bm25.py and the corpus notes): an inverted index
in compressed-sparse-row form over terms, holding for every (term, section) pair its precomputed BM25
term weight ("eager" scoring, as bm25s does). A query sums the weight rows of its terms into a score
array (numpy fancy-index adds), keeps the candidates that match at least one term, drops filtered
repositories/skills *before* ranking (so K results come back whenever K unfiltered matches exist),
and selects the top K with `argpartition`. Ties are broken by section order, so results are
deterministic. Sections are stored column-wise (one UTF-8 blob + offsets per text column, small
tables for provenance), so a million sections do not become a million Python objects, and a saved
index is memory-mapped on load.

Scoring: score(q, d) = sum over query tokens t (repeated tokens count again) of
    idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))
with two idf variants:
* "lucene" (default): ln(1 + (N - n_t + 0.5) / (n_t + 0.5)), always positive;
* "okapi" (parity with rank-bm25's BM25Okapi): ln((N - n_t + 0.5) / (n_t + 0.5)), where values below
  zero are replaced by epsilon * (mean idf over the vocabulary) -- exactly rank-bm25's formula.
The indexed text of a section is its heading path, a newline, then its text.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sized
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from corpus_tools.sections import Section
from corpus_tools.tokenizer import TOKENIZER_VERSION, tokenize

FORMAT_VERSION = 1
IDF_MODES = ("lucene", "okapi")
_BATCH = 8192
_SOURCE_FIELDS = ("skill_id", "skill_name", "repo", "path", "commit", "license")

ProgressFn = Callable[[int, "int | None"], None]


@dataclass(slots=True)
class Hit:
    section: Section
    score: float


def index_text(section: Section) -> str:
    """The text BM25 sees for a section."""
    return f"{section.heading_path}\n{section.text}"


class _Blob:
    """Append-only UTF-8 string column: one byte buffer plus offsets."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.offsets: list[int] = [0]

    def add(self, value: str) -> None:
        self.data += value.encode("utf-8")
        self.offsets.append(len(self.data))

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        # Zero-copy view of the buffer (the blob is not appended to after this).
        return np.frombuffer(self.data, dtype=np.uint8), np.asarray(self.offsets, dtype=np.int64)


class SectionIndex:
    """BM25 over sections. Build with `SectionIndex.build`, persist with `save`/`load`."""

    def __init__(self, *, vocab: dict[str, int], indptr: np.ndarray, postings: np.ndarray, weights: np.ndarray,
                 doc_lengths: np.ndarray, doc_source: np.ndarray, sources: list[dict[str, str]],
                 blobs: dict[str, tuple[np.ndarray, np.ndarray]], meta: dict[str, Any],
                 term_max: np.ndarray | None = None, doc_columns: dict[str, np.ndarray] | None = None):
        self.vocab = vocab
        self.indptr = indptr
        self.postings = postings
        self.weights = weights
        self.doc_lengths = doc_lengths
        self.doc_source = doc_source
        self.sources = sources
        self.blobs = blobs
        self.meta = meta
        # Optional per-section columns of a streamed build (corpus_tools.index_build), e.g. "flags".
        self.doc_columns = doc_columns or {}
        self.directory: Path | None = None  # where `load` read it from
        # With `skip_flagged`, sections whose vetting flag (the "flags" column) is set never come back.
        self.skip_flagged = False
        # Largest weight in each term's posting list: the bound that query pruning relies on.
        if term_max is None:
            nonempty = indptr[:-1] < indptr[1:]
            term_max = np.zeros(len(indptr) - 1, dtype=np.float64)
            if nonempty.any():
                term_max[nonempty] = np.maximum.reduceat(np.asarray(weights), indptr[:-1][nonempty])
        self.term_max = term_max
        repos = sorted({s["repo"] for s in sources})
        skills = sorted({s["skill_id"] for s in sources})
        self._repo_ids = {r: i for i, r in enumerate(repos)}
        self._skill_ids = {s: i for i, s in enumerate(skills)}
        source_repo = np.asarray([self._repo_ids[s["repo"]] for s in sources], dtype=np.int32)
        source_skill = np.asarray([self._skill_ids[s["skill_id"]] for s in sources], dtype=np.int32)
        self.doc_repo = source_repo[doc_source] if len(sources) else np.zeros(0, np.int32)
        self.doc_skill = source_skill[doc_source] if len(sources) else np.zeros(0, np.int32)

    # ------------------------------------------------------------------------------------------ build
    @classmethod
    def build(cls, sections: Iterable[Section], k1: float = 1.5, b: float = 0.75, *, idf: str = "lucene",
              epsilon: float = 0.25, dtype: type = np.float32, progress: ProgressFn | None = None,
              total: int | None = None) -> "SectionIndex":
        """Index `sections` (any iterable, consumed once). `idf="okapi"` reproduces rank-bm25's
        BM25Okapi scores; `dtype=np.float64` keeps full precision for exact comparisons."""
        if idf not in IDF_MODES:
            raise ValueError(f"idf must be one of {IDF_MODES}, got {idf!r}")
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError(f"need k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        started = time.perf_counter()
        if total is None and isinstance(sections, Sized):
            total = len(sections)
        # A missing token gets the next id on first lookup: the fastest pure-Python term->id map.
        vocab: dict[str, int] = defaultdict(itertools.count().__next__)
        texts, headings, ids = _Blob(), _Blob(), _Blob()
        source_index: dict[tuple[str, ...], int] = {}
        doc_source: list[int] = []
        lengths: list[int] = []
        chunk_docs: list[np.ndarray] = []
        chunk_terms: list[np.ndarray] = []
        chunk_tf: list[np.ndarray] = []
        batch_ids: list[int] = []
        batch_lengths: list[int] = []
        n_docs = 0

        def flush() -> None:
            if not batch_ids:
                return
            first = n_docs - len(batch_lengths)
            terms = np.asarray(batch_ids, dtype=np.int64)
            docs = np.repeat(np.arange(first, n_docs, dtype=np.int64), batch_lengths)
            keys, counts = np.unique((docs << 32) | terms, return_counts=True)
            chunk_docs.append((keys >> 32).astype(np.int32))
            chunk_terms.append((keys & 0xFFFFFFFF).astype(np.int32))
            chunk_tf.append(np.minimum(counts, 65535).astype(np.uint16))
            batch_ids.clear()
            batch_lengths.clear()

        for section in sections:
            tokens = tokenize(index_text(section))
            batch_ids.extend(map(vocab.__getitem__, tokens))
            batch_lengths.append(len(tokens))
            lengths.append(len(tokens))
            key = (section.skill_id, section.skill_name, section.repo, section.path, section.commit, section.license)
            src = source_index.get(key)
            if src is None:
                src = source_index[key] = len(source_index)
            doc_source.append(src)
            texts.add(section.text)
            headings.add(section.heading_path)
            ids.add(section.id)
            n_docs += 1
            if len(batch_lengths) >= _BATCH:
                flush()
                if progress is not None:
                    progress(n_docs, total)
        flush()
        if progress is not None:
            progress(n_docs, total)

        vocab = dict(vocab)
        n_terms = len(vocab)
        doc_lengths = np.asarray(lengths, dtype=np.int32)
        indptr, postings, term_freqs = _group_by_term(chunk_docs, chunk_terms, chunk_tf, n_terms)
        doc_freq = np.diff(indptr)
        idf_of_term = idf_values(doc_freq, n_docs, idf, epsilon)
        avgdl = float(doc_lengths.mean()) if n_docs else 0.0
        weights: np.ndarray = np.empty(len(postings), dtype=dtype)
        term_of_posting = np.repeat(np.arange(n_terms, dtype=np.int32), doc_freq)
        step = 4_000_000
        for start in range(0, len(postings), step):
            stop = start + step
            weights[start:stop] = bm25_weights(idf_of_term[term_of_posting[start:stop]], term_freqs[start:stop],
                                               doc_lengths[postings[start:stop]], k1, b, avgdl, dtype)
        del term_of_posting, term_freqs
        sources = [dict(zip(_SOURCE_FIELDS, key)) for key in source_index]
        meta = {
            "format_version": FORMAT_VERSION,
            "tokenizer": TOKENIZER_VERSION,
            "k1": k1, "b": b, "idf": idf, "epsilon": epsilon, "dtype": np.dtype(dtype).name,
            "sections": n_docs, "terms": n_terms, "postings": int(len(postings)), "avgdl": avgdl,
            "build_seconds": round(time.perf_counter() - started, 3),
        }
        return cls(vocab=vocab, indptr=indptr, postings=postings, weights=weights, doc_lengths=doc_lengths,
                   doc_source=np.asarray(doc_source, dtype=np.int32), sources=sources,
                   blobs={"text": texts.arrays(), "heading": headings.arrays(), "id": ids.arrays()}, meta=meta)

    # ------------------------------------------------------------------------------------------ query
    def __len__(self) -> int:
        return int(self.meta["sections"])

    def query_terms(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        """Known term ids of `query` and how often each occurs in it."""
        counts: dict[int, int] = {}
        for token in tokenize(query):
            term = self.vocab.get(token)
            if term is not None:
                counts[term] = counts.get(term, 0) + 1
        return np.fromiter(counts.keys(), np.int64, len(counts)), np.fromiter(counts.values(), np.float64, len(counts))

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every section for `query` (dense, float64; for tests and evaluation)."""
        terms, qtf = self.query_terms(query)
        out = np.zeros(len(self), dtype=np.float64)
        for term, weight in zip(terms, qtf):
            lo, hi = self.indptr[term], self.indptr[term + 1]
            out[self.postings[lo:hi]] += self.weights[lo:hi].astype(np.float64) * weight
        return out

    def search(self, query: str, k: int = 5, exclude_repos: Iterable[str] = (),
               exclude_skills: Iterable[str] = ()) -> list[Hit]:
        """Top-`k` sections for `query`, best first; sections of excluded repositories or skills
        never appear and do not take a slot. Only sections matching at least one query term count."""
        docs, scores = self.top_k(query, k, exclude_repos, exclude_skills)
        return [Hit(self.section(int(d)), float(s)) for d, s in zip(docs, scores)]

    def top_k(self, query: str, k: int = 5, exclude_repos: Iterable[str] = (),
              exclude_skills: Iterable[str] = ()) -> tuple[np.ndarray, np.ndarray]:
        """Like `search`, but returns (section numbers, scores) without building Section objects.

        Exact top-k with MaxScore-style pruning: terms are taken in order of their largest possible
        contribution; once the k-th best partial score exceeds what all remaining (common, low-idf)
        terms could add together, no unseen section can enter the top k, so the remaining terms are
        only looked up for the surviving candidates (binary search in their posting lists) instead
        of being added for every section that contains them. Falls back to exhaustive scoring."""
        empty = (np.zeros(0, np.int64), np.zeros(0, np.float64))
        if k <= 0 or len(self) == 0:
            return empty
        terms, qtf = self.query_terms(query)
        if len(terms) == 0:
            return empty
        bounds = self.term_max[terms].astype(np.float64) * qtf
        order = np.argsort(-bounds, kind="stable")
        terms, qtf, bounds = terms[order], qtf[order], bounds[order]
        starts, stops = self.indptr[terms], self.indptr[terms + 1]
        lengths = stops - starts
        # remaining[i]: the most terms i.. can add to any section (with a margin for float rounding).
        remaining = np.append(np.cumsum(bounds[::-1])[::-1], 0.0) * (1 + 1e-6) + 1e-9
        big = max(len(self) // 16, 1024)
        cand = np.zeros(0, dtype=np.int64)
        scores = np.zeros(0, dtype=np.float64)
        for i in range(len(terms)):
            if i > 0 and len(cand) >= k:
                live, live_scores = self._filter(cand, scores, exclude_repos, exclude_skills)
                if len(live) >= k:
                    theta = np.partition(live_scores, len(live) - k)[len(live) - k]
                    if theta > remaining[i]:
                        return self._finish_pruned(live, live_scores, theta, remaining[i:], starts[i:], stops[i:],
                                                   qtf[i:], k)
            if lengths[i] > big:
                break  # a common term: cheaper to score the rest exhaustively
            cand, scores = self._merge(cand, scores, starts[i], stops[i], qtf[i])
        else:
            cand, scores = self._filter(cand, scores, exclude_repos, exclude_skills)
            return self._select(cand, scores, k)
        cand, scores = self._accumulate(starts, stops, qtf)
        cand, scores = self._filter(cand, scores, exclude_repos, exclude_skills)
        return self._select(cand, scores, k)

    def _merge(self, cand: np.ndarray, scores: np.ndarray, lo: int, hi: int, weight: float
               ) -> tuple[np.ndarray, np.ndarray]:
        docs = np.asarray(self.postings[lo:hi], dtype=np.int64)
        term_scores = self.weights[lo:hi].astype(np.float64) * weight
        if len(cand) == 0:
            return docs, term_scores
        both = np.concatenate([cand, docs])
        # Two sorted runs: the stable sort (timsort) merges them in linear time.
        order = np.argsort(both, kind="stable")
        both = both[order]
        both_scores = np.concatenate([scores, term_scores])[order]
        first = np.flatnonzero(np.r_[True, both[1:] != both[:-1]])
        return both[first], np.add.reduceat(both_scores, first)

    def _finish_pruned(self, cand: np.ndarray, scores: np.ndarray, theta: float, remaining: np.ndarray,
                       starts: np.ndarray, stops: np.ndarray, qtf: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """No unseen section can reach `theta`; complete the exact scores of the candidates that can.
        `remaining[j]` bounds what terms j.. can still add, so before each term the candidates that
        cannot reach `theta` even with every remaining term are dropped (the list shrinks as it goes)."""
        scores = scores.copy()
        # int32 needles: searching int64 in an int32 posting row would first copy the whole row.
        cand = cand.astype(self.postings.dtype, copy=False)
        for lo, hi, w, bound in zip(starts, stops, qtf, remaining):
            alive = scores + bound >= theta
            if not alive.all():
                cand, scores = cand[alive], scores[alive]
            row = self.postings[lo:hi]
            pos = np.searchsorted(row, cand)
            inside = pos < len(row)
            found = np.zeros(len(cand), dtype=bool)
            found[inside] = row[pos[inside]] == cand[inside]
            scores[found] += self.weights[lo + pos[found]].astype(np.float64) * w
        return self._select(cand.astype(np.int64), scores, k)

    def _accumulate(self, starts: np.ndarray, stops: np.ndarray, qtf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Exhaustive scores of every section that contains at least one of the given terms."""
        total = int((stops - starts).sum())
        if len(starts) == 1:
            return (np.asarray(self.postings[starts[0]:stops[0]]),
                    self.weights[starts[0]:stops[0]].astype(np.float64) * qtf[0])
        if total * 16 < len(self):
            # Few postings: merge them by sorting instead of touching an array of every section.
            cat_docs = np.concatenate([self.postings[lo:hi] for lo, hi in zip(starts, stops)])
            cat_w = np.concatenate([self.weights[lo:hi].astype(np.float64) * w for lo, hi, w in zip(starts, stops, qtf)])
            cand, inverse = np.unique(cat_docs, return_inverse=True)
            return cand, np.bincount(inverse, weights=cat_w, minlength=len(cand))
        # float64 throughout, each posting's weight * query count added in term order: every path of
        # top_k then gives a section the same bits, which shards rely on (corpus_tools.shards).
        acc = np.zeros(len(self), dtype=np.float64)
        for lo, hi, w in zip(starts, stops, qtf):
            acc[self.postings[lo:hi]] += self.weights[lo:hi].astype(np.float64) * w
        cand = np.flatnonzero(acc)
        return cand, acc[cand]

    def _filter(self, cand: np.ndarray, scores: np.ndarray, exclude_repos: Iterable[str],
                exclude_skills: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        keep = scores > 0
        if self.skip_flagged and "flags" in self.doc_columns:
            keep &= np.asarray(self.doc_columns["flags"])[cand] == 0
        mask = self._exclusion_mask(cand, exclude_repos, exclude_skills)
        if mask is not None:
            keep &= ~mask
        return (cand, scores) if keep.all() else (cand[keep], scores[keep])

    @staticmethod
    def _select(cand: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        if len(cand) > k:
            kth = np.partition(scores, len(cand) - k)[len(cand) - k]
            near = scores >= kth  # every tie at the cut-off, so ties resolve by section order
            cand, scores = cand[near], scores[near]
        order = np.lexsort((cand, -scores))[:k]
        return cand[order].astype(np.int64), scores[order]

    def _exclusion_mask(self, cand: np.ndarray, exclude_repos: Iterable[str],
                        exclude_skills: Iterable[str]) -> np.ndarray | None:
        mask = None
        repo_ids = [self._repo_ids[r] for r in exclude_repos if r in self._repo_ids]
        if repo_ids:
            mask = np.isin(self.doc_repo[cand], repo_ids)
        skill_ids = [self._skill_ids[s] for s in exclude_skills if s in self._skill_ids]
        if skill_ids:
            skill_mask = np.isin(self.doc_skill[cand], skill_ids)
            mask = skill_mask if mask is None else mask | skill_mask
        return mask

    # ------------------------------------------------------------------------------------------ access
    def _blob_str(self, name: str, doc: int) -> str:
        data, offsets = self.blobs[name]
        return bytes(data[offsets[doc]:offsets[doc + 1]]).decode("utf-8")

    def section(self, doc: int) -> Section:
        """The `doc`-th section (in build order)."""
        src = self.sources[int(self.doc_source[doc])]
        return Section(id=self._blob_str("id", doc), skill_id=src["skill_id"], skill_name=src["skill_name"],
                       heading_path=self._blob_str("heading", doc), text=self._blob_str("text", doc),
                       repo=src["repo"], path=src["path"], commit=src["commit"], license=src["license"])

    def iter_sections(self) -> Iterable[Section]:
        for doc in range(len(self)):
            yield self.section(doc)

    @property
    def repos(self) -> list[str]:
        return list(self._repo_ids)

    @property
    def skills(self) -> list[str]:
        return list(self._skill_ids)

    def stats(self) -> dict[str, Any]:
        repo_counts = np.bincount(self.doc_repo, minlength=len(self._repo_ids)) if len(self) else np.zeros(0)
        top = sorted(zip(self._repo_ids, repo_counts.tolist()), key=lambda x: -x[1])[:10]
        return {**{k: v for k, v in self.meta.items()}, "skills": len(self._skill_ids), "repos": len(self._repo_ids),
                "top_repos": top}

    # ------------------------------------------------------------------------------------------ persist
    def save(self, directory: str | Path) -> Path:
        """Write the index to `directory` (created; replaced atomically if it exists)."""
        directory = Path(directory)
        directory.parent.mkdir(parents=True, exist_ok=True)
        tmp = directory.with_name(f".{directory.name}.tmp-{os.getpid()}")
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        (tmp / "vocab.txt").write_text("\n".join(self.vocab), encoding="utf-8")
        arrays = {"indptr": self.indptr, "postings": self.postings, "weights": self.weights, "term_max": self.term_max,
                  "doc_lengths": self.doc_lengths, "doc_source": self.doc_source}
        for name, values in self.doc_columns.items():
            arrays[name] = values
        for name, (data, offsets) in self.blobs.items():
            arrays[f"{name}_blob"] = data
            arrays[f"{name}_offsets"] = offsets
        for name, array in arrays.items():
            np.save(tmp / f"{name}.npy", np.ascontiguousarray(array))
        (tmp / "sources.json").write_text(json.dumps(self.sources, ensure_ascii=False), encoding="utf-8")
        meta = dict(self.meta)
        record_file_sizes(tmp, meta)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        if directory.exists():
            old = directory.with_name(f".{directory.name}.old-{os.getpid()}")
            directory.rename(old)
            tmp.rename(directory)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(directory)
        return directory

    @classmethod
    def load(cls, directory: str | Path, *, mmap: bool = True) -> "SectionIndex":
        """Load an index written by `save`. With `mmap`, the large arrays are memory-mapped."""
        directory = Path(directory)
        meta_file = directory / "meta.json"
        if not meta_file.is_file():
            raise FileNotFoundError(f"{directory} is not a section index (no meta.json)")
        meta = read_index_json(directory, "meta.json")
        if meta.get("format_version") != FORMAT_VERSION or meta.get("tokenizer") != TOKENIZER_VERSION:
            raise ValueError(f"{directory} was built with format {meta.get('format_version')} / tokenizer "
                             f"{meta.get('tokenizer')}; this code needs {FORMAT_VERSION} / {TOKENIZER_VERSION}. "
                             "Rebuild it.")
        verify_index_files(directory, meta)
        mode: Literal["r"] | None = "r" if mmap else None

        def arr(name: str) -> np.ndarray:
            # A plain ndarray view of the map: slicing a np.memmap costs a Python-level __getitem__ each time.
            return np.asarray(np.load(directory / f"{name}.npy", mmap_mode=mode))

        vocab_text = (directory / "vocab.txt").read_text(encoding="utf-8")
        terms = vocab_text.split("\n") if vocab_text else []
        vocab = dict(zip(terms, range(len(terms))))
        blobs = {name: (arr(f"{name}_blob"), np.load(directory / f"{name}_offsets.npy"))
                 for name in ("text", "heading", "id")}
        try:
            index = cls(vocab=vocab, indptr=np.load(directory / "indptr.npy"), postings=arr("postings"),
                        weights=arr("weights"), doc_lengths=arr("doc_lengths"),
                        doc_source=np.load(directory / "doc_source.npy"),
                        sources=read_index_json(directory, "sources.json", list),
                        blobs=blobs, meta=meta, term_max=np.load(directory / "term_max.npy"),
                        doc_columns={name: arr(name) for name in meta.get("doc_columns", ())})
        except (ValueError, EOFError) as exc:  # numpy's own complaint about a truncated .npy file
            raise IndexIntegrityError(f"index {directory} is damaged: {exc}; rebuild it") from None
        _verify_counts(directory, index)
        index.directory = directory
        return index


class IndexIntegrityError(ValueError):
    """An index folder whose files do not match what its meta.json recorded (truncated, swapped or damaged)."""


def read_index_json(directory: str | Path, name: str, kind: type = dict) -> Any:
    """The JSON file `name` of an index folder, parsed; IndexIntegrityError naming the file when it is truncated,
    not JSON, or not a `kind` (a JSON object by default)."""
    path = Path(directory) / name
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise IndexIntegrityError(f"index {directory} is damaged: {name} is not UTF-8 text; rebuild it") from None
    except json.JSONDecodeError as exc:
        raise IndexIntegrityError(f"index {directory} is damaged: {name} is not valid JSON ({exc.msg}, line "
                                  f"{exc.lineno} column {exc.colno}; truncated?); rebuild it") from None
    if not isinstance(data, kind):
        raise IndexIntegrityError(f"index {directory} is damaged: {name} holds a JSON {type(data).__name__}, not "
                                  f"{'an object' if kind is dict else 'a list'}; rebuild it")
    return data


def record_file_sizes(directory: Path, meta: dict[str, Any]) -> None:
    """Record the byte size of every file of an index folder in `meta` (written last, as meta.json)."""
    meta["file_bytes"] = {p.name: p.stat().st_size for p in sorted(directory.iterdir())
                          if p.is_file() and p.name != "meta.json"}


def verify_index_files(directory: Path, meta: dict[str, Any]) -> None:
    """Raise IndexIntegrityError when a file of the index is missing or its size differs from meta.json's record
    (indexes written before sizes were recorded are checked by their counts only, in `_verify_counts`)."""
    for name, size in (meta.get("file_bytes") or {}).items():
        path = directory / name
        if not path.is_file():
            raise IndexIntegrityError(f"index {directory} is damaged: {name} is missing; rebuild it")
        actual = path.stat().st_size
        if actual != size:
            raise IndexIntegrityError(f"index {directory} is damaged: {name} has {actual:,} bytes, its meta.json "
                                      f"recorded {size:,}; rebuild it")


def _verify_counts(directory: Path, index: "SectionIndex") -> None:
    """The loaded arrays against the counts meta.json recorded: a truncated vocabulary or postings file would
    otherwise load and silently find nothing."""
    meta = index.meta
    found = {"terms (vocab.txt)": len(index.vocab), "sections (doc_lengths.npy)": len(index.doc_lengths),
             "postings (postings.npy)": len(index.postings), "weights (weights.npy)": len(index.weights),
             "term offsets (indptr.npy)": len(index.indptr) - 1, "term bounds (term_max.npy)": len(index.term_max),
             "section sources (doc_source.npy)": len(index.doc_source),
             **{f"{name} ({name}.npy)": len(values) for name, values in index.doc_columns.items()}}
    expected = {"terms (vocab.txt)": meta.get("terms"), "sections (doc_lengths.npy)": meta.get("sections"),
                "postings (postings.npy)": meta.get("postings"), "weights (weights.npy)": meta.get("postings"),
                "term offsets (indptr.npy)": meta.get("terms"), "term bounds (term_max.npy)": meta.get("terms"),
                "section sources (doc_source.npy)": meta.get("sections"),
                **{f"{name} ({name}.npy)": meta.get("sections") for name in index.doc_columns}}
    for what, want in expected.items():
        if want is not None and found[what] != int(want):
            raise IndexIntegrityError(f"index {directory} is damaged: it has {found[what]:,} {what}, its meta.json "
                                      f"recorded {int(want):,}; rebuild it")
    for name, (_, offsets) in index.blobs.items():
        if meta.get("sections") is not None and len(offsets) != int(meta["sections"]) + 1:
            raise IndexIntegrityError(f"index {directory} is damaged: {name}_offsets.npy covers {len(offsets) - 1:,} "
                                      f"sections, its meta.json recorded {int(meta['sections']):,}; rebuild it")


_RELEASED = np.empty(0, dtype=np.int32)  # what a placed chunk leaves behind in its list, so its memory is freed


def _group_by_term(chunk_docs: list[np.ndarray], chunk_terms: list[np.ndarray], chunk_tf: list[np.ndarray],
                   n_terms: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Counting sort of the (doc, term, tf) chunks into term-major CSR arrays, one chunk at a time
    (each chunk is released once placed), so peak memory stays near one copy of the postings.
    Chunks come in document order, so each term's postings end up sorted by document."""
    counts = np.zeros(n_terms, dtype=np.int64)
    for terms in chunk_terms:
        counts += np.bincount(terms, minlength=n_terms)
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    fill = indptr[:-1].copy()
    postings = np.empty(int(indptr[-1]), dtype=np.int32)
    term_freqs = np.empty(int(indptr[-1]), dtype=np.uint16)
    for i in range(len(chunk_terms)):
        terms, docs, tf = chunk_terms[i], chunk_docs[i], chunk_tf[i]
        chunk_terms[i] = chunk_docs[i] = chunk_tf[i] = _RELEASED
        order = np.argsort(terms, kind="stable")
        sorted_terms = terms[order]
        run_start = np.flatnonzero(np.r_[True, sorted_terms[1:] != sorted_terms[:-1]])
        run_lengths = np.diff(np.r_[run_start, len(sorted_terms)])
        rank = np.arange(len(sorted_terms)) - np.repeat(run_start, run_lengths)
        where = fill[sorted_terms] + rank
        postings[where] = docs[order]
        term_freqs[where] = tf[order]
        fill[sorted_terms[run_start]] += run_lengths
    return indptr, postings, term_freqs


def bm25_weights(idf: np.ndarray, tf: np.ndarray, doc_lengths: np.ndarray, k1: float, b: float, avgdl: float,
                 dtype: Any) -> np.ndarray:
    """The eager BM25 weight of each posting (elementwise, so any chunking gives the same bits)."""
    f = tf.astype(np.float64)
    norm = k1 * (1.0 - b + b * doc_lengths / avgdl) if avgdl else k1 * (1.0 - b)
    return (idf * f * (k1 + 1.0) / (f + norm)).astype(dtype, copy=False)


def idf_values(doc_freq: np.ndarray, n_docs: int, mode: str, epsilon: float) -> np.ndarray:
    """Per-term idf for the given document frequencies (see the module docstring for the modes)."""
    n = doc_freq.astype(np.float64)
    if mode == "lucene":
        return np.log1p((n_docs - n + 0.5) / (n + 0.5))
    # rank-bm25 BM25Okapi: raw Robertson-Sparck Jones idf; negatives floored at epsilon * mean idf.
    raw = np.log(n_docs - n + 0.5) - np.log(n + 0.5)
    if len(raw) == 0:
        return raw
    floor = epsilon * float(raw.mean())
    return np.where(raw < 0, floor, raw)
