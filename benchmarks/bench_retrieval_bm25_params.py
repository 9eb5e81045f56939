"""Why does BM25 over whole skills trail TF-IDF on long queries? An ablation on the reference-file
benchmark (query = a reference file's title + opening paragraph; pool = the corpus's SKILL.md files).

Rows vary one thing at a time against BM25 over whole skills (concat, from k1 1.5, b 0.75,
query terms counted as often as they occur): the query-term weighting (raw count, once, 1 + ln),
the length normalisation b, the saturation k1; TF-IDF (sublinear tf, cosine) is the reference.

    python benchmarks/bench_retrieval_bm25_params.py [--corpus DIR] [--limit 1000] [--split test]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from corpus_tools.retrieval.dataset import build_reference_benchmark, sample_queries  # noqa: E402
from corpus_tools.retrieval.fields import FieldSparseIndex  # noqa: E402
from corpus_tools.retrieval.metrics import mean_metrics  # noqa: E402


def bm25_matrix(index: FieldSparseIndex, k1: float, b: float) -> tuple[sp.csr_matrix, np.ndarray]:
    """(terms x docs saturated tf, idf) of the concat field for the given k1, b."""
    field = index.fields["concat"]
    avg = float(field.lengths.mean()) or 1.0
    norm = (1.0 - b) + b * field.lengths / avg
    tf = field.counts.tocsr().astype(np.float64)
    rows = np.repeat(np.arange(tf.shape[0]), np.diff(tf.indptr))
    tf.data = tf.data * (k1 + 1.0) / (tf.data + k1 * norm[rows])
    df = np.bincount(field.counts.indices, minlength=tf.shape[1]).astype(np.float64)
    n = tf.shape[0]
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    return tf.T.tocsr(), idf


def query_weights(index: FieldSparseIndex, queries: list[str], mode: str) -> sp.csr_matrix:
    q = index.query_counts(queries).astype(np.float64)
    if mode == "once":
        q.data = np.ones_like(q.data)
    elif mode == "log":
        q.data = 1.0 + np.log(q.data)
    return q


def evaluate(scores: np.ndarray, queries, ids: list[str]) -> dict[str, float]:
    position = {sid: i for i, sid in enumerate(ids)}
    rankings = []
    for row, q in zip(scores, queries):
        row = row.astype(np.float64, copy=True)
        for e in q.exclude:
            if e in position:
                row[position[e]] = -np.inf
        top = np.argsort(-row, kind="stable")[:10]
        rankings.append([ids[j] for j in top])
    return mean_metrics(rankings, [q.gold for q in queries])


def main() -> int:
    default_corpus = Path(os.environ.get("RASO_SHARED_DIR", REPO.parent / "shared")) / "corpus"
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=str(default_corpus))
    parser.add_argument("--bench", default=None, help="a saved benchmark file instead of the reference benchmark")
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--split", default="test")
    parser.add_argument("--paragraph-chars", type=int, default=500,
                        help="opening text kept per query (longer = longer queries with repeated terms)")
    parser.add_argument("--full-text-words", type=int, default=0,
                        help="instead: the first N words of the whole reference file (code included), for long "
                             "instruction-like queries with repeated terms")
    args = parser.parse_args()
    start = time.perf_counter()
    if args.bench:
        from corpus_tools.retrieval.dataset import RetrievalDataset

        dataset = RetrievalDataset.load(args.bench, corpus_dir=args.corpus)
    else:
        dataset = build_reference_benchmark(args.corpus, max_paragraph_chars=args.paragraph_chars)
    queries = sample_queries(dataset.split(args.split), args.limit)
    if args.full_text_words:
        for q in queries:
            raw = (Path(args.corpus) / "skills" / q.id).read_text(encoding="utf-8", errors="replace")
            q.text = " ".join(raw.split()[: args.full_text_words])
    index = FieldSparseIndex.build(dataset.pool)
    texts = [q.text for q in queries]
    lengths = [len(t.split()) for t in texts]
    print(f"{len(queries)} {args.split} queries (median {int(np.median(lengths))} words), pool {len(dataset.pool)}, "
          f"{time.perf_counter() - start:.0f}s to load", file=sys.stderr)
    rows: dict[str, dict[str, float]] = {}
    rows["TF-IDF cosine (reference)"] = evaluate(index.tfidf_scores(texts, "concat"), queries, index.ids)
    default_bm25 = index.bm25_scores(texts, "concat")
    rows[f"BM25 concat (fields.py default: k1 {index.k1}, b {index.b})"] = evaluate(default_bm25, queries, index.ids)
    grid = [(1.5, 0.75, "raw"), (1.5, 0.75, "once"), (1.5, 0.75, "log"), (1.5, 0.5, "raw"), (1.5, 0.3, "raw"),
            (1.5, 0.3, "log"), (1.2, 0.5, "log"), (0.9, 0.4, "log"), (2.0, 0.5, "log"), (1.2, 0.75, "log"),
            (1.5, 0.5, "log"), (1.5, 0.5, "once"), (1.5, 0.9, "raw"), (1.5, 1.0, "raw"), (1.2, 1.0, "raw"),
            (2.0, 1.0, "raw"), (3.0, 1.0, "raw"), (2.0, 0.9, "raw"), (1.5, 1.0, "log"), (2.0, 1.0, "log")]
    cache: dict[tuple[float, float], tuple[sp.csr_matrix, np.ndarray]] = {}
    for k1, b, mode in grid:
        if (k1, b) not in cache:
            cache[(k1, b)] = bm25_matrix(index, k1, b)
        matrix, idf = cache[(k1, b)]
        q = query_weights(index, texts, mode) @ sp.diags(idf)
        scores = np.asarray((q @ matrix).todense())
        rows[f"BM25 k1 {k1}, b {b}, query tf {mode}"] = evaluate(scores, queries, index.ids)
    cols = ["Hit@1", "R@5", "R@10", "MRR"]
    print("| method | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for name, m in rows.items():
        print(f"| {name} | " + " | ".join(f"{100 * m[c]:.1f}" if c != "MRR" else f"{m[c]:.3f}" for c in cols) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
