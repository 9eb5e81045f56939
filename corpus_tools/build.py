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
index folder behind.
"""

from __future__ import annotations

import datetime as dt
import hashlib
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
from corpus_tools.card import write_card
from corpus_tools.index import SectionIndex
from corpus_tools.index_build import IndexWriter
from corpus_tools.ingest import SKIP_DUPLICATE, SKIP_LINK_OUTSIDE, IngestReport, SkillRecord, iter_corpus
from corpus_tools.sections import DEFAULT_LEVELS, DEFAULT_MAX_CHARS, retrievable_sections, split_sections
from corpus_tools.sources import SourceError, SourceOptions
from corpus_tools.vetting import FLAG_BITS, families_of, flag_bits

# stage name, done, total (None when unknown)
StageProgress = Callable[[str, int, "int | None"], None]
POPULARITY_COLUMN = "repos"
# Licence values that say nothing: treated as unknown by the licence filter.
UNKNOWN_LICENSES = frozenset({"", "unknown", "noassertion", "none", "null", "other", "unlicensed"})


def normalize_license(value: str) -> str:
    """Lower-case SPDX id for comparison ("MIT" -> "mit"); unknown values become ""."""
    text = value.strip().lower()
    return "" if text in UNKNOWN_LICENSES else text


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
                       name: str | None = None, release_date: str | None = None) -> BuildResult:
    """Stream `sources` (minus blocklisted repositories) into a section index at `out`; without `out`
    the index is built in a temporary folder and loaded into memory. With `shards` > 1, `out` becomes
    a sharded index (corpus_tools.shards.load_index reads it) and `result.index` is its first shard.

    Sections without procedural content (corpus_tools.sections.unretrievable_reason) are left out
    unless `keep_all_sections`; with `scan` every section's injection / exfiltration flags
    (corpus_tools.vetting) are stored in the index. Both are counted in `section_report.json`.
    `options` maps the columns of table sources (corpus_tools.sources); `licenses` (SPDX ids, any case)
    keeps only skills under one of them, plus those of unknown licence when `keep_unknown_license`.
    `name` and `release_date` go into the corpus card. Raises SourceError (nothing written) for a
    source that cannot be read or a build that would index no skill."""
    if shards > 1 and out is None:
        raise ValueError("a sharded build needs an output folder")
    options = options or SourceOptions()
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
    target = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="raso-index-")) / "index"
    flagged: dict[str, int] = {}

    def flagger(text: str) -> int:
        bits = flag_bits(text)
        for family in families_of(bits):
            flagged[family] = flagged.get(family, 0) + 1
        return bits

    writer = IndexWriter(target, k1=k1, b=b, idf=idf, shards=shards, progress=stage("index"),
                         flagger=flagger if scan else None, doc_columns={POPULARITY_COLUMN: np.int32})
    left_out: dict[str, int] = {}
    dropped = {"licence": 0, "blocklist": 0, "unretrievable": 0}
    content_digest = hashlib.sha256()
    kept = 0

    def records() -> Iterator[SkillRecord]:
        for record in iter_corpus(sources, ingest, progress=stage("load"), options=options):
            if record.repo in excluded:
                dropped["blocklist"] += 1
            elif allowed and not _license_allowed(record.license, allowed, keep_unknown_license):
                dropped["licence"] += 1
            else:
                yield record

    try:
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
            raise SourceError(f"no skills to index from {', '.join(map(str, sources))} ({summary}){hint}")
        seconds["read_split_tokenize"] = time.perf_counter() - t
        t = time.perf_counter()
        directory = writer.finish()
        seconds["merge"] = time.perf_counter() - t
    except BaseException:
        writer.abort()
        if out is None:
            shutil.rmtree(target.parent, ignore_errors=True)
        raise
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
        index = SectionIndex.load(directory, mmap=False)
        shutil.rmtree(directory.parent, ignore_errors=True)
        return BuildResult(index, ingest, blocklist_report, seconds)
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
    return BuildResult(SectionIndex.load(index_dirs[0]), ingest, blocklist_report, seconds, written_card)


def _license_allowed(license: str, allowed: frozenset[str], keep_unknown: bool) -> bool:
    value = normalize_license(license)
    return keep_unknown if not value else value in allowed


def _default_name(sources: Sequence[str | Path]) -> str:
    names = [Path(s).name or str(s) for s in sources]
    return names[0] if len(names) == 1 else f"{names[0]} + {len(names) - 1} more"
