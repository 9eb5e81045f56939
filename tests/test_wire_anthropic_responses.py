"""The Anthropic Messages and OpenAI Responses wire formats: requests in the shapes Claude Code and Codex send become
chat requests, and chat replies become bodies and event streams those programs read back; then both through the real
loopback endpoint (raw HTTP as Claude Code calls it, the OpenAI SDK for Responses) over a scripted model."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from raso.agent.endpoint import ModelEndpoint
from raso.agent.wire import FORMATS
from raso.agent.wire.anthropic import AnthropicMessages
from raso.agent.wire.base import ChatReply, ChatRequest, ToolCall
from raso.agent.wire.responses import OpenAIResponses
from raso.llm.config import GatewayConfig, RoleConfig
from raso.llm.gateway import LLMGateway
from raso.llm.scripted import ScriptedModel


def _events(stream) -> list[tuple[str, dict]]:
    """Server-sent events as (event name, data)."""
    out = []
    for chunk in stream:
        text = chunk.decode()
        assert text.endswith("\n\n"), text
        lines = dict(line.split(": ", 1) for line in text.strip().split("\n"))
        out.append((lines["event"], json.loads(lines["data"])))
    return out


TOOL_REPLY = ChatReply(text="Writing it.", tool_calls=[ToolCall(id="call_7", name="Bash", arguments='{"command": "ls"}')],
                       finish_reason="tool_calls", prompt_tokens=120, completion_tokens=9, model="m")


def test_both_formats_are_registered_under_their_names():
    assert FORMATS["anthropic-messages"] is AnthropicMessages
    assert FORMATS["openai-responses"] is OpenAIResponses


def test_anthropic_request_with_tool_round_trip_becomes_chat_messages():
    body = {
        "model": "claude-x", "max_tokens": 512, "stream": True, "stop_sequences": ["END"],
        "system": [{"type": "text", "text": "You are an agent."}, {"type": "text", "text": "Be brief."}],
        "tools": [{"name": "Bash", "description": "Run a command",
                   "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}},
                  {"type": "web_search_20250305", "name": "web_search"}],
        "tool_choice": {"type": "any"},
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "List files"}]},
            {"role": "system", "content": [{"type": "text", "text": "Skills: sheet-helper"}]},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "x"},
                                              {"type": "text", "text": "Listing."},
                                              {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                          "content": [{"type": "text", "text": "a.txt"}]},
                                         {"type": "tool_result", "tool_use_id": "toolu_2", "content": "denied", "is_error": True},
                                         {"type": "text", "text": "and now?"}]},
        ],
    }
    request = AnthropicMessages().to_chat(body)
    assert request.model == "claude-x" and request.max_tokens == 512 and request.stream and request.stop == ["END"]
    # every system text (the top-level one and Claude Code's mid-conversation one) leads, in order
    assert request.messages[0] == {"role": "system", "content": "You are an agent.\nBe brief.\n\nSkills: sheet-helper"}
    assert request.messages[1] == {"role": "user", "content": "List files"}
    assistant = request.messages[2]
    assert assistant["content"] == "Listing."  # thinking is dropped
    assert assistant["tool_calls"] == [{"id": "toolu_1", "type": "function",
                                        "function": {"name": "Bash", "arguments": '{"command": "ls"}'}}]
    assert request.messages[3] == {"role": "tool", "tool_call_id": "toolu_1", "content": "a.txt"}
    assert request.messages[4] == {"role": "tool", "tool_call_id": "toolu_2", "content": "[error] denied"}
    assert request.messages[5] == {"role": "user", "content": "and now?"}
    # the server tool has nothing behind it and is not offered
    assert request.tools == [{"type": "function", "function": {"name": "Bash", "description": "Run a command",
                                                               "parameters": body["tools"][0]["input_schema"]}}]
    assert request.tool_choice == "required"


@pytest.mark.parametrize("body, message", [
    ({}, "'messages' must be a non-empty list"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0] must be an object with role"),
    ({"messages": [{"role": "user", "content": 3}]}, "messages[0].content must be text"),
    ({"messages": [{"role": "user", "content": "x"}], "tools": [{"input_schema": {}}]}, "tools[0] has no 'name'"),
    ({"messages": [{"role": "user", "content": "x"}], "max_tokens": "many"}, "'max_tokens' must be an integer"),
])
def test_anthropic_malformed_request_is_one_clear_error(body, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        AnthropicMessages().to_chat(body)


def test_anthropic_reply_body_has_text_and_tool_use_blocks():
    fmt = AnthropicMessages()
    body = fmt.from_chat(TOOL_REPLY, ChatRequest(messages=[{"role": "user", "content": "x"}], model="claude-x"))
    assert body["type"] == "message" and body["role"] == "assistant" and body["model"] == "claude-x"
    assert body["content"] == [{"type": "text", "text": "Writing it."},
                               {"type": "tool_use", "id": "call_7", "name": "Bash", "input": {"command": "ls"}}]
    assert body["stop_reason"] == "tool_use"
    assert body["usage"] == {"input_tokens": 120, "output_tokens": 9}
    cut = fmt.from_chat(ChatReply(text="half", finish_reason="length"), ChatRequest(messages=[]))
    assert cut["stop_reason"] == "max_tokens"
    # arguments that are not a JSON object still reach the agent (as an object, which tool_use requires)
    odd = fmt.from_chat(ChatReply(tool_calls=[ToolCall(id="c", name="Bash", arguments="ls -l")]), ChatRequest(messages=[]))
    assert odd["content"] == [{"type": "tool_use", "id": "c", "name": "Bash", "input": {"arguments": "ls -l"}}]


def test_anthropic_stream_reassembles_to_the_body():
    fmt = AnthropicMessages()
    request = ChatRequest(messages=[{"role": "user", "content": "x"}], model="claude-x", stream=True)
    events = _events(fmt.stream(TOOL_REPLY, request))
    names = [name for name, _ in events]
    assert names == ["message_start", "content_block_start", "content_block_delta", "content_block_stop",
                     "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"]
    assert all(data["type"] == name for name, data in events)
    # reassemble as a client does: blocks from start + deltas
    blocks: dict[int, dict] = {}
    for name, data in events:
        if name == "content_block_start":
            blocks[data["index"]] = dict(data["content_block"], partial="")
        elif name == "content_block_delta":
            delta = data["delta"]
            if delta["type"] == "text_delta":
                blocks[data["index"]]["text"] += delta["text"]
            else:
                blocks[data["index"]]["partial"] += delta["partial_json"]
    assert blocks[0]["text"] == "Writing it."
    assert blocks[1]["name"] == "Bash" and json.loads(blocks[1]["partial"]) == {"command": "ls"}
    assert events[7][1]["delta"]["stop_reason"] == "tool_use" and events[7][1]["usage"]["output_tokens"] == 9
    assert events[0][1]["message"]["usage"]["input_tokens"] == 120


def test_anthropic_error_shape():
    assert AnthropicMessages().error(401, "bad key") == {"type": "error",
                                                         "error": {"type": "authentication_error", "message": "bad key"}}


def test_responses_request_items_become_chat_messages():
    body = {
        "model": "gpt-x", "stream": True, "instructions": "Be an agent.", "max_output_tokens": 300,
        "tools": [{"type": "function", "name": "exec_command", "description": "Run", "parameters": {"type": "object"}},
                  {"type": "web_search"}, {"type": "namespace", "name": "multi_agent_v1", "tools": []}],
        "tool_choice": "auto",
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Skills: sheet-helper"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Write 42"}]},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "On it."}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "exec_command", "arguments": '{"cmd": "ls"}'},
            {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "exec_command", "arguments": '{"cmd": "pwd"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
            {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "/w"}]},
            {"role": "user", "content": "thanks"},
        ],
    }
    request = OpenAIResponses().to_chat(body)
    assert request.model == "gpt-x" and request.stream and request.max_tokens == 300 and request.tool_choice == "auto"
    assert request.messages[0] == {"role": "system", "content": "Be an agent.\n\nSkills: sheet-helper"}
    assert request.messages[1] == {"role": "user", "content": "Write 42"}
    assert request.messages[2]["content"] == "On it."
    assert [c["id"] for c in request.messages[2]["tool_calls"]] == ["call_1", "call_2"]
    assert request.messages[3] == {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"}
    assert request.messages[4] == {"role": "tool", "tool_call_id": "call_2", "content": "/w"}
    assert request.messages[5] == {"role": "user", "content": "thanks"}
    assert request.tools == [{"type": "function",
                              "function": {"name": "exec_command", "description": "Run", "parameters": {"type": "object"}}}]
    assert OpenAIResponses().to_chat({"input": "hi"}).messages == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("body, message", [
    ({}, "'input' must be text or a non-empty list"),
    ({"input": [3]}, r"input\[0\] must be an object"),
    ({"input": [{"type": "message", "role": "tool", "content": "x"}]}, r"input\[0\] has role 'tool'"),
    ({"input": "x", "tools": "all"}, "'tools' must be a list"),
])
def test_responses_malformed_request_is_one_clear_error(body, message):
    with pytest.raises(ValueError, match=message):
        OpenAIResponses().to_chat(body)


def test_responses_reply_body_is_a_valid_response():
    fmt = OpenAIResponses()
    body = fmt.from_chat(TOOL_REPLY, ChatRequest(messages=[], model="gpt-x"))
    parsed = Response.model_validate(body)  # the OpenAI SDK's own type accepts it
    assert parsed.status == "completed" and parsed.model == "gpt-x"
    assert [item.type for item in parsed.output] == ["message", "function_call"]
    assert parsed.output_text == "Writing it."
    call = parsed.output[1]
    assert call.call_id == "call_7" and call.name == "Bash" and json.loads(call.arguments) == {"command": "ls"}
    assert parsed.usage.input_tokens == 120 and parsed.usage.output_tokens == 9
    cut = Response.model_validate(fmt.from_chat(ChatReply(text="half", finish_reason="length"), ChatRequest(messages=[])))
    assert cut.status == "incomplete" and cut.incomplete_details.reason == "max_output_tokens"


def test_responses_stream_events_are_valid_and_end_in_the_response():
    fmt = OpenAIResponses()
    events = _events(fmt.stream(TOOL_REPLY, ChatRequest(messages=[], model="gpt-x", stream=True)))
    adapter = TypeAdapter(ResponseStreamEvent)
    parsed = [adapter.validate_python(data) for _, data in events]  # every event is one the SDK knows
    assert [e.type for e in parsed][0] == "response.created" and parsed[-1].type == "response.completed"
    assert [e.sequence_number for e in parsed] == list(range(len(parsed)))
    text = "".join(e.delta for e in parsed if e.type == "response.output_text.delta")
    arguments = "".join(e.delta for e in parsed if e.type == "response.function_call_arguments.delta")
    assert text == "Writing it." and json.loads(arguments) == {"command": "ls"}
    done = [e.item for e in parsed if e.type == "response.output_item.done"]
    assert [item.type for item in done] == ["message", "function_call"]
    assert parsed[-1].response.usage.total_tokens == 129


def test_responses_error_shape():
    assert OpenAIResponses().error(429, "slow down")["error"] == {"message": "slow down", "type": "rate_limit_exceeded",
                                                                  "param": None, "code": "rate_limit_exceeded"}


# ---------------------------------------------------------------------------- through the real loopback endpoint

def _endpoint_gateway(model):
    return LLMGateway(GatewayConfig(roles={"agent": RoleConfig(model=model.model)}, retry={"max_attempts": 1}))


def _http(url: str, body: dict, headers: dict) -> tuple[int, str]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_anthropic_messages_through_the_endpoint_as_claude_code_calls_it():
    model = ScriptedModel([{"content": "", "tool_calls": [{"name": "Bash", "arguments": {"command": "ls"}}]}])
    body = {"model": "claude-x", "max_tokens": 100, "stream": True, "system": [{"type": "text", "text": "SKILL: answers"}],
            "tools": [{"name": "Bash", "description": "Run", "input_schema": {"type": "object"}}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "go"}]}]}
    with ModelEndpoint(_endpoint_gateway(model)) as endpoint, endpoint.session("r") as session:
        url = session.base_url("anthropic-messages") + "/v1/messages?beta=true"  # the path and query Claude Code sends
        status, text = _http(url, body, {"x-api-key": session.api_key, "anthropic-version": "2023-06-01"})
        refused, error = _http(url, body, {"x-api-key": "wrong"})
    assert status == 200, text
    events = [(chunk.split("\n")[0][len("event: "):], json.loads(chunk.split("\n")[1][len("data: "):]))
              for chunk in text.strip().split("\n\n")]
    assert events[0][0] == "message_start" and events[-1][0] == "message_stop"
    start = next(data for name, data in events if name == "content_block_start")
    assert start["content_block"]["type"] == "tool_use" and start["content_block"]["name"] == "Bash"
    assert model.calls[0][0] == {"role": "system", "content": "SKILL: answers"}
    assert refused == 401 and json.loads(error)["type"] == "error"
    assert json.loads(error)["error"]["type"] == "authentication_error"


def test_openai_responses_through_the_endpoint_with_the_openai_sdk():
    model = ScriptedModel([{"content": "Listing.", "tool_calls": [{"name": "exec_command", "arguments": {"cmd": "ls"}}]},
                           "All done."])
    tools = [{"type": "function", "name": "exec_command", "description": "Run", "parameters": {"type": "object"}}]
    with ModelEndpoint(_endpoint_gateway(model)) as endpoint, endpoint.session("r") as session:
        client = openai.OpenAI(base_url=session.base_url("openai-responses"), api_key=session.api_key, max_retries=0)
        with client.responses.stream(model="gpt-x", instructions="SKILL: answers", input="go", tools=tools) as stream:
            first = stream.get_final_response()
        call = first.output[1]
        second = client.responses.create(model="gpt-x", input=[
            {"role": "user", "content": "go"},
            {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
            {"type": "function_call_output", "call_id": call.call_id, "output": "a.txt"}], tools=tools)
    assert first.output_text == "Listing." and call.name == "exec_command" and json.loads(call.arguments) == {"cmd": "ls"}
    assert second.output_text == "All done." and second.status == "completed"
    assert model.calls[0][0] == {"role": "system", "content": "SKILL: answers"}
    assert model.calls[1][-1] == {"role": "tool", "tool_call_id": call.call_id, "content": "a.txt"}
    assert session.calls == 2
