"""Field-aware skill retrieval: per-field sparse and dense scores fused into one ranking.

For a query and a skill there are six field scores (the field-aware retrieval paper's z vector):
TF-IDF cosine against name, description and body, and dense cosine against the same three fields.
Each score column is min-max normalised over the pool per query (sparse and dense cosines live on
different scales), then fused:

* uniform — the mean of the normalised scores (training-free);
* MLP     — a small network f(z) -> relevance (6 -> 16 -> 1, ReLU), trained listwise (softmax over
  a candidate list, cross-entropy on the gold skill) on the dev split, numpy only; it reranks the
  uniform fusion's top RERANK_DEPTH skills (the kind of list it was trained on).

The flat ("concat") variants do the same with the two scores against the joined document. Methods
by name (`METHODS`): bm25, bm25f, tfidf, tfidf-fields, dense, dense-fields, hybrid, hybrid-fields,
mlp-concat, mlp.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from corpus_tools.retrieval.dense import EmbeddingCache, Encoder, dense_field_texts, embed
from corpus_tools.retrieval.fields import FIELDS, FieldSparseIndex

SPARSE_FIELD_FEATURES = tuple(f"tfidf:{f}" for f in FIELDS)
DENSE_FIELD_FEATURES = tuple(f"dense:{f}" for f in FIELDS)
FIELD_FEATURES = SPARSE_FIELD_FEATURES + DENSE_FIELD_FEATURES
CONCAT_FEATURES = ("tfidf:concat", "dense:concat")
RERANK_DEPTH = 50  # the learned fusion reranks the uniform fusion's top 50

# method -> (features, fusion); fusion "raw" means a single unnormalised score
METHODS: dict[str, tuple[tuple[str, ...], str]] = {
    "bm25": (("bm25:concat",), "raw"),
    "bm25f": (("bm25f",), "raw"),
    "tfidf": (("tfidf:concat",), "raw"),
    "tfidf-fields": (SPARSE_FIELD_FEATURES, "uniform"),
    "dense": (("dense:concat",), "raw"),
    "dense-fields": (DENSE_FIELD_FEATURES, "uniform"),
    "hybrid": (CONCAT_FEATURES, "uniform"),
    "hybrid-fields": (FIELD_FEATURES, "uniform"),
    "mlp-concat": (CONCAT_FEATURES, "mlp"),
    "mlp": (FIELD_FEATURES, "mlp"),
}


def needs_dense(method: str) -> bool:
    return any(f.startswith("dense:") for f in METHODS[method][0])


def minmax_rows(scores: np.ndarray) -> np.ndarray:
    """Scale each row to [0, 1] (a constant row becomes 0)."""
    lo = scores.min(axis=1, keepdims=True)
    span = scores.max(axis=1, keepdims=True) - lo
    span[span == 0] = 1.0
    return (scores - lo) / span


class FieldAwareRetriever:
    """Scores queries against a skill pool with any method of `METHODS`.

    `skills`: objects with id, name, description, body. Dense features need `encoder` (the skill
    field embeddings go through `cache` when given). Query vectors may be passed in precomputed."""

    def __init__(self, skills: Sequence[Any], *, encoder: Encoder | None = None,
                 cache: EmbeddingCache | None = None, sparse: FieldSparseIndex | None = None,
                 mlps: dict[str, "FusionMLP"] | None = None) -> None:
        self.skills = list(skills)
        self.ids = [str(s.id) for s in self.skills]
        self.encoder = encoder
        self.cache = cache
        self.sparse = sparse or FieldSparseIndex.build(self.skills)
        self.mlps: dict[str, FusionMLP] = dict(mlps or {})
        self.rerank_depth = RERANK_DEPTH
        self._dense: dict[str, np.ndarray] = {}

    # ---- raw feature columns
    def dense_matrix(self, field: str) -> np.ndarray:
        if self.encoder is None:
            raise RuntimeError("dense scores need an encoder (corpus_tools.retrieval.dense.make_encoder())")
        if field not in self._dense:
            self._dense[field] = embed(self.encoder, dense_field_texts(self.skills, field), self.cache)
        return self._dense[field]

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        if self.encoder is None:
            raise RuntimeError("dense scores need an encoder")
        return np.asarray(self.encoder.encode(list(queries)), dtype=np.float32)

    def feature(self, name: str, queries: Sequence[str], query_vectors: np.ndarray | None = None) -> np.ndarray:
        kind, _, field = name.partition(":")
        if kind == "tfidf":
            return self.sparse.tfidf_scores(queries, field)
        if kind == "bm25":
            return self.sparse.bm25_scores(queries, field)
        if kind == "bm25f":
            return self.sparse.bm25f_scores(queries)
        if kind == "dense":
            vectors = query_vectors if query_vectors is not None else self.encode_queries(queries)
            return np.asarray(vectors @ np.asarray(self.dense_matrix(field)).T, dtype=np.float32)
        raise ValueError(f"unknown feature {name!r}")

    def features(self, names: Sequence[str], queries: Sequence[str],
                 query_vectors: np.ndarray | None = None) -> np.ndarray:
        """(n_queries, n_skills, n_features), each column min-max normalised per query."""
        if any(n.startswith("dense:") for n in names) and query_vectors is None:
            query_vectors = self.encode_queries(queries)
        cols = [minmax_rows(self.feature(n, queries, query_vectors)) for n in names]
        return np.stack(cols, axis=2)

    # ---- fused scores
    def scores(self, method: str, queries: Sequence[str], query_vectors: np.ndarray | None = None) -> np.ndarray:
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
        names, fusion = METHODS[method]
        if fusion == "raw":
            return self.feature(names[0], queries, query_vectors)
        mlp = self.mlps.get(method)
        if fusion == "mlp" and mlp is None:
            raise RuntimeError(f"method {method!r} needs a trained fusion model: call train_mlp first")
        feats = self.features(names, queries, query_vectors)
        uniform = feats.mean(axis=2)
        if fusion == "uniform" or mlp is None:  # mlp is set for the "mlp" fusion (checked above)
            return uniform
        # The MLP reranks the uniform fusion's top `rerank_depth` (the lists it was trained on); scoring
        # every skill put never-seen feature combinations on top and broke on the full pool.
        depth = min(self.rerank_depth, uniform.shape[1])
        top = np.argpartition(-uniform, depth - 1, axis=1)[:, :depth]
        out = uniform - 1e6
        rows = np.arange(uniform.shape[0])[:, None]
        out[rows, top] = mlp.score(feats[rows, top])
        return out

    def rank(self, method: str, queries: Sequence[str], k: int = 10, *,
             exclude: Sequence[Sequence[str]] | None = None, query_vectors: np.ndarray | None = None,
             batch_size: int = 256) -> list[list[str]]:
        """Top-k skill ids per query; `exclude[i]` lists ids never returned for query i."""
        position = {sid: i for i, sid in enumerate(self.ids)}
        out: list[list[str]] = []
        for start in range(0, len(queries), batch_size):
            batch = list(queries[start:start + batch_size])
            vectors = None if query_vectors is None else query_vectors[start:start + batch_size]
            scores = self.scores(method, batch, vectors)
            out.extend(self._top_ids(scores, k, exclude, start, position))
        return out

    def _top_ids(self, scores: np.ndarray, k: int, exclude: Sequence[Sequence[str]] | None, offset: int,
                 position: dict[str, int]) -> list[list[str]]:
        scores = np.array(scores, dtype=np.float32, copy=True)
        if exclude is not None:
            for row in range(scores.shape[0]):
                for sid in exclude[offset + row]:
                    if sid in position:
                        scores[row, position[sid]] = -np.inf
        k = min(k, scores.shape[1])
        part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(scores, part, axis=1), axis=1, kind="stable")
        top = np.take_along_axis(part, order, axis=1)
        return [[self.ids[j] for j in row if np.isfinite(scores[i, j])] for i, row in enumerate(top)]

    # ---- learned fusion
    def train_mlp(self, method: str, queries: Sequence[str], golds: Sequence[Sequence[str]], *,
                  query_vectors: np.ndarray | None = None, candidates: int | None = None, random_negatives: int = 20,
                  epochs: int = 60, seed: int = 0, batch_size: int = 256) -> "FusionMLP":
        """Fit the fusion MLP of `method` ("mlp" or "mlp-concat") on labelled queries (the dev split).
        Each training list: the top `candidates` (default: the rerank depth) skills by the uniform
        fusion, the gold skills and `random_negatives` random others."""
        names, fusion = METHODS[method]
        if fusion != "mlp":
            raise ValueError(f"{method!r} has no learned fusion")
        rng = np.random.default_rng(seed)
        candidates = min(candidates or self.rerank_depth, len(self.ids))
        random_negatives = min(random_negatives, len(self.ids))
        position = {sid: i for i, sid in enumerate(self.ids)}
        lists: list[np.ndarray] = []
        labels: list[np.ndarray] = []
        for start in range(0, len(queries), batch_size):
            batch = list(queries[start:start + batch_size])
            vectors = None if query_vectors is None else query_vectors[start:start + batch_size]
            feats = self.features(names, batch, vectors)
            uniform = feats.mean(axis=2)
            top = np.argpartition(-uniform, candidates - 1, axis=1)[:, :candidates]
            for row in range(len(batch)):
                gold = [position[g] for g in golds[start + row] if g in position]
                if not gold:
                    continue
                pool = set(top[row].tolist()) | set(gold)
                pool |= set(rng.choice(len(self.ids), size=random_negatives, replace=False).tolist())
                idx = np.fromiter(pool, dtype=np.int64)
                lists.append(feats[row, idx])
                labels.append(np.isin(idx, gold))
        mlp = FusionMLP(n_features=len(names), seed=seed)
        mlp.fit(lists, labels, epochs=epochs)
        self.mlps[method] = mlp
        return mlp


class FusionMLP:
    """f(z) = w2 · relu(W1 z + b1) + b2, trained with a listwise softmax loss (Adam)."""

    def __init__(self, n_features: int, hidden: int = 16, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.params = {
            "W1": rng.normal(0, np.sqrt(2.0 / n_features), (n_features, hidden)).astype(np.float32),
            "b1": np.zeros(hidden, np.float32),
            "w2": rng.normal(0, np.sqrt(1.0 / hidden), hidden).astype(np.float32),
            "b2": np.zeros(1, np.float32),
        }
        self.losses: list[float] = []

    @property
    def n_features(self) -> int:
        return int(self.params["W1"].shape[0])

    def score(self, feats: np.ndarray) -> np.ndarray:
        p = self.params
        hidden = np.maximum(feats @ p["W1"] + p["b1"], 0.0)
        return (hidden @ p["w2"] + p["b2"][0]).astype(np.float32)

    def fit(self, lists: Sequence[np.ndarray], labels: Sequence[np.ndarray], *, epochs: int = 60,
            lr: float = 0.01, seed: int = 0) -> "FusionMLP":
        if not lists:
            raise ValueError("no training lists (do the training queries have gold skills in the pool?)")
        rng = np.random.default_rng(seed)
        m = {k: np.zeros_like(v) for k, v in self.params.items()}
        v = {k: np.zeros_like(val) for k, val in self.params.items()}
        step = 0
        for _ in range(epochs):
            total = 0.0
            for i in rng.permutation(len(lists)):
                x, y = lists[i], labels[i]
                grads, loss = self._grad(x, y)
                total += loss
                step += 1
                for key, g in grads.items():  # Adam
                    m[key] = 0.9 * m[key] + 0.1 * g
                    v[key] = 0.999 * v[key] + 0.001 * g * g
                    m_hat = m[key] / (1 - 0.9**step)
                    v_hat = v[key] / (1 - 0.999**step)
                    self.params[key] -= (lr * m_hat / (np.sqrt(v_hat) + 1e-8)).astype(np.float32)
            self.losses.append(total / len(lists))
        return self

    def _grad(self, x: np.ndarray, y: np.ndarray) -> tuple[dict[str, np.ndarray], float]:
        p = self.params
        pre = x @ p["W1"] + p["b1"]
        hidden = np.maximum(pre, 0.0)
        s = hidden @ p["w2"] + p["b2"][0]
        s = s - s.max()
        e = np.exp(s)
        prob = e / e.sum()
        gold_mass = prob[y].sum()
        loss = -float(np.log(max(gold_mass, 1e-12)))
        # d(-log sum_gold p)/ds = p - p*1[gold]/gold_mass
        ds = prob - np.where(y, prob / max(gold_mass, 1e-12), 0.0)
        dw2 = hidden.T @ ds
        db2 = np.array([ds.sum()], np.float32)
        dpre = np.outer(ds, p["w2"]) * (pre > 0)
        dW1 = x.T @ dpre
        db1 = dpre.sum(axis=0)
        return {"W1": dW1, "b1": db1, "w2": dw2, "b2": db2}, loss

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        np.savez(path, allow_pickle=False, **self.params)
        return path if path.suffix == ".npz" else path.with_suffix(path.suffix + ".npz")

    @classmethod
    def load(cls, path: str | Path) -> "FusionMLP":
        data = np.load(path)
        mlp = cls(n_features=int(data["W1"].shape[0]), hidden=int(data["W1"].shape[1]))
        mlp.params = {k: np.asarray(data[k], np.float32) for k in ("W1", "b1", "w2", "b2")}
        return mlp
