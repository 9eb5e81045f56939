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
from corpus_tools.retrieval.fusion import FieldAwareRetriever, needs_dense  # noqa: E402
from corpus_tools.retrieval.metrics import format_table  # noqa: E402
from raso.retrieval.benchmark import run_eval  # noqa: E402

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


def scaling(pool_all, full: FieldAwareRetriever, queries, vectors, sizes, methods) -> dict:
    """Recall@10 over pools of growing size that always hold every gold skill of `queries`.
    Dense rows are sliced out of `full`'s matrices, so no pool is embedded twice."""
    out: dict[str, dict[str, float]] = {}
    position = {sid: i for i, sid in enumerate(full.ids)}
    for size in sizes:
        pool = subsample_pool(pool_all, queries, size, seed=0)
        sub = FieldAwareRetriever(pool, encoder=full.encoder, mlps=full.mlps)
        if full.encoder is not None and any(needs_dense(m) for m in methods):
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
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.2))
    ax = fig.subplots()
    methods = sorted({m for vals in scale.values() for m in vals}, key=lambda m: list(LABELS).index(m))
    for method in methods:
        sizes = sorted(int(s) for s in scale if method in scale[s])
        ax.plot(sizes, [100 * scale[str(s)][method] for s in sizes], marker="o", label=LABELS.get(method, method))
    ax.set_xscale("log")
    ax.set_xlabel("skills in the pool")
    ax.set_ylabel("Recall@10 (%)")
    ax.set_title("Reference-file benchmark: Recall@10 as the pool grows")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def write_short_bench(args: argparse.Namespace) -> int:
    """The short-query benchmark as stored in the repository (experiments/data/)."""
    dataset = build_reference_benchmark(args.corpus, style="short")
    queries = sample_queries(dataset.split("test"), args.limit) + sample_queries(dataset.split("dev"), args.train_limit)
    for q in queries:
        q.source = ""  # the query id already names the reference file
    meta = {**dataset.meta, "sampled": f"sample_queries(test, {args.limit}) + sample_queries(dev, {args.train_limit})"}
    stored = RetrievalDataset(name=dataset.name, description=dataset.description, queries=queries, pool=dataset.pool,
                              pool_corpus="../shared/corpus", meta=meta)
    path = stored.save(args.write_short_bench, inline_pool=False)
    log(f"wrote {path}: {len(queries)} queries over a {len(dataset.pool)}-skill pool (by reference)")
    return 0


# label -> the `retrieval:` options of the section retriever it rates
SECTION_RETRIEVERS: dict[str, dict[str, object]] = {
    "RASO bm25 (sections)": {"kind": "bm25", "vet": False},
    "RASO two_stage (skill-level BM25 -> sections, <= 2 per skill)": {"kind": "two_stage", "top_skills": None,
                                                                      "skill_scoring": "bm25", "vet": False},
    "RASO two_stage, untuned (top 10 skills, skill weight 1)": {"kind": "two_stage", "skill_weight": 1.0,
                                                                "skill_scoring": "bm25", "vet": False},
    "RASO two_stage, skill-level TF-IDF": {"kind": "two_stage", "top_skills": None, "skill_scoring": "tfidf",
                                           "vet": False},
    "RASO two_stage, skill-level BM25 + TF-IDF fused": {"kind": "two_stage", "top_skills": None,
                                                         "skill_scoring": "fused", "vet": False},
    "RASO two_stage, vetted (the default: fused skill stage)": {"kind": "two_stage", "top_skills": None},
    "RASO two_stage+dense (skill stage BM25 fused with MiniLM, weight 0.3)": {
        "kind": "two_stage", "top_skills": None, "skill_scoring": "bm25", "skill_dense_weight": 0.3, "vet": False},
    "RASO tfidf (skills -> sections)": {"kind": "tfidf", "vet": False},
    "RASO field, bm25 (whole-skill BM25 -> sections)": {"kind": "field", "field_method": "bm25", "encoder": "none",
                                                        "vet": False},
    "RASO field, uniform (skills -> sections)": {"kind": "field", "vet": False},
    "RASO field, hybrid (TF-IDF + MiniLM skills -> sections)": {"kind": "field", "field_method": "hybrid",
                                                                "vet": False},
    "RASO hybrid (BM25 + MiniLM sections)": {"kind": "hybrid", "vet": False},
}


class SavedTextVectors:
    """An encoder whose vectors are kept per text (sha256) in one .npz per encoder model under the
    embedding cache, so the hybrid section retriever's candidate sections are encoded once across
    runs and benchmarks (long and short queries share many candidates). Same model_id as the wrapped
    encoder, so EmbeddingCache keys do not change."""

    def __init__(self, encoder, directory: Path, *, save_every: int = 1024) -> None:
        import hashlib

        self.encoder = encoder
        self.model_id = encoder.model_id
        self.path = Path(directory) / f"texts-{hashlib.sha256(self.model_id.encode()).hexdigest()[:16]}.npz"
        self.save_every = save_every
        self.computed = 0
        self._unsaved = 0
        self._vectors: dict[str, np.ndarray] = {}
        if self.path.is_file():
            with np.load(self.path) as saved:
                self._vectors = dict(zip(saved["keys"].tolist(), saved["vectors"]))

    @staticmethod
    def _key(text: str) -> str:
        import hashlib

        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]

    def encode(self, texts) -> np.ndarray:
        keys = [self._key(t) for t in texts]
        missing = {k: t for k, t in zip(keys, texts) if k not in self._vectors}
        if missing:
            vectors = np.asarray(self.encoder.encode(list(missing.values())), dtype=np.float32)
            self._vectors.update(zip(missing, vectors))
            self.computed += len(missing)
            self._unsaved += len(missing)
            if self._unsaved >= self.save_every:
                self.save()
        return np.stack([self._vectors[k] for k in keys]) if keys else np.zeros((0, 0), np.float32)

    def save(self) -> None:
        if not self._vectors:
            return
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(tmp, keys=np.array(list(self._vectors)), vectors=np.stack(list(self._vectors.values())))
        os.replace(tmp, self.path)
        self._unsaved = 0


def pool_section_index(pool):
    """A section index of the pool's SKILL.md files, streamed to disk like `raso corpus build` (the skill level
    and the vetting flags come with it)."""
    import tempfile

    from corpus_tools.index import SectionIndex
    from corpus_tools.index_build import write_index
    from corpus_tools.ingest import SkillRecord
    from corpus_tools.sections import split_sections
    from corpus_tools.vetting import flag_bits

    records = [SkillRecord(id=s.id, name=s.name, description=s.description, body=s.body, text=s.body, metadata={},
                           repo=s.repo, path="SKILL.md", commit="", license="") for s in pool]
    t = time.perf_counter()
    work = tempfile.mkdtemp(prefix="retrieval-benchmark-index-")
    index = SectionIndex.load(write_index((s for r in records for s in split_sections(r, include_references=False)),
                                          Path(work) / "index", flagger=flag_bits))
    log(f"section index over the pool: {len(index)} sections ({time.perf_counter() - t:.0f}s)")
    return index


def rate_section_retriever(retriever, queries, depth: int = 50) -> dict[str, float]:
    """A section retriever rated as a skill ranker: the skills of its top `depth` sections, first appearance
    first; plus its median ms per query."""
    from corpus_tools.retrieval.metrics import mean_metrics

    rankings, times = [], []
    for q in queries:
        t = time.perf_counter()
        hits = retriever.search(q.text, k=depth, exclude_skills=q.exclude)
        times.append(time.perf_counter() - t)
        rankings.append(list(dict.fromkeys(h.section.skill_id for h in hits)))
    return {**mean_metrics(rankings, [q.gold for q in queries]), "ms/query": 1000 * float(np.median(times))}


def section_retriever_rows(pool, queries, encoder, depth: int = 50) -> dict[str, dict[str, float]]:
    """RASO's section retrievers over a section index of the pool's SKILL.md files, rated as skill
    rankings: the skills of the top `depth` sections in order of first appearance."""
    from raso.api import make_retriever
    from raso.engine.config import OptimizeConfig
    from raso.retrieval.retrievers import RetrievalOptions

    index = pool_section_index(pool)
    rows: dict[str, dict[str, float]] = {}
    for label, spec in SECTION_RETRIEVERS.items():
        options = RetrievalOptions(**{"top_skills": 10, "candidates": 20, **spec})
        dense = options.kind == "hybrid" or (options.kind == "field" and options.encoder != "none") or \
            (options.kind == "two_stage" and options.skill_dense_weight > 0)
        if dense and encoder is None:
            continue
        retriever = make_retriever(OptimizeConfig(retrieval=options), index=index,
                                   skills=pool if options.kind != "bm25" else None,
                                   encoder=encoder if dense else None)
        rows[label] = rate_section_retriever(retriever, queries, depth)
        log(f"{label}: R@5 {100 * rows[label]['R@5']:.1f}")
    return rows


# label -> the two_stage options of one skill-stage scoring (everything else as shipped); dense rows need the
# `dense` extra
SKILL_STAGES: dict[str, dict[str, object]] = {
    "BM25": {"skill_scoring": "bm25"},
    "TF-IDF": {"skill_scoring": "tfidf"},
    "fused (BM25 + TF-IDF)": {"skill_scoring": "fused"},
    "BM25 + MiniLM 0.3": {"skill_scoring": "bm25", "skill_dense_weight": 0.3},
    "TF-IDF + MiniLM 0.3": {"skill_scoring": "tfidf", "skill_dense_weight": 0.3},
    "fused + MiniLM 0.3": {"skill_scoring": "fused", "skill_dense_weight": 0.3},
}


def query_sets(args: argparse.Namespace) -> tuple[list, dict[str, list]]:
    """The pool and every query set of the studies: the reference-file queries (long and short, --limit each) and
    the instruction-style queries."""
    from corpus_tools.retrieval.dataset import build_instruction_benchmarks, load_pool

    t = time.perf_counter()
    pool = load_pool(args.corpus)
    long_q = sample_queries(build_reference_benchmark(args.corpus, style="long", pool=pool).split("test"), args.limit)
    short = RetrievalDataset.load(REPO / "experiments" / "data" / "reference_short_queries.jsonl",
                                  corpus_dir=args.corpus)
    sets = {f"reference, long ({len(long_q)})": long_q}
    short_q = sample_queries(short.split("test"), args.limit)
    sets[f"reference, short ({len(short_q)})"] = short_q
    for dataset in build_instruction_benchmarks(args.instruction_queries, pool=pool,
                                                roots={"repo": REPO, "shared": Path(args.corpus).parent}):
        sets[f"{dataset.name} ({len(dataset.queries)})"] = dataset.queries
    log(f"pool {len(pool)} skills; query sets: {', '.join(sets)} ({time.perf_counter() - t:.0f}s)")
    return pool, sets


def skill_stage_study(args: argparse.Namespace) -> int:
    """The `two_stage` retriever (shipped options, vetted as RASI/RASU run it) with each skill-stage scoring on
    every query set: the reference-file queries (long and short) and the instruction-style queries."""
    from raso.api import make_retriever
    from raso.engine.config import OptimizeConfig
    from raso.retrieval.retrievers import RetrievalOptions, encoder_from_spec

    pool, sets = query_sets(args)
    index = pool_section_index(pool)
    encoder = None if args.no_dense else encoder_from_spec("minilm")
    rows: dict[str, dict[str, dict[str, float]]] = {}
    cpu = time.process_time()
    for label, spec in SKILL_STAGES.items():
        options = RetrievalOptions(kind="two_stage", **spec)
        if options.skill_dense_weight > 0 and encoder is None:
            log(f"{label}: skipped (no dense encoder: the `dense` extra is not installed, or --no-dense)")
            continue
        retriever = make_retriever(OptimizeConfig(retrieval=options), index=index,
                                   encoder=encoder if options.skill_dense_weight > 0 else None)
        rows[label] = {name: rate_section_retriever(retriever, queries) for name, queries in sets.items()}
        log(f"{label}: " + ", ".join(f"{n} R@5 {100 * r['R@5']:.1f}" for n, r in rows[label].items()))
    header = "| skill stage | " + " | ".join(f"{name}: R@5 / R@10 / MRR" for name in sets) + " |"
    lines = [header, "|---|" + "---|" * len(sets)]
    for label, by_set in rows.items():
        lines.append(f"| {label} | " + " | ".join(
            f"{100 * r['R@5']:.1f} / {100 * r['R@10']:.1f} / {r['MRR']:.3f}" for r in by_set.values()) + " |")
    lines += ["", f"CPU s of the scoring (this process): {time.process_time() - cpu:.1f}"]
    print("\n".join(lines))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "skill_stage.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


# label -> the retrieval section of `raso corpus search` before and after issue 47 (a run's retriever)
SEARCH_COMMANDS: dict[str, dict[str, object]] = {
    "section BM25, unvetted (corpus search before issue 47)": {"kind": "bm25", "vet": False},
    "section BM25, vetted (near-duplicates collapsed)": {"kind": "bm25"},
    "two_stage, unvetted": {"vet": False},
    "two_stage, vetted (a run's default; corpus search now)": {},
}


def top_sections_rating(retriever, queries, k: int = 5) -> dict[str, float]:
    """What `raso corpus search -k K` prints, rated: the share of each query's gold skills among the skills of the
    K sections (gold@K), the distinct skills among them, and the sections whose normalised text (the vetting's
    word shingles) repeats one printed above it."""
    from corpus_tools.vetting import shingles

    gold_found = distinct = repeats = 0.0
    for q in queries:
        hits = retriever.search(q.text, k=k, exclude_skills=q.exclude)
        skills = {h.section.skill_id for h in hits}
        gold_found += len(skills & set(q.gold)) / len(set(q.gold))
        distinct += len(skills)
        texts = [shingles(h.section.text) for h in hits]
        repeats += sum(t in texts[:i] for i, t in enumerate(texts))
    n = len(queries)
    return {f"gold@{k}": gold_found / n, "skills": distinct / n, "repeats": repeats / n}


def search_command_study(args: argparse.Namespace) -> int:
    """`raso corpus search` before issue 47 (section BM25, unvetted) and now (the run's default retriever), on
    every query set: R@5 / R@10 / MRR of the skills of the top 50 sections, and what the default `-k 5` prints."""
    from raso.api import make_retriever
    from raso.engine.config import OptimizeConfig

    pool, sets = query_sets(args)
    index = pool_section_index(pool)
    rows: dict[str, dict[str, dict[str, float]]] = {}
    cpu = time.process_time()
    for label, retrieval in SEARCH_COMMANDS.items():
        retriever = make_retriever(OptimizeConfig(retrieval=retrieval), index=index)
        rows[label] = {name: {**rate_section_retriever(retriever, queries), **top_sections_rating(retriever, queries)}
                       for name, queries in sets.items()}
        log(f"{label}: " + ", ".join(f"{n} R@5 {100 * r['R@5']:.1f}" for n, r in rows[label].items()))
    lines = ["| corpus search | " + " | ".join(f"{name}: R@5 / R@10 / MRR; at -k 5: gold@5, skills, repeats"
                                             for name in sets) + " |", "|---|" + "---|" * len(sets)]
    for label, by_set in rows.items():
        lines.append(f"| {label} | " + " | ".join(
            f"{100 * r['R@5']:.1f} / {100 * r['R@10']:.1f} / {r['MRR']:.3f}; {100 * r['gold@5']:.1f}, "
            f"{r['skills']:.2f}, {r['repeats']:.2f}" for r in by_set.values()) + " |")
    lines += ["", f"CPU s of the scoring (this process): {time.process_time() - cpu:.1f}"]
    print("\n".join(lines))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "search_command.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


def main() -> int:
    default_corpus = Path(os.environ.get("RASO_SHARED_DIR", REPO.parent / "shared")) / "corpus"
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=str(default_corpus))
    parser.add_argument("--bench", default=None, help="a saved benchmark (default: build it from --corpus)")
    parser.add_argument("--out", default=str(REPO / "runs" / "retrieval-benchmark"))
    parser.add_argument("--limit", type=int, default=1000, help="test queries (fixed sample)")
    parser.add_argument("--train-limit", type=int, default=1000, help="dev queries for the MLPs (fixed sample)")
    parser.add_argument("--pool", type=int, default=None,
                        help="evaluate every method on a sub-pool of this many skills holding every gold skill of "
                             "the sampled queries (to bound dense embedding time); sparse methods are also run "
                             "on the full pool")
    parser.add_argument("--latency-sample", type=int, default=50)
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--no-dense", action="store_true", help="sparse methods only")
    parser.add_argument("--pool-sizes", default="1000,2000,3000,4771")
    parser.add_argument("--dreamer-model", default=None, help="litellm model for SkillDreamer rows")
    parser.add_argument("--dreamer-limit", type=int, default=20)
    parser.add_argument("--style", choices=["long", "short"], default="long",
                        help="queries built from --corpus: long (title + opening paragraph) or short (3-8 heading "
                             "keywords); ignored with --bench")
    parser.add_argument("--write-short-bench", default=None, metavar="PATH",
                        help="write the short-query benchmark (fixed samples of --limit test and --train-limit dev "
                             "queries, pool by reference) to PATH and exit")
    parser.add_argument("--section-retrievers", action="store_true",
                        help="also rate RASO's section retrievers (bm25, tfidf, field, hybrid) by the skills of "
                             "their top sections")
    parser.add_argument("--section-limit", type=int, default=300,
                        help="test queries for the section retriever rows (hybrid encodes its candidates)")
    parser.add_argument("--skill-stage", action="store_true",
                        help="rate two_stage's skill-stage scorings (BM25, TF-IDF, fused; with MiniLM when the "
                             "dense extra is installed) on the reference queries (--limit each) and the "
                             "instruction-style queries, then exit")
    parser.add_argument("--instruction-queries", default=str(REPO / "experiments" / "data" / "instruction_queries.json"),
                        help="the instruction-query judgements (task ids and gold skills; texts read from the tasks)")
    parser.add_argument("--search-command", action="store_true",
                        help="rate `raso corpus search` before issue 47 (section BM25, unvetted) and now (the run's "
                             "default retriever) on the query sets of --skill-stage, then exit")
    args = parser.parse_args()
    if args.search_command:
        return search_command_study(args)
    if args.write_short_bench:
        return write_short_bench(args)
    if args.skill_stage:
        return skill_stage_study(args)

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    dataset = (RetrievalDataset.load(args.bench, corpus_dir=args.corpus) if args.bench
               else build_reference_benchmark(args.corpus, style=args.style))
    log(f"benchmark: {len(dataset.queries)} queries, pool {len(dataset.pool)} ({time.perf_counter() - start:.0f}s)")
    test_q = sample_queries(dataset.split("test"), args.limit)
    dev_q = sample_queries(dataset.split("dev"), args.train_limit)
    pool = dataset.pool if not args.pool else subsample_pool(dataset.pool, test_q + dev_q, args.pool, seed=0)
    bench = RetrievalDataset(name=dataset.name, queries=test_q + dev_q, pool=pool)
    encoder = None if args.no_dense else OnnxMiniLMEncoder(progress=True)
    from raso.retrieval.retrievers import embedding_cache_dir

    cache_dir = Path(args.cache_dir) if args.cache_dir else embedding_cache_dir()
    cache = EmbeddingCache(cache_dir)
    retriever = FieldAwareRetriever(pool, encoder=encoder, cache=cache)
    timings: dict[str, tuple[float, float]] = {}  # (wall s, CPU s of this process): the machine is shared
    counts: dict[str, object] = {}

    def timed(name: str, fn):
        t, c = time.perf_counter(), time.process_time()
        value = fn()
        timings[name] = (time.perf_counter() - t, time.process_time() - c)
        return value

    if encoder is not None:
        for f in (*FIELDS, "concat"):
            timed(f"embed pool {f} ({len(pool)} skills)", lambda f=f: retriever.dense_matrix(f))
        for name, qs in (("test", test_q), ("dev", dev_q)):
            timed(f"embed {len(qs)} {name} queries", lambda qs=qs: cache.embed(encoder, [q.text for q in qs]))
        counts["embedding cache hits / misses"] = f"{cache.hits} / {cache.misses}"
        log("embeddings: " + ", ".join(f"{k} {w:.0f}s (CPU {c:.0f}s)" for k, (w, c) in timings.items()))
    methods = SPARSE_METHODS + ([] if encoder is None else DENSE_METHODS)
    gateway = None
    if args.dreamer_model:
        from raso.api import make_gateway
        from raso.engine.config import OptimizeConfig

        gateway = make_gateway(OptimizeConfig(models={"target": args.dreamer_model}))
        methods.append("dreamer")
    result = timed("evaluate", lambda: run_eval(
        bench, methods, split="test", limit=None, train_limit=None, latency_sample=args.latency_sample,
        encoder=encoder, cache_dir=cache_dir, gateway=gateway, dreamer_limit=args.dreamer_limit,
        retriever=retriever, save_mlp=out_dir, log=log))
    full_rows = None
    if args.pool and len(pool) < len(dataset.pool):
        full_bench = RetrievalDataset(name=dataset.name, queries=test_q, pool=dataset.pool)
        full_rows = run_eval(full_bench, SPARSE_METHODS, split="test", latency_sample=args.latency_sample,
                             log=log)["rows"]
    section_rows = None
    if args.section_retrievers:
        section_encoder = SavedTextVectors(encoder, cache_dir) if encoder is not None else None
        section_rows = timed("section retrievers", lambda: section_retriever_rows(
            pool, sample_queries(test_q, args.section_limit), section_encoder))
        if section_encoder is not None:
            section_encoder.save()
            counts["section texts encoded (not in the cache before)"] = section_encoder.computed
    vectors = np.asarray(cache.embed(encoder, [q.text for q in test_q])) if encoder is not None else None
    sizes = [int(s) for s in args.pool_sizes.split(",") if s.strip().isdigit()]
    scale_methods = [m for m in SCALING_METHODS if m in result["rows"]]
    scale = scaling(pool, retriever, test_q, vectors, [s for s in sizes if s <= len(pool)], scale_methods)
    if len(pool) < len(dataset.pool):
        sparse = [m for m in scale_methods if not needs_dense(m)]
        full_ret = FieldAwareRetriever(dataset.pool)
        for size, vals in scaling(dataset.pool, full_ret, test_q, None, [s for s in sizes if s > len(pool)],
                                  sparse).items():
            scale.setdefault(size, {}).update(vals)
    plot(scale, out_dir / "recall_vs_pool.png")

    def scale_md() -> str:
        cols = sorted({m for v in scale.values() for m in v}, key=lambda m: list(LABELS).index(m))
        text = "| pool | " + " | ".join(LABELS[m] for m in cols) + " |\n|---:|" + "---:|" * len(cols)
        for size in sorted(scale, key=int):
            text += f"\n| {size} | " + " | ".join(
                f"{100 * scale[size][m]:.2f}" if m in scale[size] else "" for m in cols) + " |"
        return text

    query_rule = ("3 to 8 keywords from a reference file's headings" if dataset.meta.get("style") == "short"
                  else "a reference file's title + opening paragraph")
    md = [
        f"# Skill retrieval on the reference-file benchmark ({dataset.name})",
        "",
        f"Queries: a fixed sample of {len(test_q)} test queries ({query_rule}; "
        f"gold = its parent skill). Pool: {len(pool)} SKILL.md documents"
        + (f" (every gold skill of the sampled test and dev queries plus a fixed random sample of the other "
           f"{len(dataset.pool)} corpus skills)" if len(pool) < len(dataset.pool) else "")
        + f". MLPs trained on {len(dev_q)} dev queries. Dense: {encoder.model_id if encoder else 'off'}. "
        "Metrics in %, MRR in [0, 1]; ms/query = one query at a time incl. encoding it; batch ms/q = whole sample "
        "scored in batches.",
        "",
        format_table({LABELS.get(m, m): v for m, v in result["rows"].items()}),
        "",
    ]
    if section_rows:
        md += [f"## RASO's section retrievers ({min(len(test_q), args.section_limit)} of the test queries; a ranking "
               "is the skills of the top 50 sections, first appearance first; ms/query = median, one query at a "
               "time)", "", format_table(section_rows), ""]
    if full_rows:
        md += [f"## Sparse methods on the full {len(dataset.pool)}-skill pool (same queries)", "",
               format_table({LABELS.get(m, m): v for m, v in full_rows.items()}), ""]
    md += ["## Recall@10 as the pool grows (every gold skill kept; others sampled)", "", scale_md(), "",
           "## Timings (s, wall / CPU of this process)", "",
           *(f"- {k}: {w:.1f} / {c:.1f}" for k, (w, c) in timings.items()),
           *(f"- {k}: {v}" for k, v in counts.items()), ""]
    (out_dir / "results.md").write_text("\n".join(md), encoding="utf-8")
    (out_dir / "results.json").write_text(json.dumps({**result, "full_pool_sparse": full_rows, "scaling": scale,
                                                      "section_retrievers": section_rows,
                                                      "timings": timings, "counts": counts}, indent=1,
                                                     default=float), encoding="utf-8")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
