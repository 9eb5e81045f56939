"""`raso corpus build/search/stats` end to end on small trees."""

from __future__ import annotations

import argparse
import errno
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

import corpus_tools.build as build_module
from corpus_tools import index_build
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


# --- what a build must never delete or replace (issue 45) ---------------------------------------------------------


def tree_bytes(root: Path) -> dict[str, bytes | None]:
    """Every path under `root` with its bytes (None for a folder): equal before and after means untouched."""
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes() for p in sorted(root.rglob("*"))}


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_an_out_that_raso_did_not_build_is_refused_and_left_as_it_was(
        tmp_path: Path, sources: tuple[Path, Path], capsys: pytest.CaptureFixture) -> None:
    folder = tmp_path / "my-notes"
    (folder / "deep").mkdir(parents=True)
    (folder / "todo.md").write_text("buy milk\n")
    (folder / "deep" / "data.bin").write_bytes(bytes(range(256)))
    (folder / "meta.json").write_text('{"mine": true}')  # a file name an index has is not enough to be one
    regular = tmp_path / "report.pdf"
    regular.write_bytes(b"%PDF-1.4 my report")
    before = tree_bytes(folder)
    assert run(["corpus", "build", str(sources[0]), "--out", str(folder)]) == 2
    assert "not an index raso built" in one_error_line(capsys.readouterr().err)
    assert run(["corpus", "build", str(sources[0]), "--out", str(folder), "--force"]) == 2  # --force is for indexes
    assert "not an index raso built" in one_error_line(capsys.readouterr().err)
    assert tree_bytes(folder) == before
    assert run(["corpus", "build", str(sources[0]), "--out", str(regular), "--force"]) == 2
    assert "is a file" in one_error_line(capsys.readouterr().err)
    assert regular.read_bytes() == b"%PDF-1.4 my report"
    link = tmp_path / "notes-link"
    link.symlink_to(folder, target_is_directory=True)
    assert run(["corpus", "build", str(sources[0]), "--out", str(link), "--force"]) == 2
    assert "is a link" in one_error_line(capsys.readouterr().err)
    assert link.is_symlink() and tree_bytes(folder) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good-repo", "leaky-repo", "my-notes", "notes-link",
                                                          "report.pdf"]


def test_an_empty_out_folder_is_used(tmp_path: Path, sources: tuple[Path, Path]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(["corpus", "build", str(sources[0]), "--out", str(empty)]) == 0
    assert (empty / "meta.json").is_file() and (empty / "corpus_card.json").is_file()


@pytest.mark.parametrize("where", ["itself", "parent", "cwd", "inside"])
def test_the_sources_can_never_be_the_output(where: str, tmp_path: Path, sources: tuple[Path, Path],
                                             monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    good, _ = sources
    monkeypatch.chdir(tmp_path)
    out = {"itself": str(good), "parent": str(tmp_path), "cwd": ".", "inside": str(good / "index")}[where]
    before = tree_bytes(tmp_path)
    assert run(["corpus", "build", "good-repo", "--out", out, "--force"]) == 2
    assert "source good-repo" in one_error_line(capsys.readouterr().err)
    assert tree_bytes(tmp_path) == before


def test_the_current_folder_is_never_the_output(tmp_path: Path, sources: tuple[Path, Path],
                                               monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    here = tmp_path / "empty"
    here.mkdir()
    monkeypatch.chdir(here)
    assert run(["corpus", "build", "../good-repo", "--out", "."]) == 2
    assert "current folder" in one_error_line(capsys.readouterr().err)
    assert os.listdir(here) == [] and sorted(os.listdir(tmp_path)) == ["empty", "good-repo", "leaky-repo"]


def test_an_index_is_replaced_only_with_force_and_whole(tmp_path: Path, sources: tuple[Path, Path],
                                                        capsys: pytest.CaptureFixture) -> None:
    good, leaky = sources
    out = tmp_path / "index"
    assert run(["corpus", "build", str(good), "--out", str(out)]) == 0
    capsys.readouterr()
    before = tree_bytes(out)
    assert run(["corpus", "build", str(leaky), "--out", str(out)]) == 2
    assert "pass --force" in one_error_line(capsys.readouterr().err)
    assert tree_bytes(out) == before
    assert run(["corpus", "build", str(leaky), "--out", str(out), "--force"]) == 0
    assert "of 1 skills" in capsys.readouterr().out
    assert json.loads((out / "corpus_card.json").read_text())["inputs"][0]["name"] == "leaky-repo"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good-repo", "index", "leaky-repo"]  # no temp sibling left


class DiskFullFile:
    """Stands in for a file on a full disk: every write raises ENOSPC, and so does close (a buffered file flushing
    what it holds), which still closes the real file, as io's buffered files do."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.failed = False

    def write(self, data: bytes) -> int:
        self.failed = True
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.real.name)

    def seek(self, *args: Any) -> int:
        return self.real.seek(*args)

    @property
    def closed(self) -> bool:
        return self.real.closed

    def close(self) -> None:
        try:
            if self.failed:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.real.name)
        finally:
            self.real.close()


def fill_the_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on every index file the writer appends to is on a full disk (after its header)."""
    real_init = index_build._NpyAppender.__init__

    def init(self: index_build._NpyAppender, path: Path, dtype: Any) -> None:
        real_init(self, path, dtype)
        self.fh = DiskFullFile(self.fh)  # type: ignore[assignment]

    monkeypatch.setattr(index_build._NpyAppender, "__init__", init)


def test_a_full_disk_leaves_the_old_index_and_no_temporary_folder(
        tmp_path: Path, sources: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    good, leaky = sources
    out = tmp_path / "index"
    assert run(["corpus", "build", str(good), "--out", str(out)]) == 0
    before, listing = tree_bytes(out), sorted(os.listdir(tmp_path))
    capsys.readouterr()
    fill_the_disk(monkeypatch)
    assert run(["corpus", "build", str(leaky), "--out", str(out), "--force"]) == 1
    line = one_error_line(capsys.readouterr().err)
    assert "No space left on device" in line and "free some space" in line and "left as it was" in line
    assert tree_bytes(out) == before
    assert sorted(os.listdir(tmp_path)) == listing
    # a new --out in folders that did not exist: none of them is left behind
    assert run(["corpus", "build", str(leaky), "--out", str(tmp_path / "new" / "deeper" / "index")]) == 1
    assert "nothing was written to" in one_error_line(capsys.readouterr().err)
    assert sorted(os.listdir(tmp_path)) == listing


def test_the_writer_removes_its_temporary_folder_when_the_disk_is_full(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from corpus_tools.sections import Section

    sections = [Section(id=f"s{i}", skill_id="k", skill_name="k", heading_path="k", text=f"word{i} text",
                        repo="o/r", path="SKILL.md", commit="c", license="MIT") for i in range(5)]
    fill_the_disk(monkeypatch)
    with pytest.raises(OSError) as raised:
        index_build.write_index(sections, tmp_path / "index")
    assert raised.value.errno == errno.ENOSPC
    assert os.listdir(tmp_path) == []  # abort got past the failing closes to its rmtree


@pytest.mark.parametrize("during", ["reading", "merging"])
def test_ctrl_c_leaves_the_old_index_and_no_temporary_folder(
        during: str, tmp_path: Path, sources: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    good, leaky = sources
    out = tmp_path / "index"
    assert run(["corpus", "build", str(good), "--out", str(out)]) == 0
    before, listing = tree_bytes(out), sorted(os.listdir(tmp_path))
    capsys.readouterr()

    def interrupt(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    if during == "reading":
        monkeypatch.setattr(build_module, "split_sections", interrupt)
    else:
        monkeypatch.setattr(index_build.IndexWriter, "_merge", interrupt)
    assert run(["corpus", "build", str(leaky), "--out", str(out), "--force"]) == 130
    assert "interrupted" in one_error_line(capsys.readouterr().err)
    assert tree_bytes(out) == before
    assert sorted(os.listdir(tmp_path)) == listing


@pytest.mark.parametrize("report", ["corpus_card.json", "ingest_report.json", "blocklist_report.json"])
def test_a_damaged_report_is_named_by_stats_and_search(report: str, tmp_path: Path, sources: tuple[Path, Path],
                                                       capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "index"
    assert run(["corpus", "build", *map(str, sources), "--out", str(out), "--blocklist", "webshop"]) == 0
    capsys.readouterr()
    whole = (out / report).read_bytes()
    (out / report).write_bytes(whole[: len(whole) // 2])  # truncated, as by a full disk or a killed copy
    for command in (["stats", str(out)], ["search", str(out), "formulas"]):
        assert run(["corpus", *command]) == 2
        line = one_error_line(capsys.readouterr().err)
        assert f"{report} is not valid JSON" in line and "rebuild it" in line and "--force" in line
    assert run(["corpus", "build", *map(str, sources), "--out", str(out), "--blocklist", "webshop", "--force"]) == 0
    assert run(["corpus", "stats", str(out)]) == 0


def test_a_missing_source_is_named(tmp_path: Path, sources: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(["corpus", "build", "good-repo", "nope-src", "--out", "index"]) == 2
    assert one_error_line(capsys.readouterr().err) == "error: no such file or folder: nope-src"
    assert not (tmp_path / "index").exists()


@pytest.mark.parametrize("k", ["0", "-3", "two"])
def test_search_k_below_one_is_a_usage_error(k: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exited:
        run(["corpus", "search", str(tmp_path), "query", "-k", k])
    assert exited.value.code == 2
    assert "argument -k:" in capsys.readouterr().err


def test_a_build_not_on_a_terminal_prints_its_counts_periodically(
        tmp_path: Path, sources: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    printed = threading.Event()
    real_line, real_build = corpus_cmd._ProgressLines.line, build_module.build_corpus_index

    def line(self: corpus_cmd._ProgressLines) -> str:
        printed.set()
        return real_line(self)

    def build_that_waits_for_a_line(*args: Any, progress: Any, **kwargs: Any) -> Any:
        progress("load", 7, None)
        assert printed.wait(60), "no progress line while the build was busy"
        return real_build(*args, progress=progress, **kwargs)

    monkeypatch.setattr(corpus_cmd, "PROGRESS_EVERY_S", 0.01)  # the period itself is not what is tested
    monkeypatch.setattr(corpus_cmd._ProgressLines, "line", line)
    monkeypatch.setattr(build_module, "build_corpus_index", build_that_waits_for_a_line)
    assert run(["corpus", "build", str(sources[0]), "--out", str(tmp_path / "index")]) == 0
    assert "corpus build: reading files 7" in capsys.readouterr().err  # capsys's stderr is not a terminal


# --- `corpus search` runs the retriever a run builds (issue 47) ---------------------------------------------------


@pytest.fixture
def library(tmp_path: Path) -> Path:
    """A built index of six skills; excel-formulas has three sections that match a formulas query."""
    team = tmp_path / "team-skills"
    skill(team, "excel-formulas", "## Formulas\n\nWrite formulas into workbook cells with openpyxl.\n\n"
          "## Recalculate formulas\n\nRecalculate workbook formulas with LibreOffice headless so values are cached.\n\n"
          "## Formula errors\n\nFind formula errors such as #REF! in workbook cells after writing formulas.\n")
    skill(team, "excel-charts", "## Charts\n\nAdd a bar chart to a workbook sheet from a cell range.\n\n"
          "## Chart formulas\n\nChart series can reference formulas in workbook cells.\n")
    skill(team, "csv-cleaning", "## Clean\n\nDrop empty rows from a CSV file with pandas.\n")
    skill(team, "pdf-tables", "## Tables\n\nExtract tables from a PDF with pdfplumber into a workbook.\n")
    skill(team, "planning", "## Plan\n\nWrite a checklist of steps before acting.\n")
    skill(team, "git-rebase", "## Rebase\n\nSquash commits with an interactive rebase.\n")
    out = tmp_path / "index"
    assert run(["corpus", "build", str(team), "--out", str(out)]) == 0
    return out


def searched_ids(capsys: pytest.CaptureFixture, argv: list[str]) -> list[str]:
    capsys.readouterr()
    assert run(["corpus", "search", *argv, "--json"]) == 0
    return [json.loads(line)["id"] for line in capsys.readouterr().out.splitlines()]


def test_search_returns_what_the_runs_retriever_returns(library: Path, capsys: pytest.CaptureFixture) -> None:
    from raso.api import make_retriever
    from raso.engine.config import OptimizeConfig

    queries = ["write formulas into workbook cells", "extract pdf tables into a workbook", "formula errors",
               "a checklist before acting"]
    found: dict[str | None, list[list[str]]] = {}
    for kind in (None, "bm25", "tfidf"):  # None: no --retriever, the run's default
        chosen = {"kind": kind} if kind else {}
        retriever = make_retriever(OptimizeConfig(retrieval={"index": library, **chosen}))
        for query in queries:
            for k in (1, 3, 5):
                expected = [hit.section.id for hit in retriever.search(query, k=k)]
                argv = [str(library), query, "-k", str(k), *(["--retriever", kind] if kind else [])]
                assert searched_ids(capsys, argv) == expected, (kind, query, k)
                found.setdefault(kind, []).append(expected)
    # The kinds rank differently here (the default keeps at most 2 sections of a skill), so the comparison above
    # would catch a search that ignored --retriever or ran BM25 alone.
    assert found[None] != found["bm25"]
    assert run(["corpus", "search", str(library), "write formulas into workbook cells"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"retriever {OptimizeConfig().retrieval.kind}, k 5\n")
    assert "\nexcel-formulas (local/team-skills)\n  1. [" in printed  # each hit under its skill and repository


def test_search_refuses_a_retriever_it_cannot_run(library: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture) -> None:
    assert run(["corpus", "search", str(library), "formulas", "--retriever", "dreamer"]) == 2
    assert "raso retrieval eval --method dreamer" in one_error_line(capsys.readouterr().err)
    import raso.retrieval.retrievers as retrievers

    monkeypatch.setattr(retrievers, "default_encoder", lambda cache_progress=False: None)  # no `dense` extra
    assert run(["corpus", "search", str(library), "formulas", "--retriever", "hybrid"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith("error: cannot build the 'hybrid' retriever") and "`dense` extra" in line
    with pytest.raises(SystemExit) as exited:
        run(["corpus", "search", str(library), "formulas", "--retriever", "bm26"])
    assert exited.value.code == 2 and "two_stage" in capsys.readouterr().err  # the choices are listed


RECALC = "Recalculate every formula with LibreOffice headless after editing the xlsx file, then reopen it."


def test_near_duplicate_sections_of_forks_are_one_hit_with_their_copies(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from corpus_tools.vetting import shingles
    from raso.api import make_retriever
    from raso.engine.config import OptimizeConfig

    variants = {"fork-a": RECALC, "fork-b": RECALC.upper().replace(" ", "  \n"), "fork-c": RECALC}  # case, spacing
    for fork, text in variants.items():
        skill(tmp_path / fork, "xlsx", f"## Recalculate\n\n{text}\n\n## Notes\n\nKept by {fork} for its own team.\n")
    skill(tmp_path / "other", "xlsx-charts", "## Charts\n\nAdd a chart to the xlsx file after editing it.\n")
    out = tmp_path / "index"
    sources = [str(tmp_path / name) for name in (*variants, "other")]
    assert run(["corpus", "build", *sources, "--out", str(out)]) == 0
    query = "recalculate formula libreoffice after editing xlsx"

    def recalc_copies(config: dict[str, Any]) -> int:
        hits = make_retriever(OptimizeConfig(retrieval={"index": out, **config})).search(query, k=5)
        return sum(shingles(hit.section.text) == shingles(f"## Recalculate\n\n{RECALC}") for hit in hits)

    assert recalc_copies({"vet": False}) == 3  # unvetted, the optimizer would read the same text three times
    assert recalc_copies({}) == 1  # a run's default retriever hands it over once

    capsys.readouterr()
    assert run(["corpus", "search", str(out), query, "--json"]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    recalc = [h for h in hits if "Recalculate" in h["heading_path"]]
    assert len(recalc) == 1 and recalc[0]["copies"] == 3
    assert sorted(c["repo"] for c in recalc[0]["other_copies"]) == sorted(
        {"local/fork-a", "local/fork-b", "local/fork-c"} - {recalc[0]["repo"]})
    assert all(h["copies"] == 1 for h in hits if h is not recalc[0])
    assert run(["corpus", "search", str(out), query]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "copies" in x).strip()
    assert line.startswith("3 copies; also in ")
    assert all(f"{repo}/xlsx/SKILL.md" in line for repo in {"local/fork-a", "local/fork-b", "local/fork-c"}
               - {recalc[0]["repo"]})
