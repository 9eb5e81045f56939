"""Streaming BM25 index build: sections in, index directory out, in bounded memory.

`SectionIndex.build` keeps every (section, term) posting and every text in memory until the end,
which is fine for the shared corpus and not for tens of millions of sections. `IndexWriter` writes
the same index files (`SectionIndex.save`'s format, bit-identical arrays) while holding only:

* one batch of tokenized sections (`batch_sections`), then its postings are sorted term-major and
  spilled to disk as a run (`run_*.bin`);
* the text columns, which go straight to their files as they arrive;
* per-term counters (vocabulary, document frequency); per-section lengths and source ids go to spill
  files as they arrive (4 bytes each, read back for the merge);
* the distinct skill sources (skill id, name, repo, path, commit, licence) in a SQLite table in the
  spill folder (`_SourceTable`), not in memory: one per skill is what grows with the corpus, and
  `sources.json` is streamed out of it;
* during the merge, one block of about `block_postings` postings: the runs are read term range by
  term range (a cursor per run, plain reads, no memory maps), weighted with the global statistics
  (in slices of `WEIGHT_CHUNK` postings, so the float temporaries stay small) and appended to
  `postings.npy` / `weights.npy`.

The same writer can cut the sections into `shards` contiguous ranges, each a complete index with the
global vocabulary, idf, average length and term bounds, so that searching the shards and merging
their top K gives exactly the single index's results (corpus_tools.shards).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import shutil
import sqlite3
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from corpus_tools.index import (
    _SOURCE_FIELDS,
    FORMAT_VERSION,
    IDF_MODES,
    SectionIndex,
    bm25_weights,
    idf_values,
    index_text,
    record_file_sizes,
)
from corpus_tools.sections import Section
from corpus_tools.tokenizer import TOKENIZER_VERSION, tokenize

DEFAULT_BATCH_SECTIONS = 8192
DEFAULT_BLOCK_POSTINGS = 4_000_000
# BM25 / TF-IDF weights are elementwise, so a block is weighted in slices of this many postings: the
# float64 temporaries of a 4M-posting block would otherwise hold ~200 MB at once.
WEIGHT_CHUNK = 1 << 19
SHARDS_FILE = "shards.json"
SKILL_DIR = "skills"
FLAGS_COLUMN = "flags"
# Whole skills differ in length by two orders of magnitude: full length normalisation and a little
# more tf headroom rank them best (docs/retrieval-at-scale.md 4.2).
SKILL_K1, SKILL_B = 2.0, 1.0
SKILL_BATCH = 1024  # skill documents are ~25 sections long: smaller batches keep a run's size similar
TFIDF_SCHEME = "sublinear-tf, idf ln((1+N)/(1+df))+1, l2-normalised"
_COLUMNS = ("text", "heading", "id")
_HEADER_BYTES = 128  # a 1-D .npy header (version 1.0) of any realistic length fits in 128 bytes

ProgressFn = Callable[[int, "int | None"], None]


def _npy_header(dtype: np.dtype, length: int) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": (length,)})
    header = buffer.getvalue()
    if len(header) != _HEADER_BYTES:
        raise AssertionError(f"unexpected .npy header size {len(header)}")
    return header


class _NpyAppender:
    """A 1-D .npy file written by appending; the header (with the final length) is patched on close."""

    def __init__(self, path: Path, dtype: Any) -> None:
        self.path = path
        self.dtype = np.dtype(dtype)
        self.length = 0
        self.fh: BinaryIO = open(path, "wb")
        self.fh.write(_npy_header(self.dtype, 0))

    def append(self, values: np.ndarray | bytes | bytearray) -> None:
        if isinstance(values, (bytes, bytearray)):
            self.fh.write(values)
            self.length += len(values) // self.dtype.itemsize
        else:
            array = np.ascontiguousarray(values, dtype=self.dtype)
            self.fh.write(array.tobytes())
            self.length += len(array)

    def close(self) -> None:
        self.fh.seek(0)
        self.fh.write(_npy_header(self.dtype, self.length))
        self.fh.close()


def _read(path: Path, dtype: Any, start: int, count: int, header: int = 0) -> np.ndarray:
    """`count` items of a raw array file from item `start` (a plain read: the pages are not mapped)."""
    dtype = np.dtype(dtype)
    if count <= 0:
        return np.zeros(0, dtype=dtype)
    with open(path, "rb") as fh:
        fh.seek(header + start * dtype.itemsize)
        return np.fromfile(fh, dtype=dtype, count=count)


class _Run:
    """One spilled batch of postings, sorted by (term, section): three raw files and a read cursor."""

    def __init__(self, folder: Path, number: int, first_doc: int, last_doc: int, length: int) -> None:
        self.base = folder / f"run_{number:06d}"
        self.first_doc, self.last_doc, self.length = first_doc, last_doc, length
        self.cursor = 0

    def path(self, column: str) -> Path:
        return Path(f"{self.base}.{column}.bin")

    def take_below(self, term_stop: int, expected: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The entries from the cursor on whose term is below `term_stop`; the cursor moves past them."""
        start = self.cursor
        window = max(expected, 4096)
        while True:
            count = min(window, self.length - start)
            terms = _read(self.path("terms"), np.int32, start, count)
            stop = int(np.searchsorted(terms, term_stop))
            if stop < count or start + count >= self.length:
                break
            window *= 4
        self.cursor = start + stop
        return (terms[:stop], _read(self.path("docs"), np.int32, start, stop),
                _read(self.path("tf"), np.uint16, start, stop))


class _SourceTable:
    """The distinct skill sources of a build (a `sources.json` entry each), numbered in order of first
    appearance, kept in a SQLite file rather than a dict: a corpus of a million skills would otherwise hold
    a million key tuples in memory. Consecutive sections of a skill share their source, so the last key is
    checked first and SQLite is asked once per skill (and reference file)."""

    def __init__(self, file: Path) -> None:
        self.db = sqlite3.connect(file, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=OFF")
        self.db.execute("PRAGMA synchronous=OFF")
        # The entry as sources.json writes it is the key: equal keys give equal JSON and different keys differ.
        self.db.execute("CREATE TABLE sources (id INTEGER PRIMARY KEY, entry TEXT NOT NULL UNIQUE)")
        self.db.execute("BEGIN")
        self.count = 0
        self._last: tuple[tuple[str, ...], int] | None = None

    def id_of(self, key: tuple[str, ...]) -> int:
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        entry = json.dumps(dict(zip(_SOURCE_FIELDS, key)), ensure_ascii=False)
        try:  # a new source is the common case: one statement, not a look-up first
            self.db.execute("INSERT INTO sources (id, entry) VALUES (?, ?)", (self.count, entry))
            number = self.count
            self.count += 1
        except sqlite3.IntegrityError:
            number = int(self.db.execute("SELECT id FROM sources WHERE entry = ?", (entry,)).fetchone()[0])
        self._last = (key, number)
        return number

    def write_json(self, path: Path, used: np.ndarray) -> None:
        """`sources.json` holding the entries numbered `used` (sorted, distinct), in that order -- the bytes
        `json.dumps([...], ensure_ascii=False)` writes, one entry at a time."""
        with open(path, "w", encoding="utf-8") as out:
            out.write("[")
            if len(used):
                wanted = iter(used.tolist())
                next_id = next(wanted)
                first = True
                rows = self.db.execute("SELECT id, entry FROM sources WHERE id BETWEEN ? AND ? ORDER BY id",
                                       (int(used[0]), int(used[-1])))
                for number, entry in rows:
                    if number != next_id:
                        continue
                    out.write(entry if first else ", " + entry)
                    first = False
                    next_id = next(wanted, None)
                    if next_id is None:
                        break
            out.write("]")

    def close(self) -> None:
        self.db.close()


class IndexWriter:
    """Build a section index into `directory` from sections added one at a time.

        writer = IndexWriter("index/", shards=1)
        writer.add_all(sections)          # any iterable, consumed once
        writer.finish()                   # -> the directory (or the folder of shards)

    Parameters as `SectionIndex.build` (k1, b, idf, epsilon, dtype). With `shards` > 1 the directory
    holds `shards.json` and one index per shard (`shard-000`, ...), see corpus_tools.shards."""

    def __init__(self, directory: str | Path, *, k1: float = 1.5, b: float = 0.75, idf: str = "lucene",
                 epsilon: float = 0.25, dtype: Any = np.float32, shards: int = 1,
                 batch_sections: int = DEFAULT_BATCH_SECTIONS, block_postings: int = DEFAULT_BLOCK_POSTINGS,
                 progress: ProgressFn | None = None, total: int | None = None,
                 doc_columns: dict[str, Any] | None = None, tfidf: bool = False,
                 skill_level: bool = True, skill_k1: float = SKILL_K1, skill_b: float = SKILL_B,
                 flagger: Callable[[str], int] | None = None) -> None:
        if idf not in IDF_MODES:
            raise ValueError(f"idf must be one of {IDF_MODES}, got {idf!r}")
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError(f"need k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        if shards < 1:
            raise ValueError(f"shards must be at least 1, got {shards}")
        self.directory = Path(directory)
        self.params = {"k1": k1, "b": b, "idf": idf, "epsilon": epsilon, "dtype": np.dtype(dtype)}
        self.shards = shards
        self.batch_sections = max(1, batch_sections)
        self.block_postings = max(1, block_postings)
        self.progress, self.total = progress, total
        self.started = time.perf_counter()
        self.directory.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.directory.with_name(f".{self.directory.name}.tmp-{os.getpid()}")
        if self.tmp.exists():
            shutil.rmtree(self.tmp)
        try:  # a failure part-way (a full disk) leaves no temporary folder behind
            self.spill = self.tmp / "spill"
            self.spill.mkdir(parents=True)
            # Columns go straight to their final files when there is one shard, else to the spill folder.
            column_dir = self.tmp / "index" if shards == 1 else self.spill
            column_dir.mkdir(exist_ok=True)
            self.blobs = {c: _NpyAppender(column_dir / f"{c}_blob.npy", np.uint8) for c in _COLUMNS}
            self.offsets = {c: _NpyAppender(column_dir / f"{c}_offsets.npy", np.int64) for c in _COLUMNS}
            for c in _COLUMNS:
                self.offsets[c].append(np.zeros(1, np.int64))
            self.blob_sizes = dict.fromkeys(_COLUMNS, 0)
            self.lengths_file = _NpyAppender(self.spill / "doc_lengths.npy", np.int32)
            self.source_file = _NpyAppender(self.spill / "doc_source.npy", np.int32)
            # A missing token gets the next id on first lookup (as in SectionIndex.build, so ids agree).
            self.vocab: dict[str, int] = defaultdict(itertools.count().__next__)
            self.doc_freq = np.zeros(1024, dtype=np.int64)
            self.sources = _SourceTable(self.spill / "sources.sqlite")
            self.runs: list[_Run] = []
            self.n_docs = 0
            # Optional per-section integer columns (e.g. a skill's section range, a vetting flag), saved
            # sliced per shard as `<name>.npy` and listed in the meta's "doc_columns".
            self.flagger = flagger
            columns = dict(doc_columns or {})
            if flagger is not None:
                columns.setdefault(FLAGS_COLUMN, np.uint8)
            self.doc_columns = {name: _NpyAppender(self.spill / f"col_{name}.npy", dtype) for name, dtype in columns.items()}
            self.tfidf = tfidf
            self._batch: dict[str, Any] = self._empty_batch()
            self._finished = False
            # The skill-level index: one document per skill (a run of consecutive sections with the same
            # skill id), written beside the section index by its own writer with the same streaming merge.
            self.skill_level: _SkillLevel | None = None
            if skill_level:
                skill_dir = (self.tmp / "index" if shards == 1 else self.tmp) / SKILL_DIR
                self.skill_level = _SkillLevel(IndexWriter(
                    skill_dir, k1=skill_k1, b=skill_b, idf="lucene", dtype=dtype, shards=shards,
                    batch_sections=SKILL_BATCH, block_postings=block_postings, skill_level=False, tfidf=True,
                    doc_columns={"section_start": np.int64, "section_count": np.int32}))
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise

    @staticmethod
    def _empty_batch() -> dict[str, Any]:
        return {"ids": [], "lengths": [], "sources": [], "columns": {}, **{c: [] for c in _COLUMNS}}

    # ------------------------------------------------------------------------------------------ input
    def add(self, section: Section, **doc_values: int) -> None:
        """Add one section; `doc_values` gives its value of each of `doc_columns`."""
        # Heading and text are tokenized apart (the same tokens as index_text's, which joins them with
        # a newline) so the skill level can reuse the text's tokens.
        text_tokens = tokenize(section.text)
        if self.flagger is not None:
            doc_values[FLAGS_COLUMN] = self.flagger(index_text(section))
        self.add_tokens(tokenize(section.heading_path) + text_tokens, section, **doc_values)
        if self.skill_level is not None:
            self.skill_level.feed(section, text_tokens, self.n_docs - 1)

    def add_tokens(self, tokens: list[str], section: Section, **doc_values: int) -> None:
        """Add one document whose tokens are already known (the columns come from `section`)."""
        batch = self._batch
        if set(doc_values) != set(self.doc_columns):
            raise ValueError(f"need a value for each of {sorted(self.doc_columns)}, got {sorted(doc_values)}")
        for name, value in doc_values.items():
            batch["columns"].setdefault(name, []).append(value)
        batch["ids"].extend(map(self.vocab.__getitem__, tokens))
        batch["lengths"].append(len(tokens))
        batch["sources"].append(self.sources.id_of(
            (section.skill_id, section.skill_name, section.repo, section.path, section.commit, section.license)))
        batch["text"].append(section.text)
        batch["heading"].append(section.heading_path)
        batch["id"].append(section.id)
        self.n_docs += 1
        if len(batch["lengths"]) >= self.batch_sections:
            self._flush()

    def add_all(self, sections: Iterable[Section]) -> "IndexWriter":
        for section in sections:
            self.add(section)
        return self

    def _flush(self) -> None:
        batch = self._batch
        n = len(batch["lengths"])
        if n == 0:
            return
        first = self.n_docs - n
        for column in _COLUMNS:
            encoded = [value.encode("utf-8") for value in batch[column]]
            sizes = np.fromiter(map(len, encoded), dtype=np.int64, count=n)
            self.blobs[column].append(b"".join(encoded))
            self.offsets[column].append(self.blob_sizes[column] + np.cumsum(sizes))
            self.blob_sizes[column] += int(sizes.sum())
        self.lengths_file.append(np.asarray(batch["lengths"], dtype=np.int32))
        self.source_file.append(np.asarray(batch["sources"], dtype=np.int32))
        for name, appender in self.doc_columns.items():
            appender.append(np.asarray(batch["columns"][name], dtype=appender.dtype))
        terms = np.asarray(batch["ids"], dtype=np.int64)
        docs = np.repeat(np.arange(first, self.n_docs, dtype=np.int64), batch["lengths"])
        keys, counts = np.unique((terms << 32) | docs, return_counts=True)  # term-major, then section
        run_terms = (keys >> 32).astype(np.int32)
        if len(self.vocab) > len(self.doc_freq):
            self.doc_freq = np.concatenate([self.doc_freq, np.zeros(2 * len(self.vocab) - len(self.doc_freq), np.int64)])
        self.doc_freq[: len(self.vocab)] += np.bincount(run_terms, minlength=len(self.vocab))
        run = _Run(self.spill, len(self.runs), first, self.n_docs, len(keys))
        run_terms.tofile(run.path("terms"))
        (keys & 0xFFFFFFFF).astype(np.int32).tofile(run.path("docs"))
        np.minimum(counts, 65535).astype(np.uint16).tofile(run.path("tf"))
        self.runs.append(run)
        self._batch = self._empty_batch()
        if self.progress is not None:
            self.progress(self.n_docs, self.total)

    # ------------------------------------------------------------------------------------------ output
    def finish(self) -> Path:
        """Merge the runs into the index files and move them into place; returns the directory."""
        if self._finished:
            raise RuntimeError("finish() was already called")
        self._finished = True
        self._flush()
        for appender in self._appenders():
            appender.close()
        n_docs, n_terms = self.n_docs, len(self.vocab)
        vocab_text = "\n".join(self.vocab)
        # The merges need term ids only: the dict (~140 bytes a term; a million-skill corpus has a million terms
        # and more) goes before them, as the skill level's own does in its finish() below.
        self.vocab = {}
        skill_meta = None
        if self.skill_level is not None:
            skill_meta = self.skill_level.finish()
        doc_freq = self.doc_freq[:n_terms]
        doc_lengths = np.load(self.spill / "doc_lengths.npy")
        doc_source = np.load(self.spill / "doc_source.npy")
        avgdl = float(doc_lengths.mean()) if n_docs else 0.0
        idf = idf_values(doc_freq, n_docs, self.params["idf"], self.params["epsilon"])
        tfidf = self._tfidf_statistics(doc_freq, n_docs) if self.tfidf else None
        columns = {name: np.load(self.spill / f"col_{name}.npy") for name in self.doc_columns}
        bounds = np.linspace(0, n_docs, self.shards + 1).round().astype(np.int64)
        folders = [self.tmp / "index"] if self.shards == 1 else [self.tmp / f"shard-{i:03d}" for i in range(self.shards)]
        term_max = np.zeros(n_terms, dtype=np.float64)
        metas = []
        for number, folder in enumerate(folders):
            lo, hi = int(bounds[number]), int(bounds[number + 1])
            folder.mkdir(exist_ok=True)
            if self.shards > 1:
                self._copy_columns(folder, lo, hi)
            shard_max, postings = self._merge(folder, lo, hi, doc_lengths, idf, avgdl, n_terms, tfidf)
            for name, values in columns.items():
                np.save(folder / f"{name}.npy", values[lo:hi])
            if tfidf is not None:
                np.save(folder / "tfidf_idf.npy", tfidf[0])
            np.maximum(term_max, shard_max, out=term_max)
            used, local_source = np.unique(doc_source[lo:hi], return_inverse=True)
            np.save(folder / "doc_lengths.npy", doc_lengths[lo:hi])
            np.save(folder / "doc_source.npy", local_source.astype(np.int32).reshape(-1))
            del local_source
            self.sources.write_json(folder / "sources.json", used)
            (folder / "vocab.txt").write_text(vocab_text, encoding="utf-8")
            meta = {"format_version": FORMAT_VERSION, "tokenizer": TOKENIZER_VERSION,
                    "k1": self.params["k1"], "b": self.params["b"], "idf": self.params["idf"],
                    "epsilon": self.params["epsilon"], "dtype": self.params["dtype"].name,
                    "sections": hi - lo, "terms": n_terms, "postings": postings, "avgdl": avgdl}
            if columns:
                meta["doc_columns"] = sorted(columns)
            if tfidf is not None:
                meta["tfidf"] = TFIDF_SCHEME
            if skill_meta is not None:
                meta["skill_index"] = {**skill_meta, "dir": SKILL_DIR if self.shards == 1 else f"../{SKILL_DIR}"}
            if self.shards > 1:
                meta["shard"] = {"number": number, "of": self.shards, "doc_offset": lo, "sections_total": n_docs}
            metas.append(meta)
        self.sources.close()
        seconds = round(time.perf_counter() - self.started, 3)
        for folder, meta in zip(folders, metas):
            # Every shard bounds a term by its largest weight anywhere, so all shards order and prune
            # query terms alike (and a shard's scores are bit-identical to the single index's).
            np.save(folder / "term_max.npy", term_max)
            meta["build_seconds"] = seconds
            record_file_sizes(folder, meta)
            (folder / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        shutil.rmtree(self.spill)
        if self.shards == 1:
            return self._move_into_place(self.tmp / "index")
        manifest = {"format_version": FORMAT_VERSION, "sections": n_docs, "terms": n_terms,
                    "shards": [{"dir": f.name, "doc_offset": int(bounds[i]), "sections": int(bounds[i + 1] - bounds[i])}
                               for i, f in enumerate(folders)]}
        if skill_meta is not None:
            manifest["skill_index"] = {**skill_meta, "dir": SKILL_DIR}
        (self.tmp / SHARDS_FILE).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        return self._move_into_place(self.tmp)

    def abort(self) -> None:
        """Drop everything written so far (nothing at `directory` changes). Never raises for a failing close: the
        files are being thrown away, and on a full disk closing one flushes its buffer and fails again; the
        temporary folder must go regardless, or the disk stays full."""
        self._finished = True
        try:
            if self.skill_level is not None:
                self.skill_level.writer.abort()
            for appender in self._appenders():
                with contextlib.suppress(OSError):
                    appender.fh.close()  # a no-op when already closed
            with contextlib.suppress(sqlite3.Error):
                self.sources.close()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _appenders(self) -> list[_NpyAppender]:
        return [*self.blobs.values(), *self.offsets.values(), self.lengths_file, self.source_file,
                *self.doc_columns.values()]

    def _tfidf_statistics(self, doc_freq: np.ndarray, n_docs: int) -> tuple[np.ndarray, np.ndarray]:
        """(idf per term, L2 norm per document) of the TF-IDF weighting: one pass over the runs."""
        tfidf_idf = tfidf_idf_values(doc_freq, n_docs)
        norm2 = np.zeros(n_docs, dtype=np.float64)
        for run in self.runs:
            terms = _read(run.path("terms"), np.int32, 0, run.length)
            docs = _read(run.path("docs"), np.int32, 0, run.length)
            tf = _read(run.path("tf"), np.uint16, 0, run.length)
            w = (1.0 + np.log(tf.astype(np.float64))) * tfidf_idf[terms]
            norm2[run.first_doc:run.last_doc] += np.bincount(docs - run.first_doc, weights=w * w,
                                                            minlength=run.last_doc - run.first_doc)
        norm = np.sqrt(norm2)
        norm[norm == 0] = 1.0
        return tfidf_idf, norm

    def _move_into_place(self, built: Path) -> Path:
        if built != self.tmp:
            staged = self.tmp.with_name(self.tmp.name + "-done")
            built.rename(staged)
            shutil.rmtree(self.tmp)
            built = staged
        if self.directory.exists():
            old = self.directory.with_name(f".{self.directory.name}.old-{os.getpid()}")
            self.directory.rename(old)
            try:
                built.rename(self.directory)
            except BaseException:
                old.rename(self.directory)  # the old index stays where it was
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            built.rename(self.directory)
        return self.directory

    def _copy_columns(self, folder: Path, lo: int, hi: int) -> None:
        """Sections lo..hi of each text column into the shard (offsets rebased to 0), in pieces."""
        for column in _COLUMNS:
            offsets = _read(self.spill / f"{column}_offsets.npy", np.int64, lo, hi - lo + 1, _HEADER_BYTES)
            np.save(folder / f"{column}_offsets.npy", offsets - offsets[0])
            out = _NpyAppender(folder / f"{column}_blob.npy", np.uint8)
            with open(self.spill / f"{column}_blob.npy", "rb") as src:
                src.seek(_HEADER_BYTES + int(offsets[0]))
                left = int(offsets[-1] - offsets[0])
                while left > 0:
                    piece = src.read(min(left, 1 << 24))
                    out.append(piece)
                    left -= len(piece)
            out.close()

    def _merge(self, folder: Path, lo: int, hi: int, doc_lengths: np.ndarray, idf: np.ndarray, avgdl: float,
               n_terms: int, tfidf: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, int]:
        """Write indptr/postings/weights of sections lo..hi; returns (largest weight per term, postings)."""
        runs = [r for r in self.runs if r.first_doc < hi and r.last_doc > lo]
        whole = all(lo <= r.first_doc and r.last_doc <= hi for r in runs)
        if whole and len(runs) == len(self.runs):
            counts = self.doc_freq[:n_terms].copy()
        else:
            counts = np.zeros(n_terms, dtype=np.int64)
            for run in runs:
                terms = _read(run.path("terms"), np.int32, 0, run.length)
                if not (lo <= run.first_doc and run.last_doc <= hi):
                    docs = _read(run.path("docs"), np.int32, 0, run.length)
                    terms = terms[(docs >= lo) & (docs < hi)]
                counts += np.bincount(terms, minlength=n_terms)
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        np.save(folder / "indptr.npy", indptr)
        postings_out = _NpyAppender(folder / "postings.npy", np.int32)
        weights_out = _NpyAppender(folder / "weights.npy", self.params["dtype"])
        tfidf_out = _NpyAppender(folder / "tfidf_weights.npy", np.float32) if tfidf is not None else None
        term_max = np.zeros(n_terms, dtype=np.float64)
        total = int(indptr[-1])
        run_share = {id(r): (r.last_doc - r.first_doc) / max(hi - lo, 1) for r in runs}
        for run in runs:
            run.cursor = 0
        t0 = 0
        while t0 < n_terms:
            # The next block: as many terms as fit in block_postings (at least one).
            t1 = int(np.searchsorted(indptr, indptr[t0] + self.block_postings, side="right")) - 1
            t1 = min(max(t1, t0 + 1), n_terms)
            block = int(indptr[t1] - indptr[t0])
            parts_terms, parts_docs, parts_tf = [], [], []
            for run in runs:
                terms, docs, tf = run.take_below(t1, int(block * run_share[id(run)] * 1.2) + 16)
                if not (lo <= run.first_doc and run.last_doc <= hi):
                    keep = (docs >= lo) & (docs < hi)
                    terms, docs, tf = terms[keep], docs[keep], tf[keep]
                parts_terms.append(terms)
                parts_docs.append(docs)
                parts_tf.append(tf)
            terms = np.concatenate(parts_terms) if parts_terms else np.zeros(0, np.int32)
            # Runs come in section order, so a stable sort by term keeps each posting list sorted.
            order = np.argsort(terms, kind="stable")
            terms = terms[order]
            docs = np.concatenate(parts_docs)[order] if parts_docs else np.zeros(0, np.int32)
            tf = np.concatenate(parts_tf)[order] if parts_tf else np.zeros(0, np.uint16)
            del parts_terms, parts_docs, parts_tf, order
            if len(terms) != block:
                raise AssertionError(f"merge lost postings: block {t0}..{t1} has {len(terms)} of {block}")
            postings_out.append((docs - lo).astype(np.int32))
            weights = np.empty(len(terms), dtype=self.params["dtype"])
            for a in range(0, len(terms), WEIGHT_CHUNK):
                z = a + WEIGHT_CHUNK
                weights[a:z] = bm25_weights(idf[terms[a:z]], tf[a:z], doc_lengths[docs[a:z]], self.params["k1"],
                                            self.params["b"], avgdl, self.params["dtype"])
                if tfidf_out is not None and tfidf is not None:  # the one exists with the other
                    tfidf_out.append((1.0 + np.log(tf[a:z].astype(np.float64))) * tfidf[0][terms[a:z]]
                                     / tfidf[1][docs[a:z]])
            weights_out.append(weights)
            if len(terms):
                starts = np.flatnonzero(np.r_[True, terms[1:] != terms[:-1]])
                term_max[terms[starts]] = np.maximum.reduceat(weights, starts)
            t0 = t1
        postings_out.close()
        weights_out.close()
        if tfidf_out is not None:
            tfidf_out.close()
        if postings_out.length != total:
            raise AssertionError(f"merge wrote {postings_out.length} postings, expected {total}")
        return term_max, total


def tfidf_idf_values(doc_freq: np.ndarray, n_docs: int) -> np.ndarray:
    """Smoothed idf of the TF-IDF weighting (as scikit-learn's and corpus_tools.retrieval.fields')."""
    return np.log((1.0 + n_docs) / (1.0 + doc_freq.astype(np.float64))) + 1.0


class _SkillLevel:
    """Turns the section stream into skill documents for the skill-level writer. A skill document is
    a run of consecutive sections with the same skill id: its name, then the text tokens of the
    sections from the skill's own file (the first section's path; reference files stay section-level
    only), with the first section's text (the description and what precedes the first heading) as its
    description column and the run's range of section numbers as `section_start` / `section_count`."""

    def __init__(self, writer: IndexWriter) -> None:
        self.writer = writer
        self.section: Section | None = None
        self.tokens: list[str] = []
        self.start = self.count = 0

    def feed(self, section: Section, text_tokens: list[str], doc: int) -> None:
        if self.section is None or section.skill_id != self.section.skill_id:
            self.emit()
            self.section, self.tokens, self.start, self.count = section, [], doc, 0
        self.count += 1
        if section.path == self.section.path:
            self.tokens.extend(text_tokens)

    def emit(self) -> None:
        first = self.section
        if first is None:
            return
        record = Section(id=first.skill_id, skill_id=first.skill_id, skill_name=first.skill_name,
                         heading_path=first.skill_name, text=first.text[:SKILL_DESCRIPTION_CHARS], repo=first.repo,
                         path=first.path, commit=first.commit, license=first.license)
        self.writer.add_tokens(tokenize(first.skill_name) + self.tokens, record, section_start=self.start,
                               section_count=self.count)
        self.section, self.tokens = None, []

    def finish(self) -> dict[str, Any]:
        self.emit()
        n = self.writer.n_docs
        self.writer.finish()
        return {"documents": n, "k1": self.writer.params["k1"], "b": self.writer.params["b"],
                "fields": "name + the skill file's section texts (the description is its first section)",
                "tfidf": TFIDF_SCHEME}


SKILL_DESCRIPTION_CHARS = 1000


def write_index(sections: Iterable[Section], directory: str | Path, **options: Any) -> Path:
    """Stream `sections` into an index at `directory` (options: see `IndexWriter`); returns the path.
    Nothing at `directory` changes if building fails."""
    writer = IndexWriter(directory, **options)
    try:
        writer.add_all(sections)
        return writer.finish()
    except BaseException:
        writer.abort()
        raise


def build_streaming(sections: Iterable[Section], directory: str | Path, **options: Any) -> SectionIndex:
    """`write_index`, then the index loaded memory-mapped."""
    return SectionIndex.load(write_index(sections, directory, **options))
