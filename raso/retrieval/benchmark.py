"""The skill-retrieval benchmark runner: evaluate retrieval methods (sparse, dense, fused, SkillDreamer) on a
RetrievalDataset split and return metric rows with latency. The `raso retrieval eval` command and
experiments/retrieval_benchmark.py are thin callers of `run_eval`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

DREAMER = "dreamer"


def make_encoder_from_spec(spec: str) -> Any:
    if spec.startswith("litellm:"):
        from raso.retrieval.retrievers import litellm_encoder

        return litellm_encoder(spec.split(":", 1)[1])
    from corpus_tools.retrieval.dense import make_encoder

    return make_encoder(spec)


def run_eval(dataset: Any, methods: list[str], *, split: str = "test", limit: int | None = None,
             train_limit: int | None = 1000, latency_sample: int = 50, encoder: Any = None,
             cache_dir: str | Path | None = None, gateway: Any = None, dreamer_limit: int = 20,
             retriever: Any = None, save_mlp: str | Path | None = None, log=print) -> dict[str, Any]:
    """Evaluate `methods` on a dataset split; returns {"rows": {method: metrics+latency}, "details": ...}."""
    from corpus_tools.retrieval.dataset import sample_queries
    from corpus_tools.retrieval.dense import EmbeddingCache
    from corpus_tools.retrieval.evaluate import evaluate_method, train_fusion
    from corpus_tools.retrieval.fusion import METHODS, FieldAwareRetriever, needs_dense

    unknown = [m for m in methods if m not in METHODS and m != DREAMER]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; choose from {', '.join([*METHODS, DREAMER])}")
    queries = sample_queries(dataset.split(split), limit)
    if not queries:
        raise ValueError(f"split {split!r} has no queries")
    wants_dense = any(m in METHODS and needs_dense(m) for m in methods) or DREAMER in methods
    from raso.retrieval.retrievers import embedding_cache_dir

    cache = EmbeddingCache(cache_dir or embedding_cache_dir()) if encoder is not None else None
    if retriever is None:
        start = time.perf_counter()
        retriever = FieldAwareRetriever(dataset.pool, encoder=encoder if wants_dense else None, cache=cache)
        log(f"sparse index over {len(dataset.pool)} skills: {time.perf_counter() - start:.1f}s")
    vectors = None
    if wants_dense and encoder is not None and cache is not None:  # the cache exists with an encoder
        start = time.perf_counter()
        from corpus_tools.retrieval.fields import FIELDS

        for f in (*FIELDS, "concat"):
            retriever.dense_matrix(f)
        vectors = np.asarray(cache.embed(encoder, [q.text for q in queries]))
        log(f"dense vectors ready (pool fields + {len(queries)} queries): {time.perf_counter() - start:.1f}s")
    rows: dict[str, dict[str, float]] = {}
    details: dict[str, Any] = {"split": split, "queries": len(queries), "pool": len(dataset.pool)}
    for method in methods:
        if method == DREAMER:
            rows[method], details[method] = _eval_dreamer(retriever, gateway, queries[:dreamer_limit], log)
            continue
        if needs_dense(method) and encoder is None:
            raise RuntimeError(f"method {method!r} needs a dense encoder")
        if METHODS[method][1] == "mlp":
            dev = sample_queries(dataset.split("dev"), train_limit)
            dev_vectors = (np.asarray(cache.embed(encoder, [q.text for q in dev]))
                           if needs_dense(method) and cache is not None else None)
            sub = type(dataset)(name=dataset.name, queries=dev, pool=dataset.pool)
            details[f"{method}:training"] = train_fusion(retriever, method, sub, split="all",
                                                         query_vectors=dev_vectors)
            if save_mlp:
                Path(save_mlp).mkdir(parents=True, exist_ok=True)
                retriever.mlps[method].save(Path(save_mlp) / f"{method}.npz")
        result = evaluate_method(retriever, method, queries, query_vectors=vectors, latency_sample=latency_sample)
        rows[method] = result.row()
        log(f"{method}: R@10 {100 * result.metrics['R@10']:.2f}  ({result.ms_per_query:.1f} ms/query)")
    return {"rows": rows, "details": details}


def _eval_dreamer(retriever: Any, gateway: Any, queries: list, log) -> tuple[dict[str, float], dict[str, Any]]:
    from corpus_tools.retrieval.metrics import mean_metrics
    from raso.retrieval.dreamer import FieldAwareScorer, SkillDreamer

    if gateway is None:
        raise RuntimeError("the dreamer needs a gateway (--optimizer-model)")
    dreamer = SkillDreamer(gateway, FieldAwareScorer(retriever))
    rankings, errors, dropped, start = [], 0, 0, time.perf_counter()
    for i, q in enumerate(queries, 1):
        result = dreamer.retrieve(q.text, exclude=q.exclude)
        errors += result.error is not None
        dropped += len(result.dropped_capabilities)
        rankings.append(result.ranked)
        log(f"dreamer {i}/{len(queries)}: {len(result.capabilities)} capabilities"
            + (f", {len(result.dropped_capabilities)} dropped (unusable pseudo-skill)" if result.dropped_capabilities else "")
            + (f" (fallback: {result.error[:80]})" if result.error else ""))
    ms = 1000.0 * (time.perf_counter() - start) / max(1, len(queries))
    metrics = mean_metrics(rankings, [q.gold for q in queries])
    usage = gateway.ledger.totals()
    return ({**metrics, "ms/query": ms, "batch ms/q": ms},
            {"queries": len(queries), "model_failures": errors, "dropped_capabilities": dropped, "usage": usage})
