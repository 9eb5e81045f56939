"""The packaged starter corpus: provenance, licenses, no leakage, and the cached index."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from corpus_tools import starter
from corpus_tools.blocklist import find_leaks
from corpus_tools.index import SectionIndex
from corpus_tools.ingest import SkillRecord, load_corpus
from corpus_tools.starter import select_starter, starter_corpus_dir, starter_index


def test_starter_corpus_is_complete_and_attributed() -> None:
    root = starter_corpus_dir()
    rows = [json.loads(line) for line in (root / "MANIFEST.jsonl").read_text(encoding="utf-8").splitlines()]
    assert 200 <= len(rows) <= 500
    total = 0
    for row in rows:
        data = (root / "skills" / row["id"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == row["sha256"], row["id"]
        total += len(data)
        assert row["license"] in ("MIT", "Apache-2.0")
        assert row["repo"] and len(row["commit"]) == 40 and row["path"].endswith("SKILL.md")
        license_text = (root / row["license_file"]).read_text(encoding="utf-8", errors="replace")
        assert ("Permission is hereby granted" in license_text) == (row["license"] == "MIT"), row["id"]
    assert total < 4 * 1024 * 1024
    records, report = load_corpus(root)
    assert len(records) == len(rows) and report.skipped == []
    assert find_leaks(records, ["all"]).excluded == {}
    assert len({r["topic"] for r in rows}) >= 6 and len({r["repo"] for r in rows}) >= 15


def test_starter_index_is_built_once_and_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = starter_index(cache_dir=tmp_path)
    cached = list((tmp_path / "corpus").iterdir())
    assert len(cached) == 1 and cached[0].name.startswith("starter-")
    hits = index.search("read an excel workbook and write formulas", k=5)
    assert len(hits) == 5 and any("excel" in (h.section.skill_name + h.section.text).lower() for h in hits)

    def no_build(*args, **kwargs):
        raise AssertionError("the cached index should have been loaded")

    monkeypatch.setattr(SectionIndex, "build", no_build)
    again = starter_index(cache_dir=tmp_path)
    assert [h.section.id for h in again.search("read an excel workbook and write formulas", k=5)] == \
        [h.section.id for h in hits]
    monkeypatch.setenv("RASO_CACHE_DIR", str(tmp_path))
    assert len(starter_index()) == len(index)


def test_select_starter_filters(monkeypatch: pytest.MonkeyPatch) -> None:
    body = "## Steps\n\n" + "Open the workbook and write the formula. " * 60

    def rec(i: int, repo: str, license: str = "MIT", **meta) -> SkillRecord:
        return SkillRecord(id=f"{repo}/s{i}/SKILL.md", name=f"excel-helper-{i}",
                           description="Excel spreadsheet formulas and pivot tables", body=body, text=body,
                           metadata=meta, repo=repo, path=f"s{i}/SKILL.md", commit="c", license=license)

    records = [rec(1, "ok/one"), rec(2, "ok/two"), rec(3, "gpl/x", license="GPL-3.0"),
               rec(4, "ok/one", near_duplicate_of="ok/two/s2/SKILL.md"), rec(5, "bad/leak")]
    records[-1].text += "\nTuned on SpreadsheetBench."
    records[-1].body += "\nTuned on SpreadsheetBench."
    chosen = select_starter(records, {"spreadsheets-data": 10})
    assert sorted(r.id for _, r in chosen) == ["ok/one/s1/SKILL.md", "ok/two/s2/SKILL.md"]
    assert {topic for topic, _ in chosen} == {"spreadsheets-data"}
    monkeypatch.setattr(starter, "MAX_PER_REPO_PER_TOPIC", 1)
    more = [rec(i, "ok/one") for i in range(10, 14)]
    assert len(select_starter(more, {"spreadsheets-data": 10})) == 1
