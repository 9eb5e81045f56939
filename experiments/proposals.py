"""How often an update method's proposal step produced nothing, from the engine's candidate records.

A method whose proposal keeps failing (a reply the parser cannot read, a prompt over the model's context) equals
its s0 in the table; the table must say so. `proposal_failures` gives the numbers and the note a cell's
`result.json` and the tables carry ("no candidate: N of M iterations").
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from raso.engine.state import CandidateRecord


def proposal_failures(candidates: Iterable[CandidateRecord | dict[str, Any]]) -> dict[str, Any]:
    """`{"iterations": M, "no_candidate": N, "no_candidate_note": "no candidate: N of M iterations" | ""}` over
    an engine run's candidate records (`RunState.candidates`; dicts from a checkpoint are read too)."""
    records = [c if isinstance(c, CandidateRecord) else CandidateRecord.model_validate(c) for c in candidates]
    failed = sum(1 for c in records if c.error is not None or c.version is None)
    note = f"no candidate: {failed} of {len(records)} iterations" if failed else ""
    return {"iterations": len(records), "no_candidate": failed, "no_candidate_note": note}


def gepa_failures(reflection_calls: int, reflection_failures: int, note: str) -> dict[str, Any]:
    """The same numbers for GEPA, whose proposal step is its reflection call (one per iteration that reached
    it): `{"iterations": M, "no_candidate": N, "no_candidate_note": "reflection failed: N of M iterations (...)"}`."""
    return {"iterations": reflection_calls, "no_candidate": reflection_failures, "no_candidate_note": note}


def produced_nothing(failures: dict[str, Any]) -> bool:
    """Whether an update's optimizer produced no candidate at all (no iteration reached a proposal, or every
    proposal failed): its reported skill is then s0, and the table must say so whatever the method."""
    iterations, failed = failures.get("iterations"), failures.get("no_candidate")
    return iterations is not None and (iterations == 0 or failed == iterations)


def init_notes(init_json: Path | None) -> dict[str, Any]:
    """From an init.json (InitResult.to_dict()): the share of requirements with a supported lesson and whether
    skill-init's assembled fallback made s0 (both None when there is no such record, e.g. s0 from a file)."""
    if init_json is None or not Path(init_json).is_file():
        return {"supported_share": None, "assembled_fallback": None}
    record = json.loads(Path(init_json).read_text(encoding="utf-8"))
    return {"supported_share": record.get("supported_share"), "assembled_fallback": record.get("assembled_fallback")}


def cell_notes(harness: Any, *, checkpoint: Path | None = None, init_json: Path | None = None,
               update_failures: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a cell's `result.json` says beside its scores: the data it ran on (`harness.data_label()`), how often
    its update proposal produced nothing (from the engine's checkpoint, or `update_failures` for a method that
    runs outside the engine: GEPA's `gepa_failures`) and whether it produced nothing at all, and its init's
    supported-lesson share and assembled fallback (from init.json)."""
    failures: dict[str, Any] = {"iterations": None, "no_candidate": None, "no_candidate_note": ""}
    if update_failures is not None:
        failures = dict(update_failures)
    elif checkpoint is not None and Path(checkpoint).is_file():
        state = json.loads(Path(checkpoint).read_text(encoding="utf-8"))
        failures = proposal_failures(state.get("candidates") or [])
    return {"data": harness.data_label(), **failures, "produced_nothing": produced_nothing(failures),
            **init_notes(init_json)}


__all__ = ["cell_notes", "gepa_failures", "init_notes", "produced_nothing", "proposal_failures"]
