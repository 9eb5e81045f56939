"""The workspace form of a SpreadsheetBench task, for external agents (Claude Code, Codex, a user's command).

The workspace gets a copy of each test case's input workbook, `input_N.xlsx` (N = 1, 2, ...), and nothing else:
never an answer workbook, never the data folder. The agent must leave the changed workbook of each case as
`output_N.xlsx`. Scoring is the text environment's own (env.py): each output is recalculated where its formulas
lack values and compared with the case's answer at the answer position; reward 1 only if every case passes, the
soft score is the fraction that pass.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from harnesses.spreadsheet.loader import SpreadsheetTask
from raso.harness import Score
from raso.safe_files import UnsafePathError, copy_file

if TYPE_CHECKING:
    from harnesses.spreadsheet.env import SpreadsheetEnv

MAX_OUTPUT_BYTES = 64 * 1024 * 1024


def input_name(index: int) -> str:
    return f"input_{index}.xlsx"


def output_name(index: int) -> str:
    return f"output_{index}.xlsx"


def prepare(task: SpreadsheetTask, workspace: Path) -> str:
    """Copy the cases' input workbooks into `workspace`; the instruction the agent gets."""
    for case in task.cases:
        shutil.copyfile(case.input_path, workspace / input_name(case.index))
    pairs = ", ".join(f"{input_name(c.index)} -> {output_name(c.index)}" for c in task.cases)
    parts = [
        f"Spreadsheet task {task.id} ({task.instruction_type}); {len(task.cases)} test case(s).",
        "Instruction (from a spreadsheet user):",
        f'"""\n{task.instruction.strip()}\n"""',
        f"Answer position (the cells that are checked): {task.answer_position}",
    ]
    if task.data_position:
        parts.append(f"Data position (where the relevant data is): {task.data_position}")
    parts.append(
        f"The current folder holds the input workbook of each test case. For each one, save the complete workbook "
        f"with the change applied under the output name ({pairs}). The cases share a layout but hold different "
        "values, so compute each result from its own workbook. Cells outside the answer position must keep their "
        "content; formulas are allowed (they are recalculated before checking). Only the answer cells of the "
        "output workbooks are checked.")
    return "\n\n".join(parts)


def _collected(workspace: Path, name: str, dest: Path) -> tuple[Path | None, str | None]:
    """Copy the agent's output `name` to `dest` when it is a regular file of bounded size; else why not."""
    produced = workspace / name
    if produced.is_symlink():
        return None, f"{name} is a symbolic link, not a workbook file"
    if not produced.is_file():
        return None, f"no {name} in the workspace"
    if produced.stat().st_size > MAX_OUTPUT_BYTES:
        return None, f"{name} exceeds {MAX_OUTPUT_BYTES // (1024 * 1024)} MB"
    try:  # opened inside the workspace's own descriptor: a workspace the agent swapped for a link yields nothing
        copy_file(name, dest, MAX_OUTPUT_BYTES, within=workspace)
    except UnsafePathError as exc:
        return None, str(exc)
    return dest, None


def score(task: SpreadsheetTask, env: "SpreadsheetEnv", workspace: Path) -> Score:
    """Score the outputs in `workspace` exactly as the environment scores a submitted program's outputs."""
    scratch = Path(tempfile.mkdtemp(prefix=f"raso-sheet-score-{task.id}-"))
    try:
        collected = [_collected(Path(workspace), output_name(c.index), scratch / output_name(c.index))
                     for c in task.cases]
        outputs = [path for path, _ in collected]
        prepared = env.recalculate_outputs(outputs)
        prepared = [(scored, missing or problem) for (scored, problem), (_, missing) in zip(prepared, collected)]
        results = env.score_cases(prepared)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    passed = sum(r.passed for r in results)
    info = {"cases_passed": passed, "cases": len(results), "case_results": [r.model_dump() for r in results]}
    if passed < len(results):
        info["error"] = "; ".join(f"case {c.index}: {r.message}" for c, r in zip(task.cases, results) if not r.passed)
    return Score(reward=1.0 if passed == len(results) else 0.0, soft_score=passed / len(results), info=info)


__all__ = ["input_name", "output_name", "prepare", "score"]
