"""Events the engine emits as it works; sinks turn them into a log file or a live rich progress display.

Every event is a typed, frozen dataclass (one per kind, `EVENT_TYPES` lists them) that carries a snapshot of the
run (iteration, rollouts used, best val score, cost so far), so a sink never needs to ask the engine anything. A
sink tells them apart with `isinstance` (or `event.kind`, the name events.jsonl records); `event.data` is an
event's own fields as a dict.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Protocol

from rich.console import Console
from rich.live import Live
from rich.table import Table

from raso.llm.ledger import cost_text

from .run_dir import RunDir


@dataclass(frozen=True)
class Snapshot:
    iteration: int
    rollouts_used: int
    budget_rollouts: int | None
    best_val: float | None
    cost_usd: float | None  # the spend so far; None once a call had no known price (like the ledger's totals)
    phase: str
    priced_cost_usd: float = 0.0  # the spend so far on calls with a known price
    unpriced_calls: int = 0  # the calls so far without one: priced_cost_usd leaves them out


@dataclass(frozen=True, kw_only=True)
class Event:
    """The base of every event: its kind (the class's name in events.jsonl), the run's snapshot, the time."""

    kind: ClassVar[str] = ""
    snapshot: Snapshot
    time: float = field(default_factory=time.time)

    @property
    def data(self) -> dict[str, Any]:
        """The event's own fields (not the snapshot, not the time)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("snapshot", "time")}

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "time": self.time, **{f.name: getattr(self.snapshot, f.name)
                                                         for f in fields(self.snapshot)}, **self.data}


@dataclass(frozen=True, kw_only=True)
class RunStarted(Event):
    kind: ClassVar[str] = "run_started"
    run_dir: str


@dataclass(frozen=True, kw_only=True)
class Resumed(Event):
    kind: ClassVar[str] = "resumed"
    resumes: int


@dataclass(frozen=True, kw_only=True)
class InitDone(Event):
    kind: ClassVar[str] = "init_done"
    version: int
    lessons: int


@dataclass(frozen=True, kw_only=True)
class BatchStarted(Event):
    kind: ClassVar[str] = "batch_started"
    batch: str
    size: int


@dataclass(frozen=True, kw_only=True)
class RolloutDone(Event):
    kind: ClassVar[str] = "rollout_done"
    batch: str
    task_id: str
    reward: float
    error: bool


@dataclass(frozen=True, kw_only=True)
class InfraRetry(Event):
    """Rollouts whose model calls failed for infrastructure reasons, re-run."""

    kind: ClassVar[str] = "infra_retry"
    batch: str
    attempt: int
    rollouts: int
    error: str


@dataclass(frozen=True, kw_only=True)
class BatchDone(Event):
    kind: ClassVar[str] = "batch_done"
    batch: str
    size: int
    mean_reward: float
    errors: int


@dataclass(frozen=True, kw_only=True)
class ParentSelected(Event):
    """The candidate selector chose the skill version the next iteration proposes from."""

    kind: ClassVar[str] = "parent_selected"
    iteration: int
    version: int


@dataclass(frozen=True, kw_only=True)
class ProposalDone(Event):
    """A proposal: the candidate's version and its gradients, or the error that cost the iteration its candidate."""

    kind: ClassVar[str] = "proposal_done"
    version: int | None = None
    gradients: int = 0
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class Decision(Event):
    kind: ClassVar[str] = "decision"
    version: int | None
    candidate_val: float | None
    current_val: float | None
    accepted: bool
    reason: str


@dataclass(frozen=True, kw_only=True)
class CheckpointWritten(Event):
    kind: ClassVar[str] = "checkpoint"


@dataclass(frozen=True, kw_only=True)
class Stopped(Event):
    kind: ClassVar[str] = "stopped"
    reason: str


@dataclass(frozen=True, kw_only=True)
class HoldoutDone(Event):
    kind: ClassVar[str] = "holdout_done"
    version: int
    mean_reward: float
    gated_val: float | None
    tasks: int


@dataclass(frozen=True, kw_only=True)
class TestDone(Event):
    __test__ = False  # not a pytest test class
    kind: ClassVar[str] = "test_done"
    version: int
    mean_reward: float
    tasks: int


@dataclass(frozen=True, kw_only=True)
class ReportFailed(Event):
    kind: ClassVar[str] = "report_failed"
    error: str


@dataclass(frozen=True, kw_only=True)
class RunFinished(Event):
    kind: ClassVar[str] = "run_finished"
    reason: str | None
    best_val: float | None


#: Every kind of event, by the name events.jsonl records.
EVENT_TYPES: dict[str, type[Event]] = {cls.kind: cls for cls in (
    RunStarted, Resumed, InitDone, BatchStarted, RolloutDone, InfraRetry, BatchDone, ParentSelected, ProposalDone,
    Decision, CheckpointWritten, Stopped, HoldoutDone, TestDone, ReportFailed, RunFinished)}


class EventSink(Protocol):
    def __call__(self, event: Event) -> None: ...


class EventLog:
    """Appends every event to the run's events.jsonl."""

    def __init__(self, run_dir: RunDir) -> None:
        self.run_dir = run_dir

    def __call__(self, event: Event) -> None:
        if isinstance(event, RolloutDone):  # per-rollout events are many; the batch events summarize them
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
        table.add_row("cost so far", cost_text(s.priced_cost_usd, s.unpriced_calls))
        for msg in self._messages[-4:]:
            table.add_row("", msg)
        return table

    def __call__(self, event: Event) -> None:
        self._last = event
        if isinstance(event, BatchStarted):
            self._batch = (event.batch, 0, event.size)
        elif isinstance(event, RolloutDone):
            name, done, total = self._batch
            self._batch = (name, done + 1, total)
        elif isinstance(event, Decision):
            verdict = "accepted" if event.accepted else "rejected"
            fmt = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
            self._messages.append(f"candidate v{event.version}: {fmt(event.candidate_val)} vs "
                                  f"{fmt(event.current_val)} -> {verdict}")
        elif isinstance(event, Stopped) and event.reason:
            self._messages.append(event.reason)
        elif isinstance(event, TestDone):
            self._messages.append(f"test: v{event.version} scores {event.mean_reward:.3f} on {event.tasks} task(s)")
        if self._live is not None:
            self._live.update(self._render())


__all__ = ["EVENT_TYPES", "BatchDone", "BatchStarted", "CheckpointWritten", "Decision", "Emitter", "Event", "EventLog",
           "EventSink", "HoldoutDone", "InfraRetry", "InitDone", "ParentSelected", "ProposalDone", "ReportFailed",
           "Resumed", "RichProgress", "RolloutDone", "RunFinished", "RunStarted", "Snapshot", "Stopped", "TestDone"]
