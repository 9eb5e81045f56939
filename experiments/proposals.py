"""How often an update method's proposal step produced nothing, from the engine's candidate records.

A method whose proposal keeps failing (a reply the parser cannot read, a prompt over the model's context) equals
its s0 in the table; the table must say so. `proposal_failures` gives the numbers and the note a cell's
`result.json` and the tables carry ("no candidate: N of M iterations").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from raso.engine.state import CandidateRecord


def proposal_failures(candidates: Iterable[CandidateRecord | dict[str, Any]]) -> dict[str, Any]:
    """`{"iterations": M, "no_candidate": N, "no_candidate_note": "no candidate: N of M iterations" | ""}` over
    an engine run's candidate records (`RunState.candidates`; dicts from a checkpoint are read too)."""
    records = [c if isinstance(c, CandidateRecord) else CandidateRecord.model_validate(c) for c in candidates]
    failed = sum(1 for c in records if c.error is not None or c.version is None)
    note = f"no candidate: {failed} of {len(records)} iterations" if failed else ""
    return {"iterations": len(records), "no_candidate": failed, "no_candidate_note": note}


__all__ = ["proposal_failures"]
