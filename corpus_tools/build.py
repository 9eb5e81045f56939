"""One call from corpus sources to a saved section index, with the build reports written beside it.

The build streams: skills are read one at a time (corpus_tools.ingest.iter_corpus), split into
sections and handed to the streaming index writer (corpus_tools.index_build), so memory stays flat
as the corpus grows. Blocklists need to know every repository that leaks before the first section is
written, so with blocklists the sources are read twice (a scan, then the build).

INDEX/ holds the index files plus `ingest_report.json` (every skipped or adjusted file and why),
`corpus_card.json` (corpus_tools.card: the inputs with their sizes and sha256, counts read / kept /
dropped by reason, the build parameters and a stable digest) and, when blocklists were applied,
`blocklist_report.json` / `blocklist_report.md` (every excluded repository and why).

Each section carries the number of repositories that hold its skill's content (doc column `repos`; 0
where the source does not say, e.g. a folder tree). It is recorded for retrieval to use as a prior;
no retriever reads it yet.

A build that indexes no skill is an error (`SourceError`), and a source that fails part-way leaves no
index folder behind. The whole index folder (reports and card included) is written into a temporary
sibling of `out` and renamed into place at the end, so a failed or interrupted build (a full disk, Ctrl-C)
leaves the old index as it was and no temporary folder behind. `out` is never a folder raso did not write:
an existing folder that is not an index, a file, or a path overlapping a source is refused
(`OutputFolderError`) before anything is read; an existing index is replaced only with `replace=True`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from corpus_tools import sources as table_sources
from corpus_tools.blocklist import BlocklistReport, find_leaks
from corpus_tools.card import CARD_FILE, read_card, write_card
from corpus_tools.index import SectionIndex, read_index_json
from corpus_tools.index_build import IndexWriter
from corpus_tools.ingest import SKIP_DUPLICATE, SKIP_LINK_OUTSIDE, UNKNOWN_LICENSES, IngestReport, SkillRecord, iter_corpus
from corpus_tools.sections import DEFAULT_LEVELS, DEFAULT_MAX_CHARS, retrievable_sections, split_sections
from corpus_tools.sources import SourceError, SourceOptions
from corpus_tools.vetting import FLAG_BITS, families_of, flag_bits

SHARDS_MANIFEST = "shards.json"


class OutputFolderError(ValueError):
    """An `out` that a build must not write to (it would replace or delete what raso did not create); the
    message is one line for the user and nothing has been read or written."""


# stage name, done, total (None when unknown)
StageProgress = Callable[[str, int, "int | None"], None]
POPULARITY_COLUMN = "repos"


def normalize_license(value: str) -> str:
    """Lower-case SPDX id for comparison ("MIT" -> "mit"); unknown values become ""."""
    text = value.strip().lower()
    return "" if text in UNKNOWN_LICENSES else text


def license_class(value: str) -> str:
    """The class a licence is counted under: its SPDX id in lower case, `proprietary`, or `unknown`."""
    return normalize_license(value) or "unknown"


def parse_licenses(value: str | Sequence[str]) -> frozenset[str]:
    """`"mit,Apache-2.0"` -> {"mit", "apache-2.0"}."""
    items = value.split(",") if isinstance(value, str) else [x for v in value for x in v.split(",")]
    return frozenset(normalize_license(x) for x in items if normalize_license(x))


def describe_input(source: str | Path) -> dict[str, Any]:
    """Kind, file name, size and sha256 of one input (per file for a folder of parquet files or a glob;
    file count and bytes for a folder tree)."""
    kind = table_sources.source_kind(source)
    path = Path(source)
    entry: dict[str, Any] = {"kind": kind, "name": path.name or str(source)}
    if kind == "parquet" and (table_sources.is_glob(source) or path.is_dir()):
        entry["files"] = [{"name": f.name, **table_sources.file_fingerprint(f)}
                          for f in table_sources.parquet_files(source)]
    elif path.is_file():
        entry.update(table_sources.file_fingerprint(path))
    elif path.is_dir():
        files = total = 0
        for folder, dirs, names in os.walk(path):  # os.walk does not follow folder links
            dirs[:] = [d for d in dirs if d not in (".git", "node_modules")]
            for name in names:
                try:
                    total += os.lstat(os.path.join(folder, name)).st_size
                    files += 1
                except OSError:
                    continue
        entry.update({"files": files, "bytes": total})
    return entry


@dataclass
class BuildResult:
    index: SectionIndex
    ingest: IngestReport
    blocklist: BlocklistReport | None
    seconds: dict[str, float]
    card: dict[str, Any] | None = None


def build_corpus_index(sources: Sequence[str | Path], out: str | Path | None = None, *,
                       blocklists: Sequence[str] = (), levels: tuple[int, ...] = DEFAULT_LEVELS,
                       max_chars: int = DEFAULT_MAX_CHARS, include_references: bool = True, k1: float = 1.5,
                       b: float = 0.75, idf: str = "lucene", shards: int = 1,
                       progress: StageProgress | None = None, keep_all_sections: bool = False,
                       scan: bool = True, options: SourceOptions | None = None,
                       licenses: Sequence[str] = (), keep_unknown_license: bool = True,
                       name: str | None = None, release_date: str | None = None,
                       replace: bool = False) -> BuildResult:
    """Stream `sources` (minus blocklisted repositories) into a section index at `out`; without `out`
    the index is built in a temporary folder and loaded into memory. With `shards` > 1, `out` becomes
    a sharded index (corpus_tools.shards.load_index reads it) and `result.index` is its first shard.

    Sections without procedural content (corpus_tools.sections.unretrievable_reason) are left out
    unless `keep_all_sections`; with `scan` every section's injection / exfiltration flags
    (corpus_tools.vetting) are stored in the index. Both are counted in `section_report.json`.
    `options` maps the columns of table sources (corpus_tools.sources); `licenses` (SPDX ids, any case)
    keeps only skills under one of them, plus those of unknown licence when `keep_unknown_license`.
    `name` and `release_date` go into the corpus card. Raises SourceError (nothing written) for a
    source that cannot be read or a build that would index no skill, and OutputFolderError for an `out` that
    is not a new or empty folder (an index raso built is replaced only with `replace`)."""
    if shards > 1 and out is None:
        raise ValueError("a sharded build needs an output folder")
    options = options or SourceOptions()
    check_sources_exist(sources)
    if out is not None:
        check_output_folder(out, sources, replace=replace, repos=options.repos)
    allowed = parse_licenses(licenses)
    seconds: dict[str, float] = {}

    def stage(name: str):
        return (lambda done, total: progress(name, done, total)) if progress else None

    blocklist_report = None
    excluded: set[str] = set()
    if blocklists:
        t = time.perf_counter()
        blocklist_report = find_leaks(iter_corpus(sources, progress=stage("scan"), options=options), blocklists)
        excluded = set(blocklist_report.excluded)
        seconds["blocklist_scan"] = time.perf_counter() - t
    ingest = IngestReport(sources=[str(s) for s in sources])
    t = time.perf_counter()
    # Everything, reports and card included, is written into `staging` (a private temp folder, or a hidden
    # sibling of `out`) and renamed into place last: until then `out` is as it was, and a failure (a full disk,
    # Ctrl-C) removes `staging` whole.
    created_parents: list[Path] = []
    if out is None:
        staging = Path(tempfile.mkdtemp(prefix="raso-index-"))
    else:
        final = Path(os.path.abspath(out))  # `.` or `x/..` have no name to put a sibling beside
        created_parents = _missing_parents(final)
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = final.with_name(f".{final.name}.tmp-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)  # a leftover of a killed build that had the same pid
        staging.mkdir()
    target = staging / "index"
    flagged: dict[str, int] = {}

    def flagger(text: str) -> int:
        bits = flag_bits(text)
        for family in families_of(bits):
            flagged[family] = flagged.get(family, 0) + 1
        return bits

    left_out: dict[str, int] = {}
    dropped = {"licence": 0, "blocklist": 0, "unretrievable": 0}
    # skills loaded per licence class (the SPDX id in lower case, `proprietary`, or `unknown`), and those the
    # licence filter dropped
    licences: dict[str, int] = {}
    dropped_by_licence: dict[str, int] = {}
    content_digest = hashlib.sha256()
    kept = 0

    def records() -> Iterator[SkillRecord]:
        for record in iter_corpus(sources, ingest, progress=stage("load"), options=options):
            licence = license_class(record.license)
            licences[licence] = licences.get(licence, 0) + 1
            if record.repo in excluded:
                dropped["blocklist"] += 1
            elif allowed and not _license_allowed(record.license, allowed, keep_unknown_license):
                dropped["licence"] += 1
                dropped_by_licence[licence] = dropped_by_licence.get(licence, 0) + 1
            else:
                yield record

    writer: IndexWriter | None = None
    try:
        writer = IndexWriter(target, k1=k1, b=b, idf=idf, shards=shards, progress=stage("index"),
                             flagger=flagger if scan else None, doc_columns={POPULARITY_COLUMN: np.int32})
        for record in records():
            sections = split_sections(record, levels, max_chars, include_references=include_references)
            written = 0
            popularity = int(record.metadata.get("repos") or 0)
            for section in (sections if keep_all_sections else retrievable_sections(sections, left_out)):
                writer.add(section, **{POPULARITY_COLUMN: popularity})
                written += 1
            if written:
                kept += 1
                content_digest.update(f"{record.content_hash}\t{record.repo}\t{record.path}\n".encode())
            else:
                dropped["unretrievable"] += 1
        if kept == 0:
            summary = "; ".join(ingest.summary().splitlines())
            hint = ("; links out of a tree are not followed unless trusted (--follow-links-out)"
                    if ingest.skip_counts().get(SKIP_LINK_OUTSIDE) else "")
            if blocklist_report is not None and dropped["blocklist"]:
                # The build leaves no index, but what removed the skills must still be readable.
                hint += "; " + blocklist_report.summary()
                if out is not None:
                    hint += "; " + save_report_beside(blocklist_report, final)
            raise SourceError(f"no skills to index from {', '.join(map(str, sources))} ({summary}){hint}")
        seconds["read_split_tokenize"] = time.perf_counter() - t
        t = time.perf_counter()
        directory = writer.finish()
        seconds["merge"] = time.perf_counter() - t
        extra = {"sources": [str(s) for s in sources],
                 "blocklists": list(blocklist_report.benchmarks) if blocklist_report else [],
                 "levels": list(levels), "max_chars": max_chars, "skills_indexed": kept,
                 "sections_left_out": dict(sorted(left_out.items())),
                 "sections_flagged": {f: flagged.get(f, 0) for f in FLAG_BITS} if scan else None}
        index_dirs = sorted(directory.glob("shard-*")) if shards > 1 else [directory]
        for folder in index_dirs:
            meta_file = folder / "meta.json"
            meta = json.loads(meta_file.read_text(encoding="utf-8"))
            meta.update(extra)
            meta_file.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        if out is None:
            return BuildResult(SectionIndex.load(directory, mmap=False), ingest, blocklist_report, seconds)
        ingest.save(directory / "ingest_report.json")
        (directory / "section_report.json").write_text(json.dumps(
            {"sections_indexed": writer.n_docs, "sections_left_out": extra["sections_left_out"],
             "sections_flagged": extra["sections_flagged"]}, indent=1) + "\n", encoding="utf-8")
        if blocklist_report is not None:
            blocklist_report.save(directory)
        (directory / "build_seconds.json").write_text(json.dumps({k: round(v, 3) for k, v in seconds.items()}))
        skip_counts = ingest.skip_counts()
        card = {
            "name": name or _default_name(sources),
            "release_date": release_date,
            "demo": False,
            "skills": kept,
            "sections": writer.n_docs,
            "inputs": [describe_input(s) for s in sources],
            "mappings": {Path(k).name or k: {f: v for f, v in m.items() if f != "described"}
                         for k, m in ingest.mappings.items()},
            "content_sha256": content_digest.hexdigest(),
            "counts": {
                "read": ingest.files_seen,
                "skills_loaded": ingest.skills_loaded,
                "kept": kept,
                "dropped": {"duplicate": skip_counts.get(SKIP_DUPLICATE, 0), **dropped},
                "licences": dict(sorted(licences.items(), key=lambda kv: (-kv[1], kv[0]))),
                "dropped_by_licence": dict(sorted(dropped_by_licence.items(), key=lambda kv: (-kv[1], kv[0]))),
                # files or rows not read as skills (binary, empty, too large, ...), by reason
                "skipped": {k: v for k, v in skip_counts.items() if k != SKIP_DUPLICATE},
                "sections_left_out": extra["sections_left_out"],
                "sections_flagged": extra["sections_flagged"],
            },
            "build": {"levels": list(levels), "max_chars": max_chars, "include_references": include_references,
                      "k1": k1, "b": b, "idf": idf, "shards": shards, "keep_all_sections": keep_all_sections,
                      "scan": scan, "blocklists": extra["blocklists"], "licenses": sorted(allowed),
                      "keep_unknown_license": keep_unknown_license, "map": dict(options.overrides),
                      "sql": options.sql, "repos": options.repos.name if options.repos else None,
                      "follow_links_out": options.follow_links_out},
            "built_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "seconds": {k: round(v, 3) for k, v in seconds.items()},
        }
        written_card = write_card(directory, card)
        _move_into_place(directory, final)
    except BaseException:
        if writer is not None:
            writer.abort()
        shutil.rmtree(staging, ignore_errors=True)
        _remove_empty(created_parents)  # only once `staging` is gone can they be empty
        raise
    finally:  # emptied by the move into place, or (without `out`) the loaded index's folder
        shutil.rmtree(staging, ignore_errors=True)
    first = sorted(final.glob("shard-*"))[0] if shards > 1 else final
    return BuildResult(SectionIndex.load(first), ingest, blocklist_report, seconds, written_card)


def save_report_beside(report: BlocklistReport, out: Path) -> str:
    """Write the blocklist report of a build that indexed nothing as `<out>.blocklist_report.md` and `.json`
    beside `out` (each through a temporary sibling), unless a file of either name exists that is not such a
    report (it is left as it is); what was done, for the build's error line."""
    written = {out.with_name(f"{out.name}.blocklist_report.md"): report.to_markdown(),
               out.with_name(f"{out.name}.blocklist_report.json"):
                   json.dumps(report.to_dict(), indent=1, ensure_ascii=False) + "\n"}
    for path in written:
        if os.path.lexists(path) and not (path.is_file() and not path.is_symlink() and _is_blocklist_report(path)):
            return f"report not written: {path} exists and is not a blocklist report (left as it is)"
    for path, text in written.items():
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        try:
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    return f"report: {next(iter(written))}"


def _is_blocklist_report(path: Path) -> bool:
    try:
        head = path.read_text(encoding="utf-8")[:200]
    except (OSError, UnicodeDecodeError):
        return False
    return head.startswith("# Leakage blocklist report") or head.startswith('{\n "benchmarks"')


def _license_allowed(license: str, allowed: frozenset[str], keep_unknown: bool) -> bool:
    value = normalize_license(license)
    return keep_unknown if not value else value in allowed


def _default_name(sources: Sequence[str | Path]) -> str:
    names = [Path(s).name or str(s) for s in sources]
    return names[0] if len(names) == 1 else f"{names[0]} + {len(names) - 1} more"


def is_raso_index(folder: Path) -> bool:
    """Whether `folder` holds an index written by this package (a section index's meta.json, or the manifest
    of a sharded one): the only folders a build may replace."""
    for name, keys in (("meta.json", ("format_version", "tokenizer")), (SHARDS_MANIFEST, ("format_version", "shards"))):
        try:
            data = json.loads((folder / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and all(key in data for key in keys):
            return True
    return False


def check_sources_exist(sources: Sequence[str | Path]) -> None:
    """SourceError naming the first source path that does not exist (a quoted glob is matched later)."""
    for source in sources:
        if not table_sources.is_glob(source) and not os.path.lexists(source):
            raise SourceError(f"no such file or folder: {source}")


def _fixed_part(source: str | Path) -> Path:
    """The path of a source, or for a glob the folder before its first wildcard."""
    if not table_sources.is_glob(source):
        return Path(source)
    parts = Path(source).parts
    fixed = list(itertools.takewhile(lambda part: not table_sources.is_glob(part), parts))
    return Path(*fixed) if fixed else Path(".")


def check_output_folder(out: str | Path, sources: Sequence[str | Path], *, replace: bool = False,
                        repos: Path | None = None) -> None:
    """OutputFolderError unless `out` is new, an empty folder, or (with `replace`) an index raso built, and lies
    apart from every source: writing it must not delete or replace anything raso did not create."""
    path = Path(out)
    where = path.resolve()
    inputs = [(str(s), _fixed_part(s)) for s in sources] + ([(f"--repos {repos}", repos)] if repos else [])
    for label, source in inputs:
        held = source.resolve()
        if where == held:
            raise OutputFolderError(f"--out {out} is the source {label} itself; write the index to a new folder "
                                    "outside the sources")
        if held.is_relative_to(where):
            raise OutputFolderError(f"--out {out} contains the source {label} (building would replace it); write "
                                    "the index to a new folder outside the sources")
        if where.is_relative_to(held):
            raise OutputFolderError(f"--out {out} lies inside the source {label}; write the index to a new folder "
                                    "outside the sources")
    if Path.cwd().resolve().is_relative_to(where):  # renaming it aside would pull the folder from under the shell
        raise OutputFolderError(f"--out {out} is or holds the current folder; write the index to a new folder")
    if path.is_symlink():
        raise OutputFolderError(f"--out {out} is a link; give a new folder (the link was left as it is)")
    if not path.exists():
        return
    if not path.is_dir():
        raise OutputFolderError(f"--out {out} is a file, not an index folder; choose a new folder (the file was "
                                "left as it is)")
    if is_raso_index(path):
        if not replace:
            raise OutputFolderError(f"--out {out} already holds an index; pass --force to replace it, or choose a "
                                    "new folder")
        return
    entries = sorted(p.name for p in path.iterdir())
    if entries:
        contents = f"{len(entries)} entries, e.g. {entries[0]}" if len(entries) > 1 else entries[0]
        raise OutputFolderError(f"--out {out} is a folder that is not an index raso built (it holds {contents}); choose "
                                "a new or empty folder (nothing was changed)")


def _missing_parents(path: Path) -> list[Path]:
    """The ancestors of `path` that do not exist yet, deepest first (to remove again if the build fails)."""
    missing = []
    for parent in path.absolute().parents:
        if parent.exists():
            break
        missing.append(parent)
    return missing


def _remove_empty(folders: list[Path]) -> None:
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def _move_into_place(built: Path, out: Path) -> None:
    """Rename the finished index folder `built` to `out`. An existing `out` (an index raso built, or an empty
    folder) is renamed aside first and removed only once the new one is in place; if the second rename fails
    the old one is put back."""
    if not out.exists():
        built.rename(out)
        return
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    shutil.rmtree(old, ignore_errors=True)
    out.rename(old)
    try:
        built.rename(out)
    except BaseException:
        old.rename(out)
        raise
    shutil.rmtree(old, ignore_errors=True)


#: The JSON reports a build writes beside the index (corpus_card.json is read by corpus_tools.card.read_card).
BUILD_REPORTS = ("ingest_report.json", "section_report.json", "blocklist_report.json")


def read_build_reports(directory: str | Path) -> dict[str, dict[str, Any]]:
    """The build reports present in an index folder (file name -> parsed object), the corpus card included;
    IndexIntegrityError naming the first one that is truncated or not a JSON object (an index whose reports
    are damaged is refused, not used as if it were whole)."""
    folder = Path(directory)
    reports = {name: read_index_json(folder, name) for name in BUILD_REPORTS if (folder / name).is_file()}
    card = read_card(folder)
    if card is not None:
        reports[CARD_FILE] = card
    return reports
