"""Answer workbooks recalculated like outputs: an answer submitted as the output scores 1.0 on every case,
the recalculation is cached on disk by file hash and engine, and the cache stays out of the sandbox's reach."""

from __future__ import annotations

import shutil
from pathlib import Path

import openpyxl
import pytest

from harnesses.spreadsheet import SpreadsheetHarness
from harnesses.spreadsheet.answers import RecalculatedAnswers, file_sha256
from harnesses.spreadsheet.loader import load_tasks
from harnesses.spreadsheet.recalc import Recalculator, get_recalculator, needs_recalc
from harnesses.spreadsheet.scoring import cell_names, compare_workbooks, parse_answer_position
from raso.harness import Task

# Their answer cells hold formulas without cached values, so read as they are the expected cells are empty.
TASKS_WITH_UNCACHED_ANSWERS = {"57072", "50066", "208-20", "51899", "32255", "CF_8276"}
# These answer files lack cached values only outside the answer cells.
TASKS_WITH_UNCACHED_CELLS_ELSEWHERE = {"59902", "532-24"}


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> SpreadsheetHarness:
    return SpreadsheetHarness(recalc="libreoffice", answer_cache_dir=tmp_path_factory.mktemp("answers"))


def answer_cell_values(task, path: Path) -> list:
    book = openpyxl.load_workbook(path, data_only=True)
    return [book[sheet or book.sheetnames[0]][name].value
            for sheet, cells in parse_answer_position(task.answer_position) for name in cell_names(cells)]


def test_exactly_the_known_tasks_have_answers_without_cached_values():
    uncached = {t.id for t in load_tasks() for c in t.cases if needs_recalc(c.answer_path)}
    assert uncached == TASKS_WITH_UNCACHED_ANSWERS | TASKS_WITH_UNCACHED_CELLS_ELSEWHERE


@pytest.mark.libreoffice
def test_every_answer_submitted_as_the_output_scores_one(harness, tmp_path):
    """All 50 tasks x 3 cases through the env's own output path (recalculation, then scoring)."""
    scored_cases = 0
    failing_against_raw_answers = set()
    for spreadsheet_task in load_tasks():
        env = harness.make_env(Task(id=spreadsheet_task.id, instruction=""))
        outputs = []
        for case in spreadsheet_task.cases:  # copies: an output's recalculation is written beside it
            out = tmp_path / spreadsheet_task.id / f"{case.index}_output.xlsx"
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(case.answer_path, out)
            outputs.append(out)
        prepared = env.recalculate_outputs(outputs)
        for case, result, (scored, _) in zip(spreadsheet_task.cases, env.score_cases(prepared), prepared):
            assert result.passed, (spreadsheet_task.id, case.index, result.message)
            assert result.cells_checked > 0
            scored_cases += 1
            if not compare_workbooks(case.answer_path, scored, spreadsheet_task.answer_position).passed:
                failing_against_raw_answers.add(spreadsheet_task.id)  # how it was scored before
    assert scored_cases == 150
    assert harness.answers.failures == {}
    assert failing_against_raw_answers and failing_against_raw_answers <= TASKS_WITH_UNCACHED_ANSWERS
    # In the recalculated answers every answer cell kept the value Excel had cached (LibreOffice computes 14 of
    # 59902's differently).
    for task in load_tasks():
        if task.id not in TASKS_WITH_UNCACHED_ANSWERS | TASKS_WITH_UNCACHED_CELLS_ELSEWHERE:
            continue
        for case in task.cases:
            (resolved,) = harness.answers.resolve([case.answer_path])
            assert resolved.parent == harness.answer_cache_dir
            before, after = answer_cell_values(task, case.answer_path), answer_cell_values(task, resolved)
            assert all(b == a for b, a in zip(before, after) if b is not None), (task.id, case.index)


class CountingEngine(Recalculator):
    """A real engine wrapped to count the workbooks it is asked to recalculate."""

    def __init__(self, inner: Recalculator, version: str | None = None) -> None:
        self.inner, self.name, self.calls = inner, inner.name, 0
        self._version = version or inner.version

    @property
    def version(self) -> str:
        return self._version

    def recalc(self, src: Path, dest: Path) -> None:
        self.calls += 1
        self.inner.recalc(src, dest)


def uncached_answer(tmp_path: Path) -> Path:
    wb = openpyxl.Workbook()
    wb.active["A1"], wb.active["A2"], wb.active["A3"] = 2, 3, "=A1*A2"
    wb.save(tmp_path / "answer.xlsx")
    return tmp_path / "answer.xlsx"


def test_a_recalculated_answer_is_cached_on_disk_by_hash_and_engine(tmp_path):
    answer = uncached_answer(tmp_path)
    engine = CountingEngine(get_recalculator("formulas"))
    first = RecalculatedAnswers(engine, tmp_path / "cache").resolve([answer, answer])
    assert engine.calls == 1 and first[0] == first[1]
    assert first[0].name.startswith(file_sha256(answer)) and "formulas" in first[0].name
    assert openpyxl.load_workbook(first[0], data_only=True).active["A3"].value == 6
    # A new process (a new resolver) finds the file instead of recalculating.
    again = RecalculatedAnswers(engine, tmp_path / "cache").resolve([answer])
    assert engine.calls == 1 and again == first[:1]
    # Another engine (or version) gets its own entry.
    other = CountingEngine(get_recalculator("formulas"), version="formulas 9.9")
    assert RecalculatedAnswers(other, tmp_path / "cache").resolve([answer]) != first[:1] and other.calls == 1
    # An answer with cached values is read as it is, never recalculated.
    plain = tmp_path / "plain.xlsx"
    openpyxl.Workbook().save(plain)
    assert RecalculatedAnswers(engine, tmp_path / "cache").resolve([plain]) == [plain] and engine.calls == 1


def test_an_answer_the_engine_cannot_recalculate_is_scored_as_it_is(tmp_path):
    from harnesses.spreadsheet.recalc import LibreOfficeRecalc

    answer = uncached_answer(tmp_path)
    answers = RecalculatedAnswers(LibreOfficeRecalc(soffice="/bin/false"), tmp_path / "cache")
    assert answers.resolve([answer]) == [answer]
    assert "could not recalculate answer.xlsx" in answers.failures[answer]
    assert not any((tmp_path / "cache").glob("*"))  # nothing half-written is left in the cache
    produced = tmp_path / "p.xlsx"
    shutil.copyfile(answer, produced)
    assert compare_workbooks(answer, produced, "A1:A3").passed  # as before: empty matches empty


@pytest.mark.libreoffice
def test_the_answer_cache_is_hidden_from_model_written_programs(harness):
    cached = harness.answers.resolve([next(c.answer_path for t in load_tasks() if t.id == "32255"
                                           for c in t.cases)])[0]
    assert cached.parent == harness.answer_cache_dir
    env = harness.make_env(Task(id="17251", instruction=""))
    env.reset()
    try:
        code = f"import shutil, sys\nshutil.copyfile({str(cached)!r}, sys.argv[2])\n"
        obs, reward, *_ = env.step(f"```python\n{code}```\nAction: RUN")
    finally:
        env.close()
    assert reward == 0.0 and "is not allowed (outside the working directory)" in obs
