"""A line every so often while a long command works and its output is not a terminal (a CI log, `nohup`, a pipe):
the model calls and tokens so far, from the gateway's ledger, so a run that is busy is told from one that hangs."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

HEARTBEAT_EVERY_S = 30.0


class Heartbeat:
    """`with Heartbeat("raso init", ledger_totals):` prints `raso init: working, N model calls, P+C tokens so far
    (1m30s)` to `stream` every `every` seconds, only when `stream` is not a terminal (a terminal has its own
    progress display or the command's own lines)."""

    def __init__(self, label: str, totals: Callable[[], dict[str, Any]], every: float = HEARTBEAT_EVERY_S,
                 stream: TextIO | None = None, force: bool = False) -> None:
        self.label = label
        self.totals = totals
        self.every = every
        self.stream = stream or sys.stderr
        self.enabled = force or not _is_terminal(self.stream)
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{label}-heartbeat", daemon=True)

    def line(self) -> str:
        seconds = int(time.monotonic() - self.started)
        totals = self.totals()
        return (f"{self.label}: working, {totals.get('calls', 0):,} model calls, {totals.get('prompt_tokens', 0):,} "
                f"prompt + {totals.get('completion_tokens', 0):,} completion tokens so far "
                f"({seconds // 60}m{seconds % 60:02d}s)")

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                print(self.line(), file=self.stream, flush=True)
            except Exception:  # noqa: BLE001 - a progress line must never end the command it reports on
                return

    def __enter__(self) -> "Heartbeat":
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


__all__ = ["HEARTBEAT_EVERY_S", "Heartbeat"]
