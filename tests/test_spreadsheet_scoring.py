"""Scoring fidelity with SpreadsheetBench's evaluator on the shipped workbooks, and the value rules one by one."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import openpyxl
import pytest

from harnesses.spreadsheet.loader import load_tasks
from harnesses.spreadsheet.scoring import (
    CorruptWorkbookError,
    ScoringError,
    cells_equal,
    compare_workbooks,
    open_values,
    parse_answer_position,
)

# What the upstream evaluator (evaluation/evaluation.py, input workbook in place of the output) reports for the
# untouched input workbooks of the 50 tasks: these 12 test cases pass, the other 138 fail (README: 12 pass).
INPUT_CASES_THAT_PASS_UNTOUCHED = {
    ("193-42", 1), ("193-42", 2), ("CF_4909", 1), ("CF_4909", 2), ("CF_4909", 3), ("570-43", 1), ("570-43", 2),
    ("570-43", 3), ("30468", 1), ("CF_8276", 1), ("CF_8276", 2), ("CF_8276", 3),
}


def test_answer_workbooks_pass_and_input_workbooks_score_as_upstream():
    answer_passes = 0
    input_passes = set()
    for task in load_tasks():
        for case in task.cases:
            answer = open_values(case.answer_path)
            result = compare_workbooks(answer, answer, task.answer_position)
            assert result.passed, (task.id, case.index, result.message)
            assert result.cells_checked > 0
            answer_passes += 1
            if compare_workbooks(answer, case.input_path, task.answer_position).passed:
                input_passes.add((task.id, case.index))
    assert answer_passes == 150
    assert input_passes == INPUT_CASES_THAT_PASS_UNTOUCHED


@pytest.mark.parametrize("position, expected", [
    ("'Sheet1'!A1:A4", [("Sheet1", "A1:A4")]),
    ("A1:N53", [(None, "A1:N53")]),
    ("E1", [(None, "E1")]),
    ("'Sheet1!'A2:B19,'Sheet2!'A2:B19,'Sheet3!'A2:D11'",  # task 184-45, quotes in the wrong places
     [("Sheet1", "A2:B19"), ("Sheet2", "A2:B19"), ("Sheet3", "A2:D11")]),
    ("Updated Data'!B5:B9", [("Updated Data", "B5:B9")]),  # task 50066, opening quote missing
    ("'ورقة1'!H2:L4", [("ورقة1", "H2:L4")]),
    ("'51998'!L24", [("51998", "L24")]),
    ("Sheet1!A1: B3, C4", [("Sheet1", "A1:B3"), (None, "C4")]),
])
def test_answer_positions_parse(position, expected):
    assert parse_answer_position(position) == expected


@pytest.mark.parametrize("position", ["", "Sheet1!", "A:A", "not a range"])
def test_bad_answer_positions_are_refused(position):
    with pytest.raises(ScoringError):
        parse_answer_position(position)


@pytest.mark.parametrize("expected, produced, equal", [
    (1.234, 1.2349, True),           # rounded to 2 decimals
    (1.23, 1.24, False),
    (5, "5", True),                  # numeric strings compare as numbers
    (5, "5 apples", False),
    ("", None, True),                # empty equals None
    (None, "", True),
    (0, None, False),
    ("abc", "abc", True),
    ("abc", "ABC", False),
    (True, 1, True),                 # booleans are numbers to the upstream evaluator
    (dt.datetime(2024, 1, 2, 9, 0), 45293, True),       # datetimes become Excel serial days (rounded)
    (dt.datetime(2024, 1, 2), dt.datetime(2024, 1, 2, 11, 0), True),
    (dt.datetime(2024, 1, 2), dt.datetime(2024, 1, 3), False),
    (dt.time(9, 30), "09:30", True),  # times become HH:MM text
])
def test_cell_value_rules(expected, produced, equal):
    assert cells_equal(expected, produced) is equal


def _book(path: Path, cells: dict[str, object], title: str = "Sheet1") -> Path:
    wb = openpyxl.Workbook()
    wb.active.title = title
    for ref, value in cells.items():
        wb.active[ref] = value
    wb.save(path)
    return path


def test_unqualified_ranges_use_the_answer_workbooks_first_sheet(tmp_path):
    answer = openpyxl.Workbook()
    answer.active.title = "Data"
    answer.active["B2"] = 7
    answer.create_sheet("Other")["B2"] = 99
    answer.save(tmp_path / "a.xlsx")
    good = _book(tmp_path / "good.xlsx", {"B2": 7}, title="Data")
    assert compare_workbooks(tmp_path / "a.xlsx", good, "B2").passed
    result = compare_workbooks(tmp_path / "a.xlsx", _book(tmp_path / "x.xlsx", {"B2": 7}, title="Renamed"), "B2")
    assert not result.passed and "worksheet 'Data' not found" in result.message


def test_mismatches_are_reported_with_cell_and_values(tmp_path):
    answer = _book(tmp_path / "a.xlsx", {"A1": 1, "A2": 2, "A3": 3})
    produced = _book(tmp_path / "p.xlsx", {"A1": 1, "A2": 20, "A3": 3})
    result = compare_workbooks(answer, produced, "A1:A3")
    assert not result.passed
    assert result.mismatches == ["Sheet1!A2: expected 2, got 20"]


def test_a_formula_without_a_cached_value_does_not_count_as_its_result(tmp_path):
    answer = _book(tmp_path / "a.xlsx", {"A1": 1, "A2": 2, "A3": 3})
    produced = _book(tmp_path / "p.xlsx", {"A1": 1, "A2": 2, "A3": "=A1+A2"})  # openpyxl stores no value
    assert not compare_workbooks(answer, produced, "A1:A3").passed


def test_a_corrupt_output_workbook_fails_the_case_with_a_clear_message(tmp_path):
    answer = _book(tmp_path / "a.xlsx", {"A1": 1})
    corrupt = tmp_path / "corrupt.xlsx"
    corrupt.write_bytes(b"PK\x03\x04 this is not really a zip archive")
    result = compare_workbooks(answer, corrupt, "A1")
    assert not result.passed
    assert "output workbook corrupt.xlsx is not a readable .xlsx workbook" in result.message
    with pytest.raises(CorruptWorkbookError, match="answer workbook corrupt.xlsx"):
        compare_workbooks(corrupt, answer, "A1")
    missing = compare_workbooks(answer, tmp_path / "nope.xlsx", "A1")
    assert not missing.passed and "does not exist" in missing.message
