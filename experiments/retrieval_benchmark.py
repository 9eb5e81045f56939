"""Skill-retrieval benchmark: every method on the reference-file benchmark, plus Recall@10 as the
skill pool grows.

    python experiments/retrieval_benchmark.py --corpus ../shared/corpus --out runs/retrieval-benchmark

Writes <out>/results.md (the metrics table, latency, scaling numbers), results.json and
recall_vs_pool.png. The benchmark (built from the corpus; see corpus_tools.retrieval.dataset) is
evaluated on a fixed sample of the test split (--limit); the fusion MLPs train on a fixed sample of
the dev split (--train-limit). Dense scores use the int8 ONNX MiniLM; embeddings are cached
(--cache-dir), so a rerun only pays for scoring. --dreamer-model adds SkillDreamer rows on the first
--dreamer-limit test queries (each query costs 1 + #capabilities model calls).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from corpus_tools.retrieval.dataset import (  # noqa: E402
    RetrievalDataset,
    build_reference_benchmark,
    sample_queries,
    subsample_pool,
)
from corpus_tools.retrieval.dense import EmbeddingCache, OnnxMiniLMEncoder  # noqa: E402
from corpus_tools.retrieval.evaluate import evaluate_method  # noqa: E402
from corpus_tools.retrieval.fields import FIELDS  # noqa: E402
from corpus_tools.retrieval.fusion import FieldAwareRetriever  # noqa: E402
from corpus_tools.retrieval.metrics import format_table  # noqa: E402
from raso.commands.retrieval import run_eval  # noqa: E402

SPARSE_METHODS = ["bm25", "bm25f", "tfidf", "tfidf-fields"]
DENSE_METHODS = ["dense", "dense-fields", "hybrid", "hybrid-fields", "mlp-concat", "mlp"]
SCALING_METHODS = ["bm25", "bm25f", "hybrid", "hybrid-fields", "mlp-concat", "mlp"]
LABELS = {
    "bm25": "BM25 (concat)", "bm25f": "BM25F (fields)", "tfidf": "TF-IDF (concat)",
    "tfidf-fields": "TF-IDF (per-field, uniform)", "dense": "MiniLM (concat)",
    "dense-fields": "MiniLM (per-field, uniform)", "hybrid": "Hybrid (concat, uniform)",
    "hybrid-fields": "Hybrid (per-field, uniform)", "mlp-concat": "Hybrid (concat) + MLP",
    "mlp": "Hybrid (per-field) + MLP", "dreamer": "SkillDreamer (MiniLM concat)",
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def scaling(dataset: RetrievalDataset, full: FieldAwareRetriever, queries, vectors, sizes, methods) -> dict:
    """Recall@10 (and the rest) over pools of growing size that always hold every gold skill."""
    out: dict[str, dict[str, float]] = {}
    position = {sid: i for i, sid in enumerate(full.ids)}
    for size in sizes:
        pool = subsample_pool(dataset.pool, queries, size, seed=0)
        sub = FieldAwareRetriever(pool, encoder=full.encoder, mlps=full.mlps)
        if full.encoder is not None:
            rows = np.array([position[s.id] for s in pool])
            for f in (*FIELDS, "concat"):
                sub._dense[f] = np.asarray(full.dense_matrix(f))[rows]
        kept = {s.id for s in pool}
        qs = [type(q)(q.id, q.text, q.gold, [e for e in q.exclude if e in kept], q.split, q.source) for q in queries]
        out[str(len(pool))] = {}
        for method in methods:
            r = evaluate_method(sub, method, qs, query_vectors=vectors, latency_sample=0)
            out[str(len(pool))][method] = r.metrics["R@10"]
        log(f"pool {len(pool)}: " + ", ".join(f"{m} {100 * v:.1f}" for m, v in out[str(len(pool))].items()))
    return out


def plot(scale: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(int(s) for s in scale)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for method in next(iter(scale.values())):
        ax.plot(sizes, [100 * scale[str(s)][method] for s in sizes], marker="o", label=LABELS.get(method, method))
    ax.set_xscale("log")
    ax.set_xlabel("skills in the pool")
    ax.set_ylabel("Recall@10 (%)")
    ax.set_title("Reference-file benchmark: Recall@10 as the pool grows")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    default_corpus = Path(os.environ.get("RASO_SHARED_DIR", REPO.parent / "shared")) / "corpus"
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=str(default_corpus))
    parser.add_argument("--bench", default=None, help="a saved benchmark (default: build it from --corpus)")
    parser.add_argument("--out", default=str(REPO / "runs" / "retrieval-benchmark"))
    parser.add_argument("--limit", type=int, default=1000, help="test queries (fixed sample)")
    parser.add_argument("--train-limit", type=int, default=1000, help="dev queries for the MLPs (fixed sample)")
    parser.add_argument("--latency-sample", type=int, default=50)
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--no-dense", action="store_true", help="sparse methods only")
    parser.add_argument("--pool-sizes", default="250,500,1000,2000,4771")
    parser.add_argument("--dreamer-model", default=None, help="litellm model for SkillDreamer rows")
    parser.add_argument("--dreamer-limit", type=int, default=20)
    args = parser.parse_args()

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    dataset = (RetrievalDataset.load(args.bench, corpus_dir=args.corpus) if args.bench
               else build_reference_benchmark(args.corpus))
    log(f"benchmark: {len(dataset.queries)} queries, pool {len(dataset.pool)} ({time.perf_counter() - start:.0f}s)")
    encoder = None if args.no_dense else OnnxMiniLMEncoder(progress=True)
    from raso.retrievers import embedding_cache_dir

    cache_dir = Path(args.cache_dir) if args.cache_dir else embedding_cache_dir()
    cache = EmbeddingCache(cache_dir)
    retriever = FieldAwareRetriever(dataset.pool, encoder=encoder, cache=cache)
    timings = {}
    if encoder is not None:
        for f in (*FIELDS, "concat"):
            t = time.perf_counter()
            retriever.dense_matrix(f)
            timings[f"embed pool {f}"] = time.perf_counter() - t
            log(f"pool {f} embeddings: {timings[f'embed pool {f}']:.0f}s")
    methods = SPARSE_METHODS + ([] if encoder is None else DENSE_METHODS)
    gateway = None
    if args.dreamer_model:
        from raso.llm import GatewayConfig, LLMGateway

        gateway = LLMGateway(GatewayConfig.for_models(target=args.dreamer_model))
        methods.append("dreamer")
    t = time.perf_counter()
    result = run_eval(dataset, methods, split="test", limit=args.limit, train_limit=args.train_limit,
                      latency_sample=args.latency_sample, encoder=encoder, cache_dir=cache_dir, gateway=gateway,
                      dreamer_limit=args.dreamer_limit, retriever=retriever, save_mlp=out_dir, log=log)
    timings["evaluate"] = time.perf_counter() - t
    queries = sample_queries(dataset.split("test"), args.limit)
    vectors = np.asarray(cache.embed(encoder, [q.text for q in queries])) if encoder is not None else None
    sizes = [int(s) for s in args.pool_sizes.split(",")]
    scale_methods = [m for m in SCALING_METHODS if m in result["rows"]]
    scale = scaling(dataset, retriever, queries, vectors, sizes, scale_methods)
    plot(scale, out_dir / "recall_vs_pool.png")

    rows = {LABELS.get(m, m): v for m, v in result["rows"].items()}
    scale_table = "| pool | " + " | ".join(LABELS[m] for m in scale_methods) + " |\n|---:|" + "---:|" * len(scale_methods)
    for size, vals in scale.items():
        scale_table += f"\n| {size} | " + " | ".join(f"{100 * vals[m]:.2f}" for m in scale_methods) + " |"
    md = [
        "# Skill retrieval on the reference-file benchmark",
        "",
        f"Queries: a fixed sample of {result['details']['queries']} test queries (a reference file's title + opening "
        f"paragraph; gold = its parent skill) over the {len(dataset.pool)}-skill pool (SKILL.md only). "
        f"MLPs trained on {args.train_limit} dev queries. Dense: {encoder.model_id if encoder else 'off'}. "
        "Metrics in %, MRR in [0, 1]; ms/query = one query at a time incl. encoding it; batch ms/q = whole sample "
        "scored in batches.",
        "",
        format_table(rows),
        "",
        "## Recall@10 as the pool grows (every gold skill kept; others sampled)",
        "",
        scale_table,
        "",
        "## Timings (s)",
        "",
        *(f"- {k}: {v:.1f}" for k, v in timings.items()),
        "",
    ]
    (out_dir / "results.md").write_text("\n".join(md), encoding="utf-8")
    (out_dir / "results.json").write_text(json.dumps({**result, "scaling": scale, "timings": timings}, indent=1,
                                                     default=float), encoding="utf-8")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
