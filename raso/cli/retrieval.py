"""`raso retrieval`: build the skill-retrieval benchmark and evaluate retrieval methods on it.

    raso retrieval build-bench --corpus ../shared/corpus --out bench.jsonl
    raso retrieval eval --bench bench.jsonl --method bm25 --method mlp --limit 1000

`eval` prints a markdown table: Hit@1, R@5, R@10, nDCG@5/10, C@5/10, MRR and latency (ms per single
query, and per query when the whole split is scored in batches). Learned fusion ("mlp",
"mlp-concat") is trained on the dev split first; "dreamer" calls the optimizer model per query.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from raso.retrieval.benchmark import DREAMER, make_encoder_from_spec, run_eval


def register(subparsers: argparse._SubParsersAction) -> None:
    from corpus_tools.retrieval.fusion import METHODS

    parser = subparsers.add_parser("retrieval", help="skill-retrieval benchmark: build it, evaluate methods on it",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="retrieval_command", metavar="ACTION")
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])

    build = sub.add_parser("build-bench", help="queries from a corpus's reference files, gold = parent skill")
    build.add_argument("--corpus", required=True, help="corpus folder with MANIFEST.jsonl")
    build.add_argument("--out", required=True, help="dataset file to write (.jsonl)")
    build.add_argument("--dev-fraction", type=float, default=0.5)
    build.add_argument("--inline-pool", action="store_true", help="store the pool skills in the file")
    build.set_defaults(func=build_bench)

    ev = sub.add_parser("eval", help="evaluate retrieval methods; prints a metrics table with latency")
    ev.add_argument("--bench", required=True, help="dataset file from build-bench")
    ev.add_argument("--corpus", default=None, help="corpus folder for the pool (default: the one recorded)")
    ev.add_argument("--method", action="append", required=True,
                    help=f"repeatable or comma-separated: {', '.join([*METHODS, DREAMER])}")
    ev.add_argument("--split", default="test", choices=["dev", "test", "all"])
    ev.add_argument("--limit", type=int, default=None,
                    help="evaluate a fixed pseudo-random sample of this many queries (same sample everywhere)")
    ev.add_argument("--train-limit", type=int, default=1000, help="dev queries used to train the fusion MLP")
    ev.add_argument("--pool", type=int, default=None,
                    help="rank within a sub-pool of this many skills: every gold skill of the sampled test and dev "
                         "queries plus a fixed random sample of the rest (bounds dense embedding time)")
    ev.add_argument("--latency-sample", type=int, default=50, help="queries timed one at a time")
    ev.add_argument("--encoder", default="minilm", help="minilm (int8 ONNX, default) | st:<model> | litellm:<model>")
    ev.add_argument("--cache-dir", default=None, help="embedding cache (default: $RASO_CACHE_DIR/embeddings)")
    ev.add_argument("--optimizer-model", default=os.environ.get("RASO_OPTIMIZER_MODEL"),
                    help="model for the dreamer's calls (default: $RASO_OPTIMIZER_MODEL or the embedded model)")
    ev.add_argument("--api-base", default=None, help="server URL for --optimizer-model")
    ev.add_argument("--dreamer-limit", type=int, default=20, help="queries for the dreamer (each costs model calls)")
    ev.add_argument("--json", default=None, help="also write the results as JSON here")
    ev.add_argument("--save-mlp", default=None, help="folder to save trained fusion models (.npz)")
    ev.set_defaults(func=eval_command)


def build_bench(args: argparse.Namespace) -> int:
    from corpus_tools.retrieval.dataset import build_reference_benchmark

    start = time.perf_counter()
    try:
        dataset = build_reference_benchmark(args.corpus, dev_fraction=args.dev_fraction)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    path = dataset.save(args.out, inline_pool=args.inline_pool or None)
    print(f"wrote {path}: {len(dataset.queries)} queries ({dataset.meta['dev_queries']} dev, "
          f"{dataset.meta['test_queries']} test) over {len(dataset.pool)} skills; dropped {dataset.meta['dropped']}; "
          f"{time.perf_counter() - start:.1f}s")
    return 0


def eval_command(args: argparse.Namespace) -> int:
    from corpus_tools.retrieval.dataset import RetrievalDataset
    from corpus_tools.retrieval.fusion import METHODS, needs_dense
    from corpus_tools.retrieval.metrics import format_table

    methods = [m.strip() for chunk in args.method for m in chunk.split(",") if m.strip()]
    try:
        dataset = RetrievalDataset.load(args.bench, corpus_dir=args.corpus)
    except (OSError, ValueError) as exc:
        print(f"error: cannot read the benchmark: {exc}", file=sys.stderr)
        return 2
    if args.pool:
        from corpus_tools.retrieval.dataset import sample_queries, subsample_pool

        test_q = sample_queries(dataset.split(args.split), args.limit)
        dev_q = sample_queries(dataset.split("dev"), args.train_limit) if args.split == "test" else []
        pool = subsample_pool(dataset.pool, test_q + dev_q, args.pool, seed=0)
        dataset = RetrievalDataset(name=dataset.name, queries=test_q + dev_q, pool=pool,
                                   description=dataset.description)
        args.limit = args.train_limit = None
    encoder = None
    if any((m in METHODS and needs_dense(m)) or m == DREAMER for m in methods):
        try:
            encoder = make_encoder_from_spec(args.encoder)
        except (RuntimeError, ValueError, FileNotFoundError) as exc:
            if any(m in METHODS and needs_dense(m) for m in methods):
                print(f"error: {exc}", file=sys.stderr)
                return 2
    gateway = None
    if DREAMER in methods:
        from raso.api import make_gateway
        from raso.engine.config import ModelsConfig, OptimizeConfig
        from raso.llm.config import DEFAULT_LOCAL_MODEL

        gateway = make_gateway(OptimizeConfig(models=ModelsConfig(target=args.optimizer_model or DEFAULT_LOCAL_MODEL,
                                                                  api_base=args.api_base)))
    try:
        out = run_eval(dataset, methods, split=args.split, limit=args.limit, train_limit=args.train_limit,
                       latency_sample=args.latency_sample, encoder=encoder, cache_dir=args.cache_dir,
                       gateway=gateway, dreamer_limit=args.dreamer_limit, save_mlp=args.save_mlp,
                       log=lambda msg: print(msg, file=sys.stderr))
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{dataset.name}: split {args.split}, {out['details']['queries']} queries, pool {len(dataset.pool)}")
    print(format_table(out["rows"]))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=float) + "\n", encoding="utf-8")
    return 0

