"""Formula recalculation before scoring: detection, the LibreOffice engine, batching, clear errors, and the
`auto` default that falls back to the pure-Python `formulas` engine where LibreOffice is not installed."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import openpyxl
import pytest

from harnesses.spreadsheet import recalc as recalc_module
from harnesses.spreadsheet.recalc import (
    FormulasRecalc,
    LibreOfficeRecalc,
    RecalcError,
    RecalcUnavailable,
    find_soffice,
    get_recalculator,
    needs_recalc,
)
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


@pytest.mark.libreoffice
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


@pytest.mark.libreoffice
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


def test_missing_libreoffice_fails_with_the_install_command(monkeypatch, tmp_path):
    hide_soffice(monkeypatch, tmp_path / "bin")
    with pytest.raises(RecalcUnavailable, match="apt-get install -y libreoffice-calc-nogui"):
        get_recalculator("libreoffice")


def test_unknown_engine_is_refused():
    with pytest.raises(ValueError, match="choose one of"):
        get_recalculator("excel")


def test_formulas_engine_computes_formula_values(tmp_path):
    FormulasRecalc().recalc(formula_book(tmp_path / "f.xlsx"), tmp_path / "out.xlsx")
    ws = open_values(tmp_path / "out.xlsx").active
    assert (ws["C1"].value, ws["C2"].value, ws["C3"].value) == (15, "big", 7)
    assert FormulasRecalc().version.startswith("formulas 1.")


def test_formulas_engine_runs_in_a_child_process_with_a_time_limit(tmp_path):
    book = formula_book(tmp_path / "f.xlsx")
    errors = FormulasRecalc(timeout_s=0.01).recalc_many([(book, tmp_path / "out.xlsx")])
    assert errors == ["formulas did not finish within 0.01s (f.xlsx)"] and not (tmp_path / "out.xlsx").exists()
    errors = FormulasRecalc().recalc_many([(tmp_path / "missing.xlsx", tmp_path / "a.xlsx"), (book, tmp_path / "b.xlsx")])
    assert "could not recalculate missing.xlsx" in errors[0] and errors[1] is None  # per workbook


def hide_soffice(monkeypatch, shadow: Path) -> None:
    """PATH as on a machine with only Python: a folder that holds soffice / libreoffice is replaced by `shadow`,
    which links to every other program in it (unshare, mount, ... stay reachable)."""
    hidden = ("soffice", "libreoffice")
    shadow.mkdir(parents=True, exist_ok=True)
    keep = []
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if not any(Path(folder, name).exists() for name in hidden):
            keep.append(folder)
            continue
        for program in Path(folder).iterdir():
            if program.name not in hidden and not (shadow / program.name).exists():
                (shadow / program.name).symlink_to(program)
        if str(shadow) not in keep:
            keep.append(str(shadow))
    monkeypatch.setenv("PATH", os.pathsep.join(keep))
    monkeypatch.setattr(recalc_module, "_fallback_noticed", False)
    assert find_soffice() is None and shutil.which("sh") is not None


@pytest.mark.libreoffice
def test_auto_uses_libreoffice_where_installed():
    engine = get_recalculator("auto")
    assert isinstance(engine, LibreOfficeRecalc)
    assert engine.version.startswith("LibreOffice ")


def test_auto_falls_back_to_formulas_with_one_notice_naming_the_debian_package(monkeypatch, caplog, tmp_path):
    hide_soffice(monkeypatch, tmp_path / "bin")
    with caplog.at_level(logging.WARNING, logger=recalc_module.__name__):
        first, second = get_recalculator(), get_recalculator("auto")
    assert isinstance(first, FormulasRecalc) and isinstance(second, FormulasRecalc)
    notices = [r.getMessage() for r in caplog.records if "LibreOffice" in r.getMessage()]
    assert len(notices) == 1  # once per process, however many harnesses are built
    assert "apt-get install -y libreoffice-calc-nogui" in notices[0] and "\n" not in notices[0]
    first.recalc(formula_book(tmp_path / "f.xlsx"), tmp_path / "out.xlsx")
    assert open_values(tmp_path / "out.xlsx").active["C1"].value == 15
    with pytest.raises(RecalcUnavailable, match="libreoffice-calc-nogui"):  # asked for by name: no fallback
        get_recalculator("libreoffice")


@pytest.mark.libreoffice
def test_recalculation_keeps_the_values_a_workbook_already_had(tmp_path):
    """Task 59902's answer: LibreOffice recomputes its cached answer cells differently; Excel's values are kept."""
    from harnesses.spreadsheet.loader import load_tasks
    from harnesses.spreadsheet.recalc import has_cached_formula_values, recalculate
    from harnesses.spreadsheet.scoring import compare_workbooks

    task = next(t for t in load_tasks() if t.id == "59902")
    answer = task.cases[0].answer_path
    assert needs_recalc(answer) and has_cached_formula_values(answer)
    assert not has_cached_formula_values(formula_book(tmp_path / "f.xlsx"))  # what openpyxl writes
    engine = get_recalculator("libreoffice")
    try:
        assert engine.recalc_many([(answer, tmp_path / "engine_only.xlsx")]) == [None]
        assert recalculate(engine, [(answer, tmp_path / "kept.xlsx")]) == [None]
    finally:
        engine.close()
    assert not compare_workbooks(answer, tmp_path / "engine_only.xlsx", task.answer_position).passed
    assert compare_workbooks(answer, tmp_path / "kept.xlsx", task.answer_position).passed
