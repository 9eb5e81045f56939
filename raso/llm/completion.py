"""A model's reply as the gateway returns it. Its own light module (no litellm import), so a rollout worker that
receives replies from the driver's gateway (raso.execution) does not pay for importing litellm."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Completion(BaseModel):
    """One reply. On a cache hit `cached` is True and tokens/cost are 0 (nothing was spent)."""

    model_config = ConfigDict(frozen=True)

    text: str
    model: str
    role: str
    stage: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cached: bool = False
    retries: int = 0
    finish_reason: str | None = None
    latency_s: float = 0.0
    #: the model's tool calls, each {"id", "name", "arguments" (JSON text)}; None when the reply has none
    tool_calls: list[dict[str, Any]] | None = None


__all__ = ["Completion"]
