"""The workspace forms of spreadsheet and officeqa (raso.harness.workspace.WorkspaceTasks): what an external agent
finds in its folder (inputs only, never an answer) and how its output is scored (the harness's own scorer).

The right and wrong outputs are made here by the tests' own trusted code (openpyxl programs from
tests/spreadsheet_solutions.py run in this process), standing in for what an agent would write.
"""

from __future__ import annotations

import hashlib
import os
import runpy
import sys
from pathlib import Path

import pytest

from harnesses.officeqa import OfficeQAHarness
from harnesses.officeqa.loader import PACKAGED_DATA_DIR as OFFICEQA_DATA
from harnesses.spreadsheet import SpreadsheetHarness
from harnesses.spreadsheet.workspace import input_name, output_name
from raso.harness import Task, WorkspaceTasks
from tests.spreadsheet_solutions import CORRECT, SUBTLY_WRONG


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def files_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


# ---------------------------------------------------------------------------------------------- spreadsheet
@pytest.fixture(scope="module")
def sheets(tmp_path_factory) -> SpreadsheetHarness:
    return SpreadsheetHarness(answer_cache_dir=tmp_path_factory.mktemp("answers"))


def run_program(code: str, source: Path, dest: Path) -> None:
    """Run one of the tests' own openpyxl programs as `program input output` (trusted test code)."""
    program = dest.parent / "_program.py"
    program.write_text(code, encoding="utf-8")
    argv = sys.argv
    try:
        sys.argv = [str(program), str(source), str(dest)]
        runpy.run_path(str(program), run_name="__main__")
    finally:
        sys.argv = argv
        program.unlink()


def solve_workspace(harness: SpreadsheetHarness, task_id: str, workspace: Path, code: str) -> None:
    for case in harness.spreadsheet_task(task_id).cases:
        run_program(code, workspace / input_name(case.index), workspace / output_name(case.index))


def test_spreadsheet_is_a_workspace_harness_whose_workspace_holds_only_input_workbooks(sheets, tmp_path):
    assert isinstance(sheets, WorkspaceTasks)
    task_id = "17251"
    instruction = sheets.prepare_workspace(Task(id=task_id, instruction=""), tmp_path)
    spreadsheet_task = sheets.spreadsheet_task(task_id)
    names = [p.name for p in files_in(tmp_path)]
    assert names == [input_name(c.index) for c in spreadsheet_task.cases]
    answers = {sha256(c.answer_path) for c in spreadsheet_task.cases}
    assert not answers & {sha256(p) for p in files_in(tmp_path)}  # no answer workbook under any name
    for case in spreadsheet_task.cases:
        assert sha256(tmp_path / input_name(case.index)) == sha256(case.input_path)
        assert output_name(case.index) in instruction
    assert spreadsheet_task.answer_position in instruction and spreadsheet_task.instruction.strip() in instruction
    description = sheets.workspace_description
    assert "output_N.xlsx" in description and "input_1.xlsx" in description


def test_spreadsheet_scores_a_right_output_one_and_a_subtly_wrong_one_like_the_env(sheets, tmp_path):
    task = Task(id="17251", instruction="")
    right, wrong, empty = tmp_path / "right", tmp_path / "wrong", tmp_path / "empty"
    for folder, code in ((right, CORRECT["17251"]), (wrong, SUBTLY_WRONG["17251"]), (empty, None)):
        folder.mkdir()
        sheets.prepare_workspace(task, folder)
        if code is not None:
            solve_workspace(sheets, "17251", folder, code)
    score = sheets.score_workspace(task, right)
    assert (score.reward, score.soft_score, score.info["cases_passed"]) == (1.0, 1.0, 3), score.info
    score = sheets.score_workspace(task, wrong)
    assert score.reward == 0.0 and score.soft_score < 1.0 and "value difference at" in score.info["error"]
    score = sheets.score_workspace(task, empty)
    assert (score.reward, score.soft_score) == (0.0, 0.0) and "no output_1.xlsx in the workspace" in score.info["error"]


def test_a_spreadsheet_output_linked_to_an_answer_is_not_scored(sheets, tmp_path):
    task = Task(id="17251", instruction="")
    sheets.prepare_workspace(task, tmp_path)
    for case in sheets.spreadsheet_task("17251").cases:  # an agent that found the answers would link them
        os.symlink(case.answer_path, tmp_path / output_name(case.index))
    score = sheets.score_workspace(task, tmp_path)
    assert score.reward == 0.0 and "is a symbolic link" in score.info["error"]


@pytest.mark.libreoffice
def test_a_spreadsheet_output_with_formulas_is_recalculated_before_scoring(sheets, tmp_path):
    task = Task(id="37609", instruction="")  # the correct program writes IF formulas without cached values
    right, wrong = tmp_path / "right", tmp_path / "wrong"
    for folder, code in ((right, CORRECT["37609"]), (wrong, SUBTLY_WRONG["37609"])):
        folder.mkdir()
        sheets.prepare_workspace(task, folder)
        solve_workspace(sheets, "37609", folder, code)
    assert sheets.score_workspace(task, right).reward == 1.0
    assert sheets.score_workspace(task, wrong).reward == 0.0


# ---------------------------------------------------------------------------------------------- officeqa
@pytest.fixture(scope="module")
def office() -> OfficeQAHarness:
    return OfficeQAHarness()


def test_officeqa_workspace_holds_the_documents_and_never_the_questions_or_answers(office, tmp_path):
    assert isinstance(office, WorkspaceTasks)
    task = office.tasks("train")[0]
    instruction = office.prepare_workspace(task, tmp_path)
    copied = files_in(tmp_path)
    corpus = {d.path.name: d.path for d in office.corpus.documents.values()}
    assert sorted(p.name for p in copied) == sorted(corpus) and all(p.parent.name == "documents" for p in copied)
    assert all(sha256(p) == sha256(corpus[p.name]) for p in copied)
    questions_csv = (OFFICEQA_DATA / "officeqa_full.csv").read_text(encoding="utf-8")
    rows = [line for line in questions_csv.splitlines()[1:] if line.strip()]
    for path in copied:  # neither the question file nor any of its rows (which carry the answers)
        text = path.read_text(encoding="utf-8")
        assert not any(row in text for row in rows), path.name
        assert "uid,question,answer" not in text
    assert office.question(task.id).question in instruction and "answer.txt" in instruction
    assert "answer.txt" in office.workspace_description


def test_officeqa_scores_answer_txt_with_its_reward_rules(office, tmp_path):
    task = office.tasks("train")[0]
    expected = office.question(task.id).answer
    office.prepare_workspace(task, tmp_path)
    missing = office.score_workspace(task, tmp_path)
    assert missing.reward == 0.0 and "no answer.txt" in missing.info["error"]
    (tmp_path / "answer.txt").write_text(f"{expected}\n", encoding="utf-8")
    right = office.score_workspace(task, tmp_path)
    assert right.reward == 1.0 and right.soft_score == 1.0, right.info
    (tmp_path / "answer.txt").write_text("It is 1.\nBecause reasons 2.\n", encoding="utf-8")
    wrong = office.score_workspace(task, tmp_path)
    assert wrong.reward == 0.0 and wrong.info["verdict"]
    (tmp_path / "answer.txt").unlink()
    os.symlink(tmp_path / "documents", tmp_path / "answer.txt")
    assert office.score_workspace(task, tmp_path).reward == 0.0
