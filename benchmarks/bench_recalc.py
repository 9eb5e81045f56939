"""Which engine should recalculate formulas before scoring? Correctness and speed on the shipped tasks.

For every answer workbook (of the 50 shipped SpreadsheetBench tasks) that contains formulas, the script
re-saves it with openpyxl, which drops every cached formula value (exactly what happens to a workbook a
model-written program saves), recalculates the copy with each engine, and scores it against the original
answer workbook (whose cached values Excel computed) with the harness's scorer. Baseline: no recalculation.
A second pass count scores the same copy the way the harness does: against the answer workbook as the harness
reads it (recalculated with the same engine where its formulas lack cached values, see answers.py).

    python benchmarks/bench_recalc.py [--engines libreoffice formulas] [--first-case-only] [--limit N]
                                      [--timeout 60] [--data DIR]

Each recalculation runs in a child process with a timeout (a hang counts as an error). Prints a line per
workbook as it goes, then one table: engine, workbooks, cases that pass (against Excel's values / as the
harness scores), errors, seconds per workbook.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import openpyxl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harnesses.spreadsheet.answers import RecalculatedAnswers  # noqa: E402
from harnesses.spreadsheet.loader import PACKAGED_DATA_DIR, load_tasks  # noqa: E402
from harnesses.spreadsheet.recalc import RecalcError, Recalculator, get_recalculator  # noqa: E402
from harnesses.spreadsheet.scoring import compare_workbooks, open_values  # noqa: E402


def has_formulas(path: Path) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wb = openpyxl.load_workbook(path)
    return any(cell.data_type == "f" for ws in wb.worksheets for row in ws.iter_rows() for cell in row)


def recalc_in_child(engine: str, src: Path, dest: Path, timeout: float) -> str | None:
    """Recalculate in a fresh process (bounded time, no state shared between workbooks); None or the error."""
    try:
        proc = subprocess.run([sys.executable, __file__, "--one", engine, str(src), str(dest)],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout:.0f}s"
    if proc.returncode != 0 or not dest.is_file():
        return (proc.stderr.strip().splitlines() or ["failed"])[-1][:200]
    return None


class ChildProcessRecalc(Recalculator):
    """An engine run in a fresh child process per workbook, with a timeout (for RecalculatedAnswers)."""

    def __init__(self, name: str, timeout: float) -> None:
        self.name, self.timeout = name, timeout
        self._version = get_recalculator(name).version

    @property
    def version(self) -> str:
        return self._version

    def recalc(self, src: Path, dest: Path) -> None:
        error = recalc_in_child(self.name, src, dest, self.timeout)
        if error is not None:
            raise RecalcError(error)


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--one":
        try:
            get_recalculator(sys.argv[2]).recalc(Path(sys.argv[3]), Path(sys.argv[4]))
        except RecalcError as exc:
            print(exc, file=sys.stderr)
            return 1
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", nargs="+", default=["libreoffice", "formulas"])
    ap.add_argument("--limit", type=int, default=0, help="at most this many workbooks (0 = all)")
    ap.add_argument("--data", type=Path, default=PACKAGED_DATA_DIR)
    ap.add_argument("--first-case-only", action="store_true", help="only test case 1 of each task")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per workbook and engine")
    opts = ap.parse_args()

    cases = [(task, case) for task in load_tasks(opts.data) for case in task.cases
             if (case.index == 1 or not opts.first_case_only) and has_formulas(case.answer_path)]
    if opts.limit:
        cases = cases[: opts.limit]
    print(f"{len(cases)} answer workbooks with formulas", flush=True)
    for name in opts.engines:
        get_recalculator(name)  # fail now, with the install command, if an engine is missing
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        stripped: list[Path] = []
        answers = []
        for i, (_task, case) in enumerate(cases):
            path = Path(tmp) / f"{i}_stripped.xlsx"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                openpyxl.load_workbook(case.answer_path).save(path)
            stripped.append(path)
            answers.append(open_values(case.answer_path))
        baseline = sum(compare_workbooks(answers[i], stripped[i], task.answer_position).passed
                       for i, (task, _) in enumerate(cases))
        rows.append(("none (openpyxl re-save)", len(cases), baseline, baseline, 0, 0.0, 0.0))
        for name in opts.engines:
            passed = as_harness = errors = 0
            times: list[float] = []
            answers_as_harness = RecalculatedAnswers(ChildProcessRecalc(name, opts.timeout), Path(tmp) / f"answers-{name}")
            for i, (task, case) in enumerate(cases):
                out = Path(tmp) / f"{i}_{name}.xlsx"
                start = time.perf_counter()
                error = recalc_in_child(name, stripped[i], out, opts.timeout)
                times.append(time.perf_counter() - start)
                if error is not None:
                    errors += 1
                    verdict = f"ERROR {error}"
                else:
                    result = compare_workbooks(answers[i], out, task.answer_position)
                    passed += result.passed
                    (harness_answer,) = answers_as_harness.resolve([case.answer_path])
                    as_harness += compare_workbooks(harness_answer, out, task.answer_position).passed
                    verdict = "pass" if result.passed else f"FAIL {result.message}"
                print(f"[{name}] {task.id}#{case.index} {times[-1]:6.1f}s {verdict}"[:220], flush=True)
            rows.append((name, len(cases), passed, as_harness, errors, statistics.mean(times), max(times)))
    print()
    print(f"| {'engine':24} | workbooks | pass (Excel values) | pass (as the harness scores) | errors "
          "| s/workbook (mean) | s (max) |")
    print(f"|{'-' * 26}|-----------|---------------------|------------------------------|--------"
          "|-------------------|---------|")
    for name, n, passed, as_harness, errors, mean_s, max_s in rows:
        print(f"| {name:24} | {n:9} | {passed:4} ({passed / max(n, 1):6.1%})      | {as_harness:4} "
              f"({as_harness / max(n, 1):6.1%})               | {errors:6} | {mean_s:17.2f} | {max_s:7.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
