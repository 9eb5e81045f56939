"""Structured output: validated instances, tolerant parsing, one repair attempt, typed error with raw text."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from raso.llm import GatewayConfig, LLMGateway, RetryConfig, StructuredOutputError
from raso.llm import gateway as gateway_module
from raso.llm.scripted import ScriptedModel
from raso.llm.structured import parse_structured

FAST = RetryConfig(max_attempts=2, initial_wait_s=0.0, max_wait_s=0.0, jitter_s=0.0)
MSG = [{"role": "system", "content": "You plan."}, {"role": "user", "content": "Give a requirement."}]


class Requirement(BaseModel):
    requirement: str
    query: str
    priority: int = Field(ge=1, le=5)


def gateway_for(sm: ScriptedModel) -> LLMGateway:
    return LLMGateway(GatewayConfig.for_models(target=sm.model, retry=FAST))


def test_valid_json_gives_a_validated_instance_and_the_prompt_carries_the_schema():
    sm = ScriptedModel(['{"requirement": "sum a column", "query": "excel sum", "priority": 2}'])
    obj = gateway_for(sm).structured("optimizer", MSG, Requirement, stage="rasi.query_init")
    assert obj == Requirement(requirement="sum a column", query="excel sum", priority=2)
    sent = sm.calls[0]
    assert sent[0] == MSG[0]
    assert '"priority"' in sent[-1]["content"] and sent[-1]["content"].startswith("Give a requirement.")


@pytest.mark.parametrize(
    "reply",
    [
        'Sure! Here it is:\n```json\n{"requirement": "r", "query": "q", "priority": 1}\n```\nHope that helps.',
        'The answer is {"requirement": "r", "query": "q", "priority": 1} as requested.',
        '```\n{"requirement": "r", "query": "q", "priority": 1}\n```',
    ],
)
def test_json_is_extracted_from_fences_and_prose(reply):
    assert parse_structured(reply, Requirement).query == "q"


def test_junk_twice_raises_structured_output_error_with_raw_text():
    sm = ScriptedModel(["I cannot do JSON today.", '{"requirement": "r", "priority": 9}'])
    gw = gateway_for(sm)
    with pytest.raises(StructuredOutputError) as info:
        gw.structured("optimizer", MSG, Requirement, stage="adapt")
    err = info.value
    assert err.raw_text == '{"requirement": "r", "priority": 9}'
    assert "query" in err.validation_error and "priority" in err.validation_error
    assert len(sm.calls) == 2
    assert gw.ledger.by_stage()["adapt"]["calls"] == 2


def test_repair_succeeds_and_shows_the_model_the_validation_error():
    sm = ScriptedModel(['{"requirement": "r", "query": "q", "priority": 7}', '{"requirement": "r", "query": "q", "priority": 5}'])
    obj = gateway_for(sm).structured("optimizer", MSG, Requirement)
    assert obj.priority == 5
    repair = sm.calls[1]
    assert repair[-2] == {"role": "assistant", "content": '{"requirement": "r", "query": "q", "priority": 7}'}
    assert "less than or equal to 5" in repair[-1]["content"]  # pydantic's message for the bad field
    assert "priority" in repair[-1]["content"]


def test_schema_mode_sends_response_format():
    sm = ScriptedModel(['{"requirement": "r", "query": "q", "priority": 3}'])
    # a model whose profile takes a JSON schema
    gw = LLMGateway(GatewayConfig.for_models(target=sm.model, retry=FAST, profile={"structured_output": "json_schema"}))
    gw.structured("optimizer", MSG, Requirement)
    rf = sm.params[0]["response_format"]
    assert rf["type"] == "json_schema"
    assert rf["json_schema"]["schema"]["required"] == ["requirement", "query", "priority"]


def test_local_model_uses_llama_cpp_json_schema_mode():
    rf = gateway_module.response_format_for("local/qwen2.5-coder-0.5b", Requirement)
    assert rf["type"] == "json_object" and rf["schema"]["properties"]["priority"]["maximum"] == 5
    assert gateway_module.supports_schema_mode("local/qwen2.5-coder-0.5b")
    assert not gateway_module.supports_schema_mode("scripted/x")


def test_a_reply_cut_at_the_token_limit_is_named_as_the_cause():
    long_json = '{"requirement": "' + "sum the column " * 20 + '", "query": "q", "priority": 1}'
    sm = ScriptedModel([long_json, long_json])
    with pytest.raises(StructuredOutputError) as info:
        gateway_for(sm).structured("optimizer", MSG, Requirement, stage="adapt", max_tokens=10)
    assert "cut at its token limit" in str(info.value)
    assert len(info.value.raw_text.split()) == 10

    sm = ScriptedModel(["I cannot do JSON today.", "Still no JSON."])
    with pytest.raises(StructuredOutputError) as info:
        gateway_for(sm).structured("optimizer", MSG, Requirement, stage="adapt", max_tokens=10)
    assert "token limit" not in str(info.value)


def test_raw_newlines_and_tabs_inside_json_strings_are_accepted():
    # llama.cpp's JSON grammar lets a model put control characters into strings; the object is still usable.
    reply = '{"requirement": "line one\nline two\twith a tab", "query": "q", "priority": 1}'
    assert parse_structured(reply, Requirement).requirement == "line one\nline two\twith a tab"
    fenced = f"Here:\n```json\n{reply}\n```"
    assert parse_structured(fenced, Requirement).priority == 1
    assert parse_structured(f"Sure. {reply} Done.", Requirement).query == "q"
