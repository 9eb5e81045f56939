"""Leakage blocklist: a benchmark keyword anywhere in a repository excludes the whole repository."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corpus_tools.blocklist import apply_blocklist, find_leaks, resolve_benchmarks
from corpus_tools.ingest import RefDoc, SkillRecord, load_corpus


def rec(repo: str, name: str, body: str = "## Use\n\nPlain advice.\n", refs: list[RefDoc] | None = None,
        path: str | None = None) -> SkillRecord:
    path = path or f"{name}/SKILL.md"
    return SkillRecord(id=f"{repo}/{path}", name=name, description=f"{name} skill", body=body, text=body,
                       metadata={}, repo=repo, path=path, commit="c", license="MIT", references=refs or [])


@pytest.fixture
def records() -> list[SkillRecord]:
    return [
        rec("a/sheets", "clean-sheet"),
        rec("a/sheets", "tuned", refs=[RefDoc("tuned/notes.md", "Scores 80% on Spreadsheet-Bench tasks.")]),
        rec("b/names", "mail", body="## Use\n\nAsk Alfred (the butler) or use the Alfred app."),
        rec("c/embodied", "household", body="## Tips\n\nTrained on ALFRED trajectories."),
        rec("d/shop", "agent", path="webshop-agent/SKILL.md"),
        rec("e/text", "games", body="## Games\n\nTextWorld games need the look command."),
        rec("f/office", "qa", body="## Eval\n\nOfficeQA questions about documents."),
        rec("g/clean", "planner", body="## Plan\n\nReal-world shop floor planning for the office."),
    ]


def test_spreadsheet_keyword_excludes_whole_repository(records: list[SkillRecord]) -> None:
    kept, report = apply_blocklist(records, ["spreadsheet"])
    assert report.excluded_repos == ["a/sheets"]
    assert "clean-sheet" not in {r.name for r in kept}  # the clean skill of a leaking repo goes too
    assert len(kept) == len(records) - 2
    info = report.excluded["a/sheets"]
    assert info["skills"] == 2 and info["keywords"] == ["SpreadsheetBench"]
    assert info["examples"][0]["path"] == "tuned/notes.md" and "Spreadsheet-Bench" in info["examples"][0]["snippet"]


def test_each_benchmark_and_case_rules(records: list[SkillRecord]) -> None:
    assert find_leaks(records, ["alfworld"]).excluded_repos == ["c/embodied", "e/text"]  # not b/names' "Alfred"
    assert find_leaks(records, ["webshop"]).excluded_repos == ["d/shop"]  # matched in the path
    assert find_leaks(records, ["officeqa"]).excluded_repos == ["f/office"]
    report = find_leaks(records, ["all"])
    assert "g/clean" not in report.excluded and "b/names" not in report.excluded
    assert report.excluded_skill_count == 6 and report.repos_scanned == 7


def test_report_files(tmp_path: Path, records: list[SkillRecord]) -> None:
    _, report = apply_blocklist(records, ["alfworld", "webshop"])
    report.save(tmp_path)
    data = json.loads((tmp_path / "blocklist_report.json").read_text())
    assert data["excluded_repos"] == ["c/embodied", "d/shop", "e/text"]
    assert data["benchmarks"] == ["alfworld", "webshop"]
    markdown = (tmp_path / "blocklist_report.md").read_text()
    assert "## c/embodied" in markdown and "ALFRED" in markdown


def test_benchmark_names() -> None:
    assert resolve_benchmarks(["all"]) == ["spreadsheet", "alfworld", "webshop", "officeqa"]
    assert resolve_benchmarks(["SpreadsheetBench", "spreadsheet"]) == ["spreadsheet"]
    with pytest.raises(ValueError, match="unknown blocklist"):
        resolve_benchmarks(["mmlu"])


@pytest.mark.shared
def test_shared_corpus_leaks(shared_corpus: Path) -> None:
    records, _ = load_corpus(shared_corpus)
    leaking = "muratcankoylan/Agent-Skills-for-Context-Engineering"
    report = find_leaks(records, ["all"])
    assert leaking in report.excluded
    assert set(report.excluded[leaking]["benchmarks"]) == {"alfworld", "webshop"}
    assert find_leaks(records, ["spreadsheet"]).excluded_repos == []
