"""Brute-force cosine top-k over N unit vectors (384-d, MiniLM's size): latency per query as N grows.

    python benchmarks/bench_dense_bruteforce.py --sizes 10000,100000,1000000 --queries 20

Baseline in the same run: a full argsort of the score row (what a naive search does) at each size.
The matrix is a memory-mapped .npy on disk, as corpus_tools.retrieval.dense.EmbeddingCache hands it
out; vectors are random (search cost does not depend on the values).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from corpus_tools.retrieval.dense import cosine_topk, l2_normalise


def make_matrix(path: Path, n: int, dim: int, seed: int = 0, block: int = 100_000) -> np.ndarray:
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, dim))
    rng = np.random.default_rng(seed)
    for start in range(0, n, block):
        stop = min(n, start + block)
        out[start:stop] = l2_normalise(rng.normal(size=(stop - start, dim)).astype(np.float32))
    out.flush()
    del out
    return np.load(path, mmap_mode="r")


def measure(matrix: np.ndarray, queries: np.ndarray, k: int) -> dict[str, float]:
    cosine_topk(queries[:1], matrix, k)  # warm the page cache
    start = time.perf_counter()
    for q in queries:
        cosine_topk(q[None, :], matrix, k)
    single = 1000 * (time.perf_counter() - start) / len(queries)
    start = time.perf_counter()
    cosine_topk(queries, matrix, k)
    batched = 1000 * (time.perf_counter() - start) / len(queries)
    start = time.perf_counter()
    for q in queries[: max(1, len(queries) // 4)]:
        np.argsort(-(np.asarray(matrix) @ q))[:k]
    naive = 1000 * (time.perf_counter() - start) / max(1, len(queries) // 4)
    return {"single_ms": single, "batched_ms": batched, "argsort_ms": naive}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    queries = l2_normalise(np.random.default_rng(1).normal(size=(args.queries, args.dim)).astype(np.float32))
    print(f"| vectors | MB | top-{args.k} ms/query (one at a time) | ms/query (batch of {args.queries}) "
          f"| full argsort ms/query (baseline) | speed-up |")
    print("|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            path = Path(tmp) / f"m{n}.npy"
            matrix = make_matrix(path, n, args.dim)
            r = measure(matrix, queries, args.k)
            print(f"| {n:,} | {n * args.dim * 4 / 2**20:.0f} | {r['single_ms']:.2f} | {r['batched_ms']:.2f} "
                  f"| {r['argsort_ms']:.2f} | {r['argsort_ms'] / r['single_ms']:.1f}x |", flush=True)
            del matrix
            path.unlink()


if __name__ == "__main__":
    main()
