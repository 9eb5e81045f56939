"""Why does BM25 over whole skills trail TF-IDF on long queries? An ablation on the reference-file
benchmark (query = a reference file's title + opening paragraph; pool = the corpus's SKILL.md files).

Rows vary one thing at a time against BM25 over whole skills (concat, from k1 1.5, b 0.75,
query terms counted as often as they occur): the query-term weighting (raw count, once, 1 + ln),
the length normalisation b, the saturation k1; TF-IDF (sublinear tf, cosine) is the reference.

    python benchmarks/bench_retrieval_bm25_params.py [--corpus DIR] [--limit 1000] [--split test]

`--two-stage` sweeps the two-stage section retriever instead (corpus_tools.skill_index): BM25 k1 / b of
the skill level and of the section level, the skill level's TF-IDF, and TF-IDF with and without
sub-linear tf at skill and section level, rated like experiments/retrieval_benchmark.py's section rows
(a ranking = the skills of the top sections, first appearance first). Tune on `--split dev` only:

    python benchmarks/bench_retrieval_bm25_params.py --two-stage --split dev --limit 500 [--bench SHORT.jsonl]

`--skill-dense 0.2,0.4` rates, in one run and over the same streamed index, section `bm25`, `two_stage`
(shipped options) and `two_stage` with dense fusion at the skill stage at each weight
(`retrieval.skill_dense_weight`, the `dense` extra's int8 MiniLM; `--skill-candidates` lexical candidates, a
list),
on each split of `--splits` (dev to choose, test to report) with a ranking = the skills of the top 50
sections, as experiments/retrieval_benchmark.py's section rows. Vectors are kept per text on disk
(experiments.retrieval_benchmark.SavedTextVectors under the embedding cache), so the second query set
reuses the pool's skill vectors:

    python benchmarks/bench_retrieval_bm25_params.py --skill-dense 0.1,0.2,0.3,0.5 --splits dev:500,test:1000
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


def section_setup(pool) -> list:
    """The sections of the pool's SKILL.md files (reference files left out, as in the section rows)."""
    from corpus_tools.ingest import SkillRecord
    from corpus_tools.sections import split_sections

    records = [SkillRecord(id=s.id, name=s.name, description=s.description, body=s.body, text=s.body, metadata={},
                           repo=s.repo, path="SKILL.md", commit="", license="") for s in pool]
    return [sec for r in records for sec in split_sections(r, include_references=False)]


def tfidf_rankings(docs_tokens: list[list[str]], doc_skill: list[str], queries, sublinear: bool,
                   exclude: bool = True) -> list[list[str]]:
    """TF-IDF cosine (smoothed idf) over documents; a ranking = the skills of the top 50 documents."""
    from collections import Counter

    vocab: dict[str, int] = {}
    rows, cols, vals = [], [], []
    for i, toks in enumerate(docs_tokens):
        for t, c in Counter(toks).items():
            rows.append(i)
            cols.append(vocab.setdefault(t, len(vocab)))
            vals.append(float(c))
    m = sp.csr_matrix((np.asarray(vals), (rows, cols)), shape=(len(docs_tokens), len(vocab)))
    if sublinear:
        m.data = 1.0 + np.log(m.data)
    df = np.bincount(m.indices, minlength=len(vocab))
    idf = np.log((1.0 + len(docs_tokens)) / (1.0 + df)) + 1.0
    m = (m @ sp.diags(idf)).tocsr()
    norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    mt = (sp.diags(1.0 / norms) @ m).T.tocsr()
    from corpus_tools.tokenizer import tokenize

    out = []
    for q in queries:
        counts = Counter(t for t in tokenize(q.text) if t in vocab)
        if not counts:
            out.append([])
            continue
        qv = np.zeros(len(vocab))
        for t, c in counts.items():
            qv[vocab[t]] = (1.0 + np.log(c) if sublinear else c) * idf[vocab[t]]
        scores = np.asarray(mt.T @ qv).ravel()
        banned = set(q.exclude) if exclude else set()
        ranking: list[str] = []
        for d in np.argsort(-scores, kind="stable"):
            if scores[d] <= 0 or len(ranking) >= 50:
                break
            sid = doc_skill[d]
            if sid not in banned and sid not in ranking:
                ranking.append(sid)
        out.append(ranking)
    return out


def two_stage_sweep(args, dataset, queries) -> dict[str, dict[str, float]]:
    import tempfile

    from corpus_tools.index import SectionIndex
    from corpus_tools.retrieval.metrics import mean_metrics
    from corpus_tools.skill_index import SkillIndex, two_stage_top_k, write_skill_index
    from corpus_tools.tokenizer import tokenize

    sections = section_setup(dataset.pool)
    golds = [q.gold for q in queries]
    rows: dict[str, dict[str, float]] = {}

    def rate(index, skills, scoring="bm25", top_skills=10, per_skill=2, depth=20, skill_weight=1.0) -> dict[str, float]:
        rankings = []
        for q in queries:
            docs, _, _ = two_stage_top_k(index, skills, q.text, depth, top_skills=top_skills, per_skill=per_skill,
                                         exclude_skills=q.exclude, scoring=scoring, skill_weight=skill_weight)
            rankings.append(list(dict.fromkeys(index.section(int(d)).skill_id for d in docs)))
        return mean_metrics(rankings, golds)

    work = Path(tempfile.mkdtemp(prefix="two-stage-sweep-"))
    if args.weights_only:
        skills = SkillIndex.load(write_skill_index(sections, work / "skills"))
        index = SectionIndex.build(sections)
        for top_skills in args.top_skills:
            for weight in args.skill_weights:
                rows[f"skill BM25 k1 2.0, b 1.0, top_skills {top_skills}, skill weight {weight}"] = rate(
                    index, skills, top_skills=top_skills, skill_weight=weight)
                print(list(rows)[-1], rows[list(rows)[-1]]["R@5"], file=sys.stderr)
        return rows
    skill_grid = [(1.2, 0.75), (1.5, 0.75), (2.0, 0.75), (1.2, 1.0), (2.0, 1.0), (3.0, 1.0)]
    section_grid = [(1.2, 0.75), (1.5, 0.75), (2.0, 0.75), (1.5, 0.5), (1.5, 1.0)]
    skill_levels = {kb: SkillIndex.load(write_skill_index(sections, work / f"skills-{kb[0]}-{kb[1]}", k1=kb[0], b=kb[1]))
                    for kb in skill_grid}
    section_levels = {kb: SectionIndex.build(sections, k1=kb[0], b=kb[1]) for kb in section_grid}
    base_section = section_levels[(1.5, 0.75)]
    for kb, skills in skill_levels.items():
        rows[f"skill BM25 k1 {kb[0]}, b {kb[1]} / section k1 1.5, b 0.75"] = rate(base_section, skills)
        print(f"skill {kb}: R@5 {100 * rows[list(rows)[-1]]['R@5']:.1f}", file=sys.stderr)
    best_skill = max(skill_grid, key=lambda kb: rows[f"skill BM25 k1 {kb[0]}, b {kb[1]} / section k1 1.5, b 0.75"]["R@5"])
    for kb, index in section_levels.items():
        if kb != (1.5, 0.75):
            rows[f"skill BM25 k1 {best_skill[0]}, b {best_skill[1]} / section k1 {kb[0]}, b {kb[1]}"] = rate(
                index, skill_levels[best_skill])
    rows["skill TF-IDF (sublinear) / section k1 1.5, b 0.75"] = rate(base_section, skill_levels[(2.0, 1.0)], "tfidf")
    for top_skills, per_skill in ((5, 2), (10, 1), (10, 3), (20, 2)):
        rows[f"skill BM25 k1 {best_skill[0]}, b {best_skill[1]}, top_skills {top_skills}, per_skill {per_skill}"] = rate(
            base_section, skill_levels[best_skill], top_skills=top_skills, per_skill=per_skill)
    section_tokens = [tokenize(s.heading_path) + tokenize(s.text) for s in sections]
    section_skill = [s.skill_id for s in sections]
    skill_tokens: dict[str, list[str]] = {}
    for s, toks in zip(sections, section_tokens):
        skill_tokens.setdefault(s.skill_id, tokenize(s.skill_name)).extend(toks[len(tokenize(s.heading_path)):])
    for sub in (True, False):
        label = "sublinear tf" if sub else "raw tf"
        rows[f"TF-IDF {label}, whole skills (one stage)"] = mean_metrics(
            tfidf_rankings(list(skill_tokens.values()), list(skill_tokens), queries, sub), golds)
        rows[f"TF-IDF {label}, sections (one stage)"] = mean_metrics(
            tfidf_rankings(section_tokens, section_skill, queries, sub), golds)
    rows["section BM25 k1 1.5, b 0.75 (one stage, today's bm25)"] = mean_metrics(
        [list(dict.fromkeys(base_section.section(int(d)).skill_id for d in
                            base_section.top_k(q.text, 50, exclude_skills=q.exclude)[0])) for q in queries], golds)
    import shutil

    shutil.rmtree(work, ignore_errors=True)
    return rows


def skill_dense_rows(args, dataset) -> dict[str, dict[str, dict[str, float]]]:
    """{split: {row: metrics + ms/query}} for bm25, two_stage and two_stage + skill-stage dense fusion."""
    import tempfile

    from corpus_tools.index import SectionIndex
    from corpus_tools.index_build import write_index
    from corpus_tools.retrieval.dense import OnnxMiniLMEncoder
    from experiments.retrieval_benchmark import SavedTextVectors
    from raso.retrieval.retrievers import RetrievalOptions, build_retriever, embedding_cache_dir

    work = Path(tempfile.mkdtemp(prefix="skill-dense-"))
    index = SectionIndex.load(write_index(section_setup(dataset.pool), work / "index"))
    encoder = SavedTextVectors(OnnxMiniLMEncoder(), embedding_cache_dir())
    variants: dict[str, RetrievalOptions] = {
        "bm25 (sections)": RetrievalOptions(kind="bm25", vet=False),
        "two_stage (lexical skill stage, shipped)": RetrievalOptions(kind="two_stage", vet=False),
    }
    for candidates in args.skill_candidates:
        for weight in args.skill_dense:
            variants[f"two_stage+dense, skill_dense_weight {weight}, {candidates} candidates"] = \
                RetrievalOptions(kind="two_stage", vet=False, skill_dense_weight=weight, skill_candidates=candidates)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for split_spec in args.splits.split(","):
        split, _, limit = split_spec.partition(":")
        queries = sample_queries(dataset.split(split), int(limit) if limit else None)
        rows: dict[str, dict[str, float]] = {}
        for label, options in variants.items():
            retriever = build_retriever(options, index=index, encoder=encoder)
            rankings, cpu = [], []
            for q in queries:
                t = time.process_time()
                hits = retriever.search(q.text, k=50, exclude_skills=q.exclude)
                cpu.append(time.process_time() - t)
                rankings.append(list(dict.fromkeys(h.section.skill_id for h in hits)))
            encoder.save()
            rows[label] = {**mean_metrics(rankings, [q.gold for q in queries]), "cpu ms": 1000 * float(np.median(cpu))}
            print(f"{split} {label}: R@5 {100 * rows[label]['R@5']:.1f}", file=sys.stderr, flush=True)
        out[f"{split} ({len(queries)} queries)"] = rows
    print(f"texts encoded in this run (not in the cache before): {encoder.computed}", file=sys.stderr)
    import shutil

    shutil.rmtree(work, ignore_errors=True)
    return out


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
    parser.add_argument("--two-stage", action="store_true", help="sweep the two-stage section retriever instead")
    parser.add_argument("--weights-only", action="store_true",
                        help="with --two-stage: only the skill weight and top_skills (default BM25 parameters)")
    parser.add_argument("--skill-weights", type=lambda v: [float(x) for x in v.split(",")], default=[0.5, 1, 2, 4, 100])
    parser.add_argument("--top-skills", type=lambda v: [int(x) for x in v.split(",")], default=[10, 20])
    parser.add_argument("--skill-dense", type=lambda v: [float(x) for x in v.split(",")], default=None,
                        help="rate two_stage with dense fusion at the skill stage at these weights (see above)")
    parser.add_argument("--skill-candidates", type=lambda v: [int(x) for x in v.split(",")], default=[50],
                        help="with --skill-dense: lexical candidates (one or more, each with every weight)")
    parser.add_argument("--splits", default="dev:500,test:1000", help="with --skill-dense: split:limit, ...")
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
    if args.skill_dense:
        cpu = time.process_time()
        tables = skill_dense_rows(args, dataset)
        cols = ["Hit@1", "R@5", "R@10", "MRR", "cpu ms"]
        print(f"pool {len(dataset.pool)}; {time.process_time() - cpu:.0f} CPU s in all")
        for split, rows in tables.items():
            print(f"\n{split}\n\n| section retriever | " + " | ".join(cols) + " |")
            print("|---|" + "---:|" * len(cols))
            for name, m in rows.items():
                print(f"| {name} | " + " | ".join(
                    f"{m[c]:.3f}" if c == "MRR" else f"{m[c]:.1f}" if c == "cpu ms" else f"{100 * m[c]:.1f}"
                    for c in cols) + " |")
        return 0
    if args.two_stage:
        cpu = time.process_time()
        rows = two_stage_sweep(args, dataset, queries)
        cols = ["Hit@1", "R@5", "R@10", "MRR"]
        print(f"{len(queries)} {args.split} queries, pool {len(dataset.pool)}; {time.process_time() - cpu:.0f} CPU s")
        print("| two-stage variant | " + " | ".join(cols) + " |")
        print("|---|" + "---:|" * len(cols))
        for name, m in rows.items():
            print(f"| {name} | " + " | ".join(f"{100 * m[c]:.1f}" if c != "MRR" else f"{m[c]:.3f}" for c in cols) + " |")
        return 0
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
