"""Tool calls through the gateway: native ones from the provider (a scripted model here), replayed from the cache
like text, and text ones (a profile with tool_calls="text") rendered into the prompt and parsed from the reply."""

from __future__ import annotations

import json

from raso.llm.config import GatewayConfig, RoleConfig
from raso.llm.gateway import LLMGateway
from raso.llm.profiles import profile_for
from raso.llm.scripted import ScriptedModel
from raso.llm.tool_text import messages_with_tools, parse_tool_calls, render_tools

BASH = {"type": "function", "function": {"name": "bash", "description": "run a shell command",
                                         "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}}


def _gateway(model: ScriptedModel, tmp_path=None, **profile) -> LLMGateway:
    role = RoleConfig(model=model.model, profile=profile)
    return LLMGateway(GatewayConfig(roles={"agent": role}, cache_dir=tmp_path))


def test_native_tool_calls_reach_the_provider_and_come_back():
    model = ScriptedModel([{"content": "listing", "tool_calls": [{"name": "bash", "arguments": {"cmd": "ls"}}]}])
    reply = _gateway(model).complete("agent", [{"role": "user", "content": "go"}], tools=[BASH], tool_choice="auto")
    assert model.params[0]["tools"] == [BASH]
    assert reply.text == "listing" and reply.finish_reason == "tool_calls"
    assert [(c["name"], json.loads(c["arguments"])) for c in reply.tool_calls] == [("bash", {"cmd": "ls"})]
    assert reply.tool_calls[0]["id"]


def test_plain_reply_has_no_tool_calls():
    reply = _gateway(ScriptedModel(["just text"])).complete("agent", [{"role": "user", "content": "go"}])
    assert reply.tool_calls is None and reply.text == "just text"


def test_tool_calls_replay_from_the_cache(tmp_path):
    model = ScriptedModel([{"content": "", "tool_calls": [{"name": "bash", "arguments": {"cmd": "pwd"}}]}])
    gateway = _gateway(model, tmp_path)
    first = gateway.complete("agent", [{"role": "user", "content": "go"}], tools=[BASH])
    again = gateway.complete("agent", [{"role": "user", "content": "go"}], tools=[BASH])
    assert model.remaining == 0 and len(model.calls) == 1  # the second answer came from the cache
    assert again.cached and again.tool_calls == first.tool_calls


def test_text_tool_call_profile_renders_tools_and_parses_the_reply():
    model = ScriptedModel(['I will look.\n<tool_call>\n{"name": "bash", "arguments": {"cmd": "ls -la"}}\n</tool_call>'])
    gateway = _gateway(model, tool_calls="text")
    history = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "list files"},
               {"role": "assistant", "content": None,
                "tool_calls": [{"id": "a", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "pwd"}'}}]},
               {"role": "tool", "tool_call_id": "a", "content": "/work"}]
    reply = gateway.complete("agent", history, tools=[BASH])
    sent = model.calls[0]
    assert "tools" not in model.params[0]  # not as a parameter: the model takes none
    assert '"name": "bash"' in sent[0]["content"] and sent[0]["content"].startswith("You are an agent.")
    assert '<tool_call>\n{"name": "bash", "arguments": {"cmd": "pwd"}}\n</tool_call>' in sent[2]["content"]
    assert sent[3] == {"role": "user", "content": "<tool_response>\n/work\n</tool_response>"}
    assert reply.text == "I will look." and reply.finish_reason == "tool_calls"
    assert [(c["name"], json.loads(c["arguments"])) for c in reply.tool_calls] == [("bash", {"cmd": "ls -la"})]


def test_embedded_profile_takes_tools_as_text():
    assert profile_for("local/qwen2.5-0.5b-instruct-q4_k_m").tool_calls == "text"
    assert profile_for("scripted/x").tool_calls == "native"


def test_parse_tool_calls_keeps_junk_as_text():
    text = ('a <tool_call>{"name": "x", "arguments": {"k": 1}}</tool_call> b <tool_call>not json</tool_call> '
            '<tool_call>{"arguments": {}}</tool_call> <tool_call>{"name": "y", "arguments": "raw"}')
    rest, calls = parse_tool_calls(text)
    assert [(c["name"], c["arguments"]) for c in calls] == [("x", '{"k": 1}'), ("y", "raw")]
    assert "not json" in rest and '{"arguments": {}}' in rest and "a" in rest and '"name": "x"' not in rest
    assert parse_tool_calls("no calls here") == ("no calls here", [])


def test_render_tools_and_messages_without_a_system_turn():
    block = render_tools([BASH])
    assert "<tools>" in block and json.dumps(BASH["function"]) in block
    out = messages_with_tools([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], [BASH])
    assert out[0]["role"] == "system" and "<tools>" in out[0]["content"]
    assert out[1] == {"role": "user", "content": "hi"}
