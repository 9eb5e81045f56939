"""Per-field sparse scores of a query against every skill of a pool.

A skill has three fields — name, description, body — and "concat", the three joined (the flat
document most retrievers use). For each field this module gives:

* TF-IDF cosine: sublinear tf (1 + ln tf), smoothed idf ln((1 + N) / (1 + df)) + 1 fitted on that
  field alone, rows L2-normalised, so a score is a cosine in [0, 1].
* BM25 (Okapi, idf ln(1 + (N - df + 0.5) / (df + 0.5))) with k1 = 2.0, b = 1.0 by default: whole skills
  vary widely in length and a long skill matches more of a long query's words, so full length
  normalisation ranks better (benchmarks/bench_retrieval_bm25_params.py: R@5 84.9 -> 85.8 on the
  reference-file queries, 85.4 -> 88.2 on 300-word queries; counting query words once or 1 + ln did
  not help).
* BM25F (the lexical field baseline): per field length-normalised term frequencies, summed with field
  weights (uniform by default) before one saturation (k1 = 1.5, b = 0.75, the usual values), idf from
  document frequency over the whole skill.

Everything is scipy.sparse: the saturation depends on the document side only, so BM25 is one sparse
matrix product per batch of queries. Scores come back as dense float32 arrays (queries x skills).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

FIELDS: tuple[str, ...] = ("name", "description", "body")
DEFAULT_K1, DEFAULT_B = 2.0, 1.0  # BM25 over whole skills (see the module docstring)
BM25F_K1, BM25F_B = 1.5, 0.75
ALL_FIELDS: tuple[str, ...] = (*FIELDS, "concat")

_TOKEN = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
STOPWORDS = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the this to was were will "
    "with you your can if not do does use used using when which into than then there these those we "
    "our they them their i me my he she his her what who how all any each more most other some such "
    "no nor only own same so too very s t just should now also may must".split()
)


def tokenize(text: str) -> list[str]:
    """Lowercase alphanumeric tokens; camelCase split; stopwords and 1-character tokens dropped."""
    text = _CAMEL.sub(" ", text or "").lower()
    return [t for t in _TOKEN.findall(text) if len(t) > 1 and t not in STOPWORDS]


def field_text(skill: Any, field: str, max_body_chars: int | None = None) -> str:
    """The text of `field` of a skill-like object (attributes name, description, body)."""
    if field == "concat":
        parts = [field_text(skill, f, max_body_chars) for f in FIELDS]
        return "\n".join(parts)
    value = getattr(skill, field, None)
    if value is None and isinstance(skill, dict):
        value = skill.get(field)
    text = str(value or "")
    if field == "body" and max_body_chars is not None:
        text = text[:max_body_chars]
    return text


@dataclass
class _FieldMatrix:
    counts: sp.csr_matrix  # docs x vocab raw term counts
    lengths: np.ndarray  # tokens per document


class FieldSparseIndex:
    """Sparse per-field statistics of a skill pool (see the module doc for the scores)."""

    def __init__(self, ids: list[str], vocab: dict[str, int], fields: dict[str, _FieldMatrix],
                 k1: float = DEFAULT_K1, b: float = DEFAULT_B) -> None:
        self.ids = ids
        self.vocab = vocab
        self.fields = fields
        self.k1 = k1
        self.b = b
        self._tfidf: dict[str, tuple[sp.csr_matrix, np.ndarray]] = {}  # (terms x docs, idf)
        self._bm25: dict[str, tuple[sp.csr_matrix, np.ndarray]] = {}
        self._bm25f: dict[tuple[float, ...], tuple[sp.csr_matrix, np.ndarray]] = {}

    @classmethod
    def build(cls, skills: Sequence[Any], *, max_body_chars: int | None = None,
              k1: float = DEFAULT_K1, b: float = DEFAULT_B) -> "FieldSparseIndex":
        """Index `skills` (objects or dicts with id, name, description, body)."""
        ids = [str(getattr(s, "id", None) or (s.get("id") if isinstance(s, dict) else "")) for s in skills]
        vocab: dict[str, int] = {}
        # (rows, cols, counts, lengths) per field: the matrices are built once the shared vocabulary is complete
        per_field: dict[str, tuple[list[int], list[int], list[int], np.ndarray]] = {}
        for field in FIELDS:
            rows: list[int] = []
            cols: list[int] = []
            vals: list[int] = []
            lengths: list[int] = []
            for i, skill in enumerate(skills):
                tokens = tokenize(field_text(skill, field, max_body_chars))
                lengths.append(len(tokens))
                counts: dict[int, int] = {}
                for tok in tokens:
                    j = vocab.setdefault(tok, len(vocab))
                    counts[j] = counts.get(j, 0) + 1
                rows.extend([i] * len(counts))
                cols.extend(counts.keys())
                vals.extend(counts.values())
            per_field[field] = (rows, cols, vals, np.asarray(lengths, dtype=np.float32))
        shape = (len(skills), len(vocab))
        fields: dict[str, _FieldMatrix] = {}
        for field, (rows, cols, vals, field_lengths) in per_field.items():
            matrix = sp.csr_matrix((np.asarray(vals, np.float32), (rows, cols)), shape=shape)
            fields[field] = _FieldMatrix(matrix, field_lengths)
        concat = sum((fields[f].counts for f in FIELDS), sp.csr_matrix(shape, dtype=np.float32)).tocsr()
        fields["concat"] = _FieldMatrix(concat, sum((fields[f].lengths for f in FIELDS), np.zeros(len(skills), np.float32)))
        return cls(ids, vocab, fields, k1=k1, b=b)

    def __len__(self) -> int:
        return len(self.ids)

    # ---- queries
    def query_counts(self, queries: Sequence[str]) -> sp.csr_matrix:
        rows: list[int] = []
        cols: list[int] = []
        vals: list[int] = []
        for i, q in enumerate(queries):
            counts: dict[int, int] = {}
            for tok in tokenize(q):
                j = self.vocab.get(tok)
                if j is not None:
                    counts[j] = counts.get(j, 0) + 1
            rows.extend([i] * len(counts))
            cols.extend(counts.keys())
            vals.extend(counts.values())
        return sp.csr_matrix((np.asarray(vals, np.float32), (rows, cols)), shape=(len(queries), len(self.vocab)))

    @staticmethod
    def _df(counts: sp.csr_matrix) -> np.ndarray:
        return np.bincount(counts.indices, minlength=counts.shape[1]).astype(np.float32)

    # ---- TF-IDF cosine
    def _tfidf_field(self, field: str) -> tuple[sp.csr_matrix, np.ndarray]:
        if field not in self._tfidf:
            counts = self.fields[field].counts
            n = counts.shape[0]
            idf = (np.log((1.0 + n) / (1.0 + self._df(counts))) + 1.0).astype(np.float32)
            matrix = counts.copy()
            matrix.data = 1.0 + np.log(matrix.data)
            matrix = _l2_rows(matrix @ sp.diags(idf))
            self._tfidf[field] = (matrix.T.tocsr(), idf)  # terms x docs: a query is one csr product
        return self._tfidf[field]

    def tfidf_scores(self, queries: Sequence[str], field: str = "concat") -> np.ndarray:
        _check_field(field)
        matrix, idf = self._tfidf_field(field)
        q = self.query_counts(queries)
        q.data = 1.0 + np.log(q.data)
        q = _l2_rows(q @ sp.diags(idf))
        return np.asarray((q @ matrix).todense(), dtype=np.float32)

    # ---- BM25 on one field
    def _idf_bm25(self, counts: sp.csr_matrix) -> np.ndarray:
        n = counts.shape[0]
        df = self._df(counts)
        return np.log1p((n - df + 0.5) / (df + 0.5)).astype(np.float32)

    @staticmethod
    def _saturate(weighted_tf: sp.csr_matrix, k1: float) -> sp.csr_matrix:
        out = weighted_tf.copy()
        out.data = out.data * (k1 + 1.0) / (out.data + k1)
        return out

    def _length_normalised(self, field: str, b: float) -> sp.csr_matrix:
        fm = self.fields[field]
        avg = float(fm.lengths.mean()) or 1.0
        norm = (1.0 - b) + b * fm.lengths / avg
        return (sp.diags(1.0 / np.maximum(norm, 1e-6)) @ fm.counts).tocsr()

    def bm25_scores(self, queries: Sequence[str], field: str = "concat") -> np.ndarray:
        _check_field(field)
        if field not in self._bm25:
            saturated = self._saturate(self._length_normalised(field, self.b), self.k1)
            self._bm25[field] = (saturated.T.tocsr(), self._idf_bm25(self.fields[field].counts))
        saturated_t, idf = self._bm25[field]
        q = self.query_counts(queries) @ sp.diags(idf)
        return np.asarray((q @ saturated_t).todense(), dtype=np.float32)

    # ---- BM25F
    def bm25f_scores(self, queries: Sequence[str], weights: Sequence[float] = (1.0, 1.0, 1.0)) -> np.ndarray:
        key = tuple(float(w) for w in weights)
        if len(key) != len(FIELDS):
            raise ValueError(f"BM25F needs {len(FIELDS)} field weights, got {len(key)}")
        if key not in self._bm25f:
            combined = sum(w * self._length_normalised(f, BM25F_B) for w, f in zip(key, FIELDS))
            saturated = self._saturate(sp.csr_matrix(combined), BM25F_K1)
            self._bm25f[key] = (saturated.T.tocsr(), self._idf_bm25(self.fields["concat"].counts))
        saturated_t, idf = self._bm25f[key]
        q = self.query_counts(queries) @ sp.diags(idf)
        return np.asarray((q @ saturated_t).todense(), dtype=np.float32)


def _check_field(field: str) -> None:
    if field not in ALL_FIELDS:
        raise ValueError(f"unknown field {field!r}; choose one of {', '.join(ALL_FIELDS)}")


def _l2_rows(matrix: sp.spmatrix) -> sp.csr_matrix:
    matrix = sp.csr_matrix(matrix, dtype=np.float32)
    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return (sp.diags(1.0 / norms) @ matrix).tocsr()
