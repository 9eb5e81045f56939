"""Section-index scaling table: the streaming build (corpus_tools.index_build) at 1M, 3M, 10M sections.

For every size, in fresh processes (so each peak RSS is its own):
  build   stream recombined real sections (bench_bm25.synthetic_sections: first half of one shared-
          corpus section + second half of another) into an index on disk: wall and CPU seconds, peak
          RSS (and peak RSS above the process's RSS once the base sections are loaded), size on disk;
  build-sections  the same build without the skill level and the vetting scan (today's section
          index alone), for the build cost of the skill level and the scan in the same run;
  query   load the index memory-mapped, time top-5 queries pinned to one core: load seconds,
          median / p95 (wall and CPU), peak RSS; then section BM25 top-5 and two-stage top-5
          (skill level -> sections, corpus_tools.skill_index) alternated query by query on the
          same loaded index, CPU median / p95 of each and their ratio;
  bm25s   (sizes up to --bm25s-max) bm25s on the same tokens, in memory: build seconds, peak RSS,
          top-5 median / p95, and whether its top-5 sets equal ours.

Usage: python benchmarks/bench_index_scale.py --sizes 1000000,3000000 [--work DIR] [--out results.json]
The base sections are read from the shared corpus once ("prepare") and pickled into --work.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_bm25 import (  # noqa: E402
    current_rss_mb,
    lat,
    make_queries,
    peak_rss_mb,
    pin_one_core,
    real_sections,
    synthetic_sections,
    timed_queries,
)

from corpus_tools.index import SectionIndex, index_text  # noqa: E402
from corpus_tools.index_build import write_index  # noqa: E402
from corpus_tools.skill_index import SkillIndex, skill_index_dir, two_stage_top_k  # noqa: E402
from corpus_tools.tokenizer import tokenize  # noqa: E402
from corpus_tools.vetting import flag_bits  # noqa: E402
from raso.retrieval.retrievers import TWO_STAGE_SKILL_WEIGHT, TWO_STAGE_TOP_SKILLS  # noqa: E402


def stage_prepare(args: argparse.Namespace) -> dict:
    base = real_sections(args.corpus)
    with open(args.work / "base.pkl", "wb") as fh:
        pickle.dump(base, fh, protocol=pickle.HIGHEST_PROTOCOL)
    (args.work / "queries.json").write_text(json.dumps(make_queries(base, args.queries)))
    return {"base_sections": len(base)}


def _base() -> list:
    with open(ARGS.work / "base.pkl", "rb") as fh:
        return pickle.load(fh)


def stage_build(args: argparse.Namespace, sections_only: bool = False) -> dict:
    pin_one_core()
    base = _base()
    rss_before = current_rss_mb()
    target = args.work / (f"index-{args.size}" + ("-sections" if sections_only else ""))
    t, c = time.perf_counter(), time.process_time()
    if sections_only:
        write_index(synthetic_sections(base, args.size), target, total=args.size, skill_level=False)
    else:
        write_index(synthetic_sections(base, args.size), target, total=args.size, flagger=flag_bits)
    build, cpu = time.perf_counter() - t, time.process_time() - c
    meta = json.loads((target / "meta.json").read_text())
    disk = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    skills_dir = target / "skills"
    if skills_dir.is_dir():
        meta["skill_documents"] = meta["skill_index"]["documents"]
        meta["skill_index_mb"] = round(sum(p.stat().st_size for p in skills_dir.rglob("*") if p.is_file()) / 1e6, 1)
        meta["flagged_sections"] = int(np.count_nonzero(np.load(target / "flags.npy")))
    if sections_only:
        shutil.rmtree(target, ignore_errors=True)
    return {"sections": meta["sections"], "terms": meta["terms"], "postings": meta["postings"],
            "build_seconds": round(build, 1), "build_cpu_seconds": round(cpu, 1),
            "peak_rss_mb": round(peak_rss_mb(), 1), "rss_base_sections_mb": round(rss_before, 1),
            "peak_rss_above_base_mb": round(peak_rss_mb() - rss_before, 1), "disk_mb": round(disk / 1e6, 1),
            **{k: meta[k] for k in ("skill_documents", "skill_index_mb", "flagged_sections") if k in meta}}


def stage_build_sections(args: argparse.Namespace) -> dict:
    return stage_build(args, sections_only=True)


def two_stage_against_sections(index: SectionIndex, queries: list[str], target: Path) -> dict:
    """Section BM25 top-5 and two-stage top-5 (the defaults, and the first cut over 10 skills) on the same
    loaded index, alternated query by query (CPU ms)."""
    t = time.perf_counter()
    skills = SkillIndex.load(skill_index_dir(target))
    load = time.perf_counter() - t

    def two_stage(q: str, top_skills: int = TWO_STAGE_TOP_SKILLS, weight: float = TWO_STAGE_SKILL_WEIGHT):
        return two_stage_top_k(index, skills, q, 5, top_skills=top_skills, per_skill=2, skip_flagged=True,
                               skill_weight=weight)

    def narrow(q: str):  # the first cut: the 10 best skills
        return two_stage(q, 10, 1.0)

    for q in queries[:5]:
        index.top_k(q, 5), two_stage(q), narrow(q)
    timings: dict[str, list[float]] = {"section": [], "two": [], "narrow": []}
    for _ in range(3):
        for q in queries:
            for name, fn in (("section", lambda q: index.top_k(q, 5)), ("two", two_stage), ("narrow", narrow)):
                c = time.process_time()
                fn(q)
                timings[name].append(time.process_time() - c)
    ms = {name: np.asarray(values) * 1000 for name, values in timings.items()}
    out = {"skill_load_seconds": round(load, 3), "skill_documents": len(skills)}
    for name, label in (("section", "section_bm25"), ("two", "two_stage"), ("narrow", "two_stage_top10")):
        out[f"{label}_cpu_median_ms"] = round(float(np.median(ms[name])), 3)
        out[f"{label}_cpu_p95_ms"] = round(float(np.percentile(ms[name], 95)), 3)
    out["median_ratio"] = round(float(np.median(ms["two"]) / np.median(ms["section"])), 2)
    out["peak_rss_mb"] = round(peak_rss_mb(), 1)
    return out


def stage_query(args: argparse.Namespace) -> dict:
    pin_one_core()
    queries = json.loads((args.work / "queries.json").read_text())
    t = time.perf_counter()
    index = SectionIndex.load(args.work / f"index-{args.size}")
    load = time.perf_counter() - t
    cold = timed_queries(lambda q: index.top_k(q, 5), queries[:50], repeat_warmup=0)
    warm = timed_queries(lambda q: index.top_k(q, 5), queries)
    results = {q: index.top_k(q, 5)[0].tolist() for q in queries}
    (args.work / f"ours-{args.size}.json").write_text(json.dumps(results))
    out = {"load_seconds": round(load, 3), "first_50_after_load": lat(cold), "top5": lat(warm),
           "peak_rss_mb": round(peak_rss_mb(), 1)}
    if args.baseline_module:
        out["baseline"] = compare_with_baseline(index, queries, args)
    if skill_index_dir(args.work / f"index-{args.size}") is not None:
        out["two_stage"] = two_stage_against_sections(index, queries, args.work / f"index-{args.size}")
    return out


def compare_with_baseline(index: SectionIndex, queries: list[str], args: argparse.Namespace) -> dict:
    """Time another version of corpus_tools/index.py (e.g. `git show REV:corpus_tools/index.py > old.py`)
    on the same index, alternating query by query so both see the same machine load; check results."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("baseline_index", args.baseline_module)
    module = importlib.util.module_from_spec(spec)
    sys.modules["baseline_index"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    old = module.SectionIndex.load(args.work / f"index-{args.size}")
    new_ms, old_ms, same = [], [], 0
    for q in queries[:5]:
        index.top_k(q, 5), old.top_k(q, 5)
    for _ in range(3):
        for q in queries:
            c = time.process_time()
            docs_new, scores_new = index.top_k(q, 5)
            new_ms.append(time.process_time() - c)
            c = time.process_time()
            docs_old, scores_old = old.top_k(q, 5)
            old_ms.append(time.process_time() - c)
            same += docs_new.tolist() == docs_old.tolist() and np.allclose(scores_new, scores_old, rtol=1e-6)
    new_ms, old_ms = np.asarray(new_ms) * 1000, np.asarray(old_ms) * 1000
    return {"module": str(args.baseline_module), "cpu_median_ms": round(float(np.median(new_ms)), 3),
            "cpu_p95_ms": round(float(np.percentile(new_ms, 95)), 3),
            "baseline_cpu_median_ms": round(float(np.median(old_ms)), 3),
            "baseline_cpu_p95_ms": round(float(np.percentile(old_ms, 95)), 3),
            "median_speedup": round(float(np.median(old_ms) / np.median(new_ms)), 2),
            "same_top5": f"{same}/{3 * len(queries)}"}


def stage_bm25s(args: argparse.Namespace) -> dict:
    import bm25s

    pin_one_core()
    base = _base()
    queries = json.loads((args.work / "queries.json").read_text())
    rss_before = current_rss_mb()
    # Our tokens, handed over as (ids, vocab) -- the form bm25s.tokenize produces -- so the memory
    # measured is bm25s's index, not a list of 10^8 Python strings.
    t, c = time.perf_counter(), time.process_time()
    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(w, len(vocab)) for w in tokenize(index_text(s))]
           for s in synthetic_sections(base, args.size)]
    tokenize_seconds, tokenize_cpu = time.perf_counter() - t, time.process_time() - c
    rss_tokens = current_rss_mb()
    t, c = time.perf_counter(), time.process_time()
    engine = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    engine.index((ids, vocab), show_progress=False)
    build, build_cpu = time.perf_counter() - t, time.process_time() - c
    del ids

    def query(q: str):
        toks = [w for w in tokenize(q) if w in engine.vocab_dict]
        return engine.retrieve([toks], k=5, show_progress=False, n_threads=1) if toks else None

    ms = timed_queries(query, queries)
    ours = json.loads((args.work / f"ours-{args.size}.json").read_text())
    same = 0
    for q in queries:
        toks = [w for w in tokenize(q) if w in engine.vocab_dict]
        docs = engine.retrieve([toks], k=5, show_progress=False, n_threads=1)[0][0].tolist() if toks else []
        same += set(docs) == set(ours[q])
    return {"tokenize_seconds": round(tokenize_seconds, 1), "tokenize_cpu_seconds": round(tokenize_cpu, 1),
            "build_seconds": round(build, 1), "build_cpu_seconds": round(build_cpu, 1),
            "rss_after_tokenize_mb": round(rss_tokens, 1),
            "peak_rss_mb": round(peak_rss_mb(), 1), "peak_rss_above_base_mb": round(peak_rss_mb() - rss_before, 1),
            "top5": lat(ms), "same_top5_sets": f"{same}/{len(queries)}"}


STAGES = {"prepare": stage_prepare, "build": stage_build, "build-sections": stage_build_sections,
          "query": stage_query, "bm25s": stage_bm25s}
ARGS: argparse.Namespace


def run_stage(stage: str, args: argparse.Namespace, size: int) -> dict:
    cmd = [sys.executable, __file__, "--stage", stage, "--size", str(size), "--work", str(args.work),
           "--corpus", str(args.corpus), "--queries", str(args.queries)]
    if args.baseline_module:
        cmd += ["--baseline-module", str(args.baseline_module)]
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:], "wall_seconds": round(time.perf_counter() - started, 1)}
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall_seconds"] = round(time.perf_counter() - started, 1)
    return result


def print_table(results: dict) -> None:
    print("\n| sections | build s (CPU s) | peak RSS MB (above base) | index MB | load s | top-5 median ms | p95 ms "
          "| CPU median ms | bm25s build s | bm25s peak RSS MB | bm25s median ms | bm25s p95 ms | same top-5 |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size, row in results["sizes"].items():
        b, q, s = row.get("build", {}), row.get("query", {}), row.get("bm25s") or {}
        top = q.get("top5", {})
        cells = [size, f"{b.get('build_seconds')} ({b.get('build_cpu_seconds')})",
                 f"{b.get('peak_rss_mb')} ({b.get('peak_rss_above_base_mb')})", b.get("disk_mb"),
                 q.get("load_seconds"), top.get("median_ms"), top.get("p95_ms"), top.get("cpu_median_ms"),
                 s.get("build_seconds", "-"), s.get("peak_rss_mb", "-"), s.get("top5", {}).get("median_ms", "-"),
                 s.get("top5", {}).get("p95_ms", "-"), s.get("same_top5_sets", "-")]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    print("\n| sections | build CPU s: sections only / + skill level and scan | peak RSS MB above base: sections only / "
          "full | skill docs | skill index MB | flagged | top-5 CPU median / p95 ms: section BM25 | two-stage | ratio |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size, row in results["sizes"].items():
        b, o, t = row.get("build", {}), row.get("build-sections") or {}, row.get("query", {}).get("two_stage", {})
        cells = [size, f"{o.get('build_cpu_seconds', '-')} / {b.get('build_cpu_seconds')}",
                 f"{o.get('peak_rss_above_base_mb', '-')} / {b.get('peak_rss_above_base_mb')}", b.get("skill_documents"),
                 b.get("skill_index_mb"), b.get("flagged_sections"),
                 f"{t.get('section_bm25_cpu_median_ms')} / {t.get('section_bm25_cpu_p95_ms')}",
                 f"{t.get('two_stage_cpu_median_ms')} / {t.get('two_stage_cpu_p95_ms')}", t.get("median_ratio")]
        print("| " + " | ".join(str(c) for c in cells) + " |")


def main() -> int:
    global ARGS
    default_corpus = Path(os.environ.get("RASO_SHARED_DIR", REPO.parent / "shared")) / "corpus"
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=default_corpus)
    parser.add_argument("--sizes", default="1000000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--bm25s-max", type=int, default=1_000_000, help="largest size bm25s is run at")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-index-scale"))
    parser.add_argument("--keep", action="store_true", help="keep the built indexes in --work")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--baseline-module", type=Path, default=None,
                        help="another corpus_tools/index.py to time against on the same index (query stage)")
    parser.add_argument("--sections-baseline", action="store_true",
                        help="also build the section index alone (no skill level, no scan) for the build cost")
    parser.add_argument("--stage", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = ARGS = parser.parse_args()
    if args.stage:
        print(json.dumps(STAGES[args.stage](args)))
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    results: dict = {"sizes": {}}
    if not (args.work / "base.pkl").is_file():
        results["prepare"] = run_stage("prepare", args, 0)
        print(f"prepare: {results['prepare']}", file=sys.stderr, flush=True)
    for size in (int(s) for s in args.sizes.split(",")):
        row = results["sizes"][size] = {}
        stages = ("build", "query") + (("build-sections",) if args.sections_baseline else ()) + \
            (("bm25s",) if size <= args.bm25s_max else ())
        for stage in stages:
            row[stage] = run_stage(stage, args, size)
            print(f"{size} {stage}: {json.dumps(row[stage])}", file=sys.stderr, flush=True)
            if args.out:
                args.out.write_text(json.dumps(results, indent=1) + "\n")
        if not args.keep:
            shutil.rmtree(args.work / f"index-{size}", ignore_errors=True)
    print_table(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
