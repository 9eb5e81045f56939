"""Field bounds for small optimizer models (issue 16): the embedded 0.5B looped inside a JSON string until its
token cap cut the reply (skill_init in the init table). With `field_chars`, the schema shown and sent bounds each
named string field, so a model under llama.cpp's JSON grammar has to close it in time. Plumbing tested with the
scripted model (it records the prompt and the parameters of each call)."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from raso.llm import GatewayConfig, LLMGateway
from raso.llm.profiles import EMBEDDED_FIELD_CHARS as LOCAL_FIELD_CHARS
from raso.llm.scripted import ScriptedModel
from raso.llm.structured import bound_strings, schema_of
from raso.optimizer.render import PromptLimits, limits_for
from raso.optimizer.roles import AdaptationOutput, SkillDraft


class Item(BaseModel):
    text: str
    note: str = ""


class Reply(BaseModel):
    body: str
    items: list[Item]
    count: int = 0


def test_bound_strings_reaches_nested_fields_and_keeps_tighter_bounds() -> None:
    schema = bound_strings(schema_of(Reply), {"body": 100, "text": 20, "count": 5})
    assert schema["properties"]["body"]["maxLength"] == 100
    assert schema["$defs"]["Item"]["properties"]["text"]["maxLength"] == 20
    assert "maxLength" not in schema["$defs"]["Item"]["properties"]["note"]  # not named
    assert "maxLength" not in schema["properties"]["count"]  # not a string
    lesson = bound_strings(schema_of(AdaptationOutput), {"lesson": 5000})["properties"]["lesson"]
    assert lesson["maxLength"] == 1000  # the model's own, tighter bound stays
    assert "maxLength" not in schema_of(Reply)["properties"]["body"]  # a copy: the original is untouched


def test_the_gateway_shows_and_sends_the_bounded_schema() -> None:
    model = ScriptedModel(['{"body": "short", "items": []}'], name="bounds-json-object")
    gw = LLMGateway(GatewayConfig.for_models(target="scripted/unused", optimizer=model.model,
                                             optimizer_structured_output="json_object"))
    out = gw.structured("optimizer", [{"role": "user", "content": "go"}], Reply, field_chars={"body": 123})
    assert out.body == "short"
    sent = model.params[0]["response_format"]["schema"]
    assert sent["properties"]["body"]["maxLength"] == 123
    assert '"maxLength": 123' in model.calls[0][-1]["content"]  # the model is told too
    plain = ScriptedModel(['{"body": "short", "items": []}'], name="bounds-none")
    gw = LLMGateway(GatewayConfig.for_models(target="scripted/unused", optimizer=plain.model,
                                             optimizer_structured_output="json_object"))
    gw.structured("optimizer", [{"role": "user", "content": "go"}], Reply)
    assert "maxLength" not in json.dumps(plain.params[0]["response_format"]["schema"])


def test_validation_is_not_tightened_by_the_bounds() -> None:
    # A longer body from a model that ignores the schema (a hosted model in instructions mode) is still accepted.
    long_body = "x" * 500
    model = ScriptedModel([json.dumps({"body": long_body, "items": []})], name="bounds-ignored")
    gw = LLMGateway(GatewayConfig.for_models(target="scripted/unused", optimizer=model.model))
    assert gw.structured("optimizer", [{"role": "user", "content": "go"}], Reply, field_chars={"body": 10}).body == long_body


def test_embedded_limits_bound_every_reply_within_its_token_cap() -> None:
    gw = LLMGateway(GatewayConfig.for_models(target="local/qwen2.5-coder-0.5b"))
    limits = limits_for(gw)
    assert limits.field_chars == LOCAL_FIELD_CHARS
    chars_per_token = 3  # JSON-escaped markdown; English prose runs nearer 4 on Qwen's tokenizer
    draft = sum(LOCAL_FIELD_CHARS[f] for f in SkillDraft.model_fields) + 60  # + the JSON around the fields
    assert draft / chars_per_token <= limits.skill_tokens
    assert (LOCAL_FIELD_CHARS["lesson"] + 20) / chars_per_token <= limits.lesson_tokens
    plan_items = limits.max_items * (LOCAL_FIELD_CHARS["failure_mode"] + LOCAL_FIELD_CHARS["evidence"]
                                     + LOCAL_FIELD_CHARS["query"] + 40)
    assert plan_items / chars_per_token <= limits.plan_tokens
    hosted = limits_for(LLMGateway(GatewayConfig.for_models(target="openai/gpt-4o-mini")))
    assert hosted.field_chars == {} and PromptLimits().field_chars == {}  # hosted models write freely


def test_roles_pass_the_bounds_of_their_limits() -> None:
    from raso.optimizer import roles

    model = ScriptedModel([json.dumps({"name": "n", "description": "d", "body": "b"})], name="bounds-role")
    gw = LLMGateway(GatewayConfig.for_models(target="scripted/unused", optimizer=model.model,
                                             optimizer_structured_output="json_object"))
    limits = PromptLimits(skill_tokens=640, field_chars={"body": 77})
    roles.skill_init(gw, roles.SkillInitInput(task_description="T", harness_description="H", requirements=[]),
                     limits)
    assert model.params[0]["response_format"]["schema"]["properties"]["body"]["maxLength"] == 77
    assert model.params[0]["max_tokens"] == 640


# ---------------------------------------------------------------- the grammar the embedded model gets
def test_bounded_strings_become_flat_repetitions_in_the_local_grammar() -> None:
    pytest.importorskip("llama_cpp", reason="needs the `local` extra (llama-cpp-python)")
    from raso.llm.local import flatten_char_repetitions, schema_grammar

    schema = bound_strings(schema_of(SkillDraft), LOCAL_FIELD_CHARS)
    grammar = schema_grammar(schema)
    assert "(char (char" not in grammar
    assert 'body ::= "\\"" char char{0,1399} "\\"" space' in grammar  # minLength 1, maxLength 1400
    assert 'name ::= "\\"" char{0,60} "\\"" space' in grammar
    assert flatten_char_repetitions("x ::= (char (char (char)?)?)?") == "x ::= char{0,3}"
    assert flatten_char_repetitions("x ::= (char)?") == "x ::= char{0,1}"
    assert flatten_char_repetitions('s ::= "\\"" char* "\\""') == 's ::= "\\"" char* "\\""'  # unbounded: as is


@pytest.mark.embedded
def test_the_embedded_model_takes_the_bounded_skill_draft_grammar() -> None:
    # In a child process: llama.cpp crashed the whole interpreter (SIGSEGV) on the nested form of this grammar.
    import subprocess
    import sys

    code = (
        "import json\n"
        "from raso.llm import DEFAULT_LOCAL_MODEL\n"
        "from raso.llm.local import get_llama, check_grammar, schema_grammar\n"
        "from raso.llm.structured import bound_strings, schema_of\n"
        "from raso.llm.profiles import EMBEDDED_FIELD_CHARS as LOCAL_FIELD_CHARS\n"
        "from raso.optimizer.roles import SkillDraft\n"
        "llm = get_llama(DEFAULT_LOCAL_MODEL)\n"
        "grammar = schema_grammar(bound_strings(schema_of(SkillDraft), {**LOCAL_FIELD_CHARS, 'body': 12}))\n"
        "check_grammar(llm, grammar)\n"
        "from raso.llm import GatewayConfig, LLMGateway\n"
        "gw = LLMGateway(GatewayConfig.for_models(target=DEFAULT_LOCAL_MODEL))\n"
        "draft = gw.structured('optimizer', [{'role': 'user', 'content': 'A skill for adding numbers.'}], SkillDraft,\n"
        "                      field_chars={'name': 8, 'description': 16, 'body': 12}, max_tokens=48, temperature=0.0)\n"
        "print(json.dumps(draft.model_dump()))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    draft = json.loads(proc.stdout.strip().splitlines()[-1])
    assert 1 <= len(draft["body"]) <= 12 and len(draft["name"]) <= 8 and len(draft["description"]) <= 16


def test_the_requirement_schema_asks_for_exactly_m_pairs_but_accepts_more() -> None:
    # The embedded 0.5B repeated one requirement pair until its token cap cut the JSON (a WebShop main job):
    # the schema it is sent (the "closed_lists" schema hint) closes the array after M pairs; a hosted model's extra
    # pairs still validate.
    from raso.optimizer.roles import query_init_schema

    schema = query_init_schema(2, closed=True)
    shown = schema_of(schema)["properties"]["requirements"]
    assert (shown["minItems"], shown["maxItems"]) == (2, 2)
    pair = {"requirement": "Buy the product", "query": "buy now"}
    assert len(schema.model_validate({"requirements": [pair] * 3}).requirements) == 3
    with pytest.raises(ValueError):
        schema.model_validate({"requirements": [pair]})


def test_the_local_grammar_of_the_requirement_schema_stops_at_m_pairs() -> None:
    pytest.importorskip("llama_cpp", reason="needs the `local` extra (llama-cpp-python)")
    from raso.llm.local import schema_grammar
    from raso.optimizer.roles import query_init_schema

    rule = next(line for line in schema_grammar(schema_of(query_init_schema(3, closed=True))).splitlines()
                if line.startswith("requirements ::="))
    assert rule.count("requirements-item") == 3 and "*" not in rule and "?" not in rule


class _SchemaRecordingGateway:
    """Records the output schema each structured call is sent, and replies with an empty gradient list; its
    optimizer is the embedded model (whose profile names every schema hint)."""

    def __init__(self) -> None:
        self.schemas: list[dict] = []

    def profile(self, role):
        from raso.llm import DEFAULT_LOCAL_MODEL
        from raso.llm.profiles import profile_for

        return profile_for(DEFAULT_LOCAL_MODEL)

    def structured(self, role, messages, schema, **kwargs):
        self.schemas.append(schema_of(schema)["properties"]["gradients"])
        return schema.model_validate({"gradients": []})


@pytest.mark.parametrize("rewards", [(0.0, 1.0), (1.0, 1.0)])
def test_the_gradient_schema_asks_for_a_failure_mode_exactly_when_a_rollout_lost_reward(rewards) -> None:
    # The embedded 1.5B answered {"gradients": []} for three failed WebShop rollouts, twice in a row (so no candidate
    # was ever proposed): when a rollout lost reward, the grammar it is sent needs at least one item.
    from raso.harness import Rollout
    from raso.optimizer.render import PromptLimits
    from raso.optimizer.roles import GradientInput, gradient_query
    from raso.skill import Skill

    gateway = _SchemaRecordingGateway()
    rollouts = [Rollout(task_id=f"t{i}", harness="toy", reward=r) for i, r in enumerate(rewards)]
    inp = GradientInput(task_description="T", harness_description="H", rollouts=rollouts,
                        skill=Skill(name="s", description="d", body="b"))
    out = gradient_query(gateway, inp, PromptLimits())
    sent = gateway.schemas[0]
    assert sent["maxItems"] == PromptLimits().max_items
    assert sent.get("minItems") == (1 if min(rewards) < 1.0 else None)
    assert out.gradients == []  # validation still takes an empty list (a hosted model's judgement)


def test_the_local_grammar_of_a_failed_chunk_needs_one_gradient() -> None:
    from raso.llm.local import schema_grammar
    from raso.llm.profiles import ALL_SCHEMA_HINTS
    from raso.optimizer.roles import gradient_schema

    def rule(lost_reward: bool) -> str:
        schema = gradient_schema(2, lost_reward, frozenset(ALL_SCHEMA_HINTS))
        return next(line for line in schema_grammar(schema_of(schema)).splitlines()
                    if line.startswith("gradients ::="))

    # with a lost reward the first item is required; without, the whole list is optional
    assert rule(True).startswith('gradients ::= "[" space gradients-item')
    assert rule(False).startswith('gradients ::= "[" space (gradients-item')
