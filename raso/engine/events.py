"""Events the engine emits as it works; sinks turn them into a log file or a live rich progress display.

Every event carries a snapshot of the run (iteration, rollouts used, best val score, cost so far), so a sink
never needs to ask the engine anything.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from rich.console import Console
from rich.live import Live
from rich.table import Table

from .run_dir import RunDir


@dataclass(frozen=True)
class Snapshot:
    iteration: int
    rollouts_used: int
    budget_rollouts: int | None
    best_val: float | None
    cost_usd: float
    phase: str


@dataclass(frozen=True)
class Event:
    kind: str  # run_started | resumed | init_done | batch_started | rollout_done | batch_done | proposal_done |
    #            decision | checkpoint | stopped | run_finished
    snapshot: Snapshot
    data: dict[str, Any] = field(default_factory=dict)
    time: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "time": self.time, **asdict(self.snapshot), **self.data}


class EventSink(Protocol):
    def __call__(self, event: Event) -> None: ...


class EventLog:
    """Appends every event to the run's events.jsonl."""

    def __init__(self, run_dir: RunDir) -> None:
        self.run_dir = run_dir

    def __call__(self, event: Event) -> None:
        if event.kind == "rollout_done":  # per-rollout events are many; the batch events summarize them
            return
        self.run_dir.append_jsonl(self.run_dir.events, event.to_dict())


class Emitter:
    """Fans events out to sinks; a failing sink (e.g. a closed terminal) never stops the run."""

    def __init__(self, sinks: list[EventSink] | None = None) -> None:
        self.sinks = list(sinks or [])
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        with self._lock:
            for sink in self.sinks:
                try:
                    sink(event)
                except Exception:
                    pass


class RichProgress:
    """A live table: phase, iteration, rollouts used / budget, batch progress, best val score, cost so far."""

    def __init__(self, console: Console | None = None, title: str = "RASO") -> None:
        self.console = console or Console(stderr=True)
        self.title = title
        self._live: Live | None = None
        self._last: Event | None = None
        self._batch: tuple[str, int, int] = ("", 0, 0)
        self._messages: list[str] = []

    def __enter__(self) -> "RichProgress":
        self._live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False)
        self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.__exit__(*exc)
            self._live = None

    def _render(self) -> Table:
        table = Table(title=self.title, show_header=False, expand=False)
        table.add_column("what", style="bold")
        table.add_column("value")
        ev = self._last
        if ev is None:
            table.add_row("status", "starting")
            return table
        s = ev.snapshot
        budget = f"/{s.budget_rollouts}" if s.budget_rollouts is not None else ""
        table.add_row("phase", s.phase)
        table.add_row("iteration", str(s.iteration))
        table.add_row("rollouts used", f"{s.rollouts_used}{budget}")
        name, done, total = self._batch
        if name:
            table.add_row("batch", f"{name}: {done}/{total}")
        table.add_row("best val score", "-" if s.best_val is None else f"{s.best_val:.3f}")
        table.add_row("cost so far", f"${s.cost_usd:.4f}")
        for msg in self._messages[-4:]:
            table.add_row("", msg)
        return table

    def __call__(self, event: Event) -> None:
        self._last = event
        d = event.data
        if event.kind == "batch_started":
            self._batch = (d.get("batch", ""), 0, int(d.get("size", 0)))
        elif event.kind == "rollout_done":
            name, done, total = self._batch
            self._batch = (name, done + 1, total)
        elif event.kind == "decision":
            cand, cur = d.get("candidate_val"), d.get("current_val")
            verdict = "accepted" if d.get("accepted") else "rejected"
            fmt = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
            self._messages.append(f"candidate v{d.get('version')}: {fmt(cand)} vs {fmt(cur)} -> {verdict}")
        elif event.kind == "stopped" and d.get("reason"):
            self._messages.append(str(d["reason"]))
        elif event.kind == "test_done":
            self._messages.append(f"test: v{d.get('version')} scores {float(d.get('mean_reward', 0.0)):.3f} "
                                  f"on {d.get('tasks')} task(s)")
        if self._live is not None:
            self._live.update(self._render())


def make_event(kind: str, snapshot: Snapshot, **data: Any) -> Event:
    return Event(kind=kind, snapshot=snapshot, data=data)


Callback = Callable[[Event], None]
__all__ = ["Event", "EventLog", "EventSink", "Emitter", "RichProgress", "Snapshot", "make_event"]
