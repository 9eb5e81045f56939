"""Model profiles (raso.llm.profiles) and the small-model sanitizers they switch on (raso.optimizer.sanitizers)."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import get_args

import pytest
from optimizer_helpers import SpyRetriever, gateway, initialize, router, section
from pydantic import ValidationError

from raso.agent import AgentConfig, ExecutionAgent
from raso.llm import DEFAULT_LOCAL_MODEL, GatewayConfig, LLMGateway, RoleConfig, StructuredOutputError
from raso.llm.profiles import (
    ALL_SANITIZERS,
    EMBEDDED_QUICK_SCHEDULE,
    QUICK_SCHEDULE_KEYS,
    ModelProfile,
    ProfileError,
    SanitizerName,
    profile_for,
)
from raso.optimizer.describe import DescribeLimits
from raso.optimizer.describe import limits_for as describe_limits_for
from raso.optimizer.render import PromptLimits, limits_for
from raso.optimizer.roles import SkillDraft
from raso.optimizer.sanitizers import (
    SANITIZERS,
    Context,
    lesson_rejection,
    sanitize,
    sanitize_draft,
    skill_body_problems,
)
from raso.optimizer.skills import draft_to_skill

ROOT = Path(__file__).resolve().parents[1]
HOSTED = "openai/gpt-4o-mini"
LOOPING = "The agent must use openpyxl to transform the input workbooks as the instruction asks."
SKILL_BODY_LOOP = f"{LOOPING} {LOOPING}\n{LOOPING}\nCall save() at the end."


# ---------------------------------------------------------------- resolution
def test_embedded_models_get_the_embedded_profile() -> None:
    for model in (DEFAULT_LOCAL_MODEL, "local/qwen2.5-coder-1.5b"):
        profile = profile_for(model)
        assert (profile.name, profile.served_by, profile.model) == ("embedded", "embedded", model)
        assert profile.grammar and profile.structured_output == "json_object" and profile.in_process
        assert profile.sanitizers == ALL_SANITIZERS
        assert profile.quick_schedule == EMBEDDED_QUICK_SCHEDULE and set(profile.quick_schedule) <= set(QUICK_SCHEDULE_KEYS)
        assert profile.context_tokens == 8192 and profile.prompt_limits and profile.caveat


def test_hosted_models_get_the_default_with_litellms_schema_support() -> None:
    hosted = profile_for(HOSTED)
    assert (hosted.name, hosted.served_by) == ("hosted", "litellm") and not hosted.in_process
    assert not hosted.grammar and hosted.sanitizers == () and hosted.quick_schedule == {}
    assert hosted.prompt_limits == {} and hosted.describe_limits == {} and hosted.caveat == ""
    assert hosted.structured_output == "json_schema" and hosted.context_tokens  # litellm knows this model
    unknown = profile_for("openai/raso-loopback-alias")  # a self-hosted server litellm knows nothing about
    assert unknown.structured_output == "instructions" and unknown.context_tokens is None
    scripted = profile_for("scripted/x")
    assert scripted.served_by == "scripted" and scripted.in_process and not scripted.takes_json_schema


def test_overrides_replace_fields_and_are_checked() -> None:
    assert profile_for(DEFAULT_LOCAL_MODEL, {"sanitizers": []}).sanitizers == ()
    assert profile_for(DEFAULT_LOCAL_MODEL).sanitizers == ALL_SANITIZERS  # the base is not changed
    hosted = profile_for(HOSTED, {"sanitizers": ["repeated_sentences"], "grammar": True,
                                  "quick_schedule": {"schedule.epochs": 1}})
    assert hosted.sanitizers == ("repeated_sentences",) and hosted.grammar and hosted.quick_schedule == {"schedule.epochs": 1}
    for bad, message in (({"sanitisers": []}, "unknown model profile field 'sanitisers'"),
                         ({"served_by": "embedded"}, "cannot be overridden"),
                         ({"sanitizers": ["no_such_repair"]}, "sanitizers"),
                         ({"quick_schedule": {"epochs": 1}}, "unknown key(s) epochs"),
                         ({"context_tokens": 10}, "context_tokens")):
        with pytest.raises(ProfileError, match=message.replace("(", r"\(").replace(")", r"\)")):
            profile_for(HOSTED, bad)
    with pytest.raises(ValidationError, match="unknown model profile field"):
        RoleConfig(model=HOSTED, profile={"sanitisers": []})


def test_the_profile_serialises_for_the_resolved_config_and_the_report() -> None:
    profile = profile_for(DEFAULT_LOCAL_MODEL)
    data = json.loads(json.dumps(profile.to_dict()))
    assert ModelProfile.model_validate(data) == profile
    assert data["sanitizers"] == list(ALL_SANITIZERS) and data["quick_schedule"]["agent.max_steps"] == 3
    assert "embedded (embedded)" in profile.summary() and "sanitizers repeated_sentences" in profile.summary()


def test_the_gateway_resolves_each_roles_profile_with_its_overrides() -> None:
    gw = LLMGateway(GatewayConfig.for_models(target=DEFAULT_LOCAL_MODEL, profile={"sanitizers": []}))
    assert gw.profile("agent").sanitizers == () and gw.profile("optimizer").sanitizers == ()  # one model, one profile
    assert gw.profile("adaptation") is gw.profile("optimizer")  # resolved once, through the role fallback
    gw = LLMGateway(GatewayConfig.for_models(target=DEFAULT_LOCAL_MODEL, optimizer=HOSTED,
                                             optimizer_profile={"sanitizers": ["echoed_lesson"]}))
    assert gw.profile("agent").sanitizers == ALL_SANITIZERS and gw.profile("optimizer").sanitizers == ("echoed_lesson",)


# ---------------------------------------------------------------- behaviour read from the profile
def test_prompt_and_describe_limits_come_from_the_optimizers_profile() -> None:
    embedded = LLMGateway(GatewayConfig.for_models(target=DEFAULT_LOCAL_MODEL))
    assert limits_for(embedded).skill_tokens == 640 and describe_limits_for(embedded).max_files == 12
    hosted = LLMGateway(GatewayConfig.for_models(target=DEFAULT_LOCAL_MODEL, optimizer=HOSTED))
    assert limits_for(hosted) == PromptLimits() and describe_limits_for(hosted) == DescribeLimits()
    tuned = LLMGateway(GatewayConfig.for_models(target=HOSTED, profile={"prompt_limits": {"section_chars": 300}}))
    assert limits_for(tuned) == PromptLimits(section_chars=300)
    typo = LLMGateway(GatewayConfig.for_models(target=HOSTED, profile={"prompt_limits": {"section_char": 300}}))
    with pytest.raises(ValueError, match="PromptLimits has no field.*section_char"):
        limits_for(typo)


def test_the_agent_constrains_replies_where_the_profile_takes_a_grammar() -> None:
    from raso.llm.scripted import ScriptedModel

    model = ScriptedModel(["x"], name="agent")
    plain = LLMGateway(GatewayConfig.for_models(target=model.model))
    grammar = LLMGateway(GatewayConfig.for_models(target=model.model, profile={"grammar": True}))
    assert not ExecutionAgent(plain, AgentConfig(mode="none"))._grammar_supported()
    assert ExecutionAgent(grammar, AgentConfig(mode="none"))._grammar_supported()
    assert not ExecutionAgent(grammar, AgentConfig(mode="none", constrain_replies=False))._grammar_supported()


def test_the_quick_schedule_reaches_the_config_only_for_a_profile_that_has_one() -> None:
    from raso.engine.config import QUICK_LOCAL_DEFAULTS, build_config

    embedded = build_config(None, {"harness": "spreadsheet"})
    assert (embedded.schedule.epochs == EMBEDDED_QUICK_SCHEDULE["schedule.epochs"]
            and embedded.retrieval.k == EMBEDDED_QUICK_SCHEDULE["retrieval.k"])
    assert embedded.budget.rollouts == EMBEDDED_QUICK_SCHEDULE["budget.rollouts"]
    assert set(QUICK_LOCAL_DEFAULTS) <= set(embedded.quick_defaults_applied)
    hosted = build_config(None, {"harness": "spreadsheet", "models.target": HOSTED})
    assert hosted.quick_defaults_applied == [] and hosted.schedule.epochs == 2
    # profile overrides in the config reach the quick schedule
    custom = build_config(None, {"harness": "spreadsheet", "models.target": HOSTED,
                                 "models.profile": {"quick_schedule": {"schedule.epochs": 1}}})
    assert custom.schedule.epochs == 1 and custom.quick_defaults_applied == ["schedule.epochs"]


# ---------------------------------------------------------------- sanitizers, each on and off
def test_every_profile_sanitizer_name_has_an_implementation() -> None:
    assert set(SANITIZERS) == set(get_args(SanitizerName)) == set(ALL_SANITIZERS)


def test_repeated_sentences_are_dropped_only_when_enabled() -> None:
    sentence = "Open the workbook with openpyxl before reading any cell of the sheet."
    body = f"{sentence} {sentence}\n{sentence}\n- Save."
    on = sanitize(body, "skill_body", ["repeated_sentences"])
    assert on.text.count(sentence) == 1 and on.notes == ("sanitizer repeated_sentences: removed 2 repeated "
                                                         "sentence(s) from the skill body",)
    off = sanitize(body, "skill_body", [])
    assert off.text == body and off.notes == () and off.rejected is None


@pytest.mark.parametrize("name, body", [("copied_clip_marker", "[... 868 more characters cut]"),
                                        ("short_body", "Be careful.")])
def test_a_body_without_instructions_is_rejected_only_when_enabled(name: str, body: str) -> None:
    assert f"(sanitizer {name})" in sanitize(body, "skill_body", [name]).rejected
    assert sanitize(body, "skill_body", [n for n in ALL_SANITIZERS if n != name]).rejected is None
    with pytest.raises(StructuredOutputError, match="without instructions"):
        sanitize_draft(SkillDraft(name="s", description="d", body=body), [name])
    kept, notes = sanitize_draft(SkillDraft(name="s", description="d", body=body), [])
    assert kept.body == body and notes == []


#: The embedded model's s0 on WebShop (issue 37): a list that runs into empty items and a reply cut mid-item.
RUNAWAY_BODY = ("## Steps\n1. Search for the product with its key words.\n2. Open the result that matches the "
                "options.\n9. Click the 'Buy Now' button to purchase the product. 10. 11. 12. ... 22. Click the '")


def test_the_embedded_profile_drops_a_runaway_enumeration_and_its_cut_off_end() -> None:
    result = sanitize(RUNAWAY_BODY, "skill_body", profile_for(DEFAULT_LOCAL_MODEL).sanitizers)
    assert result.text == ("## Steps\n1. Search for the product with its key words.\n2. Open the result that "
                           "matches the options.\n9. Click the 'Buy Now' button to purchase the product.")
    assert result.notes == ("sanitizer runaway_enumeration: removed 3 empty list item(s) from the skill body",
                            "sanitizer cut_off_ending: removed the unfinished ending \"22. Click the '\" from the "
                            "skill body")
    assert skill_body_problems(RUNAWAY_BODY) == ["it runs into 3 empty list item(s)",
                                                 "it ends mid-sentence (\"22. Click the '\")"]
    assert skill_body_problems(result.text) == []
    hosted = sanitize(RUNAWAY_BODY, "skill_body", profile_for(HOSTED).sanitizers)  # a hosted profile: none run
    assert hosted.text == RUNAWAY_BODY and hosted.notes == ()


def test_empty_items_on_their_own_lines_and_a_dangling_word_are_dropped() -> None:
    body = "1. Search.\n2. Click the 'Buy Now' button.\n3.\n4.\n5.\n6. Then click the"
    result = sanitize(body, "skill_body", ["runaway_enumeration", "cut_off_ending"])
    assert result.text == "1. Search.\n2. Click the 'Buy Now' button."
    assert len(result.notes) == 2 and "removed 3 empty list item(s)" in result.notes[0]


@pytest.mark.parametrize("body", [
    "- Use `search[...]` with the key words.\n- Don't click ads.\n- Check the price is under the budget",
    "1. Search.\n2. Choose size 10.\n3. Buy it.",
    "Pick option 3. Then buy.",
    "Run this:\n```python\nitems = [1. , 2. , 3.]\nprint('open\n```",
    "Prices end in .99 and the user's budget is firm.",
])
def test_finished_skills_and_code_are_left_alone(body: str) -> None:
    result = sanitize(body, "skill_body", ["runaway_enumeration", "cut_off_ending"])
    assert result.text == body and result.notes == ()
    assert skill_body_problems(body) == []


def test_an_echoed_lesson_is_dropped_only_when_enabled() -> None:
    context = Context(requirement="Save the workbook after writing.", headings=["pdf-to-html › 5. Verify visually"])
    for echo in ("AdaptationOutput", "save the workbook after writing", "Verify visually"):
        assert "(sanitizer echoed_lesson)" in lesson_rejection(echo, ["echoed_lesson"], context)
        assert lesson_rejection(echo, [], context) is None
    assert lesson_rejection("Call save() once the answer cell is written.", ["echoed_lesson"], context) is None


def test_every_model_still_rejects_an_empty_body_and_an_empty_lesson() -> None:
    with pytest.raises(StructuredOutputError, match="empty body"):
        draft_to_skill(SkillDraft.model_construct(name="s", description="d", body="  "),
                       default_name="n", default_description="d")
    # no sanitizer enabled: a lesson without words is still dropped
    init = initialize(gateway(router({"adapt": {"lesson": "..."}}))[0], SpyRetriever([section(1)]), k=3,
                      num_requirements=2)
    assert init.lessons == [] and all("it has no words" in e for e in init.errors)


def _init_with(profile: dict | None):
    gw, _ = gateway(router({"skill_init": {"name": "s", "description": "d", "body": SKILL_BODY_LOOP},
                            "adapt": {"lesson": "AdaptationOutput"}}), profile=profile)
    return initialize(gw, SpyRetriever([section(1)]), k=3, num_requirements=2)


def test_a_hosted_profile_keeps_what_the_embedded_one_repairs() -> None:
    sentence = LOOPING
    hosted = _init_with(None)  # a scripted model stands in for a hosted one: no sanitizers
    assert hosted.skill.body.count(sentence) == 3 and [lesson.text for lesson in hosted.lessons] == ["AdaptationOutput"] * 2
    assert not any("sanitizer" in e for e in hosted.errors)
    small = _init_with({"sanitizers": list(profile_for(DEFAULT_LOCAL_MODEL).sanitizers)})
    assert small.skill.body.count(sentence) == 1 and small.lessons == []
    assert "sanitizer repeated_sentences: removed 2 repeated sentence(s) from the skill body" in small.errors
    assert sum("(sanitizer echoed_lesson)" in e for e in small.errors) == 2


# ---------------------------------------------------------------- no behaviour on a model's name
_ALLOWED_FILES = {"raso/llm/profiles.py",  # the registry
                  "raso/llm/local.py"}  # the embedded backend, parsing its own model names
_PROVIDER_NAMES = {"PROVIDER", "EMBEDDED_PROVIDER", "LOCAL_PROVIDER_PREFIX"}


def _name_checks(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []

    def is_local(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value == "local" or node.value.startswith("local/")
        if isinstance(node, ast.JoinedStr):
            return any(is_local(v) for v in node.values)
        if isinstance(node, ast.FormattedValue):
            return is_local(node.value)
        return (isinstance(node, ast.Name) and node.id in _PROVIDER_NAMES) or (
            isinstance(node, ast.Attribute) and node.attr in _PROVIDER_NAMES)

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(is_local(n) for n in (node.left, *node.comparators)):
            found.append(f"{path}:{node.lineno}: comparison with the embedded provider's name")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("startswith", "endswith", "removeprefix") and any(is_local(a) for a in node.args)):
            found.append(f"{path}:{node.lineno}: {node.func.attr} test on the embedded provider's name")
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and is_local(node.value):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if names != ["DEFAULT_LOCAL_MODEL"] or path.as_posix() != "raso/llm/config.py":
                found.append(f"{path}:{node.lineno}: a `local/` model name outside the registry")
    return found


def test_no_behaviour_switches_on_the_local_model_name_outside_the_profile_registry(monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(ROOT)
    files = sorted(p for top in ("raso", "harnesses", "experiments") for p in Path(top).rglob("*.py"))
    assert len(files) > 50
    problems = [hit for p in files if p.as_posix() not in _ALLOWED_FILES for hit in _name_checks(p)]
    assert problems == []
    # the check sees the forms it forbids
    probe = tmp_path / "probe.py"
    probe.write_text('if model.startswith("local/"):\n    pass\nif provider_of(m) == local.PROVIDER:\n    pass\n'
                     'X = "local/qwen"\n', encoding="utf-8")
    assert len(_name_checks(probe)) == 3


def test_the_embedded_backend_reads_the_schema_in_either_wire_format() -> None:
    from raso.llm.local import _schema_of_response_format

    schema = {"type": "object", "properties": {"lesson": {"type": "string"}}}
    assert _schema_of_response_format({"type": "json_object", "schema": schema}) == schema
    assert _schema_of_response_format({"type": "json_schema", "json_schema": {"name": "X", "schema": schema}}) == schema
    assert _schema_of_response_format({"type": "json_object"}) is None and _schema_of_response_format(None) is None


def test_the_report_names_the_profiles_and_lists_sanitizer_repairs(tmp_path: Path) -> None:
    from test_engine_support import FunctionProposer, ToyHarness, toy_agent_reply, toy_initializer, toy_propose

    from raso.api import optimize
    from raso.engine import OptimizeConfig, RunDir
    from raso.llm.scripted import ScriptedModel

    def repaired_propose(ctx, skill, rollouts):
        proposal = toy_propose(ctx, skill, rollouts)
        return proposal.model_copy(update={"errors": [
            "sanitizer repeated_sentences: removed 2 repeated sentence(s) from the skill body"]})

    agent = ScriptedModel(toy_agent_reply, name="agent")
    optimizer = ScriptedModel(["LEVEL=1", "LEVEL=2", "LEVEL=2\nBe brief.", "LEVEL=1\nShorter."], name="optimizer")
    config = OptimizeConfig(harness="toy", **{"models.target": agent.model,
                                              "models.optimizer": optimizer.model, "schedule.epochs": 1,
                                              "schedule.minibatch": 2, "schedule.workers": 2,
                                              "schedule.seed": 3, "schedule.max_iterations": 1,
                                              "schedule.test": False}, init="rfsi",
                            update="rfsu",
                            run_dir=tmp_path / "run")
    optimize(ToyHarness(), config, initializer=toy_initializer, proposer=FunctionProposer(repaired_propose))
    report = RunDir(config.run_dir).report.read_text()
    assert "- target model profile: scripted (scripted); context unknown tokens; grammar no" in report
    assert "- optimizer model profile: scripted (scripted)" in report
    assert ("iter001: small-model repair (the optimizer model profile's sanitizers): sanitizer repeated_sentences: "
            "removed 2 repeated sentence(s)") in report
