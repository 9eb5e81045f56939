"""Score a produced workbook against an answer workbook the way SpreadsheetBench's evaluator does.

Rules (re-implemented from the upstream `evaluation/evaluation.py`, RUCKBReasoning/SpreadsheetBench):

* Both workbooks are opened with openpyxl `data_only=True`, so a formula cell counts by its cached value.
  Formulas written by a program have no cached value until recalculated (see `recalc.py`; the harness
  recalculates the produced workbook before scoring).
* `answer_position` is a comma-separated list of ranges or single cells. A part with `!` names its sheet
  (quotes around the sheet name are stripped, also the malformed forms `'Sheet1!'A2:B19` and `Name'!B5:B9`
  found in the data); a part without a sheet refers to the answer workbook's first sheet.
* Every cell of every part must match. Values are normalized first: numbers (and numeric strings) rounded to
  2 decimals as floats; datetimes become Excel serial day numbers rounded to whole days; times become "HH:MM";
  then "" and None are equal, different types differ, and otherwise values must be equal.
* A test case passes only if all cells match; a missing sheet in the produced workbook fails it.
"""

from __future__ import annotations

import datetime as dt
import warnings
import zipfile
from pathlib import Path
from typing import Any

import openpyxl
from openpyxl.utils import get_column_letter, range_boundaries
from pydantic import BaseModel, Field

_EXCEL_EPOCH = dt.datetime(1899, 12, 30)


class ScoringError(ValueError):
    """The task's answer_position cannot be interpreted."""


class CorruptWorkbookError(ValueError):
    """A workbook file that openpyxl cannot open."""


class CaseResult(BaseModel):
    passed: bool
    message: str = ""
    cells_checked: int = 0
    mismatches: list[str] = Field(default_factory=list)


def parse_answer_position(position: str) -> list[tuple[str | None, str]]:
    """Split an answer_position into (sheet or None, 'A1:B2' / 'C3') parts, tolerating stray quotes and spaces."""
    parts: list[tuple[str | None, str]] = []
    for raw in position.split(","):
        raw = raw.strip()
        if not raw:
            continue
        if "!" in raw:
            sheet, _, cells = raw.rpartition("!")
            sheet = sheet.strip().strip("'").strip()
        else:
            sheet, cells = None, raw
        cells = cells.replace(" ", "").strip("'").upper()
        try:
            min_col, min_row, max_col, max_row = range_boundaries(cells)
        except (ValueError, TypeError) as exc:
            raise ScoringError(f"cannot parse cell range {cells!r} in answer_position {position!r}") from exc
        if None in (min_col, min_row, max_col, max_row):
            raise ScoringError(f"unbounded range {cells!r} in answer_position {position!r}")
        parts.append((sheet or None, cells))
    if not parts:
        raise ScoringError(f"empty answer_position {position!r}")
    return parts


def cell_names(cells: str) -> list[str]:
    """Cell names of a range, column by column (the order the upstream evaluator reports mismatches in)."""
    min_col, min_row, max_col, max_row = range_boundaries(cells)
    return [f"{get_column_letter(col)}{row}" for col in range(min_col, max_col + 1)
            for row in range(min_row, max_row + 1)]


def normalize_value(value: Any) -> Any:
    if isinstance(value, (int, float)):  # bool is an int here, as upstream
        return round(float(value), 2)
    if isinstance(value, dt.time):
        return str(value)[:-3]
    if isinstance(value, dt.datetime):
        delta = value - _EXCEL_EPOCH
        return round(delta.days + delta.seconds / 86400.0, 0)
    if isinstance(value, str):
        try:
            return round(float(value), 2)
        except ValueError:
            return value
    return value


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value == "")


def cells_equal(expected: Any, produced: Any) -> bool:
    a, b = normalize_value(expected), normalize_value(produced)
    if _blank(a) and _blank(b):  # empty string and an empty cell are the same
        return True
    if type(a) is not type(b):
        return False
    return a == b


def open_values(path: Path | str, role: str = "workbook") -> openpyxl.Workbook:
    """Open a workbook for its cell values, or raise CorruptWorkbookError saying which file and why."""
    path = Path(path)
    if not path.is_file():
        raise CorruptWorkbookError(f"{role} {path.name} does not exist")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # openpyxl warns about unsupported extensions it drops
            return openpyxl.load_workbook(path, data_only=True)
    except (zipfile.BadZipFile, KeyError, ValueError, TypeError, OSError, IndexError, AttributeError) as exc:
        raise CorruptWorkbookError(f"{role} {path.name} is not a readable .xlsx workbook: "
                                   f"{type(exc).__name__}: {exc}") from exc


def compare_workbooks(answer: Path | str | openpyxl.Workbook, produced: Path | str | openpyxl.Workbook,
                      answer_position: str, max_mismatches: int = 5) -> CaseResult:
    """Compare the answer cells. Raises CorruptWorkbookError for an unreadable answer; a corrupt produced
    workbook is a failed case with the reason in `message`."""
    wb_answer = answer if isinstance(answer, openpyxl.Workbook) else open_values(answer, "answer workbook")
    parts = parse_answer_position(answer_position)
    try:
        wb_out = produced if isinstance(produced, openpyxl.Workbook) else open_values(produced, "output workbook")
    except CorruptWorkbookError as exc:
        return CaseResult(passed=False, message=str(exc))
    checked = 0
    mismatches: list[str] = []
    for sheet, cells in parts:
        sheet_name = sheet if sheet is not None else wb_answer.sheetnames[0]
        if sheet_name not in wb_answer.sheetnames:
            raise ScoringError(f"answer workbook has no sheet {sheet_name!r} (answer_position {answer_position!r})")
        if sheet_name not in wb_out.sheetnames:
            return CaseResult(passed=False, cells_checked=checked,
                              message=f"worksheet {sheet_name!r} not found in the output workbook")
        ws_answer, ws_out = wb_answer[sheet_name], wb_out[sheet_name]
        for name in cell_names(cells):
            checked += 1
            expected, got = ws_answer[name].value, ws_out[name].value
            if not cells_equal(expected, got):
                if len(mismatches) < max_mismatches:
                    mismatches.append(f"{sheet_name}!{name}: expected {expected!r}, got {got!r}")
                else:
                    break
        if len(mismatches) >= max_mismatches:
            break
    if mismatches:
        return CaseResult(passed=False, cells_checked=checked, mismatches=mismatches,
                          message=f"value difference at {mismatches[0]}")
    return CaseResult(passed=True, cells_checked=checked, message="all answer cells match")
