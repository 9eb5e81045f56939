"""`raso corpus build|search|stats`: build a BM25 section index from skill corpora and query it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

STARTER = "starter"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "corpus",
        help="build, search and inspect BM25 section indexes of skill corpora",
        description="Index public skills by heading sections for retrieval. INDEX may be `starter` for the "
        "packaged starter corpus (built once, cached under $RASO_CACHE_DIR or ~/.cache/raso).",
    )
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])
    sub = parser.add_subparsers(dest="corpus_command", metavar="ACTION")

    build = sub.add_parser("build", help="index skill sources into INDEX",
                           description="SRC: a folder tree (every folder with SKILL.md is a skill), a .jsonl dump "
                           "(one skill per line) or a folder with MANIFEST.jsonl. Writes the index and its reports "
                           "(ingest_report.json, blocklist_report.json/.md) into --out.")
    build.add_argument("sources", nargs="+", metavar="SRC", type=Path)
    build.add_argument("--out", required=True, type=Path, metavar="INDEX", help="index folder to write")
    build.add_argument("--blocklist", action="append", default=[], metavar="NAME",
                       help="drop repositories naming a benchmark: spreadsheet, alfworld, webshop, officeqa or all "
                       "(repeatable)")
    build.add_argument("--levels", default="1,2,3", help="heading levels that split sections (default 1,2,3)")
    build.add_argument("--max-chars", type=int, default=4000, help="longer sections are windowed (default 4000)")
    build.add_argument("--no-references", action="store_true", help="index SKILL.md files only")
    build.add_argument("--k1", type=float, default=1.5)
    build.add_argument("--b", type=float, default=0.75)
    build.add_argument("--idf", choices=("lucene", "okapi"), default="lucene",
                       help="lucene (default) or okapi (rank-bm25 BM25Okapi parity)")
    build.set_defaults(func=build_command)

    search = sub.add_parser("search", help="top-K sections for a query")
    search.add_argument("index", metavar="INDEX", help="index folder, or `starter`")
    search.add_argument("query")
    search.add_argument("-k", type=int, default=5)
    search.add_argument("--exclude-repo", action="append", default=[], metavar="OWNER/NAME")
    search.add_argument("--exclude-skill", action="append", default=[], metavar="SKILL_ID")
    search.add_argument("--json", action="store_true", help="print hits as JSON lines")
    search.set_defaults(func=search_command)

    stats = sub.add_parser("stats", help="size, parameters and sources of an index")
    stats.add_argument("index", metavar="INDEX", help="index folder, or `starter`")
    stats.add_argument("--json", action="store_true")
    stats.set_defaults(func=stats_command)


def _open_index(name: str):
    from corpus_tools.index import SectionIndex
    from corpus_tools.starter import starter_index

    if name == STARTER and not Path(name).exists():
        return starter_index(), None
    return SectionIndex.load(name), Path(name)


def build_command(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    from corpus_tools.blocklist import resolve_benchmarks
    from corpus_tools.build import build_corpus_index

    console = Console(stderr=True)
    try:
        levels = tuple(int(x) for x in args.levels.split(",") if x.strip())
        blocklists = resolve_benchmarks(args.blocklist)
    except ValueError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    labels = {"load": "reading files", "sections": "splitting sections", "index": "indexing sections"}
    with Progress(TextColumn("{task.description:<20}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False, disable=not console.is_terminal) as bar:
        tasks: dict[str, TaskID] = {}

        def progress(stage: str, done: int, total: int | None) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(labels.get(stage, stage), total=total)
            bar.update(tasks[stage], completed=done, total=total)

        result = build_corpus_index(args.sources, args.out, blocklists=blocklists, levels=levels,
                                    max_chars=args.max_chars, include_references=not args.no_references,
                                    k1=args.k1, b=args.b, idf=args.idf, progress=progress)
    meta = result.index.meta
    print(f"indexed {meta['sections']} sections of {meta['skills_indexed']} skills "
          f"({meta['terms']} terms) into {args.out}")
    print(result.ingest.summary())
    left_out = meta.get("sections_left_out") or {}
    if left_out:
        print("sections left out (no procedural content): " + ", ".join(f"{k} {v}" for k, v in left_out.items()))
    flagged = meta.get("sections_flagged") or {}
    if flagged:
        print("sections flagged by the vetting scan (skipped by default at retrieval): "
              + ", ".join(f"{k} {v}" for k, v in flagged.items()))
    if "skill_index" in meta:
        print(f"skill-level index: {meta['skill_index']['documents']} skills")
    if result.blocklist is not None:
        excluded = result.blocklist.excluded_repos
        print(f"blocklist {', '.join(blocklists)}: excluded {len(excluded)} repositories "
              f"({result.blocklist.excluded_skill_count} skills)" + (f": {', '.join(excluded)}" if excluded else ""))
    print("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in result.seconds.items()))
    return 0


def _snippet(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def search_command(args: argparse.Namespace) -> int:
    try:
        index, _ = _open_index(args.index)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    hits = index.search(args.query, k=args.k, exclude_repos=args.exclude_repo, exclude_skills=args.exclude_skill)
    if not hits:
        print("no matching sections", file=sys.stderr)
        return 1
    for rank, hit in enumerate(hits, 1):
        s = hit.section
        if args.json:
            print(json.dumps({"rank": rank, "score": round(hit.score, 4), "id": s.id, "heading_path": s.heading_path,
                              "repo": s.repo, "path": s.path, "commit": s.commit, "license": s.license,
                              "text": s.text}, ensure_ascii=False))
            continue
        print(f"{rank}. [{hit.score:.2f}] {s.heading_path}")
        print(f"   {s.repo}/{s.path} @ {s.commit[:12]} ({s.license})")
        print(f"   {_snippet(s.text)}")
    return 0


def _disk_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def stats_command(args: argparse.Namespace) -> int:
    try:
        index, directory = _open_index(args.index)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stats = index.stats()
    if directory is not None:
        stats["disk_bytes"] = _disk_bytes(directory)
        report = directory / "ingest_report.json"
        if report.is_file():
            data = json.loads(report.read_text(encoding="utf-8"))
            stats["ingest"] = {k: data[k] for k in ("files_seen", "skills_loaded", "references_loaded",
                                                    "skipped_counts", "note_counts")}
        blocked = directory / "blocklist_report.json"
        if blocked.is_file():
            stats["blocklist_excluded_repos"] = json.loads(blocked.read_text(encoding="utf-8"))["excluded_repos"]
    if args.json:
        print(json.dumps(stats, indent=1, ensure_ascii=False))
        return 0
    print(f"sections {stats['sections']}  skills {stats['skills']}  repos {stats['repos']}  "
          f"terms {stats['terms']}  postings {stats['postings']}  avg tokens/section {stats['avgdl']:.1f}")
    print(f"bm25 k1={stats['k1']} b={stats['b']} idf={stats['idf']} dtype={stats['dtype']} "
          f"tokenizer={stats['tokenizer']}")
    if "disk_bytes" in stats:
        print(f"disk {stats['disk_bytes'] / 1e6:.1f} MB")
    if stats.get("sources"):
        print("sources: " + ", ".join(stats["sources"]))
    if "ingest" in stats:
        ing = stats["ingest"]
        print(f"ingest: {ing['skills_loaded']} skills, {ing['references_loaded']} references; "
              f"skipped {ing['skipped_counts'] or 0}; notes {ing['note_counts'] or 0}")
    if stats.get("blocklist_excluded_repos") is not None:
        print(f"blocklist ({', '.join(stats.get('blocklists', []))}) excluded: "
              f"{', '.join(stats['blocklist_excluded_repos']) or 'nothing'}")
    print("top repositories by sections:")
    for repo, count in stats["top_repos"]:
        print(f"  {count:7d}  {repo}")
    return 0
