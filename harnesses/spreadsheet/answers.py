"""Answer workbooks as the scorer reads them: recalculated once with the outputs' engine, cached on disk.

Some answer workbooks hold formulas without cached values (six of the shipped tasks: 57072, 50066, 208-20,
51899, 32255, CF_8276). Read as-is their answer cells are empty, while a correct output, recalculated before
scoring, has values there, so a correct solution could not pass. Upstream's pipeline recalculates answers too
(`evaluation/open_spreadsheet.py` opens the workbooks in Excel or LibreOffice). The rule here is the one the
harness applies to outputs (`recalc.recalculate`): a workbook with formulas lacking cached values
(`needs_recalc`) is recalculated with the same engine, and every value it already had is kept (Excel's values
win; the engine only fills the gaps); any other answer is read as it is.

A recalculated answer is stored under `<cache_dir>/<sha256 of the file>-<engine>.xlsx`, so it is computed once
per machine and engine, and is shared by threads and processes (written to a temporary name, then renamed).
The cache folder must stay out of the sandbox's reach, like the data folder (the harness denies both).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path

from harnesses.spreadsheet.recalc import Recalculator, needs_recalc, recalculate

log = logging.getLogger(__name__)


def default_answer_cache_dir() -> Path:
    """$RASO_CACHE_DIR/spreadsheet-answers, else ~/.cache/raso/spreadsheet-answers."""
    base = os.environ.get("RASO_CACHE_DIR")
    return (Path(base).expanduser() if base else Path.home() / ".cache" / "raso") / "spreadsheet-answers"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class RecalculatedAnswers:
    """Maps an answer workbook to the file to score against (thread-safe)."""

    def __init__(self, recalculator: Recalculator | None, cache_dir: Path | None = None) -> None:
        self.recalculator = recalculator
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_answer_cache_dir()
        self._lock = threading.Lock()
        self._resolved: dict[Path, Path] = {}
        self.failures: dict[Path, str] = {}  # answers the engine could not recalculate (scored as they are)

    def _engine_tag(self) -> str:
        assert self.recalculator is not None
        return re.sub(r"[^A-Za-z0-9.]+", "_", self.recalculator.version).strip("_")

    def resolve(self, answers: Sequence[Path]) -> list[Path]:
        """The workbook to score against for each answer; the missing recalculations run in one engine batch."""
        answers = [Path(a) for a in answers]
        if self.recalculator is None:
            return answers
        with self._lock:  # one thread recalculates; the others then find the result
            todo: list[tuple[Path, Path]] = []
            for answer in dict.fromkeys(answers):
                if answer in self._resolved:
                    continue
                if not needs_recalc(answer):
                    self._resolved[answer] = answer
                    continue
                cached = self.cache_dir / f"{file_sha256(answer)}-{self._engine_tag()}.xlsx"
                if cached.is_file():
                    self._resolved[answer] = cached
                else:
                    todo.append((answer, cached))
            if todo:
                self._recalculate(todo)
            return [self._resolved[a] for a in answers]

    def _recalculate(self, todo: list[tuple[Path, Path]]) -> None:
        assert self.recalculator is not None
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        staged = [(answer, cached.with_name(f".{cached.stem}.{uuid.uuid4().hex[:8]}.tmp.xlsx"), cached)
                  for answer, cached in todo]
        errors = recalculate(self.recalculator, [(answer, tmp) for answer, tmp, _ in staged])
        for (answer, tmp, cached), error in zip(staged, errors):
            if error is None and tmp.is_file():
                os.replace(tmp, cached)
                self._resolved[answer] = cached
                continue
            tmp.unlink(missing_ok=True)
            # Scored as it is (its formula cells read as empty), as before answers were recalculated.
            message = error or "the engine wrote no file"
            self.failures[answer] = message
            self._resolved[answer] = answer
            log.warning("spreadsheet: answer workbook %s could not be recalculated (%s); scoring against it as is",
                        answer.name, message)
