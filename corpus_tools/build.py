"""One call from corpus sources to a saved section index, with the build reports written beside it.

The build streams: skills are read one at a time (corpus_tools.ingest.iter_corpus), split into
sections and handed to the streaming index writer (corpus_tools.index_build), so memory stays flat
as the corpus grows. Blocklists need to know every repository that leaks before the first section is
written, so with blocklists the sources are read twice (a scan, then the build).

INDEX/ holds the index files plus `ingest_report.json` (every skipped or adjusted file and why) and,
when blocklists were applied, `blocklist_report.json` / `blocklist_report.md` (every excluded
repository and why).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from corpus_tools.blocklist import BlocklistReport, find_leaks
from corpus_tools.index import SectionIndex
from corpus_tools.index_build import IndexWriter
from corpus_tools.ingest import IngestReport, SkillRecord, iter_corpus
from corpus_tools.sections import DEFAULT_LEVELS, DEFAULT_MAX_CHARS, retrievable_sections, split_sections
from corpus_tools.vetting import FLAG_BITS, families_of, flag_bits

# stage name, done, total (None when unknown)
StageProgress = Callable[[str, int, "int | None"], None]


@dataclass
class BuildResult:
    index: SectionIndex
    ingest: IngestReport
    blocklist: BlocklistReport | None
    seconds: dict[str, float]


def build_corpus_index(sources: Sequence[str | Path], out: str | Path | None = None, *,
                       blocklists: Sequence[str] = (), levels: tuple[int, ...] = DEFAULT_LEVELS,
                       max_chars: int = DEFAULT_MAX_CHARS, include_references: bool = True, k1: float = 1.5,
                       b: float = 0.75, idf: str = "lucene", shards: int = 1,
                       progress: StageProgress | None = None, keep_all_sections: bool = False,
                       scan: bool = True) -> BuildResult:
    """Stream `sources` (minus blocklisted repositories) into a section index at `out`; without `out`
    the index is built in a temporary folder and loaded into memory. With `shards` > 1, `out` becomes
    a sharded index (corpus_tools.shards.load_index reads it) and `result.index` is its first shard.

    Sections without procedural content (corpus_tools.sections.unretrievable_reason) are left out
    unless `keep_all_sections`; with `scan` every section's injection / exfiltration flags
    (corpus_tools.vetting) are stored in the index. Both are counted in `section_report.json`."""
    if shards > 1 and out is None:
        raise ValueError("a sharded build needs an output folder")
    seconds: dict[str, float] = {}

    def stage(name: str):
        return (lambda done, total: progress(name, done, total)) if progress else None

    blocklist_report = None
    excluded: set[str] = set()
    if blocklists:
        t = time.perf_counter()
        blocklist_report = find_leaks(iter_corpus(sources, progress=stage("scan")), blocklists)
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
                         flagger=flagger if scan else None)
    left_out: dict[str, int] = {}
    kept = 0

    def records() -> Iterator[SkillRecord]:
        nonlocal kept
        for record in iter_corpus(sources, ingest, progress=stage("load")):
            if record.repo not in excluded:
                kept += 1
                yield record

    try:
        for record in records():
            sections = split_sections(record, levels, max_chars, include_references=include_references)
            for section in (sections if keep_all_sections else retrievable_sections(sections, left_out)):
                writer.add(section)
        seconds["read_split_tokenize"] = time.perf_counter() - t
        t = time.perf_counter()
        directory = writer.finish()
        seconds["merge"] = time.perf_counter() - t
    except BaseException:
        writer.abort()
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
    return BuildResult(SectionIndex.load(index_dirs[0]), ingest, blocklist_report, seconds)
