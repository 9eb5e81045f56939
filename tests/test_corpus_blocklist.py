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


def write_collection(root: Path, leaky_reference: str = "Plain notes.\n") -> Path:
    """A skill collection in one folder (no checkout of its own) vendoring two repositories as
    `skills/<owner>--<repo>/...`, plus a skill of its own; one reference file of alice/tools says `leaky_reference`."""
    skill = "---\nname: {name}\ndescription: Does {name}\n---\n# {name}\n\n## Steps\n\n1. Open the {name} file.\n"
    files = {"skills/alice--tools/fmt/SKILL.md": skill.format(name="fmt"),
             "skills/alice--tools/fmt/references/notes.md": leaky_reference,
             "skills/alice--tools/lint/SKILL.md": skill.format(name="lint"),
             "skills/bob--pdf-helpers/extract/SKILL.md": skill.format(name="extract"),
             "skills/own-skill--v2/SKILL.md": skill.format(name="own")}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def run_cli(argv: list[str]) -> int:
    import argparse

    from raso.cli import corpus as corpus_cmd

    parser = argparse.ArgumentParser(prog="raso")
    corpus_cmd.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_a_vendored_collection_is_attributed_per_repository(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = write_collection(tmp_path / "collection", leaky_reference="Tuned on WebShop episodes.\n")
    records, _ = load_corpus(root)
    assert {(r.repo, r.path) for r in records} == {
        ("alice/tools", "fmt/SKILL.md"), ("alice/tools", "lint/SKILL.md"),
        ("bob/pdf-helpers", "extract/SKILL.md"),
        # a skill's own folder named like a vendored one is a skill, not a repository
        ("local/collection", "skills/own-skill--v2/SKILL.md")}
    # the blocklist now drops one vendored repository, not the whole collection, and says what matched
    out = tmp_path / "index"
    assert run_cli(["corpus", "build", str(root), "--out", str(out), "--blocklist", "webshop"]) == 0
    printed = capsys.readouterr().out
    assert ("blocklist webshop: excluded 1 repositories (2 of 4 skills); first matches: alice/tools: WebShop in "
            "fmt/references/notes.md") in printed
    assert json.loads((out / "blocklist_report.json").read_text())["excluded_repos"] == ["alice/tools"]


def test_a_blocklist_that_removes_everything_leaves_its_report(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = tmp_path / "one-repo"
    (root / "s").mkdir(parents=True)
    (root / "s" / "SKILL.md").write_text("---\nname: s\n---\n# S\n\n## Steps\n\nScore well on WebShop.\n")
    out = tmp_path / "index"
    assert run_cli(["corpus", "build", str(root), "--out", str(out), "--blocklist", "all"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no skills to index") and len(err.splitlines()) == 1
    assert "blocklist spreadsheet, alfworld, webshop, officeqa: excluded 1 repositories (1 of 1 skills)" in err
    report = tmp_path / "index.blocklist_report.md"
    assert f"report: {report}" in err and not out.exists()
    assert json.loads((tmp_path / "index.blocklist_report.json").read_text())["excluded_repos"] == ["local/one-repo"]
    # a second failed build replaces its own report, never a file it did not write
    assert run_cli(["corpus", "build", str(root), "--out", str(out), "--blocklist", "webshop"]) == 2
    assert json.loads((tmp_path / "index.blocklist_report.json").read_text())["benchmarks"] == ["webshop"]
    report.write_text("my notes\n")
    capsys.readouterr()
    assert run_cli(["corpus", "build", str(root), "--out", str(out), "--blocklist", "webshop"]) == 2
    assert f"report not written: {report} exists" in capsys.readouterr().err
    assert report.read_text() == "my notes\n"
