"""The SpreadsheetBench loader: the shipped 50 tasks, the Verified-400 naming, and clear errors on bad folders."""

from __future__ import annotations

import filecmp
import json
from collections import Counter
from pathlib import Path

import openpyxl
import pytest
from conftest import require_shared

from harnesses.spreadsheet.loader import PACKAGED_DATA_DIR, DatasetError, load_tasks
from harnesses.spreadsheet.splits import split_tasks


def test_the_shipped_tasks_load_with_three_cases_each():
    tasks = load_tasks()
    assert len(tasks) == 50
    assert len({t.id for t in tasks}) == 50
    assert Counter(t.instruction_type for t in tasks) == {"Cell-Level Manipulation": 25, "Sheet-Level Manipulation": 25}
    for task in tasks:
        assert [c.index for c in task.cases] == [1, 2, 3]
        for case in task.cases:
            assert case.input_path.is_file() and case.answer_path.is_file()
    by_id = {t.id: t for t in tasks}
    assert by_id["57072"].answer_position == "'Sheet2'!B1:B300"  # numeric ids become strings
    assert by_id["184-45"].answer_sheet == "Sheet1,Sheet2,Sheet3"


def test_the_shipped_data_keeps_its_license_and_attribution():
    license_text = (PACKAGED_DATA_DIR / "LICENSE").read_text()
    assert "Attribution-ShareAlike 4.0 International" in license_text
    readme = (PACKAGED_DATA_DIR / "README.md").read_text()
    assert "4842e3bd034c708cd6d2e5f6b4b22db198eb7e3c" in readme
    assert "CC BY-SA 4.0" in readme and "RUCKBReasoning/SpreadsheetBench" in readme


def test_the_shipped_data_is_an_unmodified_copy_of_the_shared_data():
    shared = require_shared("envdata", "spreadsheetbench", "test_set_50")
    assert filecmp.cmp(shared / "dataset.json", PACKAGED_DATA_DIR / "dataset.json", shallow=False)
    for task in load_tasks():
        for case in task.cases:
            for path in (case.input_path, case.answer_path):
                assert filecmp.cmp(shared / "spreadsheet" / task.id / path.name, path, shallow=False), path


def _book(path: Path, value: int) -> None:
    wb = openpyxl.Workbook()
    wb.active["A1"] = value
    wb.save(path)


def _record(task_id: str, **extra) -> dict:
    return {"id": task_id, "instruction": "double A1", "instruction_type": "Cell-Level Manipulation",
            "answer_position": "A1", "spreadsheet_path": f"spreadsheet/{task_id}", **extra}


def test_verified_400_layouts_load(tmp_path: Path):
    (tmp_path / "spreadsheet" / "101").mkdir(parents=True)
    _book(tmp_path / "spreadsheet" / "101" / "1_101_init.xlsx", 1)
    _book(tmp_path / "spreadsheet" / "101" / "1_101_golden.xlsx", 2)
    (tmp_path / "spreadsheet" / "bare-7").mkdir(parents=True)
    _book(tmp_path / "spreadsheet" / "bare-7" / "initial.xlsx", 1)
    _book(tmp_path / "spreadsheet" / "bare-7" / "golden.xlsx", 2)
    (tmp_path / "dataset.json").write_text(json.dumps([_record("101"), _record("bare-7")]))
    tasks = load_tasks(tmp_path)
    assert [t.id for t in tasks] == ["101", "bare-7"]
    assert tasks[0].layout == "init-golden" and tasks[0].cases[0].answer_path.name == "1_101_golden.xlsx"
    assert tasks[1].layout == "initial-golden" and tasks[1].cases[0].input_path.name == "initial.xlsx"


def test_jsonl_records_and_default_spreadsheet_path(tmp_path: Path):
    (tmp_path / "spreadsheet" / "5").mkdir(parents=True)
    for n in (1, 2):
        _book(tmp_path / "spreadsheet" / "5" / f"{n}_5_input.xlsx", n)
        _book(tmp_path / "spreadsheet" / "5" / f"{n}_5_answer.xlsx", 2 * n)
    record = _record("5")
    del record["spreadsheet_path"]
    (tmp_path / "dataset.jsonl").write_text(json.dumps({**record, "id": 5}) + "\n")
    (task,) = load_tasks(tmp_path)
    assert task.id == "5" and len(task.cases) == 2


@pytest.mark.parametrize("problem", ["no_folder", "unpaired", "no_cases", "bad_json", "missing_field"])
def test_bad_dataset_folders_give_clear_errors(tmp_path: Path, problem: str):
    folder = tmp_path / "spreadsheet" / "9"
    record = _record("9")
    if problem != "no_folder":
        folder.mkdir(parents=True)
    if problem == "unpaired":
        _book(folder / "1_9_input.xlsx", 1)
    if problem == "missing_field":
        del record["answer_position"]
    text = "{not json" if problem == "bad_json" else json.dumps([record])
    (tmp_path / "dataset.json").write_text(text)
    with pytest.raises(DatasetError) as err:
        load_tasks(tmp_path)
    expected = {"no_folder": "does not exist", "unpaired": "no matching answer", "no_cases": "no test cases",
                "bad_json": "not valid JSON", "missing_field": "lacks"}[problem]
    assert expected in str(err.value)


def test_split_is_deterministic_stratified_and_recorded():
    tasks = load_tasks()
    splits = split_tasks(tasks)
    assert {k: len(v) for k, v in splits.items()} == {"train": 20, "val": 10, "test": 20}
    ids = [t.id for split in splits.values() for t in split]
    assert sorted(ids) == sorted(t.id for t in tasks)  # disjoint and complete
    for split in splits.values():
        counts = Counter(t.instruction_type for t in split)
        assert counts["Cell-Level Manipulation"] == counts["Sheet-Level Manipulation"]
    recorded = json.loads((PACKAGED_DATA_DIR.parent / "splits.json").read_text())
    for name, split in splits.items():
        assert [t.id for t in split] == recorded[name]
    shuffled = list(reversed(tasks))
    assert {k: sorted(t.id for t in v) for k, v in split_tasks(shuffled).items()} == \
        {k: sorted(t.id for t in v) for k, v in splits.items()}
    assert split_tasks(tasks, salt="other")["val"] != splits["val"]
