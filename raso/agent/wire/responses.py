"""The OpenAI Responses format ("openai-responses"): what Codex CLI sends (POST <base>/v1/responses, streamed). Input
items (messages, function calls and their outputs) and `instructions` become one OpenAI chat request; the gateway's
reply becomes output items (a message, function calls), or the response.* server-sent events."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

from . import register
from .anthropic import hoist_system, text_of
from .base import ChatReply, ChatRequest


def _tools(tools: Any) -> list[dict[str, Any]] | None:
    """Function tools in chat form. Other kinds (web_search, namespaces of sub-agent tools, freeform custom tools)
    have nothing behind them here, so the model is not offered them."""
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise ValueError("'tools' must be a list")
    out = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise ValueError(f"tools[{index}] must be an object")
        if tool.get("type") != "function":
            continue
        if not isinstance(tool.get("name"), str):
            raise ValueError(f"tools[{index}] has no 'name'")
        out.append({"type": "function", "function": {"name": tool["name"], "description": str(tool.get("description") or ""),
                                                     "parameters": tool.get("parameters") or {"type": "object"}}})
    return out or None


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, str):
        return choice if choice in ("auto", "required", "none") else None
    if isinstance(choice, dict) and choice.get("type") == "function" and choice.get("name"):
        return {"type": "function", "function": {"name": str(choice["name"])}}
    return None


def _messages(items: Any) -> list[dict[str, Any]]:
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise ValueError("'input' must be text or a non-empty list of items")
    messages: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValueError(f"input[{index}] must be an object")
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            role = "system" if item.get("role") == "developer" else item.get("role")
            if role not in ("user", "assistant", "system"):
                raise ValueError(f"input[{index}] has role {item.get('role')!r}")
            messages.append({"role": role, "content": text_of(item.get("content"))})
        elif kind == "function_call":
            call = {"id": str(item.get("call_id") or item.get("id") or ""), "type": "function",
                    "function": {"name": str(item.get("name", "")), "arguments": str(item.get("arguments") or "{}")}}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":  # one assistant turn: its text, then its calls
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            messages.append({"role": "tool", "tool_call_id": str(item.get("call_id", "")),
                             "content": output if isinstance(output, str) else text_of(output)})
        # reasoning items and other kinds carry nothing the chat model can use
    return messages


@register
class OpenAIResponses:
    name: ClassVar[str] = "openai-responses"
    paths: ClassVar[tuple[str, ...]] = ("/v1/responses", "/responses")
    #: what the endpoint adds to its URL for this format: an OpenAI client appends /responses
    base_path: ClassVar[str] = "/v1"

    def to_chat(self, body: dict[str, Any]) -> ChatRequest:
        messages = _messages(body.get("input"))
        instructions = body.get("instructions")
        if instructions:
            messages.insert(0, {"role": "system", "content": text_of(instructions)})
        max_tokens = body.get("max_output_tokens")
        if max_tokens is not None and not isinstance(max_tokens, int):
            raise ValueError("'max_output_tokens' must be an integer")
        return ChatRequest(messages=hoist_system(messages), tools=_tools(body.get("tools")),
                           tool_choice=_tool_choice(body.get("tool_choice")), max_tokens=max_tokens,
                           temperature=body.get("temperature"), stream=bool(body.get("stream")),
                           model=str(body.get("model") or ""))

    @staticmethod
    def _output(reply: ChatReply) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if reply.text or not reply.tool_calls:
            items.append({"type": "message", "id": f"msg_{uuid.uuid4().hex}", "role": "assistant", "status": "completed",
                          "content": [{"type": "output_text", "text": reply.text, "annotations": []}]})
        for call in reply.tool_calls:
            call_id = call.id or f"call_{uuid.uuid4().hex[:24]}"
            items.append({"type": "function_call", "id": f"fc_{uuid.uuid4().hex}", "call_id": call_id, "name": call.name,
                          "arguments": call.arguments, "status": "completed"})
        return items

    def from_chat(self, reply: ChatReply, request: ChatRequest) -> dict[str, Any]:
        cut = reply.finish_reason == "length" and not reply.tool_calls
        return {"id": f"resp_{uuid.uuid4().hex}", "object": "response", "created_at": int(time.time()),
                "status": "incomplete" if cut else "completed",
                "incomplete_details": {"reason": "max_output_tokens"} if cut else None, "error": None,
                "model": request.model or reply.model, "output": self._output(reply), "parallel_tool_calls": True,
                "tool_choice": "auto", "tools": [],
                "usage": {"input_tokens": reply.prompt_tokens, "output_tokens": reply.completion_tokens,
                          "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                          "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                          "output_tokens_details": {"reasoning_tokens": 0}}}

    def stream(self, reply: ChatReply, request: ChatRequest) -> Iterator[bytes]:
        response = self.from_chat(reply, request)
        counter = iter(range(1_000_000))

        def event(kind: str, data: dict[str, Any]) -> bytes:
            payload = {"type": kind, "sequence_number": next(counter), **data}
            return f"event: {kind}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()

        yield event("response.created", {"response": {**response, "status": "in_progress", "output": []}})
        yield event("response.in_progress", {"response": {**response, "status": "in_progress", "output": []}})
        for index, item in enumerate(response["output"]):
            where = {"output_index": index, "item_id": item["id"]}
            if item["type"] == "message":
                text = item["content"][0]["text"]
                part = {"type": "output_text", "text": "", "annotations": []}
                started = {**item, "status": "in_progress", "content": []}
                yield event("response.output_item.added", {"output_index": index, "item": started})
                yield event("response.content_part.added", {**where, "content_index": 0, "part": part})
                yield event("response.output_text.delta", {**where, "content_index": 0, "delta": text, "logprobs": []})
                yield event("response.output_text.done", {**where, "content_index": 0, "text": text, "logprobs": []})
                yield event("response.content_part.done", {**where, "content_index": 0, "part": {**part, "text": text}})
            else:
                started = {**item, "status": "in_progress", "arguments": ""}
                yield event("response.output_item.added", {"output_index": index, "item": started})
                yield event("response.function_call_arguments.delta", {**where, "delta": item["arguments"]})
                yield event("response.function_call_arguments.done", {**where, "arguments": item["arguments"]})
            yield event("response.output_item.done", {"output_index": index, "item": item})
        yield event("response.incomplete" if response["status"] == "incomplete" else "response.completed", {"response": response})

    def error(self, status: int, message: str) -> dict[str, Any]:
        kind = {400: "invalid_request_error", 401: "authentication_error", 402: "insufficient_quota",
                404: "not_found_error", 408: "invalid_request_error", 411: "invalid_request_error",
                413: "invalid_request_error", 429: "rate_limit_exceeded"}.get(status, "server_error")
        return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


__all__ = ["OpenAIResponses"]
