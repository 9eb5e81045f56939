"""The OpenAI chat-completions format ("openai-chat"): what mini-swe-agent (through litellm), a user's command and
most OpenAI-compatible clients send. Served at <base>/v1/chat/completions and <base>/chat/completions."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

from . import register
from .base import ChatReply, ChatRequest


def _text_of(content: Any) -> Any:
    """Message content as text where it is a list of text parts (the form some clients send); other content
    (None, a string) is kept."""
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") in ("text", "input_text")]
        return "\n".join(str(p) for p in parts)
    return content


def _sse(data: Any) -> bytes:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


@register
class OpenAIChat:
    name: ClassVar[str] = "openai-chat"
    paths: ClassVar[tuple[str, ...]] = ("/v1/chat/completions", "/chat/completions")
    #: what EndpointSession.base_url adds to the session's URL: an OpenAI client appends /chat/completions
    base_path: ClassVar[str] = "/v1"

    def to_chat(self, body: dict[str, Any]) -> ChatRequest:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise ValueError("'messages' must be a non-empty list of message objects")
        for index, message in enumerate(messages):
            if not isinstance(message.get("role"), str):
                raise ValueError(f"messages[{index}] has no 'role'")
        messages = [{**m, "content": _text_of(m.get("content"))} for m in messages]
        tools = body.get("tools")
        if tools is not None and not isinstance(tools, list):
            raise ValueError("'tools' must be a list")
        stop = body.get("stop")
        if isinstance(stop, str):
            stop = [stop]
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        try:
            return ChatRequest(messages=messages, tools=tools or None, tool_choice=body.get("tool_choice"),
                               max_tokens=max_tokens, temperature=body.get("temperature"), stop=stop or None,
                               stream=bool(body.get("stream")), model=str(body.get("model") or ""))
        except ValueError as exc:
            raise ValueError(f"malformed chat request: {exc.errors()[0]['msg'] if hasattr(exc, 'errors') else exc}") from None

    @staticmethod
    def _tool_calls(reply: ChatReply) -> list[dict[str, Any]]:
        return [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in reply.tool_calls]

    @staticmethod
    def _usage(reply: ChatReply) -> dict[str, int]:
        return {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                "total_tokens": reply.prompt_tokens + reply.completion_tokens}

    def from_chat(self, reply: ChatReply, request: ChatRequest) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text if reply.text or not reply.tool_calls else None}
        if reply.tool_calls:
            message["tool_calls"] = self._tool_calls(reply)
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": request.model or reply.model,
                "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}],
                "usage": self._usage(reply)}

    def stream(self, reply: ChatReply, request: ChatRequest) -> Iterator[bytes]:
        base = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": request.model or reply.model}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            return _sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]})

        yield chunk({"role": "assistant", "content": ""})
        if reply.text:
            yield chunk({"content": reply.text})
        for index, call in enumerate(self._tool_calls(reply)):
            yield chunk({"tool_calls": [{"index": index, **call}]})
        yield chunk({}, reply.finish_reason)
        yield _sse({**base, "choices": [], "usage": self._usage(reply)})
        yield b"data: [DONE]\n\n"

    def error(self, status: int, message: str) -> dict[str, Any]:
        kind = {400: "invalid_request_error", 401: "authentication_error", 402: "insufficient_quota",
                404: "not_found_error", 408: "invalid_request_error", 411: "invalid_request_error",
                413: "invalid_request_error", 429: "rate_limit_exceeded"}.get(status, "api_error")
        return {"error": {"message": message, "type": kind, "param": None, "code": status}}


__all__ = ["OpenAIChat"]
