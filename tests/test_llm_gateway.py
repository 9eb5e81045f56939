"""Gateway faults: retries on transient errors only, clear auth errors, role fallback, concurrency limit."""

from __future__ import annotations

import threading
import time

import pytest

from raso.llm import (
    GatewayConfig,
    LLMAuthError,
    LLMContextWindowError,
    LLMError,
    LLMGateway,
    LLMUnavailableError,
    RetryConfig,
    RoleConfig,
)
from raso.llm._litellm import litellm
from raso.llm.gateway import is_transient
from raso.llm.scripted import ScriptedModel

FAST = RetryConfig(max_attempts=4, initial_wait_s=0.0, max_wait_s=0.0, jitter_s=0.0)
MSG = [{"role": "user", "content": "say hi"}]


def gateway_for(sm: ScriptedModel, **kw) -> LLMGateway:
    return LLMGateway(GatewayConfig.for_models(target=sm.model, retry=FAST, **kw))


def rate_limited() -> Exception:
    return litellm.RateLimitError("429 Too Many Requests", llm_provider="openai", model="gpt-4o-mini")


def test_rate_limit_then_success_returns_one_result_and_counts_the_retry():
    sm = ScriptedModel([rate_limited(), "hello"])
    gw = gateway_for(sm)
    c = gw.complete("agent", MSG, stage="rollout")
    assert c.text == "hello"
    assert c.retries == 1
    assert len(sm.calls) == 2
    totals = gw.ledger.totals()
    assert totals["calls"] == 1 and totals["retries"] == 1 and totals["failures"] == 0


@pytest.mark.parametrize(
    "exc",
    [
        litellm.Timeout("timed out", model="m", llm_provider="openai"),
        litellm.APIConnectionError("connection reset", llm_provider="openai", model="m"),
        litellm.InternalServerError("boom", llm_provider="openai", model="m"),
        litellm.ServiceUnavailableError("503", llm_provider="openai", model="m"),
    ],
)
def test_transient_errors_are_retried(exc):
    sm = ScriptedModel([exc, exc, "fine"])
    gw = gateway_for(sm)
    assert gw.complete("agent", MSG).text == "fine"
    assert gw.ledger.totals()["retries"] == 2


def test_auth_failure_fails_at_once_with_a_clear_message():
    sm = ScriptedModel([litellm.AuthenticationError("invalid x-api-key", llm_provider="anthropic", model="claude"), "never"])
    gw = LLMGateway(
        GatewayConfig(roles={"agent": RoleConfig(model=sm.model, api_key_env="MY_PROVIDER_KEY")}, retry=FAST)
    )
    with pytest.raises(LLMAuthError) as info:
        gw.complete("agent", MSG)
    assert len(sm.calls) == 1  # no retry
    message = str(info.value)
    assert sm.model in message and "MY_PROVIDER_KEY" in message and "invalid x-api-key" in message
    assert gw.ledger.totals()["failures"] == 1 and gw.ledger.totals()["retries"] == 0


def test_auth_message_names_the_providers_env_var():
    # a real litellm call to OpenAI without a key fails before any network traffic
    gw = LLMGateway(GatewayConfig.for_models(target="openai/gpt-4o-mini", retry=FAST))
    import os

    saved = os.environ.pop("OPENAI_API_KEY", None)
    try:
        with pytest.raises(LLMAuthError) as info:
            gw.complete("agent", MSG, max_tokens=1)
    finally:
        if saved is not None:
            os.environ["OPENAI_API_KEY"] = saved
    assert "OPENAI_API_KEY" in str(info.value) and "openai/gpt-4o-mini" in str(info.value)


def test_missing_credentials_reported_as_server_error_is_still_an_auth_failure():
    # litellm maps the OpenAI SDK's "Missing credentials" to InternalServerError (a 5xx)
    exc = litellm.InternalServerError("OpenAIException - Missing credentials. Set OPENAI_API_KEY", llm_provider="openai", model="m")
    sm = ScriptedModel([exc, "never"])
    with pytest.raises(LLMAuthError):
        gateway_for(sm).complete("agent", MSG)
    assert len(sm.calls) == 1


@pytest.mark.parametrize(
    ("exc", "error_type"),
    [
        (litellm.BadRequestError("bad param", model="m", llm_provider="openai"), LLMError),
        (litellm.ContextWindowExceededError("too long", model="m", llm_provider="openai"), LLMContextWindowError),
        (litellm.NotFoundError("no such model", model="m", llm_provider="openai"), LLMError),
    ],
)
def test_permanent_errors_are_never_retried(exc, error_type):
    sm = ScriptedModel([exc, "never"])
    gw = gateway_for(sm)
    with pytest.raises(error_type):
        gw.complete("agent", MSG)
    assert len(sm.calls) == 1
    assert sm.remaining == 1


def test_transient_errors_give_up_after_max_attempts():
    sm = ScriptedModel([rate_limited()] * 5)
    gw = gateway_for(sm)
    with pytest.raises(LLMUnavailableError, match="4 attempt"):
        gw.complete("agent", MSG)
    assert len(sm.calls) == FAST.max_attempts
    assert gw.ledger.totals()["retries"] == FAST.max_attempts - 1


def test_backoff_waits_between_attempts():
    sm = ScriptedModel([rate_limited(), "ok"])
    retry = RetryConfig(max_attempts=2, initial_wait_s=0.2, max_wait_s=0.2, jitter_s=0.0)
    gw = LLMGateway(GatewayConfig.for_models(target=sm.model, retry=retry))
    started = time.perf_counter()
    gw.complete("agent", MSG)
    assert time.perf_counter() - started >= 0.2


def test_is_transient_classification():
    assert is_transient(rate_limited())
    assert not is_transient(litellm.AuthenticationError("no", llm_provider="openai", model="m"))
    assert not is_transient(litellm.ContextWindowExceededError("long", model="m", llm_provider="openai"))


def test_role_falls_back_to_optimizer_then_agent():
    agent = ScriptedModel(lambda m: "agent-reply")
    optimizer = ScriptedModel(lambda m: "optimizer-reply")
    gw = LLMGateway(GatewayConfig.for_models(target=agent.model, optimizer=optimizer.model, retry=FAST))
    assert gw.complete("rasu.gradient", MSG).text == "optimizer-reply"
    assert gw.complete("agent", MSG).text == "agent-reply"
    only_agent = LLMGateway(GatewayConfig(roles={"agent": RoleConfig(model=agent.model)}, retry=FAST))
    assert only_agent.complete("optimizer", MSG).text == "agent-reply"
    assert set(gw.ledger.by_role()) == {"optimizer", "agent"}
    with pytest.raises(LLMError, match="not configured"):
        LLMGateway(GatewayConfig(roles={"judge": RoleConfig(model=agent.model)})).complete("agent", MSG)


def test_optimizer_defaults_to_target():
    cfg = GatewayConfig.for_models(target="ollama/llama3")
    assert cfg.roles["optimizer"].model == "ollama/llama3" == cfg.roles["agent"].model


def test_role_params_are_sent_and_call_params_override_them():
    sm = ScriptedModel(lambda m: "x")
    cfg = GatewayConfig(
        roles={"agent": RoleConfig(model=sm.model, temperature=0.7, max_tokens=64, extra_params={"stop": ["END"]})},
        retry=FAST,
    )
    gw = LLMGateway(cfg)
    gw.complete("agent", MSG, max_tokens=8)
    assert sm.params[0]["temperature"] == 0.7
    assert sm.params[0]["max_tokens"] == 8
    assert sm.params[0]["stop"] == ["END"]
    assert sm.calls[0] == MSG


def test_concurrency_limit_bounds_parallel_model_calls():
    active = 0
    peak = 0
    lock = threading.Lock()

    def slow(messages):
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.05)
        with lock:
            active -= 1
        return "done"

    sm = ScriptedModel(slow)
    gw = gateway_for(sm, max_concurrency=2)
    threads = [threading.Thread(target=gw.complete, args=("agent", MSG)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(sm.calls) == 8
    assert peak == 2


def test_a_price_for_a_custom_model_registers_without_litellms_cache_price_warning():
    import io
    import logging

    from raso.llm.config import ModelPrice
    from raso.llm.gateway import register_prices

    captured = io.StringIO()
    handler = logging.StreamHandler(captured)
    logger = logging.getLogger("LiteLLM")
    logger.addHandler(handler)
    try:
        register_prices({"openai/raso-test-custom-priced": ModelPrice(input=0.2, output=0.6)})
    finally:
        logger.removeHandler(handler)
    assert "cache_creation_input_token_cost" not in captured.getvalue()


def test_a_plain_web_server_as_api_base_is_not_retried_and_the_error_names_its_url(monkeypatch):
    # Python's own file server answers POST with 501: a real server that does not speak the API
    import http.server
    import threading

    posts: list[str] = []

    class PlainServer(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            return

        def send_error(self, code, message=None, explain=None):
            posts.append(self.command)
            super().send_error(code, message, explain)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), PlainServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
    try:
        gw = LLMGateway(GatewayConfig(roles={"agent": RoleConfig(model="openai/any", api_base=url)}, retry=FAST))
        with pytest.raises(LLMError) as info:
            gw.complete("agent", MSG, max_tokens=1)
    finally:
        server.shutdown()
    assert not isinstance(info.value, LLMUnavailableError) and url in str(info.value)
    assert posts.count("POST") == 1  # one request: a 501 is not worth a retry


@pytest.mark.parametrize("api_base", ["127.0.0.1:8000/v1", "localhost", "ftp://host/v1", "http://"])
def test_an_api_base_without_scheme_and_host_is_refused_when_configured(api_base):
    from raso.engine.config import ModelsConfig

    with pytest.raises(ValueError, match="not a server URL: write it with its scheme and host"):
        RoleConfig(model="openai/any", api_base=api_base)
    with pytest.raises(ValueError, match="not a server URL"):
        ModelsConfig(target="openai/any", optimizer_api_base=api_base)
    assert RoleConfig(model="openai/any", api_base=" http://127.0.0.1:8000/v1 ").api_base == "http://127.0.0.1:8000/v1"


def test_ollama_at_its_default_address_is_not_refused_for_a_missing_key(monkeypatch):
    # litellm lists OLLAMA_API_BASE among an ollama model's "missing keys"; it is an address with a default, not a
    # key: the call goes out (here to a closed loopback port, so it fails as unreachable, never as a missing key)
    import socket

    monkeypatch.delenv("OLLAMA_API_BASE", raising=False)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    gw = LLMGateway(GatewayConfig(roles={"agent": RoleConfig(model="ollama/qwen2.5-coder:7b")},
                                  retry=RetryConfig(max_attempts=1, initial_wait_s=0.0, max_wait_s=0.0, jitter_s=0.0)))
    monkeypatch.setattr(litellm, "completion", _refused_at(port))
    with pytest.raises(LLMError) as info:
        gw.complete("agent", MSG, max_tokens=1)
    assert not isinstance(info.value, LLMAuthError) and "OLLAMA_API_BASE" not in str(info.value)


def _refused_at(port: int):
    real = litellm.completion

    def completion(**kwargs):
        return real(**{**kwargs, "api_base": f"http://127.0.0.1:{port}"})
    return completion
