"""Read SpreadsheetBench task folders into typed records.

Two layouts are understood, both a folder with a task list and a `spreadsheet/<id>/` folder per task:

* the original release / the 50-task set shipped here: `dataset.json` (a JSON list; `dataset.jsonl` with one
  record per line is accepted too) and test cases `{n}_{id}_input.xlsx` + `{n}_{id}_answer.xlsx` (n = 1, 2, 3);
* the official SpreadsheetBench Verified-400 release: the same record fields, test cases named
  `{n}_{id}_init.xlsx` + `{n}_{id}_golden.xlsx` (usually one), or a bare `initial.xlsx` + `golden.xlsx` pair.

Record fields used: `id` (string or number), `instruction`, `instruction_type`, `answer_position`, and where
present `spreadsheet_path` (relative to the dataset folder; default `spreadsheet/<id>`), `answer_sheet`,
`data_position`. Missing files or fields give a `DatasetError` naming the task and the path.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

PACKAGED_DATA_DIR = Path(__file__).resolve().parent / "data"

_NUMBERED_CASE = re.compile(r"^(?P<n>\d+)_(?P<id>.+)_(?P<kind>input|init|answer|golden)\.xlsx$")
_INPUT_KINDS = {"input": "answer", "init": "golden"}


class DatasetError(ValueError):
    """A task folder or record that cannot be used, with the reason and the path."""


class TestCase(BaseModel):
    """One input workbook and the answer workbook the program's output must match."""

    __test__ = False  # not a pytest test class despite the name

    index: int
    input_path: Path
    answer_path: Path


class SpreadsheetTask(BaseModel):
    id: str
    instruction: str
    instruction_type: str
    answer_position: str
    answer_sheet: str | None = None
    data_position: str | None = None
    folder: Path
    cases: list[TestCase] = Field(min_length=1)
    layout: str  # "input-answer" | "init-golden" | "initial-golden"


def _discover_cases(task_id: str, folder: Path) -> tuple[list[TestCase], str]:
    if not folder.is_dir():
        raise DatasetError(f"task {task_id}: spreadsheet folder {folder} does not exist")
    names = {p.name for p in folder.iterdir() if p.is_file()}
    if {"initial.xlsx", "golden.xlsx"} <= names:
        return [TestCase(index=1, input_path=folder / "initial.xlsx", answer_path=folder / "golden.xlsx")], \
            "initial-golden"
    cases: list[TestCase] = []
    layouts: set[str] = set()
    for name in sorted(names):
        match = _NUMBERED_CASE.match(name)
        if not match or match["kind"] not in _INPUT_KINDS:
            continue
        answer_name = f"{match['n']}_{match['id']}_{_INPUT_KINDS[match['kind']]}.xlsx"
        if answer_name not in names:
            raise DatasetError(f"task {task_id}: {folder / name} has no matching answer {answer_name}")
        cases.append(TestCase(index=int(match["n"]), input_path=folder / name, answer_path=folder / answer_name))
        layouts.add(f"{match['kind']}-{_INPUT_KINDS[match['kind']]}")
    if not cases:
        raise DatasetError(f"task {task_id}: no test cases in {folder} (expected {{n}}_{{id}}_input.xlsx + "
                           f"_answer.xlsx, {{n}}_{{id}}_init.xlsx + _golden.xlsx, or initial.xlsx + golden.xlsx)")
    cases.sort(key=lambda c: c.index)
    return cases, "/".join(sorted(layouts))


def _read_records(root: Path) -> list[dict[str, Any]]:
    if root.is_file():
        path = root
    elif (root / "dataset.json").is_file():
        path = root / "dataset.json"
    elif (root / "dataset.jsonl").is_file():
        path = root / "dataset.jsonl"
    else:
        raise DatasetError(f"no dataset.json or dataset.jsonl in {root}")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".jsonl":
            records = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            records = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise DatasetError(f"{path} must hold a list of task records")
    return records


def load_tasks(root: Path | str = PACKAGED_DATA_DIR) -> list[SpreadsheetTask]:
    """All tasks of a SpreadsheetBench folder (default: the 50 tasks shipped with the harness), in file order."""
    root = Path(root)
    records = _read_records(root)
    base = root.parent if root.is_file() else root
    tasks: list[SpreadsheetTask] = []
    seen: set[str] = set()
    for number, record in enumerate(records):
        missing = [k for k in ("id", "instruction", "answer_position") if k not in record]
        if missing:
            raise DatasetError(f"record {number} in {root} lacks {missing}")
        task_id = str(record["id"])
        if task_id in seen:
            raise DatasetError(f"duplicate task id {task_id} in {root}")
        seen.add(task_id)
        folder = base / str(record.get("spreadsheet_path") or f"spreadsheet/{task_id}")
        cases, layout = _discover_cases(task_id, folder)
        tasks.append(SpreadsheetTask(
            id=task_id,
            instruction=str(record["instruction"]),
            instruction_type=str(record.get("instruction_type") or "unknown"),
            answer_position=str(record["answer_position"]),
            answer_sheet=record.get("answer_sheet"),
            data_position=record.get("data_position"),
            folder=folder,
            cases=cases,
            layout=layout,
        ))
    return tasks
