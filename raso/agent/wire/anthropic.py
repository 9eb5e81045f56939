"""The Anthropic Messages format ("anthropic-messages"): what Claude Code sends (POST <base>/v1/messages, SDK clients
add `?beta=true`). A request's system prompt, content blocks (text, tool_use, tool_result) and tools become one OpenAI
chat request; the gateway's reply becomes a message with text and tool_use blocks, or its server-sent events."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

from . import register
from .base import ChatReply, ChatRequest

_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def text_of(content: Any) -> str:
    """The text of a content value: a string, or the text of a list of blocks (text / input_text / output_text;
    an image or document block becomes a placeholder, so the model knows something was there)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        raise ValueError(f"content must be text or a list of blocks, not {type(content).__name__}")
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            kind = block.get("type")
            if kind in ("text", "input_text", "output_text"):
                parts.append(str(block.get("text", "")))
            elif kind in ("image", "input_image", "document", "input_file"):
                parts.append(f"[{kind} omitted]")
    return "\n".join(p for p in parts if p)


def hoist_system(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """System messages merged into one leading system message. Agents send some (Claude Code its environment and
    skill list, Codex its developer messages) after the first user turn; many chat templates accept a system
    message only first, and the text matters more than its position."""
    system = [m["content"] for m in messages if m["role"] == "system" and m.get("content")]
    rest = [m for m in messages if m["role"] != "system"]
    return ([{"role": "system", "content": "\n\n".join(system)}] if system else []) + rest


def _tool_choice(choice: Any) -> Any:
    if not isinstance(choice, dict):
        return None
    kind = choice.get("type")
    if kind == "tool" and choice.get("name"):
        return {"type": "function", "function": {"name": str(choice["name"])}}
    return {"auto": "auto", "any": "required", "none": "none"}.get(str(kind))


def _tools(tools: Any) -> list[dict[str, Any]] | None:
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise ValueError("'tools' must be a list")
    out = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise ValueError(f"tools[{index}] has no 'name'")
        if "input_schema" not in tool:  # a server tool (web search, code execution): nothing here runs it
            continue
        out.append({"type": "function", "function": {"name": tool["name"], "description": str(tool.get("description") or ""),
                                                     "parameters": tool.get("input_schema") or {"type": "object"}}})
    return out or None


def _message(index: int, message: Any) -> list[dict[str, Any]]:
    """One Anthropic message as chat messages (a user turn's tool results become tool messages, first)."""
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant", "system"):
        raise ValueError(f"messages[{index}] must be an object with role user or assistant")
    role, content = message["role"], message.get("content")
    if isinstance(content, str) or content is None or role == "system":
        return [{"role": role, "content": text_of(content)}]
    if not isinstance(content, list):
        raise ValueError(f"messages[{index}].content must be text or a list of blocks")
    blocks = [b for b in content if isinstance(b, dict)]
    if role == "assistant":
        calls = [{"id": str(b.get("id") or f"toolu_{uuid.uuid4().hex[:24]}"), "type": "function",
                  "function": {"name": str(b.get("name", "")), "arguments": json.dumps(b.get("input") or {})}}
                 for b in blocks if b.get("type") == "tool_use"]
        out: dict[str, Any] = {"role": "assistant", "content": text_of([b for b in blocks if b.get("type") == "text"])}
        if calls:
            out["tool_calls"] = calls
        return [out]
    results = [{"role": "tool", "tool_call_id": str(b.get("tool_use_id", "")),
                "content": ("[error] " if b.get("is_error") else "") + text_of(b.get("content"))}
               for b in blocks if b.get("type") == "tool_result"]
    rest = [b for b in blocks if b.get("type") != "tool_result"]
    return results + ([{"role": "user", "content": text_of(rest)}] if rest or not results else [])


@register
class AnthropicMessages:
    name: ClassVar[str] = "anthropic-messages"
    paths: ClassVar[tuple[str, ...]] = ("/v1/messages",)
    #: what the endpoint adds to its URL for this format: Anthropic clients append /v1/messages themselves
    base_path: ClassVar[str] = ""

    def to_chat(self, body: dict[str, Any]) -> ChatRequest:
        raw = body.get("messages")
        if not isinstance(raw, list) or not raw:
            raise ValueError("'messages' must be a non-empty list of message objects")
        system = body.get("system")
        messages = [{"role": "system", "content": text_of(system)}] if system else []
        for index, message in enumerate(raw):
            messages.extend(_message(index, message))
        stop = body.get("stop_sequences")
        max_tokens = body.get("max_tokens")
        if max_tokens is not None and not isinstance(max_tokens, int):
            raise ValueError("'max_tokens' must be an integer")
        return ChatRequest(messages=hoist_system(messages), tools=_tools(body.get("tools")),
                           tool_choice=_tool_choice(body.get("tool_choice")), max_tokens=max_tokens,
                           temperature=body.get("temperature"), stop=list(stop) if isinstance(stop, list) and stop else None,
                           stream=bool(body.get("stream")), model=str(body.get("model") or ""))

    @staticmethod
    def _blocks(reply: ChatReply) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
        for call in reply.tool_calls:
            try:
                arguments = json.loads(call.arguments or "{}")
            except json.JSONDecodeError:
                arguments = None
            if not isinstance(arguments, dict):  # tool_use input must be an object: keep what the model wrote
                arguments = {"arguments": call.arguments}
            blocks.append({"type": "tool_use", "id": call.id or f"toolu_{uuid.uuid4().hex[:24]}", "name": call.name,
                           "input": arguments})
        return blocks or [{"type": "text", "text": ""}]

    @staticmethod
    def _stop_reason(reply: ChatReply) -> str:
        return "tool_use" if reply.tool_calls else _STOP_REASONS.get(reply.finish_reason, "end_turn")

    def from_chat(self, reply: ChatReply, request: ChatRequest) -> dict[str, Any]:
        return {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant",
                "model": request.model or reply.model, "content": self._blocks(reply),
                "stop_reason": self._stop_reason(reply), "stop_sequence": None,
                "usage": {"input_tokens": reply.prompt_tokens, "output_tokens": reply.completion_tokens}}

    def stream(self, reply: ChatReply, request: ChatRequest) -> Iterator[bytes]:
        message = self.from_chat(reply, request)

        def event(kind: str, data: dict[str, Any]) -> bytes:
            return f"event: {kind}\ndata: {json.dumps({'type': kind, **data}, ensure_ascii=False)}\n\n".encode()

        yield event("message_start", {"message": {**message, "content": [], "stop_reason": None,
                                                  "usage": {"input_tokens": reply.prompt_tokens, "output_tokens": 0}}})
        for index, block in enumerate(message["content"]):
            if block["type"] == "text":
                yield event("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}})
                delta = {"type": "text_delta", "text": block["text"]}
            else:
                yield event("content_block_start", {"index": index, "content_block": {**block, "input": {}}})
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"], ensure_ascii=False)}
            yield event("content_block_delta", {"index": index, "delta": delta})
            yield event("content_block_stop", {"index": index})
        yield event("message_delta", {"delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                      "usage": {"output_tokens": reply.completion_tokens}})
        yield event("message_stop", {})

    def error(self, status: int, message: str) -> dict[str, Any]:
        kind = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error", 403: "permission_error",
                404: "not_found_error", 408: "invalid_request_error", 411: "invalid_request_error",
                413: "request_too_large", 429: "rate_limit_error",
                529: "overloaded_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}


__all__ = ["AnthropicMessages", "hoist_system", "text_of"]
