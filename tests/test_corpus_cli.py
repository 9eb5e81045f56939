"""`raso corpus build/search/stats` end to end on small trees."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from raso.cli import corpus as corpus_cmd


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="raso")
    corpus_cmd.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def skill(root: Path, name: str, body: str) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {name} helper\n---\n{body}", encoding="utf-8")


@pytest.fixture
def sources(tmp_path: Path) -> tuple[Path, Path]:
    good = tmp_path / "good-repo"
    skill(good, "excel-formulas", "# Excel\n\n## Formulas\n\nUse openpyxl to write formulas into workbook cells.\n")
    skill(good, "planning", "## Plan\n\nWrite a checklist of steps before acting.\n")
    (good / "broken").mkdir()
    (good / "broken" / "SKILL.md").write_bytes(b"\x00\x01binary")
    leaky = tmp_path / "leaky-repo"
    skill(leaky, "shop-agent", "## Shop\n\nThis skill was tuned on WebShop. Write formulas too.\n")
    return good, leaky


def test_build_search_stats(tmp_path: Path, sources: tuple[Path, Path], capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "index"
    assert run(["corpus", "build", *map(str, sources), "--out", str(out), "--blocklist", "webshop"]) == 0
    printed = capsys.readouterr().out
    assert "of 2 skills" in printed and "binary 1" in printed and "local/leaky-repo" in printed
    assert "skill-level index: 2 skills" in printed and "sections flagged by the vetting scan" in printed
    assert json.loads((out / "blocklist_report.json").read_text())["excluded_repos"] == ["local/leaky-repo"]
    assert json.loads((out / "ingest_report.json").read_text())["skipped_counts"] == {"binary": 1}

    assert run(["corpus", "search", str(out), "write formulas", "-k", "5"]) == 0
    printed = capsys.readouterr().out
    assert "1. [" in printed and "excel-formulas › Excel › Formulas" in printed
    assert "local/good-repo/excel-formulas/SKILL.md" in printed and "openpyxl" in printed
    assert "shop-agent" not in printed

    assert run(["corpus", "search", str(out), "checklist", "--json"]) == 0
    hit = json.loads(capsys.readouterr().out.splitlines()[0])
    assert hit["heading_path"] == "planning › Plan" and hit["repo"] == "local/good-repo"

    assert run(["corpus", "search", str(out), "zebra"]) == 1
    assert run(["corpus", "stats", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "sections" in printed and "local/good-repo" in printed and "excluded: local/leaky-repo" in printed
    assert run(["corpus", "stats", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["skills"] == 2


def test_bad_arguments(tmp_path: Path, sources: tuple[Path, Path], capsys: pytest.CaptureFixture) -> None:
    assert run(["corpus", "build", str(sources[0]), "--out", str(tmp_path / "i"), "--blocklist", "mmlu"]) == 2
    assert "unknown blocklist" in capsys.readouterr().err
    assert run(["corpus", "search", str(tmp_path / "missing"), "q"]) == 2


def test_links_out_of_a_tree_are_followed_only_when_asked(tmp_path: Path, sources: tuple[Path, Path],
                                                            capsys: pytest.CaptureFixture) -> None:
    good, _ = sources
    tree = tmp_path / "my-skills"
    tree.mkdir()
    (tree / "formulas").symlink_to(good / "excel-formulas", target_is_directory=True)
    refused, trusted = tmp_path / "refused", tmp_path / "trusted"
    assert run(["corpus", "build", str(tree), "--out", str(refused)]) == 2  # no skills: an index needs some
    err = capsys.readouterr().err
    assert "no skills to index" in err and "link_outside 1" in err and "--follow-links-out" in err
    assert not refused.exists()
    assert run(["corpus", "build", str(tree), "--out", str(trusted), "--follow-links-out"]) == 0
    assert "of 1 skills" in capsys.readouterr().out
    assert json.loads((trusted / "corpus_card.json").read_text())["build"]["follow_links_out"] is True
