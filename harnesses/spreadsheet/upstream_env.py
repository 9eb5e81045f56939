"""The upstream prompt mode: SpreadsheetBench's own multi-round inference setting (`row_react_exec`).

Re-stated from RUCKBReasoning/SpreadsheetBench `inference/inference_multiple.py`, `prompt_format.py` and
`code_exec.py` (our wording of the prompt, same fields in the same order):

* the first message is the prompt template (`upstream/upstream_prompt.md`) filled with the instruction, the
  input file's name, `df.head(5)` of every sheet as pandas reads it, the instruction type, the answer position
  and the output file's name; no data position and no word about other test cases;
* every reply's code (its first ```python block, else the whole reply) is executed on test case 1 and the
  observation is its output or its error; at most 5 turns;
* the run ends as soon as the output file exists; the last code is the solution, run again on the other test
  cases with `1_<id>_` replaced by `n_<id>_` in its text (upstream's `run_solution`), and every case is scored.

Deliberate differences (also in the harness README): each turn's code runs as a fresh sandboxed program, not
in one Jupyter kernel, so no variables carry over and the value of a final expression is not shown; file
names are relative to the working directory (upstream: absolute `/mnt/data/...` paths); a file left by a
program that crashed does not end the run.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from harnesses.spreadsheet.env import SpreadsheetEnv
from harnesses.spreadsheet.loader import TestCase
from raso.prompts import PromptLibrary

UPSTREAM_DIR = Path(__file__).resolve().parent / "upstream"
UPSTREAM_MAX_TURNS = 5
UPSTREAM_PREVIEW_ROWS = 5
NO_OUTPUT = "[Code executed successfully with no output]"  # what upstream's Jupyter executor answers


def extract_code(reply: str) -> str:
    """Upstream's rule: the text of the first ```python block (to its closing fence), else the whole reply."""
    start = reply.find("```python")
    if start == -1:
        return reply
    code = reply[start + len("```python"):]
    end = code.find("```")
    return (code if end == -1 else code[:end]).strip("\n")


def sheet_heads(path: Path, rows: int = UPSTREAM_PREVIEW_ROWS) -> str:
    """Every sheet's first rows as upstream's `gen_file_content` shows them (pandas, first row as header)."""
    import pandas as pd

    parts = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # openpyxl warns about extensions it drops
        with pd.ExcelFile(path, engine="openpyxl") as book:
            for sheet in book.sheet_names:
                frame = book.parse(sheet)
                parts.append(f"Sheet Name: {sheet}\n{frame.head(rows).to_string()}\n{'-' * 50}\n")
    return "".join(parts)


def case_file(case: TestCase, task_id: str, kind: str) -> str:
    """Upstream's file names: `{n}_{id}_input.xlsx` and `{n}_{id}_output.xlsx`."""
    return f"{case.index}_{task_id}_{kind}.xlsx"


class UpstreamSpreadsheetEnv(SpreadsheetEnv):
    """SpreadsheetBench's multi-round setting; see the module docstring."""

    max_turns: int = UPSTREAM_MAX_TURNS

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self._turns = 0
        return super().reset(seed=seed, options=options)

    def _first_observation(self) -> str:
        task, case = self.task, self.task.cases[0]
        try:
            content = sheet_heads(case.input_path)
        except Exception as exc:  # pandas and openpyxl raise many kinds of errors on a broken file
            content = f"(the spreadsheet cannot be read: {type(exc).__name__}: {exc})"
        return PromptLibrary([UPSTREAM_DIR]).render(
            "upstream_prompt.md", instruction=task.instruction, spreadsheet_path=case_file(case, task.id, "input"),
            spreadsheet_content=content, instruction_type=task.instruction_type,
            answer_position=task.answer_position, output_path=case_file(case, task.id, "output"),
            max_turns=self.max_turns)

    def _program_for(self, case: TestCase, code: str) -> tuple[str, str, str, list[str]]:
        first = self.task.cases[0]
        for kind in ("input", "output"):  # upstream's run_solution: the same code with the case's file names
            code = code.replace(case_file(first, self.task.id, kind), case_file(case, self.task.id, kind))
        return code, case_file(case, self.task.id, "input"), case_file(case, self.task.id, "output"), []

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._tmp is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            return "The task was already finished.", 0.0, True, False, {"error": "step after the end"}
        self._turns += 1
        code = extract_code(action)
        self.last_code = code
        ((result, scored, problem),) = self._execute(code, [0], f"turn{self._turns}")
        if result.output_file is not None or self._turns >= self.max_turns:
            if result.output_file is None:
                problem = f"{case_file(self.task.cases[0], self.task.id, 'output')} was not created in " \
                          f"{self.max_turns} turns"
            others = self._execute(code, list(range(1, len(self.task.cases))), "final")
            return self._finish(code, [(scored, problem), *((s, p) for _r, s, p in others)])
        output = "".join(part for part in (result.stdout, result.stderr) if part.strip()).rstrip()
        summary = result.error_summary()
        if summary and (result.limit_hit or not result.stderr.strip()):
            output = f"{output}\n{summary}".strip()
        observation = output or NO_OUTPUT
        info = {"command": "EXECUTE", "turn": self._turns, "exit_code": result.exit_code,
                "limit_hit": result.limit_hit, "error": summary, "isolation": result.isolation}
        return observation, 0.0, False, False, info
