"""Every choice list of the product, declared once as a Literal; option parsers, configs and CLI flags read
their allowed values from here (``choices_of``), so a new choice is added in one place."""

from __future__ import annotations

from typing import Any, Literal, get_args

#: How the execution agent incorporates skills (SRA modes): none, full injection, LLM selection, progressive.
AgentMode = Literal["none", "full", "select", "progressive"]
#: How RASO retrieves corpus sections for a query.
RetrievalKind = Literal["bm25", "tfidf", "hybrid", "field", "dreamer"]
#: How the initial skill s0 is written (a SKILL.md path is also accepted where an init is configured).
InitKind = Literal["rasi", "rfsi"]
#: How a skill is updated from rollouts.
UpdateKind = Literal["rasu", "rfsu"]
#: Task splits of a harness.
Split = Literal["train", "val", "test"]


def choices_of(literal: Any) -> tuple[str, ...]:
    """The allowed values of a Literal type, in declaration order."""
    return tuple(get_args(literal))


__all__ = ["AgentMode", "InitKind", "RetrievalKind", "Split", "UpdateKind", "choices_of"]
