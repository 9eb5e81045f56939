"""A scripted model for tests: a real litellm custom provider (`scripted/<name>`) that answers from a
list or a function and records every prompt, so tests assert on what the product actually sent."""

from __future__ import annotations

import copy
import itertools
import json
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from ._litellm import CustomLLM, litellm, register_custom_provider

PROVIDER = "scripted"

#: A reply: its text, an exception to raise, or {"content": str, "tool_calls": [{"name": ..., "arguments": {...}}]}
#: (a reply that calls tools; arguments may also be JSON text).
Reply = str | BaseException | dict[str, Any]
Script = Sequence[Reply] | Callable[[list[dict[str, Any]]], Reply]

_registry: dict[str, "ScriptedModel"] = {}
_registry_lock = threading.Lock()
_counter = itertools.count(1)


class ScriptExhaustedError(litellm.BadRequestError):
    """The scripted model was called more times than it has replies (a test bug, never retried)."""


class ScriptedModel:
    """Answers calls in order from `script` (a list; an Exception item is raised instead of answered)
    or from `script(messages)`. Usage is counted in whitespace-separated tokens."""

    def __init__(self, script: Script, name: str | None = None) -> None:
        self.name = f"{name or 'model'}-{next(_counter)}-{uuid.uuid4().hex[:6]}"
        self.model = f"{PROVIDER}/{self.name}"
        self._fn = script if callable(script) else None
        self._replies = list(script) if not callable(script) else []
        self._lock = threading.Lock()
        self.calls: list[list[dict[str, Any]]] = []
        self.params: list[dict[str, Any]] = []  # optional params (temperature, response_format, ...) per call
        with _registry_lock:
            _registry[self.name] = self

    @property
    def remaining(self) -> int:
        return len(self._replies)

    def _answer(self, messages: list[dict[str, Any]], params: dict[str, Any]) -> str | dict[str, Any]:
        with self._lock:
            self.calls.append(copy.deepcopy(messages))
            self.params.append(dict(params))
            fn = self._fn
            item: Reply | None = None
            if fn is None:
                if not self._replies:
                    raise ScriptExhaustedError(
                        message=f"scripted model {self.model} has no replies left (call {len(self.calls)})",
                        model=self.model,
                        llm_provider=PROVIDER,
                    )
                item = self._replies.pop(0)
        if fn is not None:
            item = fn(messages)  # outside the lock: concurrent calls stay concurrent
        if isinstance(item, BaseException):
            raise item
        return item if isinstance(item, dict) else str(item)


def _count_tokens(text: str) -> int:
    return len(text.split())


def _tool_call(call: dict[str, Any]) -> dict[str, Any]:
    arguments = call.get("arguments", {})
    return {"id": call.get("id") or f"call_{uuid.uuid4().hex[:12]}", "type": "function",
            "function": {"name": call["name"],
                         "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}}


class _ScriptedProvider(CustomLLM):
    def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:
        with _registry_lock:
            scripted = _registry.get(model)
        if scripted is None:
            raise litellm.NotFoundError(message=f"no ScriptedModel named {model!r}", model=model, llm_provider=PROVIDER)
        optional_params = kwargs.get("optional_params") or {}
        answer = scripted._answer(messages, optional_params)
        tool_calls = None
        if isinstance(answer, dict):
            reply = str(answer.get("content") or "")
            tool_calls = [_tool_call(call) for call in answer.get("tool_calls") or []] or None
        else:
            reply = answer
        prompt_tokens = sum(_count_tokens(str(m.get("content") or "")) for m in messages)
        finish_reason = "tool_calls" if tool_calls else "stop"
        limit = optional_params.get("max_tokens")
        if limit is not None and _count_tokens(reply) > int(limit):  # like a real model: cut at the token limit
            reply, finish_reason = " ".join(reply.split()[: int(limit)]), "length"
        completion_tokens = _count_tokens(reply)
        return litellm.ModelResponse(
            model=f"{PROVIDER}/{model}",
            choices=[{"index": 0, "finish_reason": finish_reason,
                      "message": {"role": "assistant", "content": reply, "tool_calls": tool_calls}}],
            usage={
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        )


register_custom_provider(PROVIDER, _ScriptedProvider())

__all__ = ["ScriptedModel", "ScriptExhaustedError"]
