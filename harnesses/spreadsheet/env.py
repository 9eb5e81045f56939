"""The text environment of one SpreadsheetBench task.

`reset()` shows the instruction, the input workbook of test case 1 (sheets and a preview), the answer
position and the program contract. Each `step(action)` takes a RUN or SUBMIT action (see actions.py):

* RUN: the program runs in the sandbox on test case 1's input; the observation reports exit code, stdout,
  stderr and a preview of the answer cells of the workbook it saved (formulas recalculated first).
  Not terminal, reward 0.
* SUBMIT: the program runs on every test case's input; each output (recalculated) is compared with the case's
  answer workbook (recalculated the same way where its formulas lack values; see answers.py). Terminal;
  reward 1 only if all cases pass, `info["soft_score"]` = fraction of cases passed. An error while scoring
  one case fails that case only, as upstream's evaluator does.

A malformed action costs a step and gets an observation explaining the expected format.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harnesses.spreadsheet.actions import ParsedAction, parse_reply
from harnesses.spreadsheet.answers import RecalculatedAnswers
from harnesses.spreadsheet.loader import SpreadsheetTask, TestCase
from harnesses.spreadsheet.preview import describe_cells, describe_workbook
from harnesses.spreadsheet.recalc import Recalculator, needs_recalc, recalculate
from harnesses.spreadsheet.scoring import CaseResult, CorruptWorkbookError, compare_workbooks
from raso.harness import TextEnv
from raso.harness.sandbox import Sandbox, SandboxResult

log = logging.getLogger(__name__)

INPUT_NAME = "input.xlsx"
OUTPUT_NAME = "output.xlsx"

PROGRAM_CONTRACT = f"""Program contract: write one Python program. It is run as
`python solution.py {INPUT_NAME} {OUTPUT_NAME}` in an empty working directory that holds only a copy of the
input workbook: read the input from sys.argv[1], apply the change with openpyxl, and save the complete
workbook to sys.argv[2]. Cells outside the answer position must keep their content. The same program is
later run unchanged on other test-case workbooks that have the same layout but different values, so compute
results from the data instead of hard-coding them. Writing Excel formulas is allowed (they are recalculated
before checking). No network, no other files, no subprocesses."""


class SpreadsheetEnv(TextEnv):
    def __init__(self, task: SpreadsheetTask, sandbox: Sandbox, recalculator: Recalculator | None,
                 preview_rows: int = 10, answers: RecalculatedAnswers | None = None) -> None:
        super().__init__()
        self.task = task
        self.sandbox = sandbox
        self.recalculator = recalculator
        self.answers = answers if answers is not None else RecalculatedAnswers(recalculator)
        self.preview_rows = preview_rows
        self.last_code: str | None = None
        self.done = False
        self._tmp: Path | None = None
        self._runs = 0

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._cleanup()
        self._tmp = Path(tempfile.mkdtemp(prefix=f"raso-sheet-{self.task.id}-"))
        self.last_code = None
        self.done = False
        self._runs = 0
        return self._first_observation(), {"task_id": self.task.id, "cases": len(self.task.cases)}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._tmp is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            return "The task was already submitted.", 0.0, True, False, {"error": "step after submit"}
        parsed = self._parse(action)
        if parsed.command == "INVALID":
            return (f"Invalid action: {parsed.problem}. Reply with a ```python code block``` and then a line "
                    "`Action: RUN` (try it on test case 1) or `Action: SUBMIT` (final answer)."), 0.0, False, False, \
                {"error": parsed.problem}
        code = parsed.code if parsed.code is not None else self.last_code
        if code is None:
            verb = "run" if parsed.command == "RUN" else "submit"
            return (f"Nothing to {verb} yet: no program has been written. Reply with the whole program in a "
                    f"```python code block``` followed by `Action: {parsed.command}`."), 0.0, False, False, \
                {"error": f"{verb} without a program"}
        self.last_code = code
        if parsed.command == "RUN":
            return self._run(code)
        return self._submit(code)

    def close(self) -> None:
        self._cleanup()
        super().close()

    # ------------------------------------------------------------------ internals
    @staticmethod
    def _parse(action: str) -> ParsedAction:
        return parse_reply(action)

    def _cleanup(self) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def _first_observation(self) -> str:
        task = self.task
        case = task.cases[0]
        try:
            overview = describe_workbook(case.input_path, max_rows=self.preview_rows)
            answer_now = describe_cells(case.input_path, task.answer_position, max_rows=self.preview_rows)
        except CorruptWorkbookError as exc:
            overview, answer_now = f"(the input workbook cannot be read: {exc})", ""
        parts = [
            f"Task {task.id} ({task.instruction_type}); {len(task.cases)} test case(s).",
            "Instruction (from a spreadsheet user):",
            f'"""\n{task.instruction.strip()}\n"""',
            f"Answer position (the cells that are checked): {task.answer_position}",
        ]
        if task.data_position:
            parts.append(f"Data position (where the relevant data is): {task.data_position}")
        parts += [
            f"Input workbook of test case 1:\n{overview}",
            f"Current content of the answer cells in the input:\n{answer_now}" if answer_now else "",
            PROGRAM_CONTRACT,
        ]
        return "\n\n".join(p for p in parts if p)

    def _program_for(self, case: TestCase, code: str) -> tuple[str, str, str, list[str]]:
        """The program, input file name, output file name and arguments for one test case."""
        return code, INPUT_NAME, OUTPUT_NAME, [INPUT_NAME, OUTPUT_NAME]

    def _execute(self, code: str, case_indices: list[int], label: str) -> list[tuple[SandboxResult, Path | None, str | None]]:
        """Run the program on some cases; per case the sandbox result, the workbook to score and a problem."""
        assert self._tmp is not None
        runs = []
        for i in case_indices:
            case = self.task.cases[i]
            program, input_name, output_name, args = self._program_for(case, code)
            dest = self._tmp / f"{label}_case{case.index}_{OUTPUT_NAME}"
            runs.append(self.sandbox.run(program, {input_name: case.input_path}, args, output_name, dest))
        prepared = self.recalculate_outputs([r.output_file for r in runs])
        return [(result, scored, problem if result.output_file is not None else
                 (result.error_summary() or result.output_error or "no output workbook"))
                for result, (scored, problem) in zip(runs, prepared)]

    def recalculate_outputs(self, outputs: Sequence[Path | None]) -> list[tuple[Path | None, str | None]]:
        """Per output workbook (None: there is none) the file to score and a problem. Outputs holding formulas
        without values are recalculated next to themselves, all in one engine batch."""
        prepared: list[tuple[Path | None, str | None]] = [(out, None) for out in outputs]
        if self.recalculator is None:
            return prepared
        todo = [(n, out, out.with_name(out.stem + "_recalc.xlsx")) for n, out in enumerate(outputs)
                if out is not None and needs_recalc(out)]
        if todo:
            errors = recalculate(self.recalculator, [(src, dest) for _, src, dest in todo])
            for (n, src, dest), error in zip(todo, errors):
                prepared[n] = (src, f"formulas in the output could not be recalculated: {error}") if error \
                    else (dest, None)
        return prepared

    def score_cases(self, prepared: Sequence[tuple[Path | None, str | None]]) -> list[CaseResult]:
        """Compare each case's prepared output with its answer. A case whose output is missing, whose
        recalculation failed or whose scoring raises fails alone (upstream's evaluator: `except: result = False`)."""
        cases = self.task.cases
        try:
            answers = self.answers.resolve([c.answer_path for c in cases])
        except Exception as exc:  # e.g. an unreadable answer file: scored as is, each case reports its error
            log.warning("spreadsheet: answers of task %s not recalculated: %s", self.task.id, exc)
            answers = [c.answer_path for c in cases]
        results: list[CaseResult] = []
        for answer, (scored, problem) in zip(answers, prepared):
            if problem is not None or scored is None:
                results.append(CaseResult(passed=False, message=problem or "no output workbook"))
                continue
            try:
                results.append(compare_workbooks(answer, scored, self.task.answer_position))
            except Exception as exc:
                results.append(CaseResult(passed=False, message=f"scoring error: {type(exc).__name__}: {exc}"))
        return results

    def _run(self, code: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._runs += 1
        ((result, scored, problem),) = self._execute(code, [0], f"run{self._runs}")
        lines = [f"Ran the program on test case 1 (exit code {result.exit_code if not result.timed_out else 'killed'}, "
                 f"{result.wall_time_s:.1f}s)."]
        lines += result.report_lines()
        summary = result.error_summary()
        if scored is not None:
            try:
                lines.append(f"Answer cells in the saved output workbook:\n"
                             f"{describe_cells(scored, self.task.answer_position, max_rows=self.preview_rows)}")
            except CorruptWorkbookError as exc:
                lines.append(f"The saved output workbook cannot be read: {exc}")
        if problem and (scored is not None or not summary):
            lines.append(f"Problem: {problem}")
        info = {"command": "RUN", "exit_code": result.exit_code, "limit_hit": result.limit_hit,
                "error": summary or problem, "isolation": result.isolation}
        return "\n".join(lines), 0.0, False, False, info

    def _submit(self, code: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        outcomes = self._execute(code, list(range(len(self.task.cases))), "submit")
        return self._finish(code, [(scored, problem) for _result, scored, problem in outcomes])

    def _finish(self, code: str, prepared: Sequence[tuple[Path | None, str | None]]
                ) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Score every case and end the task."""
        self.done = True
        results = self.score_cases(prepared)
        passed = sum(r.passed for r in results)
        soft = passed / len(results)
        reward = 1.0 if passed == len(results) else 0.0
        lines = [f"Submitted. {passed} of {len(results)} test cases passed; reward {reward:.0f}."]
        for case, res in zip(self.task.cases, results):
            lines.append(f"- test case {case.index}: {'passed' if res.passed else 'FAILED: ' + res.message}")
        info = {
            "command": "SUBMIT", "soft_score": soft, "cases_passed": passed, "cases": len(results),
            "case_results": [r.model_dump() for r in results], "final_output": code,
            "error": None if reward else "; ".join(f"case {c.index}: {r.message}" for c, r in
                                                   zip(self.task.cases, results) if not r.passed),
        }
        return "\n".join(lines), reward, True, False, info
