"""Formula recalculation before scoring: detection, the LibreOffice engine, batching, clear errors."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import openpyxl
import pytest

from harnesses.spreadsheet import recalc as recalc_module
from harnesses.spreadsheet.recalc import (FormulasRecalc, LibreOfficeRecalc, RecalcError, RecalcUnavailable,
                                          get_recalculator, needs_recalc)
from harnesses.spreadsheet.scoring import open_values


def formula_book(path: Path) -> Path:
    wb = openpyxl.Workbook()
    ws = wb.active
    for row, (name, qty) in enumerate([("apple", 3), ("pear", 5), ("fig", 7)], start=1):
        ws[f"A{row}"], ws[f"B{row}"] = name, qty
    ws["C1"] = "=SUM(B1:B3)"
    ws["C2"] = '=IF(B2>4,"big","small")'
    ws["C3"] = '=VLOOKUP("fig",A1:B3,2,FALSE)'
    wb.save(path)
    return path


def test_needs_recalc_spots_formulas_without_cached_values(tmp_path):
    assert needs_recalc(formula_book(tmp_path / "f.xlsx"))
    wb = openpyxl.Workbook()
    wb.active["A1"] = 1
    wb.save(tmp_path / "plain.xlsx")
    assert not needs_recalc(tmp_path / "plain.xlsx")


def test_libreoffice_computes_formula_values(tmp_path):
    engine = LibreOfficeRecalc()
    try:
        engine.recalc(formula_book(tmp_path / "f.xlsx"), tmp_path / "out.xlsx")
    finally:
        engine.close()
    ws = open_values(tmp_path / "out.xlsx").active
    assert (ws["C1"].value, ws["C2"].value, ws["C3"].value) == (15, "big", 7)
    assert not needs_recalc(tmp_path / "out.xlsx")
    assert openpyxl.load_workbook(tmp_path / "out.xlsx").active["C1"].value == "=SUM(B1:B3)"  # formulas stay


def test_libreoffice_batch_converts_every_file(tmp_path):
    engine = get_recalculator("libreoffice")
    first, second = formula_book(tmp_path / "f.xlsx"), formula_book(tmp_path / "g.xlsx")
    try:
        errors = engine.recalc_many([(first, tmp_path / "a.xlsx"), (second, tmp_path / "b.xlsx")])
    finally:
        engine.close()
    assert errors == [None, None]
    assert open_values(tmp_path / "a.xlsx").active["C1"].value == 15
    assert open_values(tmp_path / "b.xlsx").active["C3"].value == 7


def test_a_failing_engine_run_is_reported_per_file(tmp_path):
    engine = LibreOfficeRecalc(soffice="/bin/false")  # exits 1 without converting anything
    errors = engine.recalc_many([(formula_book(tmp_path / "f.xlsx"), tmp_path / "a.xlsx")])
    assert errors[0] is not None and "could not recalculate f.xlsx" in errors[0] and "exit 1" in errors[0]
    with pytest.raises(RecalcError, match="could not recalculate f.xlsx"):
        engine.recalc(tmp_path / "f.xlsx", tmp_path / "b.xlsx")
    assert not (tmp_path / "a.xlsx").exists()


def test_missing_libreoffice_fails_with_the_install_command(monkeypatch):
    monkeypatch.setattr(recalc_module.shutil, "which", lambda name: None)
    with pytest.raises(RecalcUnavailable, match="apt-get install -y libreoffice-calc-nogui"):
        get_recalculator("libreoffice")


def test_unknown_engine_is_refused():
    with pytest.raises(ValueError, match="choose one of"):
        get_recalculator("excel")


def test_formulas_engine_works_when_installed_and_says_how_to_install_otherwise(tmp_path):
    if importlib.util.find_spec("formulas") is None:
        with pytest.raises(RecalcUnavailable, match="pip install formulas"):
            FormulasRecalc()
        return
    FormulasRecalc().recalc(formula_book(tmp_path / "f.xlsx"), tmp_path / "out.xlsx")
    ws = open_values(tmp_path / "out.xlsx").active
    assert (ws["C1"].value, ws["C2"].value, ws["C3"].value) == (15, "big", 7)
