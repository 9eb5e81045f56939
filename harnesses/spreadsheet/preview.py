"""Compact text previews of workbooks for the agent's observations.

Cells are listed row by row with their coordinates (`B3: 'Total'`), empty cells skipped, long text cut; a
formula cell shows its formula and, when the file has one, its cached value (`D3: =SUM(A3:C3) -> 6`).
"""

from __future__ import annotations

import datetime as dt
import warnings
from pathlib import Path
from typing import Any

import openpyxl
from openpyxl.utils import get_column_letter, range_boundaries
from openpyxl.worksheet.formula import ArrayFormula

from harnesses.spreadsheet.scoring import CorruptWorkbookError, ScoringError, parse_answer_position


def _load_pair(path: Path) -> tuple[openpyxl.Workbook, openpyxl.Workbook]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return openpyxl.load_workbook(path), openpyxl.load_workbook(path, data_only=True)
    except Exception as exc:  # any failure to parse the file is reported the same way
        raise CorruptWorkbookError(f"{path.name} is not a readable .xlsx workbook: {type(exc).__name__}: {exc}") from exc


def format_value(value: Any, max_chars: int = 40) -> str:
    if isinstance(value, str):
        text = value if len(value) <= max_chars else value[: max_chars - 3] + "..."
        return repr(text)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="minutes") if (value.hour or value.minute) else value.date().isoformat()
    if isinstance(value, float):
        return f"{value:.6g}"
    return repr(value)


def _cell_text(formula_cell: Any, value_cell: Any, max_chars: int) -> str | None:
    raw = formula_cell.value
    if raw is None:
        return None
    if isinstance(raw, ArrayFormula) or formula_cell.data_type == "f" or (isinstance(raw, str) and raw.startswith("=")):
        formula = str(raw.text if isinstance(raw, ArrayFormula) else raw)
        formula = formula if len(formula) <= 60 else formula[:57] + "..."
        cached = value_cell.value
        return f"{formula} -> {format_value(cached, max_chars)}" if cached is not None else f"{formula} (no cached value)"
    if not isinstance(raw, (str, int, float, bool, dt.datetime, dt.date, dt.time)):
        raw = str(raw)  # array formulas, rich text and the like
    return format_value(raw, max_chars)


def _rows(ws_f: Any, ws_v: Any, min_col: int, min_row: int, max_col: int, max_row: int, max_chars: int,
          show_empty: bool = False) -> list[str]:
    lines = []
    for row in range(min_row, max_row + 1):
        parts = []
        for col in range(min_col, max_col + 1):
            ref = f"{get_column_letter(col)}{row}"
            text = _cell_text(ws_f[ref], ws_v[ref], max_chars)
            if text is not None:
                parts.append(f"{ref}: {text}")
            elif show_empty:
                parts.append(f"{ref}: (empty)")
        if parts:
            lines.append("  " + " | ".join(parts))
    return lines


def describe_workbook(path: Path, max_sheets: int = 6, max_rows: int = 10, max_cols: int = 12,
                      max_chars: int = 40) -> str:
    """Sheet list with used ranges, then the top-left cells of each sheet."""
    wb_f, wb_v = _load_pair(path)
    out = ["Sheets: " + ", ".join(f"{ws.title!r} (used range {ws.dimensions}, {ws.max_row} rows x {ws.max_column} "
                                  f"columns)" for ws in wb_f.worksheets)]
    for ws in wb_f.worksheets[:max_sheets]:
        ws_v = wb_v[ws.title]
        min_row, max_row = ws.min_row, min(ws.max_row, ws.min_row + max_rows - 1)
        min_col, max_col = ws.min_column, min(ws.max_column, ws.min_column + max_cols - 1)
        shown = f"rows {min_row}-{max_row}, columns {get_column_letter(min_col)}-{get_column_letter(max_col)}"
        out.append(f"Sheet {ws.title!r} ({shown}; empty cells omitted):")
        lines = _rows(ws, ws_v, min_col, min_row, max_col, max_row, max_chars)
        out.extend(lines or ["  (no values)"])
    if len(wb_f.worksheets) > max_sheets:
        out.append(f"({len(wb_f.worksheets) - max_sheets} more sheets not shown)")
    return "\n".join(out)


def describe_cells(path: Path, position: str, max_rows: int = 12, max_cols: int = 12, max_chars: int = 40) -> str:
    """The cells of an answer_position in a workbook (empty ones shown as such)."""
    wb_f, wb_v = _load_pair(path)
    try:
        parts = parse_answer_position(position)
    except ScoringError as exc:
        return f"(cannot show {position!r}: {exc})"
    out = []
    for sheet, cells in parts:
        name = sheet if sheet is not None else wb_f.sheetnames[0]
        if name not in wb_f.sheetnames:
            out.append(f"Sheet {name!r}: not present in this workbook")
            continue
        min_col, min_row, max_col, max_row = range_boundaries(cells)
        last_row, last_col = min(max_row, min_row + max_rows - 1), min(max_col, min_col + max_cols - 1)
        more = []
        if last_row < max_row:
            more.append(f"{max_row - last_row} more rows")
        if last_col < max_col:
            more.append(f"{max_col - last_col} more columns")
        suffix = f" ({', '.join(more)} not shown)" if more else ""
        out.append(f"Sheet {name!r} range {cells}{suffix}:")
        out.extend(_rows(wb_f[name], wb_v[name], min_col, min_row, last_col, last_row, max_chars, show_empty=True))
    return "\n".join(out)
