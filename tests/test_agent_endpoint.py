"""The loopback model endpoint, driven by the real OpenAI SDK and raw HTTP against a gateway over a scripted model:
plain and streamed replies, tool calls, errors in the format's shape, authentication per session, every call in the
gateway's ledger, and reads bounded for every framing an agent may send (memory, nesting, time)."""

from __future__ import annotations

import http.client
import itertools
import json
import logging
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path

import openai
import pytest

from raso.agent.endpoint import SESSION_PREFIX, ModelEndpoint, _nested_too_deep
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


# ---------------------------------------------------------------------------------------------------- bounded reads
# Each attack goes over a raw socket, as an agent in the box could send it; the reply must be the right status in the
# format's shape, the parent's peak memory must stay far below the body's size, and nothing may reach the model.
MiB = 1024 * 1024
CHAT = "/v1/chat/completions"


def _peak_rss_mb() -> float:
    status = Path("/proc/self/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024


def _reset_peak_rss() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # Linux: VmHWM starts again from the current RSS


def _zeros(total: int, piece: int = MiB) -> Iterator[bytes]:
    block = b"x" * piece  # the same block again and again: the sender itself holds 1 MiB
    for _ in range(total // piece):
        yield block


def _raw(session, path: str, head: str, body: Iterable[bytes] = (), *, finish: bool = True,
         read_timeout: float = 30) -> tuple[int, dict]:
    """Send a request line, `head` (header lines) and `body` (pieces) on one connection (then end our side unless not
    `finish`), and read one reply. A server that stops reading may reset the connection while we still send: the
    reply is read all the same."""
    with socket.create_connection(("127.0.0.1", session.endpoint.port), timeout=read_timeout) as sock:
        sock.sendall(f"POST {SESSION_PREFIX}{session.token}{path} HTTP/1.1\r\n"
                     f"Host: x\r\nAuthorization: Bearer {session.api_key}\r\n{head}\r\n".encode())
        try:
            for piece in body:
                sock.sendall(piece)
            if finish:
                sock.shutdown(socket.SHUT_WR)
        except OSError:  # reset or already closed by the server
            pass
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, json.loads(response.read())


ATTACKS = {
    # name: (header lines, body pieces, status)
    "negative length read to EOF": ("Content-Length: -1\r\n", lambda: _zeros(256 * MiB), 400),
    "garbage length": ("Content-Length: 12abc\r\n", lambda: [b"{}"], 400),
    "two different lengths": ("Content-Length: 2\r\nContent-Length: 3\r\n", lambda: [b"{}"], 400),
    "length over the cap": (f"Content-Length: {256 * MiB}\r\n", lambda: _zeros(256 * MiB), 413),
    "one huge chunk": ("Transfer-Encoding: chunked\r\n",
                       lambda: itertools.chain([b"%x\r\n" % (256 * MiB)], _zeros(256 * MiB)), 413),
    "many chunks past the cap": ("Transfer-Encoding: chunked\r\n",
                                 lambda: itertools.chain.from_iterable((b"100000\r\n", b, b"\r\n")
                                                                       for b in _zeros(64 * MiB)), 413),
    "chunk size 2**60": ("Transfer-Encoding: chunked\r\n", lambda: [b"1000000000000000\r\n", b"x" * 1000], 413),
    "garbage chunk size": ("Transfer-Encoding: chunked\r\n", lambda: [b"zz\r\n{}\r\n0\r\n\r\n"], 400),
    "chunk longer than its size": ("Transfer-Encoding: chunked\r\n", lambda: [b"2\r\n{}}\r\n0\r\n\r\n"], 400),
    "unknown transfer coding": ("Transfer-Encoding: gzip, chunked\r\n", lambda: [b"0\r\n\r\n"], 400),
    "no length at all": ("Connection: close\r\n", lambda: [b'{"messages": []}'], 411),
}


@pytest.mark.parametrize("name", ATTACKS)
def test_every_framing_is_read_within_the_cap_and_answered(name, capfd, caplog):
    caplog.set_level(logging.INFO, logger="raso.agent.endpoint")
    head, body, status = ATTACKS[name]
    model = ScriptedModel(["the one real answer"])
    gateway = _gateway(model)
    with ModelEndpoint(gateway) as endpoint, endpoint.session("r1") as session:
        _reset_peak_rss()
        before = _peak_rss_mb()
        got, reply = _raw(session, CHAT, head, body())
        grown = _peak_rss_mb() - before
        answer = _client(session).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert got == status, reply
    assert reply["error"]["code"] == status and reply["error"]["message"]  # the OpenAI chat error shape
    assert grown < 100, f"the parent grew by {grown:.0f} MB reading a refused body"
    assert answer.choices[0].message.content == "the one real answer"  # the endpoint still serves the session
    assert len(model.calls) == 1 and session.calls == 1 and gateway.ledger.totals()["calls"] == 1
    assert [e["status"] for e in session.errors] == [status] and session.failure() is None
    assert [r.getMessage() for r in caplog.records if "refused" in r.getMessage()] == [
        f"endpoint: refused a request ({status}): {reply['error']['message']}"]  # one line per refusal
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize("path, shape", [
    ("/v1/messages", lambda r: r["type"] == "error" and r["error"]["type"] == "request_too_large"),
    ("/v1/responses", lambda r: r["error"]["type"] == "invalid_request_error" and r["error"]["code"] == r["error"]["type"]),
    (CHAT, lambda r: r["error"]["type"] == "invalid_request_error" and r["error"]["code"] == 413),
])
def test_a_refused_body_is_answered_in_the_format_of_its_path(path, shape):
    with ModelEndpoint(_gateway(ScriptedModel([]))) as endpoint, endpoint.session("r1") as session:
        status, reply = _raw(session, path, "Transfer-Encoding: chunked\r\n", [b"FFFFFFFFFFFF\r\n"])
    assert status == 413 and shape(reply), reply
    assert "request body too large" in json.dumps(reply)


def test_chunked_body_with_trailers_keeps_the_connection_usable():
    model = ScriptedModel(["first", "second"])
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]}).encode()
    chunked = b"%x\r\n%s\r\n0\r\nX-One: a\r\nX-Two: b\r\n\r\n" % (len(body), body)
    with ModelEndpoint(_gateway(model)) as endpoint, endpoint.session("r1") as session:
        connection = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=30)
        replies = []
        for _ in range(2):  # the same connection twice: the trailers were read to their end
            connection.request("POST", f"{SESSION_PREFIX}{session.token}{CHAT}", body=iter([chunked]),
                               headers={"Authorization": f"Bearer {session.api_key}",
                                        "Transfer-Encoding": "chunked"}, encode_chunked=False)
            response = connection.getresponse()
            replies.append((response.status, json.loads(response.read())))
        connection.close()
    assert [(s, r["choices"][0]["message"]["content"]) for s, r in replies] == [(200, "first"), (200, "second")]


def test_deeply_nested_json_is_a_400_without_a_traceback(capfd):
    model = ScriptedModel(["never"])
    deep = b'{"model": "m", "messages": [{"role": "user", "content": ' + b"[" * 200_000 + b"]" * 200_000 + b"}]}"
    fine = {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [BASH],
            "metadata": {"a": [[[[[[[[[[{"b": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}]]]]]]]]]]}}
    with ModelEndpoint(_gateway(model)) as endpoint, endpoint.session("r1") as session:
        status, reply = _raw(session, CHAT, f"Content-Length: {len(deep)}\r\n", [deep])
        fine_status, _ = _post(f"{session.url}{CHAT}", fine, {"Authorization": f"Bearer {session.api_key}"})
    assert status == 400 and "nests more than 100 levels" in reply["error"]["message"]
    assert fine_status == 200  # brackets inside strings do not count, moderate nesting passes
    assert "Traceback" not in capfd.readouterr().err
    assert len(model.calls) == 1


def test_nesting_depth_is_counted_exactly():
    assert not _nested_too_deep(b"[" * 100 + b"]" * 100)
    assert _nested_too_deep(b"[" * 101 + b"]" * 101)
    assert not _nested_too_deep(b"{[" * 50 + b"]}" * 50)  # alternating kinds count one level each
    assert _nested_too_deep(b"{[" * 50 + b"{}" + b"]}" * 50)
    assert not _nested_too_deep(b'{"a": "' + b"[" * 500 + b'\\"[[", "b": [[[]]]}')  # strings, escapes included
    assert _nested_too_deep(b"[}")  # brackets that do not pair up


def test_a_silent_connection_is_closed_after_the_read_timeout():
    with ModelEndpoint(_gateway(ScriptedModel([])), read_timeout_s=1) as endpoint, endpoint.session("r1") as session:
        status, reply = _raw(session, CHAT, "Content-Length: 100\r\n", [], finish=False,
                              read_timeout=20)  # 100 promised, 0 sent
        with socket.create_connection(("127.0.0.1", endpoint.port), timeout=20) as idle:
            started = time.monotonic()
            assert idle.recv(1) == b""  # closed by the endpoint, not by our 20 s timeout
            waited = time.monotonic() - started
    assert status == 408 and "did not arrive within 1" in reply["error"]["message"]
    assert waited < 15


def test_large_bodies_are_read_two_at_a_time_per_session():
    """Two large bodies trickling in hold the session's two large-read slots: a third large one waits, then gets
    429 (read timeout 2 s); a small request is answered meanwhile, and so is the large one once a slot is free."""
    model = ScriptedModel(["small one answered", "large one answered"])
    stop = threading.Event()
    with ModelEndpoint(_gateway(model), read_timeout_s=2) as endpoint, endpoint.session("r1") as session:
        def trickle(sock: socket.socket) -> None:
            while not stop.wait(0.3):
                sock.sendall(b"x")

        slow = []
        for _ in range(2):
            sock = socket.create_connection(("127.0.0.1", endpoint.port), timeout=30)
            sock.sendall(f"POST {SESSION_PREFIX}{session.token}{CHAT} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                         f"{session.api_key}\r\nContent-Length: {8 * MiB}\r\n\r\n".encode() + b"x" * (2 * MiB))
            slow.append(sock)
            threading.Thread(target=trickle, args=(sock,), daemon=True).start()
        time.sleep(0.5)  # both are being read
        large = json.dumps({"model": "m", "messages": [{"role": "user", "content": "y" * (2 * MiB)}]}).encode()
        try:
            refused, reply = _raw(session, CHAT, f"Content-Length: {len(large)}\r\n", [large])
            small = _client(session).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        finally:
            stop.set()
            for sock in slow:
                sock.close()
        time.sleep(0.5)  # the slow ones' reads end and give their slots back
        admitted, answer = _raw(session, CHAT, f"Content-Length: {len(large)}\r\n", [large])
    assert refused == 429 and reply["error"]["type"] == "rate_limit_exceeded", reply
    assert small.choices[0].message.content == "small one answered"
    assert admitted == 200 and answer["choices"][0]["message"]["content"] == "large one answered"



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
    from raso.agent.programs.base import AgentRun
    from raso.agent.programs.claude_code import ClaudeCodeProgram
    from raso.agent.programs.runner import ExternalAgentRunner
    from raso.testing import count_script
    from raso.testing.toy import CountingHarness

    model = ScriptedModel(count_script)
    # a provider that allows 16,384 reply tokens (Claude Code asks 32,000)
    gateway = LLMGateway(GatewayConfig.for_models(target=model.model, profile={"max_output_tokens": 16384}))
    backend = ClaudeCodeProgram()
    assert ExternalAgentRunner(backend, gateway, AgentConfig()).reply_token_cap() == 16384
    assert ExternalAgentRunner(backend, gateway, AgentConfig(max_tokens=4000)).reply_token_cap() == 4000
    run = AgentRun(instruction="i", workspace="/w", home="/h", endpoint_url="http://e", api_key="k", model_name="m",
                   max_steps=3, wall_seconds=60, max_tokens=16384)
    assert backend.environment(run)["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "16384"
    # the builtin agent too
    harness = CountingHarness()
    harness.rollout(harness.tasks("test")[0], [], ExecutionAgent(gateway, AgentConfig(mode="none", max_tokens=32000)))
    assert model.params and {p["max_tokens"] for p in model.params} == {16384}
