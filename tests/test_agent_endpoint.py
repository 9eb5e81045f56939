"""The loopback model endpoint, driven by the real OpenAI SDK and raw HTTP against a gateway over a scripted model:
plain and streamed replies, tool calls, errors in the format's shape, authentication per session, and every call
in the gateway's ledger."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import openai
import pytest

from raso.agent.endpoint import ModelEndpoint
from raso.llm.config import GatewayConfig, ModelPrice, RoleConfig
from raso.llm.errors import BudgetExceededError
from raso.llm.gateway import LLMGateway
from raso.llm.scripted import ScriptedModel

BASH = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}


def _gateway(model: ScriptedModel, **config) -> LLMGateway:
    return LLMGateway(GatewayConfig(roles={"agent": RoleConfig(model=model.model)}, **config))


def _client(session, **kw) -> openai.OpenAI:
    return openai.OpenAI(base_url=session.base_url("openai-chat"), api_key=session.api_key, max_retries=0, **kw)


def _post(url: str, body: dict, headers: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json",
                                                                                 **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_plain_reply_is_booked_in_session_and_ledger():
    model = ScriptedModel(["four words in reply"])
    gateway = _gateway(model)
    with ModelEndpoint(gateway) as endpoint, endpoint.session("r1") as session:
        reply = _client(session).chat.completions.create(
            model="anything", messages=[{"role": "system", "content": "SKILL: be brief"},
                                        {"role": "user", "content": "say it"}], max_tokens=50)
    assert reply.choices[0].message.content == "four words in reply"
    assert reply.choices[0].finish_reason == "stop" and reply.usage.completion_tokens == 4
    assert model.calls[0][0] == {"role": "system", "content": "SKILL: be brief"}
    request, answer = session.exchanges[0]
    assert "SKILL: be brief" in request.messages[0]["content"] and answer.text == "four words in reply"
    assert (session.calls, session.completion_tokens, session.prompt_tokens) == (1, 4, 5)
    totals = gateway.ledger.totals()
    assert totals["calls"] == 1 and totals["completion_tokens"] == 4
    assert gateway.ledger.records()[0].stage == "rollout"


def test_streamed_reply_and_tool_calls():
    model = ScriptedModel(["streamed text", {"content": "", "tool_calls": [{"name": "bash", "arguments": {"cmd": "ls"}}]}])
    with ModelEndpoint(_gateway(model)) as endpoint, endpoint.session("r1") as session:
        client = _client(session)
        chunks = list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                                     stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "run"}], tools=[BASH])
    assert text == "streamed text"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    call = reply.choices[0].message.tool_calls[0]
    assert reply.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "bash" and json.loads(call.function.arguments) == {"cmd": "ls"}
    assert model.params[1]["tools"] == [BASH]
    assert session.calls == 2


def test_streamed_tool_call_reassembles():
    model = ScriptedModel([{"content": "ok", "tool_calls": [{"name": "bash", "arguments": {"cmd": "pwd"}}]}])
    with ModelEndpoint(_gateway(model)) as endpoint, endpoint.session("r1") as session:
        with _client(session).chat.completions.stream(model="m", messages=[{"role": "user", "content": "x"}],
                                                      tools=[BASH]) as stream:
            final = stream.get_final_completion()
    call = final.choices[0].message.tool_calls[0]
    assert call.function.name == "bash" and json.loads(call.function.arguments) == {"cmd": "pwd"}


def test_refuses_wrong_key_unknown_session_and_unknown_path():
    model = ScriptedModel(["never"])
    with ModelEndpoint(_gateway(model)) as endpoint, endpoint.session("r1") as session:
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=session.base_url("openai-chat"), api_key="wrong", max_retries=0).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}])
        base = f"http://127.0.0.1:{endpoint.port}"
        status, body = _post(f"{base}/v1/chat/completions", {"messages": []})
        assert status == 404 and "no such endpoint session" in body["error"]["message"]
        status, body = _post(f"{session.url}/v1/nothing", {}, {"Authorization": f"Bearer {session.api_key}"})
        assert status == 404 and "no such path: POST /v1/nothing" in body["error"]["message"]
        status, body = _post(f"{session.url}/v1/chat/completions", {"messages": "nope"},
                             {"Authorization": f"Bearer {session.api_key}"})
        assert status == 400 and "'messages' must be" in body["error"]["message"]
        models = _client(session).models.list()
        assert [m.id for m in models.data] == ["raso-agent"]
    assert model.calls == [] and session.calls == 0


def test_closed_session_is_refused():
    model = ScriptedModel(["never"])
    with ModelEndpoint(_gateway(model)) as endpoint:
        session = endpoint.session("r1")
        session.close()
        status, body = _post(f"{session.url}/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]},
                             {"Authorization": f"Bearer {session.api_key}"})
    assert status == 404 and model.calls == []


def test_budget_refusal_is_an_error_in_the_format_not_a_hang():
    model = ScriptedModel(["costly reply words", "never sent"])
    gateway = _gateway(model, budget_usd=0.000001, prices={model.model: ModelPrice(input=1000.0, output=1000.0)})
    with ModelEndpoint(gateway) as endpoint, endpoint.session("r1") as session:
        client = _client(session, timeout=30)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], max_tokens=10)
        with pytest.raises(openai.APIStatusError) as err:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], max_tokens=10)
    assert err.value.status_code == 402 and "USD budget reached" in err.value.message
    assert session.failure() == "budget" and session.calls == 1 and len(model.calls) == 1
    assert BudgetExceededError.__name__ in session.errors[0]["message"]


def test_unreachable_model_is_an_infrastructure_failure(monkeypatch):
    monkeypatch.setenv("RASO_TEST_ENDPOINT_KEY", "sk-test")
    role = RoleConfig(model="openai/gpt-4o-mini", api_base="http://127.0.0.1:9/v1", api_key_env="RASO_TEST_ENDPOINT_KEY")
    gateway = LLMGateway(GatewayConfig(roles={"agent": role}, retry={"max_attempts": 1}))
    with ModelEndpoint(gateway) as endpoint, endpoint.session("r1") as session:
        with pytest.raises(openai.APIStatusError) as err:
            _client(session, timeout=60).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert err.value.status_code == 403 and session.failure() == "infrastructure"
    assert "LLMUnavailableError" in err.value.message
    assert gateway.ledger.totals()["calls"] == 1


def test_max_tokens_cap_bounds_what_the_agent_asks():
    model = ScriptedModel(["one two three four five six"])
    with ModelEndpoint(_gateway(model), max_tokens_cap=3) as endpoint, endpoint.session("r1") as session:
        reply = _client(session).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                                         max_tokens=32000)
    assert model.params[0]["max_tokens"] == 3
    assert reply.choices[0].finish_reason == "length" and reply.choices[0].message.content == "one two three"


def test_after_a_refusal_every_later_call_of_the_session_is_refused_at_once(monkeypatch):
    """An agent that asks again after a refused call (mini-swe-agent retried 10 times) gets the same answer without
    the gateway waiting out its retries again; a refused connection is tried twice, not every attempt."""
    monkeypatch.setenv("RASO_TEST_ENDPOINT_KEY", "sk-test")
    role = RoleConfig(model="openai/gpt-4o-mini", api_base="http://127.0.0.1:9/v1", api_key_env="RASO_TEST_ENDPOINT_KEY")
    gateway = LLMGateway(GatewayConfig(roles={"agent": role}, retry={"max_attempts": 4, "initial_wait_s": 0.01,
                                                                       "max_wait_s": 0.01, "jitter_s": 0.0}))
    with ModelEndpoint(gateway) as endpoint, endpoint.session("r1") as session:
        client = _client(session, timeout=60)
        for _ in range(3):
            with pytest.raises(openai.APIStatusError) as err:
                client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
            assert err.value.status_code == 403 and "LLMUnavailableError" in err.value.message
    [record] = gateway.ledger.records()  # one gateway call for three requests
    assert record.failed and record.retries == 1  # refused_attempts (2), not max_attempts (4)
    assert session.failure() == "infrastructure" and len(session.errors) == 1


def test_the_reply_length_an_agent_may_ask_for_is_capped_by_the_model_profile():
    from raso.agent.agent import AgentConfig, ExecutionAgent
    from raso.agent.backends.base import AgentRun
    from raso.agent.backends.claude_code import ClaudeCodeBackend
    from raso.agent.backends.runner import ExternalAgentRunner
    from raso.testing import count_script
    from raso.testing.toy import CountingHarness

    model = ScriptedModel(count_script)
    # a provider that allows 16,384 reply tokens (Claude Code asks 32,000)
    gateway = LLMGateway(GatewayConfig.for_models(target=model.model, profile={"max_output_tokens": 16384}))
    backend = ClaudeCodeBackend()
    assert ExternalAgentRunner(backend, gateway, AgentConfig(backend="claude-code")).reply_token_cap() == 16384
    assert ExternalAgentRunner(backend, gateway, AgentConfig(backend="claude-code", max_tokens=4000)).reply_token_cap() == 4000
    run = AgentRun(instruction="i", workspace="/w", home="/h", endpoint_url="http://e", api_key="k", model_name="m",
                   max_steps=3, wall_seconds=60, max_tokens=16384)
    assert backend.environment(run)["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "16384"
    # the builtin agent too
    harness = CountingHarness()
    harness.rollout(harness.tasks("test")[0], [], ExecutionAgent(gateway, AgentConfig(mode="none", max_tokens=32000)))
    assert model.params and {p["max_tokens"] for p in model.params} == {16384}
