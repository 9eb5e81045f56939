"""One call from corpus sources to a saved section index, with the build reports written beside it.

INDEX/ holds the index files plus `ingest_report.json` (every skipped or adjusted file and why) and,
when blocklists were applied, `blocklist_report.json` / `blocklist_report.md` (every excluded
repository and why).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from corpus_tools.blocklist import BlocklistReport, apply_blocklist
from corpus_tools.index import SectionIndex
from corpus_tools.ingest import IngestReport, load_corpus
from corpus_tools.sections import DEFAULT_LEVELS, DEFAULT_MAX_CHARS, split_sections

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
                       b: float = 0.75, idf: str = "lucene", progress: StageProgress | None = None) -> BuildResult:
    """Load `sources`, drop blocklisted repositories, split into sections, build and (if `out`) save."""
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()

    def stage(name: str):
        return (lambda done, total: progress(name, done, total)) if progress else None

    records, ingest = load_corpus(sources, progress=stage("load"))
    seconds["load"] = time.perf_counter() - t0
    blocklist_report = None
    if blocklists:
        t = time.perf_counter()
        records, blocklist_report = apply_blocklist(records, blocklists)
        seconds["blocklist"] = time.perf_counter() - t
    t = time.perf_counter()
    sections = []
    section_progress = stage("sections")
    for i, record in enumerate(records, 1):
        sections.extend(split_sections(record, levels, max_chars, include_references=include_references))
        if section_progress and (i % 200 == 0 or i == len(records)):
            section_progress(i, len(records))
    seconds["sections"] = time.perf_counter() - t
    t = time.perf_counter()
    index = SectionIndex.build(sections, k1=k1, b=b, idf=idf, progress=stage("index"), total=len(sections))
    seconds["index"] = time.perf_counter() - t
    index.meta["sources"] = [str(s) for s in sources]
    index.meta["blocklists"] = list(blocklist_report.benchmarks) if blocklist_report else []
    index.meta["levels"] = list(levels)
    index.meta["max_chars"] = max_chars
    index.meta["skills_indexed"] = len(records)
    if out is not None:
        t = time.perf_counter()
        directory = index.save(out)
        ingest.save(directory / "ingest_report.json")
        if blocklist_report is not None:
            blocklist_report.save(directory)
        seconds["save"] = time.perf_counter() - t
        (directory / "build_seconds.json").write_text(json.dumps({k: round(v, 3) for k, v in seconds.items()}))
    return BuildResult(index, ingest, blocklist_report, seconds)
