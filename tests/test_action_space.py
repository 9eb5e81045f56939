"""Harnesses declare action spaces (raso.harness.actions); raso.harness.action_grammar compiles them.

The grammars compiled for every harness and state that had one before are the very text the harnesses wrote
themselves before (tests/fixtures/reply_grammars_before_action_spaces.json was written by that code, for the
states tests/grammar_cases.py lists)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from grammar_cases import cases

from harnesses.webshop import WebShopHarness
from raso.agent import AgentConfig, ExecutionAgent
from raso.harness.action_grammar import reply_from_json, to_gbnf, to_json_schema
from raso.harness.actions import Action, ActionSpace, CodeBlock, FreeText, TaskNeeds, Text
from raso.testing import CountingHarness, count_script, scripted_gateway

BEFORE = Path(__file__).parent / "fixtures" / "reply_grammars_before_action_spaces.json"


def test_every_compiled_grammar_is_the_one_the_harness_wrote_before() -> None:
    before = json.loads(BEFORE.read_text(encoding="utf-8"))
    now = {name: to_gbnf(harness.action_space(info), avoid) for name, harness, info, avoid in cases()}
    assert set(now) == set(before)
    different = [name for name in now if now[name] != before[name]]
    assert not different, different
    assert sum(g is not None for g in now.values()) > 60  # most cases have a grammar: the comparison is not empty


# ---------------------------------------------------------------- the compiler's building blocks
def test_pieces_compile_to_literals_classes_and_bounded_text() -> None:
    space = ActionSpace((
        Action.of("go ", Text("North", caseless=True)),
        Action.of("say ", FreeText(40, excludes='"]'), name="say"),
        Action.exact(""),  # an empty choice is no action
        Action.exact("go north"),
    ), thought=False)
    assert to_gbnf(space) == ('root ::= "Action: " action\n'
                              'action ::= "go " [nN] [oO] [rR] [tT] [hH] | say | "go north"\n'
                              'say ::= "say " [^"\\]\\n]{1,40}\n')
    assert to_gbnf(ActionSpace(())) is None


def test_a_code_block_comes_before_the_action_and_a_thought_has_no_backtick() -> None:
    space = ActionSpace.choices(["RUN", "SUBMIT"], code_block=CodeBlock("python", optional_for=("SUBMIT",)))
    grammar = to_gbnf(space)
    assert grammar.startswith('root ::= thought? (program "Action: " ("RUN" | "SUBMIT") | "Action: SUBMIT")\n')
    assert 'thought ::= "Thought: " [^\\n`]{1,320} "\\n"' in grammar
    assert 'program ::= "```python\\n" line+ "```\\n"' in grammar
    required = to_gbnf(ActionSpace.choices(["RUN"], code_block=CodeBlock("sql")))
    assert required.startswith('root ::= thought? program "Action: " ("RUN")\n') and "```sql" in required


def test_without_keeps_a_way_out_of_the_state() -> None:
    search = Action.of("search[", FreeText(10), "]")
    note = Action.of("think: ", FreeText(10), leaves_state=False)
    clicks = ActionSpace((search, Action.exact("a"), Action.exact("b")))
    assert clicks.without({"a", "b"}).actions == (search,)  # the search is still a way out
    noted = ActionSpace((Action.exact("a"), note))
    assert noted.without({"a"}) == noted  # a note to self is not: the choice stays
    assert ActionSpace.choices(["a", "b"], key=None).without({"a"}).actions == (Action.exact("a"), Action.exact("b"))


# ---------------------------------------------------------------- JSON schema for schema-constrained backends
def _webshop_results() -> tuple[WebShopHarness, dict]:
    harness = WebShopHarness()
    env = harness.make_env(harness.tasks("val")[0])
    env.reset()
    return harness, env.step("search[yoga pants]")[4]


def test_the_json_schema_admits_exactly_the_valid_actions() -> None:
    harness, info = _webshop_results()
    space = harness.action_space(info)
    schema = to_json_schema(space)
    asin = next(a for a in info["available_actions"] if a.startswith("click[b0"))
    for action in ("click[back to search]", asin.replace("click[b0", "click[B0").upper().replace("CLICK", "click")):
        reply = {"thought": "this one", "action": action}
        jsonschema.validate(reply, schema)
        assert harness.action_is_valid(harness.parse_action(reply_from_json(reply, space)), info)
    for bad in ({"action": "search[pants]"}, {"action": "click[Buy Now]"}, {"thought": "a\nb", "action": asin},
                {"action": asin, "extra": 1}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    search = to_json_schema(harness.action_space({"available_actions": ["search[<keywords>]"]}))
    jsonschema.validate({"action": "search[grey pants]"}, search)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"action": "search[<keywords>]"}, search)


def test_the_json_schema_of_a_code_block_reply() -> None:
    space = ActionSpace.choices(["RUN", "SUBMIT"], code_block=CodeBlock("python", optional_for=("SUBMIT",)))
    schema = to_json_schema(space)
    jsonschema.validate({"program": "print(1)", "action": "RUN"}, schema)
    jsonschema.validate({"action": "SUBMIT"}, schema)
    for bad in ({"action": "RUN"}, {"program": "x = '```'", "action": "RUN"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    text = reply_from_json({"thought": "sum it", "program": "print(1)\n", "action": "RUN"}, space)
    assert text == "Thought: sum it\n```python\nprint(1)\n```\nAction: RUN"


# ---------------------------------------------------------------- harnesses
def test_the_toy_and_template_harnesses_declare_what_their_envs_accept() -> None:
    from harnesses._template.harness import TemplateHarness

    harness = CountingHarness()
    gw, model = scripted_gateway(count_script)
    rollout = harness.rollout(harness.tasks("val")[0], [],
                              ExecutionAgent(gw, AgentConfig(mode="none", constrain_replies=True)))
    assert rollout.reward == 1.0 and rollout.metadata["constrained_turns"] == len(model.params)
    assert all('action ::= "1" | "2" | "3" | "4" | "stop"' in p["grammar"] for p in model.params)
    template = to_gbnf(TemplateHarness().action_space({}))
    assert 'action ::= "read" | "answer " [^\\n]{1,200}' in template


def test_task_needs_replace_the_quick_agent_settings_in_one_place() -> None:
    from raso.engine.config import harness_quick_defaults

    assert WebShopHarness.task_needs == TaskNeeds(agent_steps=8, reply_tokens=128)
    assert harness_quick_defaults("webshop") == {"agent.max_steps": 8, "agent.max_tokens": 128}
    assert harness_quick_defaults("toy") == {}  # no needs declared: the generic quick values
    assert harness_quick_defaults("no.such.module:Harness") == {}
