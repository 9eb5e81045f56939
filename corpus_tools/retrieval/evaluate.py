"""Run retrieval methods over a RetrievalDataset and collect metrics and latency.

Latency is measured two ways: `ms/query` is one query at a time (encoding the query included) over
the first `latency_sample` queries — what a caller waiting for one answer sees; `batch ms/q` is the
wall time of scoring the whole split in batches divided by the number of queries.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from corpus_tools.retrieval.dataset import RetrievalDataset, RetrievalQuery
from corpus_tools.retrieval.fusion import METHODS, FieldAwareRetriever, needs_dense
from corpus_tools.retrieval.metrics import DEFAULT_KS, mean_metrics


@dataclass
class MethodResult:
    method: str
    metrics: dict[str, float]
    queries: int
    ms_per_query: float
    batch_ms_per_query: float
    extra: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, float]:
        return {**self.metrics, "ms/query": self.ms_per_query, "batch ms/q": self.batch_ms_per_query}

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "metrics": self.metrics, "queries": self.queries,
                "ms_per_query": self.ms_per_query, "batch_ms_per_query": self.batch_ms_per_query, **self.extra}


def single_query_latency(rank_one: Callable[[str], Any], texts: Sequence[str]) -> float:
    """Mean milliseconds of `rank_one(text)` over `texts` (after one warm-up call)."""
    if not texts:
        return float("nan")
    rank_one(texts[0])
    start = time.perf_counter()
    for text in texts:
        rank_one(text)
    return 1000.0 * (time.perf_counter() - start) / len(texts)


def evaluate_method(retriever: FieldAwareRetriever, method: str, queries: Sequence[RetrievalQuery], *,
                    query_vectors: np.ndarray | None = None, k: int = 10, ks: Sequence[int] = DEFAULT_KS,
                    latency_sample: int = 50) -> MethodResult:
    """Metrics of `method` on `queries` (a trained MLP must already be in retriever.mlps)."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    texts = [q.text for q in queries]
    vectors = query_vectors if needs_dense(method) else None
    start = time.perf_counter()
    rankings = retriever.rank(method, texts, k=max(k, *ks), exclude=[q.exclude for q in queries],
                              query_vectors=vectors)
    batch_ms = 1000.0 * (time.perf_counter() - start) / max(1, len(texts))
    metrics = mean_metrics(rankings, [q.gold for q in queries], ks)
    sample = texts[:latency_sample]
    latency = single_query_latency(lambda t: retriever.rank(method, [t], k=k), sample)
    return MethodResult(method, metrics, len(queries), latency, batch_ms)


def train_fusion(retriever: FieldAwareRetriever, method: str, dataset: RetrievalDataset, *,
                 split: str = "dev", query_vectors: np.ndarray | None = None, limit: int | None = None,
                 seed: int = 0) -> dict[str, Any]:
    """Train the MLP of `method` on a split; returns a summary (queries, seconds, final loss)."""
    queries = dataset.split(split)[:limit] if limit else dataset.split(split)
    if not queries:
        raise ValueError(f"split {split!r} has no queries to train on")
    vectors = query_vectors[: len(queries)] if query_vectors is not None and needs_dense(method) else None
    start = time.perf_counter()
    mlp = retriever.train_mlp(method, [q.text for q in queries], [q.gold for q in queries],
                              query_vectors=vectors, seed=seed)
    return {"train_split": split, "train_queries": len(queries), "train_seconds": time.perf_counter() - start,
            "final_loss": mlp.losses[-1], "first_loss": mlp.losses[0]}
