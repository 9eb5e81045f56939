"""Every choice list of the product, declared once as a Literal; option parsers, configs and CLI flags read
their allowed values from here (``choices_of``), so a new choice is added in one place."""

from __future__ import annotations

from typing import Any, Literal, get_args

#: How the execution agent incorporates skills (SRA modes): none, full injection, LLM selection, progressive.
AgentMode = Literal["none", "full", "select", "progressive"]
#: How RASO retrieves corpus sections for a query.
RetrievalKind = Literal["two_stage", "bm25", "tfidf", "hybrid", "field", "dreamer"]
#: How the initial skill s0 is written (a SKILL.md path is also accepted where an init is configured).
InitKind = Literal["rasi", "rfsi"]
#: How a skill is updated from rollouts.
UpdateKind = Literal["rasu", "rfsu"]
#: What ran to write a skill: an init or update kind, or RASI/RASU without the adaptation step ("-raw").
InitMode = Literal[InitKind, "rasi-raw"]
UpdateMode = Literal[UpdateKind, "rasu-raw"]
#: Task splits of a harness.
Split = Literal["train", "val", "test"]
#: The validation gate's rule (raso.engine.gate): the candidate's val mean above the incumbent's stored one, above
#: the incumbent re-scored on the same tasks, or that and significantly so.
GateMode = Literal["strict", "paired", "significant"]
#: How a rollout or an optimizer step failed: "agent_error" — its own doing (junk, a tool crash, a context
#: overflow: a rollout's is scored 0 and counted); "infrastructure" — a model call still failing after the
#: gateway's retries (rate limit, timeout, 5xx, connection: worth re-running later); "unusable" — the model
#: cannot be used at all (credentials, a missing extra, an unknown model: re-running cannot help); "budget" —
#: the USD budget refused a call. Only "agent_error" failures are ever scored.
FailureKind = Literal["agent_error", "infrastructure", "unusable", "budget"]
#: How a rollout ended: "ok" (the agent's own result, whatever its reward), how it failed, or "check_error": the
#: harness's check could not score what the agent left (a verifier that wrote no reward, crashed, or could not
#: import what it needs). A check error says nothing about the skill: it is an error, never a reward of 0.
Outcome = Literal["ok", FailureKind, "check_error"]
#: What runs a batch's rollouts (the `execution.executor` option): threads in this process, a pool of local
#: processes, or a Dask or Ray cluster's workers (raso.execution).
ExecutorKind = Literal["threads", "processes", "dask", "ray"]
#: The API an external agent program speaks to its model (the loopback endpoint serves each of them).
WireFormatName = Literal["openai-chat", "anthropic-messages", "openai-responses"]


def choices_of(literal: Any) -> tuple[str, ...]:
    """The allowed values of a Literal type, in declaration order."""
    return tuple(get_args(literal))


__all__ = ["AgentMode", "ExecutorKind", "FailureKind", "GateMode", "InitKind", "InitMode", "Outcome", "RetrievalKind",
           "Split", "UpdateKind", "UpdateMode", "WireFormatName", "choices_of"]
