"""`raso models` lists the embedded model and roles; `raso models check` prints reply/tokens/cost."""

from __future__ import annotations

from raso.cli import main as raso_main
from raso.llm.scripted import ScriptedModel


def test_models_lists_embedded_model_and_roles(capsys):
    status = raso_main(["models", "--model", "ollama/llama3", "--optimizer-model", "openai/gpt-4o-mini"])
    out = capsys.readouterr().out
    assert status == 0
    assert "local/qwen2.5-coder-0.5b" in out
    assert "agent      ollama/llama3" in out and "optimizer  openai/gpt-4o-mini" in out


def test_models_check_prints_reply_tokens_and_cost(capsys):
    sm = ScriptedModel(["ready now"])
    status = raso_main(["models", "check", sm.model, "--prompt", "are you there"])
    out = capsys.readouterr().out
    assert status == 0
    assert "'ready now'" in out and "3 prompt + 2 completion" in out and "$0.000000" in out
    assert sm.calls == [[{"role": "user", "content": "are you there"}]]


def test_models_check_of_an_unpriced_model_says_its_cost_is_unknown(capsys, monkeypatch):
    from loopback_model_server import loopback_model_server

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with loopback_model_server({"ready-stand-in": lambda messages: "ready"}) as server:
        status = raso_main(["models", "check", "openai/ready-stand-in", "--api-base", server.api_base])
    out = capsys.readouterr().out
    assert status == 0 and "reply:   'ready'" in out
    assert "cost:    unknown (1 unpriced call(s); give a price with --price" in out and "$0.000000" not in out
