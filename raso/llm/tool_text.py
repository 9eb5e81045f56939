"""Tool calls for models that write them as text (a model profile with `tool_calls="text"`, e.g. the embedded
llama.cpp models): the tools go into the prompt and the calls come back as Qwen/Hermes-style
`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks, which are parsed into structured tool calls.

The conversation an agent sends back (assistant turns carrying `tool_calls`, `tool` results) is rewritten into the
same text form, so the model sees its own earlier calls the way it wrote them."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)

TOOLS_PROMPT = (
    "You may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within <tool_call></tool_call> "
    "XML tags:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": <args-json-object>}}\n</tool_call>"
)


def render_tools(tools: list[dict[str, Any]]) -> str:
    """The tools (OpenAI `function` tools) as the system-prompt block Qwen/Hermes-style models were trained on."""
    lines = [json.dumps(tool.get("function", tool), ensure_ascii=False) for tool in tools]
    return TOOLS_PROMPT.format(tools="\n".join(lines))


def _call_text(call: dict[str, Any]) -> str:
    function = call.get("function", call)
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass  # kept as the text the model wrote
    return "<tool_call>\n" + json.dumps({"name": function.get("name", ""), "arguments": arguments},
                                        ensure_ascii=False) + "\n</tool_call>"


def messages_with_tools(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """`messages` for a text-tool-call model: the tools appended to the system message (one is added when there is
    none), assistant tool calls written as `<tool_call>` blocks, tool results as `<tool_response>` user turns."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if isinstance(content, list):  # OpenAI content parts: the text parts
            content = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        content = "" if content is None else str(content)
        if role == "assistant" and message.get("tool_calls"):
            blocks = "\n".join(_call_text(c) for c in message["tool_calls"])
            out.append({"role": "assistant", "content": f"{content}\n{blocks}".strip()})
        elif role == "tool":
            response = f"<tool_response>\n{content}\n</tool_response>"
            if out and out[-1]["role"] == "user" and out[-1].get("_tool_responses"):
                out[-1]["content"] += "\n" + response
            else:
                out.append({"role": "user", "content": response, "_tool_responses": True})
        else:
            out.append({"role": role, "content": content})
    for message in out:
        message.pop("_tool_responses", None)
    if tools:
        block = render_tools(tools)
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n# Tools\n\n{block}".strip()}
        else:
            out.insert(0, {"role": "system", "content": f"# Tools\n\n{block}"})
    return out


def parse_tool_calls(text: str) -> tuple[str, list[dict[str, Any]]]:
    """(the reply without its tool-call blocks, the calls as {"id", "name", "arguments" (JSON text)}). A block
    whose JSON does not parse or names no function stays in the text: it is the model's words, not a call."""
    calls: list[dict[str, Any]] = []
    kept: list[str] = []
    position = 0
    for match in _BLOCK.finditer(text):
        try:
            data = json.loads(match.group(1))
        except ValueError:
            continue
        if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"]:
            continue
        arguments = data.get("arguments", data.get("parameters", {}))
        calls.append({"id": f"call_{uuid.uuid4().hex[:12]}", "name": data["name"],
                      "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)})
        kept.append(text[position:match.start()])
        position = match.end()
    kept.append(text[position:])
    return "".join(kept).strip(), calls


__all__ = ["messages_with_tools", "parse_tool_calls", "render_tools"]
