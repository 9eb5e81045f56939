"""What makes a killed run resumable without paying twice or drifting.

* `PersistentLedger` appends every gateway call to ledger.calls.jsonl the moment it is recorded, so the calls
  made between the last checkpoint and a kill are still on the bill after `resume`.
* `UnitGateway` wraps the run's gateway and tags every request's cache key with the unit of work it
  belongs to ("iter003/train", "iter003/propose", ...). With the gateway's on-disk cache inside the run
  directory, a resumed unit replays the replies its first attempt already got (no new spend, identical text),
  while two different units never share a reply (a skill re-rolled in a later epoch is a fresh sample).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from raso.llm import CallRecord, GatewayConfig, UsageLedger
from raso.llm.config import ModelPrice
from raso.llm.profiles import ModelProfile

from .run_dir import read_jsonl

if TYPE_CHECKING:
    from raso.llm.gateway import Completion, Gateway

T = TypeVar("T", bound=BaseModel)


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


def _join(unit: str, extra: str | None) -> str:
    return unit if not extra else f"{unit}|{extra}"


class UnitGateway:
    """A run's gateway keyed to one unit of work: every model call made through it carries the unit in its cache
    key; the config, ledger, cache and concurrency limit are the parent's own (read through, never copied).

    A wrapper, not a copy: only the methods below exist on it, and each one that calls a model adds the tag. A
    gateway method not listed here is absent (AttributeError), so a new model-calling method of LLMGateway
    cannot be reached untagged; tests/test_engine_unit_gateway.py fails until every public method of
    LLMGateway is listed here."""

    def __init__(self, parent: Gateway, unit: str) -> None:
        self._parent = parent
        self._unit = unit

    @property
    def unit(self) -> str:
        return self._unit

    @property
    def config(self) -> GatewayConfig:
        return self._parent.config

    @property
    def ledger(self) -> UsageLedger:
        return self._parent.ledger

    def profile(self, role: str) -> ModelProfile:
        return self._parent.profile(role)

    def complete(self, role: str, messages: list[dict[str, Any]], *, cache_key_extra: str | None = None,
                 **kwargs: Any) -> Completion:
        return self._parent.complete(role, messages, cache_key_extra=_join(self._unit, cache_key_extra), **kwargs)

    def structured(self, role: str, messages: list[dict[str, Any]], schema: type[T], *,
                   cache_key_extra: str | None = None, **kwargs: Any) -> T:
        return self._parent.structured(role, messages, schema, cache_key_extra=_join(self._unit, cache_key_extra),
                                       **kwargs)

    def preflight(self) -> None:
        self._parent.preflight()  # checks that the models can be used; calls none of them

    def price(self, model: str) -> ModelPrice | None:
        return self._parent.price(model)

    def unpriced_models(self) -> list[str]:
        return self._parent.unpriced_models()

    def worst_case_cost(self, model: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> float:
        return self._parent.worst_case_cost(model, messages, params)
