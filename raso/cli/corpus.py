"""`raso corpus build|search|stats`: build a BM25 section index from skill corpora and query it."""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

STARTER = "starter"
#: How often `corpus build` prints a line of its counts when stderr is not a terminal (a log file, CI), where
#: the progress bars are off and a long build would otherwise print nothing for minutes.
PROGRESS_EVERY_S = 30.0
STAGE_LABELS = {"scan": "scanning for blocklisted repositories", "load": "reading files",
                "sections": "splitting sections", "index": "indexing sections"}


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def heading_levels(text: str) -> tuple[int, ...]:
    """`--levels`: Markdown heading levels (1-6) separated by commas."""
    parts = [x.strip() for x in text.split(",") if x.strip()]
    if not parts or not all(p.isdigit() and 1 <= int(p) <= 6 for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: give heading levels 1 to 6 separated by commas, e.g. 1,2,3")
    return tuple(sorted({int(p) for p in parts}))


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
                           description="SRC: a folder tree (every folder with SKILL.md is a skill; repository "
                           "checkouts under repos/<owner>/<name>/ or with .git), a .jsonl dump (one skill per line), "
                           "a folder with MANIFEST.jsonl, a SQLite file (.sqlite/.db), parquet (a file, a folder or "
                           "a quoted glob), or a .zip/.tar(.gz) of any of them. Columns of SQLite and parquet "
                           "sources are mapped automatically (printed; override with --map/--sql). Writes the "
                           "index, its corpus card (corpus_card.json) and its reports (ingest_report.json, "
                           "blocklist_report.json/.md) into --out. See docs/corpus-sources.md.")
    build.add_argument("sources", nargs="+", metavar="SRC")
    build.add_argument("--out", required=True, type=Path, metavar="INDEX",
                       help="index folder to write: a new or empty folder, or an index raso built (with --force); "
                       "never one of the sources or a folder holding them")
    build.add_argument("--force", action="store_true",
                       help="replace an existing index at --out (it stays intact until the new one is complete); "
                       "a folder or file that is not an index is never replaced")
    build.add_argument("--blocklist", action="append", default=[], metavar="NAME",
                       help="drop repositories naming a benchmark: spreadsheet, alfworld, webshop, officeqa or all "
                       "(repeatable)")
    build.add_argument("--map", action="append", default=[], metavar="FIELD=COLUMN", dest="column_map",
                       help="map a column of a SQLite/parquet source to a field: text, name, description, repo, "
                       "path, commit, license, content_hash, stars, references (repeatable)")
    build.add_argument("--sql", metavar="QUERY", help="for a SQLite source: the SELECT whose rows are the skills "
                       "(its columns are mapped as a table's)")
    build.add_argument("--repos", type=Path, metavar="FILE", help="a parquet file of repository metadata (repo, "
                       "licence, stars) to join by repo name")
    build.add_argument("--follow-links-out", action="store_true",
                       help="for a folder tree you trust: follow links to files and folders outside it (by "
                       "default they are reported as link_outside and not read)")
    build.add_argument("--license", default="", metavar="SPDX,...",
                       help="keep only skills under these licences (SPDX ids, any case), e.g. mit,apache-2.0; a skill "
                       "whose front matter or LICENSE file reserves the rights (Proprietary, All rights reserved) is "
                       "`proprietary` and dropped; the build prints how many per licence")
    build.add_argument("--unknown-license", choices=("keep", "drop"), default="keep",
                       help="with --license: keep (default) or drop skills whose licence is unknown")
    build.add_argument("--name", help="the corpus's name in its card and in every run that uses it "
                       "(default: the source's file name)")
    build.add_argument("--release-date", metavar="YYYY-MM-DD", help="the release's date, for the corpus card")
    build.add_argument("--levels", default="1,2,3", type=heading_levels,
                       help="heading levels that split sections (default 1,2,3)")
    build.add_argument("--max-chars", type=int, default=4000, help="longer sections are windowed (default 4000)")
    build.add_argument("--no-references", action="store_true", help="index SKILL.md files only")
    build.add_argument("--k1", type=float, default=1.5)
    build.add_argument("--b", type=float, default=0.75)
    build.add_argument("--idf", choices=("lucene", "okapi"), default="lucene",
                       help="lucene (default) or okapi (rank-bm25 BM25Okapi parity)")
    build.set_defaults(func=build_command)

    from raso.retrieval.retrievers import RETRIEVER_KINDS, RetrievalOptions

    default_kind = RetrievalOptions.model_fields["kind"].default
    search = sub.add_parser("search", help="the top-K sections a run retrieves for a query, by skill",
                            description="Runs the retriever a run builds (raso.api.make_retriever, vetted as in a "
                            "run), so the sections printed are the sections RASI/RASU would be handed for this "
                            "query. Near-duplicate sections (other forks or copies of the same text) are one hit "
                            "with the number of copies the retriever left out.")
    search.add_argument("index", metavar="INDEX", help="index folder, or `starter`")
    search.add_argument("query")
    default_k = RetrievalOptions.model_fields["k"].default
    search.add_argument("-k", type=positive_int, default=default_k, help="how many sections to print, as "
                        f"retrieval.k of a run (default {default_k})")
    search.add_argument("--retriever", choices=RETRIEVER_KINDS, default=None, metavar="KIND",
                        help=f"the retriever kind, as retrieval.kind of a run: {', '.join(RETRIEVER_KINDS)} "
                        f"(default: a run's default, {default_kind}; dreamer, which calls a model per query, is refused)")
    search.add_argument("--exclude-repo", action="append", default=[], metavar="OWNER/NAME")
    search.add_argument("--exclude-skill", action="append", default=[], metavar="SKILL_ID")
    search.add_argument("--json", action="store_true", help="print hits as JSON lines")
    search.set_defaults(func=search_command)

    stats = sub.add_parser("stats", help="size, parameters and sources of an index")
    stats.add_argument("index", metavar="INDEX", help="index folder, or `starter`")
    stats.add_argument("--json", action="store_true")
    stats.set_defaults(func=stats_command)


def _open_index(name: str):
    """(index, its folder, its build reports by file name); an index whose reports are damaged is refused too,
    so a search never runs on an index it cannot vouch for."""
    from corpus_tools.build import read_build_reports
    from corpus_tools.index import SectionIndex
    from corpus_tools.starter import starter_index

    if name == STARTER and not Path(name).exists():
        index = starter_index()
        directory = index.directory
    else:
        index, directory = SectionIndex.load(name), Path(name)
    return index, directory, read_build_reports(directory) if directory is not None else {}


def _open_error(name: str, exc: Exception) -> int:
    from corpus_tools.index import IndexIntegrityError

    hint = f" (`raso corpus build SRC... --out {name} --force`)" if isinstance(exc, IndexIntegrityError) else ""
    print(f"error: {exc}{hint}", file=sys.stderr)
    return 2


class _ProgressLines:
    """For a build whose stderr is not a terminal: a line of the counts so far every `every` seconds, printed by a
    daemon thread, so a stage that reports nothing for a while (the final merge) still shows the build is alive."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.counts: dict[str, tuple[int, int | None]] = {}
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="corpus-build-progress", daemon=True)

    def update(self, stage: str, done: int, total: int | None) -> None:
        self.counts[stage] = (done, total)

    def line(self) -> str:
        seconds = int(time.monotonic() - self.started)
        parts = [f"{STAGE_LABELS.get(stage, stage)} {done:,}" + (f" of {total:,}" if total else "")
                 for stage, (done, total) in list(self.counts.items())]
        return f"corpus build: {'; '.join(parts) or 'starting'} ({seconds // 60}m{seconds % 60:02d}s)"

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            print(self.line(), file=sys.stderr, flush=True)

    def __enter__(self) -> "_ProgressLines":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def build_command(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    from corpus_tools.blocklist import resolve_benchmarks
    from corpus_tools.build import OutputFolderError, build_corpus_index
    from corpus_tools.sources import SourceError, SourceOptions, parse_overrides

    console = Console(stderr=True)
    try:
        levels = args.levels
        blocklists = resolve_benchmarks(args.blocklist)
        options = SourceOptions(overrides=parse_overrides(args.column_map), sql=args.sql, repos=args.repos,
                                follow_links_out=args.follow_links_out)
        if args.repos is not None and not args.repos.is_file():
            raise SourceError(f"--repos {args.repos}: no such file")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    lines = _ProgressLines(PROGRESS_EVERY_S)
    # The build writes only into a temporary sibling of --out, removed on any failure: --out stays as it is now.
    kept = f"{args.out} was left as it was" if args.out.exists() else f"nothing was written to {args.out}"
    with Progress(TextColumn("{task.description:<20}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False, disable=not console.is_terminal) as bar:
        tasks: dict[str, TaskID] = {}

        def progress(stage: str, done: int, total: int | None) -> None:
            lines.update(stage, done, total)
            if stage not in tasks:
                tasks[stage] = bar.add_task(STAGE_LABELS.get(stage, stage), total=total)
            bar.update(tasks[stage], completed=done, total=total)

        try:
            with contextlib.nullcontext() if console.is_terminal else lines:  # a terminal has the bars
                result = build_corpus_index(
                    args.sources, args.out, blocklists=blocklists, levels=levels, max_chars=args.max_chars,
                    include_references=not args.no_references, k1=args.k1, b=args.b, idf=args.idf,
                    progress=progress, options=options, licenses=args.license,
                    keep_unknown_license=args.unknown_license == "keep", name=args.name,
                    release_date=args.release_date, replace=args.force)
        except (SourceError, OutputFolderError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:
            where = f" ({exc.filename})" if exc.filename else ""
            todo = "; free some space and run it again" if exc.errno == errno.ENOSPC else ""
            print(f"error: corpus build failed: {exc.strerror or exc}{where}; {kept}{todo}", file=sys.stderr)
            return 2 if isinstance(exc, PermissionError) else 1
        except KeyboardInterrupt:
            print(f"interrupted; {kept}", file=sys.stderr)
            return 130
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
        print(result.blocklist.summary() + f" ({args.out}/blocklist_report.md)")
    if result.card is not None:
        counts = result.card["counts"]
        print("licences of the skills read: " + ", ".join(f"{k} {v:,}" for k, v in counts["licences"].items()))
        if args.license:
            by_class = ", ".join(f"{k} {v:,}" for k, v in counts["dropped_by_licence"].items())
            print(f"--license {args.license}: dropped {counts['dropped']['licence']:,} skills"
                  + (f" ({by_class})" if by_class else ""))
    print("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in result.seconds.items()))
    if result.card is not None:
        print(f"corpus card: {result.card['name']}, {result.card['skills']:,} skills, digest {result.card['digest'][:12]}"
              f" ({args.out}/corpus_card.json)")
    return 0


def _snippet(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def search_command(args: argparse.Namespace) -> int:
    from raso.api import make_retriever
    from raso.engine.config import OptimizeConfig

    if args.retriever == "dreamer":
        print("error: --retriever dreamer calls the optimizer model for every query; score it with `raso retrieval "
              "eval --method dreamer`, or choose another kind", file=sys.stderr)
        return 2
    try:
        index, _, _ = _open_index(args.index)
    except (FileNotFoundError, ValueError) as exc:
        return _open_error(args.index, exc)
    # The run's own construction (the retrieval section's defaults, vetting included), over the index opened here.
    config = OptimizeConfig(retrieval={"kind": args.retriever} if args.retriever else {})
    try:
        retriever = make_retriever(config, index=index)
    except (OSError, ValueError, RuntimeError, ImportError, NotImplementedError) as exc:  # as a run's RunError
        print(f"error: cannot build the {config.retrieval.kind!r} retriever over {args.index}: {exc}", file=sys.stderr)
        return 2
    hits = retriever.search(args.query, k=args.k, exclude_repos=tuple(args.exclude_repo),
                            exclude_skills=tuple(args.exclude_skill))
    take_dropped = getattr(retriever, "take_dropped", None)
    drops = take_dropped() if callable(take_dropped) else []
    copies: dict[str, list] = {}
    for drop in drops:
        if drop.duplicate_of:
            copies.setdefault(drop.duplicate_of, []).append(drop)
    flagged = sum(1 for drop in drops if not drop.duplicate_of)
    if not hits:
        print("no matching sections", file=sys.stderr)
        return 1
    if args.json:
        for rank, hit in enumerate(hits, 1):
            s = hit.section
            print(json.dumps({"rank": rank, "score": round(hit.score, 4), "id": s.id, "skill_id": s.skill_id,
                              "skill_name": s.skill_name, "heading_path": s.heading_path, "repo": s.repo,
                              "path": s.path, "commit": s.commit, "license": s.license, "text": s.text,
                              "copies": 1 + len(copies.get(s.id, [])),
                              "other_copies": [{"id": d.section_id, "repo": d.repo, "path": d.path}
                                               for d in copies.get(s.id, [])]}, ensure_ascii=False))
        return 0
    print(f"retriever {config.retrieval.kind}, k {args.k}")
    by_skill: dict[str, list[tuple[int, Any]]] = {}  # in order of each skill's best hit
    for rank, hit in enumerate(hits, 1):
        by_skill.setdefault(hit.section.skill_id, []).append((rank, hit))
    for ranked in by_skill.values():
        first = ranked[0][1].section
        print(f"{first.skill_name} ({first.repo})")
        for rank, hit in ranked:
            s = hit.section
            print(f"  {rank}. [{hit.score:.2f}] {s.heading_path}")
            print(f"     {s.repo}/{s.path} @ {s.commit[:12]} ({s.license})")
            print(f"     {_snippet(s.text)}")
            others = copies.get(s.id, [])
            if others:
                named = ", ".join(f"{d.repo}/{d.path}" for d in others[:3])
                more = f" and {len(others) - 3} more" if len(others) > 3 else ""
                print(f"     {1 + len(others)} copies; also in {named}{more}")
    if flagged:
        print(f"(the vetting scan left out {flagged} flagged section{'s' if flagged > 1 else ''}, as a run does)",
              file=sys.stderr)
    return 0


def _disk_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def _card_lines(card: dict) -> list[str]:
    counts = card.get("counts", {})
    lines = [f"corpus: {card.get('name')}" + (f" (release {card['release_date']})" if card.get("release_date") else "")
             + (" [demo]" if card.get("demo") else "") + f"  skills {card.get('skills')}  digest {card.get('digest')}"]
    for entry in card.get("inputs", []):
        size = f"{entry['bytes']:,} bytes" if "bytes" in entry else ""
        files = entry.get("files")
        detail = ", ".join(x for x in (size, f"{files:,} files" if isinstance(files, int) else
                                       f"{len(files)} files" if files else "",
                                       f"sha256 {entry['sha256'][:16]}" if entry.get("sha256") else "") if x)
        lines.append(f"  input {entry.get('kind')}: {entry.get('name')}" + (f" ({detail})" if detail else ""))
    for source, mapping in (card.get("mappings") or {}).items():
        fields = mapping.get("text", {}).get("fields", {})
        lines.append(f"  columns of {source}: " + ", ".join(f"{k}={v}" for k, v in fields.items()))
    if counts:
        dropped = ", ".join(f"{k} {v}" for k, v in counts.get("dropped", {}).items())
        skipped = ", ".join(f"{k} {v}" for k, v in (counts.get("skipped") or {}).items())
        lines.append(f"  read {counts.get('read')}; kept {counts.get('kept')}; dropped: {dropped or 'none'}"
                     + (f"; skipped: {skipped}" if skipped else ""))
        if counts.get("licences"):
            lines.append("  licences of the skills read: " + ", ".join(f"{k} {v}" for k, v in counts["licences"].items()))
    build = card.get("build") or {}
    if build:
        lines.append("  build: " + ", ".join(f"{k}={v}" for k, v in build.items() if v not in (None, [], {}, "")))
    return lines


def stats_command(args: argparse.Namespace) -> int:
    from corpus_tools.card import CARD_FILE

    try:
        index, directory, reports = _open_index(args.index)
    except (FileNotFoundError, ValueError) as exc:
        return _open_error(args.index, exc)
    stats = index.stats()
    if directory is not None:
        stats["disk_bytes"] = _disk_bytes(directory)
    if "ingest_report.json" in reports:
        data = reports["ingest_report.json"]
        stats["ingest"] = {k: data.get(k) for k in ("files_seen", "skills_loaded", "references_loaded",
                                                    "skipped_counts", "note_counts")}
    if CARD_FILE in reports:
        stats["corpus_card"] = reports[CARD_FILE]
    if "blocklist_report.json" in reports:
        stats["blocklist_excluded_repos"] = reports["blocklist_report.json"].get("excluded_repos", [])
    if args.json:
        print(json.dumps(stats, indent=1, ensure_ascii=False))
        return 0
    print(f"sections {stats['sections']}  skills {stats['skills']}  repos {stats['repos']}  "
          f"terms {stats['terms']}  postings {stats['postings']}  avg tokens/section {stats['avgdl']:.1f}")
    print(f"bm25 k1={stats['k1']} b={stats['b']} idf={stats['idf']} dtype={stats['dtype']} "
          f"tokenizer={stats['tokenizer']}")
    if "disk_bytes" in stats:
        print(f"disk {stats['disk_bytes'] / 1e6:.1f} MB")
    if "corpus_card" in stats:
        print("\n".join(_card_lines(stats["corpus_card"])))
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
