"""Thread-safe usage and cost ledger: tokens, USD, calls, retries and cache hits per role, stage and model."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from raso.fileio import atomic_write_text

_COUNTERS = ("prompt_tokens", "completion_tokens", "cost_usd", "priced_cost_usd", "calls", "retries", "cache_hits",
             "failures", "unpriced_calls")


class CallRecord(BaseModel):
    """One gateway request. A cache hit records zero tokens and cost (nothing was spent)."""

    model_config = ConfigDict(extra="ignore")

    role: str
    stage: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    retries: int = 0
    cached: bool = False
    failed: bool = False
    latency_s: float = 0.0
    unpriced: bool = False  # a paid call whose cost is unknown (no price for the model): its cost_usd, 0, is no cost
    call_id: str | None = None  # a paid call's identity, also stored with its cached reply (see book_once)
    unit: str | None = None  # the request's cache tag (the engine's unit of work, e.g. "iter003_val"), if any


def _empty() -> dict[str, Any]:
    return {"prompt_tokens": 0, "completion_tokens": 0, "priced_cost_usd": 0.0, "calls": 0, "retries": 0,
            "cache_hits": 0, "failures": 0, "unpriced_calls": 0}


def _shown(bucket: dict[str, Any]) -> dict[str, Any]:
    """A bucket as the ledger hands it out: `cost_usd` is null once a call had no known price (its cost is unknown,
    never $0); `priced_cost_usd` is the part that is known (what a USD budget counts) and `unpriced_calls` says how
    many calls it leaves out."""
    return {"cost_usd": None if bucket["unpriced_calls"] else bucket["priced_cost_usd"], **bucket}


def _add(bucket: dict[str, Any], rec: CallRecord) -> None:
    bucket["prompt_tokens"] += rec.prompt_tokens
    bucket["completion_tokens"] += rec.completion_tokens
    bucket["priced_cost_usd"] += rec.cost_usd
    bucket["retries"] += rec.retries
    if rec.cached:
        bucket["cache_hits"] += 1
    else:
        bucket["calls"] += 1  # requests that reached a model (successful or not)
    if rec.failed:
        bucket["failures"] += 1
    if rec.unpriced:
        bucket["unpriced_calls"] += 1


PRICE_HINT = "give a price with --price MODEL=INPUT,OUTPUT in USD per million tokens"


def priced_usd(row: dict[str, Any]) -> float:
    """The known part of a ledger bucket's cost: `cost_usd` where it is a number (every call priced, or a ledger.json
    written before `priced_cost_usd` existed, whose `cost_usd` was that part), else `priced_cost_usd`."""
    value = row.get("cost_usd")
    return float((row.get("priced_cost_usd") if value is None else value) or 0.0)


def cost_text(cost_usd: float | None, unpriced_calls: int = 0, digits: int = 4, *, hint: bool = False) -> str:
    """The one way a cost is written for a person. `cost_usd` is the priced part (None: nothing is priced) and
    `unpriced_calls` the calls without a known price: "$0.0123" when every call is priced, "unknown (5 unpriced
    call(s))" when none with a cost is, "≥ $0.0123 (+ 5 unpriced call(s) of unknown cost)" in between; never a $0
    that nobody measured. `hint` adds how to give a price."""
    if not unpriced_calls:
        return "unknown" if cost_usd is None else f"${cost_usd:.{digits}f}"
    what = f"{unpriced_calls} unpriced call(s)"
    text = f"≥ ${cost_usd:.{digits}f} (+ {what} of unknown cost" if cost_usd else f"unknown ({what}"
    return text + (f"; {PRICE_HINT})" if hint else ")")


def bucket_cost_text(row: dict[str, Any], digits: int = 4, *, hint: bool = False) -> str:
    """`cost_text` of a ledger bucket (totals, or a row of by_stage/by_role/by_model), as given or read from JSON."""
    return cost_text(priced_usd(row), int(row.get("unpriced_calls", 0) or 0), digits, hint=hint)


class UsageLedger:
    """Accumulates `CallRecord`s; aggregates are always recomputable from the records."""

    #: Whether cache hits whose bill never reached this ledger are booked when replayed: only for a ledger that
    #: is the sole bill of its cache (a run's), never for a cache shared between runs, where a hit is free.
    books_unbilled_replays = False

    def __init__(self, records: Iterable[CallRecord] = ()) -> None:
        self._lock = threading.Lock()
        self._records: list[CallRecord] = []
        self._call_ids: set[str] = set()
        self._totals = _empty()
        self._by_role: dict[str, dict[str, Any]] = {}
        self._by_stage: dict[str, dict[str, Any]] = {}
        self._by_model: dict[str, dict[str, Any]] = {}
        self._usd_by_unit_head: dict[str, float] = {}  # unit tag before its first "|" -> USD (budget scopes)
        for rec in records:
            self.record(rec)

    def record(self, rec: CallRecord) -> None:
        with self._lock:
            self._append(rec)
        self._persist(rec)

    def book_once(self, rec: CallRecord) -> bool:
        """Record a paid call unless a record with its `call_id` is already here; True when it was recorded."""
        with self._lock:
            if rec.call_id is None or rec.call_id in self._call_ids:
                return False
            self._append(rec)
        self._persist(rec)
        return True

    def _persist(self, rec: CallRecord) -> None:
        """Hook for ledgers that mirror each record elsewhere (raso.engine.replay.PersistentLedger)."""

    def _append(self, rec: CallRecord) -> None:
        if rec.call_id is not None:
            self._call_ids.add(rec.call_id)
        self._records.append(rec)
        _add(self._totals, rec)
        _add(self._by_role.setdefault(rec.role, _empty()), rec)
        _add(self._by_stage.setdefault(rec.stage, _empty()), rec)
        _add(self._by_model.setdefault(rec.model, _empty()), rec)
        head = (rec.unit or "").split("|", 1)[0]
        self._usd_by_unit_head[head] = self._usd_by_unit_head.get(head, 0.0) + float(rec.cost_usd or 0.0)

    def records(self) -> list[CallRecord]:
        with self._lock:
            return list(self._records)

    def totals(self) -> dict[str, Any]:
        with self._lock:
            return _shown(self._totals)

    def priced_cost(self) -> float:
        """USD of the calls with a known price (an unpriced call adds nothing here: see `totals()['unpriced_calls']`)."""
        with self._lock:
            return float(self._totals["priced_cost_usd"])

    def cost_of_units(self, prefix: str) -> float:
        """USD of the calls whose unit tag starts with `prefix` (e.g. every batch of the test evaluation)."""
        with self._lock:
            return sum(usd for head, usd in self._usd_by_unit_head.items() if head.startswith(prefix))

    def by_role(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {k: _shown(v) for k, v in self._by_role.items()}

    def by_stage(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {k: _shown(v) for k, v in self._by_stage.items()}

    def by_model(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {k: _shown(v) for k, v in self._by_model.items()}

    def merge(self, other: "UsageLedger") -> None:
        for rec in other.records():
            self.record(rec)

    def to_dict(self) -> dict[str, Any]:
        with self._lock:
            return {
                "totals": _shown(self._totals),
                "by_role": {k: _shown(v) for k, v in self._by_role.items()},
                "by_stage": {k: _shown(v) for k, v in self._by_stage.items()},
                "by_model": {k: _shown(v) for k, v in self._by_model.items()},
                "calls": [r.model_dump() for r in self._records],
            }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "UsageLedger":
        """Rebuild from `to_dict()` output; aggregates are recomputed from the call records."""
        return cls(CallRecord.model_validate(r) for r in data.get("calls", []))

    def save(self, path: str | Path) -> Path:
        """Write JSON atomically (temp file + rename) so a crash never leaves a half-written ledger."""
        return atomic_write_text(path, json.dumps(self.to_dict(), indent=1))

    @classmethod
    def load(cls, path: str | Path) -> "UsageLedger":
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
