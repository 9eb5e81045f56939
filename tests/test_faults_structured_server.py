"""Structured output on an OpenAI-compatible server (issue 15): the per-role mode is sent as asked, against a
real llama.cpp server (llama-cpp-python's own, `python -m llama_cpp.server`, the `server` extra) serving the
embedded 0.5B model on 127.0.0.1 only; the server is bounded in time and stopped by the test."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest
from pydantic import BaseModel

from raso.llm import GatewayConfig, LLMError, LLMGateway, RetryConfig, RoleConfig
from raso.llm.gateway import response_format_for, structured_mode
from raso.llm.structured import schema_of

ALIAS = "raso-loopback-qwen05"


class SearchQuery(BaseModel):
    """The shape that failed for a user behind llama.cpp's server: `query` came back as a list of strings."""

    query: str
    keywords: list[str]


def test_modes_resolve_to_what_is_sent() -> None:
    model = f"openai/{ALIAS}"  # litellm knows nothing about it: auto means instructions only
    assert structured_mode(model, "auto") == "instructions"
    assert response_format_for(model, SearchQuery, "instructions") is None
    assert response_format_for(model, SearchQuery, "json_object") == {
        "type": "json_object", "schema": schema_of(SearchQuery)}
    sent = response_format_for(model, SearchQuery, "json_schema")
    assert sent["type"] == "json_schema" and sent["json_schema"]["schema"]["required"] == ["query", "keywords"]
    assert structured_mode("openai/gpt-4o-mini", "auto") == "json_schema"


@pytest.mark.parametrize("mode, expected", [("json_schema", "json_schema"), ("json_object", "json_object"),
                                             ("instructions", None), ("auto", None)])
def test_each_roles_mode_is_what_the_gateway_sends(mode: str, expected: str | None) -> None:
    from raso.llm.scripted import ScriptedModel

    model = ScriptedModel(['{"query": "sum formulas", "keywords": ["SUM", "range"]}'], name="structured-mode")
    gw = LLMGateway(GatewayConfig.for_models(target="scripted/unused", optimizer=model.model,
                                             optimizer_structured_output=mode))
    out = gw.structured("optimizer", [{"role": "user", "content": "a query please"}], SearchQuery)
    assert out.query == "sum formulas"
    sent = model.params[0].get("response_format")
    assert (sent or {}).get("type") == expected
    assert "query" in model.calls[0][-1]["content"]  # the schema is described in the prompt in every mode


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    import sse_starlette  # noqa: F401  (the `server` extra, in `dev`: llama-cpp-python's OpenAI server)
    import starlette_context  # noqa: F401

    from raso.llm import DEFAULT_LOCAL_MODEL, local

    model_file = local.ensure_ready(DEFAULT_LOCAL_MODEL)  # the embedded GGUF, assembled from its parts
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model_file), "--model_alias", ALIAS,
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "2", "--verbose", "False"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited: {proc.stderr.read()[-2000:] if proc.stderr else ''}")
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2) as reply:
                    if ALIAS in reply.read().decode():
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("llama_cpp.server did not come up within 180 s")
            time.sleep(1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def _gateway(base: str, mode: str, monkeypatch: pytest.MonkeyPatch) -> LLMGateway:
    monkeypatch.setenv("RASO_LOOPBACK_KEY", "not-needed-by-a-local-server")
    role = RoleConfig(model=f"openai/{ALIAS}", api_base=base, api_key_env="RASO_LOOPBACK_KEY", temperature=0.0,
                      max_tokens=96, timeout_s=240, structured_output=mode, retry=RetryConfig(max_attempts=1))
    return LLMGateway(GatewayConfig(roles={"optimizer": role}))


MESSAGES = [{"role": "user", "content": "Write a search query and 2 keywords for finding spreadsheet formula "
                                        "tips. Be brief."}]


@pytest.mark.embedded
def test_a_llama_cpp_python_server_enforces_the_schema_sent_in_json_object_mode(
        server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    gw = _gateway(server, "json_object", monkeypatch)
    out = gw.structured("optimizer", MESSAGES, SearchQuery, stage="loopback")
    assert isinstance(out.query, str) and out.query.strip() and all(isinstance(k, str) for k in out.keywords)
    totals = gw.ledger.totals()
    assert totals["calls"] == 1 and totals["failures"] == 0  # the first reply validated: no repair call


@pytest.mark.embedded
def test_llama_cpp_python_server_rejects_openais_json_schema_format(server: str, monkeypatch: pytest.MonkeyPatch
                                                                    ) -> None:
    """Why README says json_object for llama-cpp-python's server (0.3.36): it answers OpenAI's json_schema
    response_format with a request validation error. If this starts passing, json_schema works there too."""
    gw = _gateway(server, "json_schema", monkeypatch)
    with pytest.raises(LLMError, match="validation error"):
        gw.structured("optimizer", MESSAGES, SearchQuery, stage="loopback")
