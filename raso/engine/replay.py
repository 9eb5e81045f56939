"""What makes a killed run resumable without paying twice or drifting.

* `PersistentLedger` appends every gateway call to ledger.calls.jsonl the moment it is recorded, so the calls
  made between the last checkpoint and a kill are still on the bill after `resume`.
* `raso.llm.view.UnitGateway` wraps the run's gateway and tags every request's cache key with the unit of work
  it belongs to ("iter003/train", "iter003/propose", ...). With the gateway's on-disk cache inside the run
  directory, a resumed unit replays the replies its first attempt already got (no new spend, identical text),
  while two different units never share a reply (a skill re-rolled in a later epoch is a fresh sample).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from raso.llm import CallRecord, UsageLedger

from .run_dir import read_jsonl


class PersistentLedger(UsageLedger):
    """A UsageLedger that mirrors each record to a JSONL file (flushed per line). It is the only bill of the run's
    own response cache, so a reply cached by a process killed before billing it is billed when replayed."""

    books_unbilled_replays = True

    def __init__(self, path: Path, *, load_existing: bool = True) -> None:
        self.path = Path(path)
        self._file_lock = threading.Lock()
        self._loading = True
        existing = read_jsonl(self.path) if load_existing else []
        super().__init__(CallRecord.model_validate(r) for r in existing)
        self._loading = False
        self._end_torn_line()

    def _end_torn_line(self) -> None:
        """A kill during an append leaves a partial last line: end it, so the next record starts a line of its
        own (the fragment is skipped by read_jsonl; the reply it billed is billed again when replayed)."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(-1, 2)
                torn = fh.read(1) != b"\n"
        except OSError:  # no file yet, or an empty one
            return
        if torn:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write("\n")

    def _persist(self, rec: CallRecord) -> None:
        if getattr(self, "_loading", False):
            return
        line = json.dumps(rec.model_dump(mode="json")) + "\n"
        with self._file_lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()


__all__ = ["PersistentLedger"]
