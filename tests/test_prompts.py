"""raso.prompts: one loader and one `{{slot}}` syntax for every prompt; a harness's `prompts/` folder overrides."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from raso.agent import AgentConfig, ExecutionAgent
from raso.llm import GatewayConfig, LLMGateway
from raso.llm.scripted import ScriptedModel
from raso.optimizer import roles
from raso.optimizer.context import RunContext
from raso.optimizer.options import InitOptions
from raso.optimizer.rasi import RFSI
from raso.optimizer.render import PromptLimits
from raso.prompts import (
    DEFAULT_PROMPT_DIRS,
    DEFAULT_PROMPTS,
    PromptLibrary,
    PromptNotFoundError,
    PromptSlotError,
    render,
)
from raso.skill import Skill
from raso.testing import CountingHarness, count_script

UNTRUSTED = "{{task_description}} $task_description ${harness_description} {x} }} {{ $$ \\1"

QUERY_INIT_REPLY = json.dumps({"requirements": [{"requirement": "Count one number per action.", "query": "count"}]})
SKILL_REPLY = json.dumps({"name": "counting", "description": "Count.", "body": "1. Say the next number."})


def harness_with_prompts(tmp_path: Path, files: dict[str, str]) -> type[CountingHarness]:
    """The toy harness with its resources copied to `tmp_path` and `files` written into its `prompts/` folder."""
    resources = tmp_path / "harness"
    shutil.copytree(CountingHarness.resource_dir, resources)
    (resources / "prompts").mkdir()
    for name, text in files.items():
        (resources / "prompts" / name).write_text(text, encoding="utf-8")

    class OverridingHarness(CountingHarness):
        resource_dir = resources

    return OverridingHarness


def scripted(script) -> tuple[ScriptedModel, LLMGateway]:
    model = ScriptedModel(script, name="prompts")
    return model, LLMGateway(GatewayConfig.for_models(target=model.model))


# ------------------------------------------------------------------------------------------ the defaults
def test_default_prompt_file_names_are_unique_across_folders():
    seen: dict[str, Path] = {}
    for folder in DEFAULT_PROMPT_DIRS:
        files = sorted(folder.glob("*.md"))
        assert files, f"{folder} holds no templates"
        for path in files:
            assert path.name not in seen, f"{path.name} is in both {seen[path.name].parent} and {folder}"
            seen[path.name] = path
    assert {"agent_system.md", "optimizer_query_init.md", "dreamer_capabilities.md",
            "structured_instructions.md"} <= set(seen)


def test_no_default_template_uses_another_placeholder_syntax():
    for name in sorted(DEFAULT_PROMPTS.names()):
        text = DEFAULT_PROMPTS.template(name)
        assert not re.search(r"\$\{?[A-Za-z_]", text), f"{name} still has a $placeholder"
        assert not re.search(r"(?<!\{)\{[A-Za-z_]+\}(?!\})", text), f"{name} has a single-brace placeholder"


def test_unknown_template_names_every_folder_searched():
    with pytest.raises(PromptNotFoundError) as info:
        DEFAULT_PROMPTS.render("agent_sytem.md")
    message = str(info.value)
    assert "agent_sytem.md" in message
    for folder in DEFAULT_PROMPT_DIRS:
        assert str(folder) in message


def test_missing_slot_is_a_clear_error():
    with pytest.raises(PromptSlotError, match="needs values for: max_items"):
        render("optimizer_merge.md", items="x")


# ------------------------------------------------------------------------------------------ untrusted values
def test_values_are_inserted_verbatim_and_never_rescanned():
    text = render("optimizer_merge.md", items=UNTRUSTED, max_items=3)
    assert UNTRUSTED in text
    assert "Keep at most 3 items" in text


def test_optimizer_role_inserts_untrusted_descriptions_verbatim():
    messages = roles.query_init_messages(roles.QueryInitInput(
        task_description=UNTRUSTED, harness_description="H $num_requirements {{num_requirements}}",
        num_requirements=2), PromptLimits())
    user = messages[1]["content"]
    assert f"<task_description>\n{UNTRUSTED}\n</task_description>" in user
    assert "H $num_requirements {{num_requirements}}" in user
    assert "List exactly 2 requirements" in user


def test_agent_system_prompt_inserts_an_untrusted_skill_verbatim():
    agent = ExecutionAgent(None, AgentConfig())
    skill = Skill(name="odd", description="d", body=f"# Steps\n{UNTRUSTED}")
    system = agent.system_prompt(CountingHarness(), [skill], [], max_steps=5)
    assert UNTRUSTED in system
    assert CountingHarness().task_description in system


# ------------------------------------------------------------------------------------------ harness overrides
def test_harness_without_a_prompts_folder_gets_the_defaults():
    library = PromptLibrary.for_harness(CountingHarness())
    assert library.folders == DEFAULT_PROMPT_DIRS


def test_harness_override_replaces_exactly_that_agent_prompt(tmp_path):
    override = "COUNTING AGENT. Goal: {{task_description}}\nAt most {{max_steps}} actions.\n{{action_instructions}}"
    harness_cls = harness_with_prompts(tmp_path, {"agent_system.md": override})
    harness = harness_cls(n_tasks=1)
    library = PromptLibrary.for_harness(harness)
    assert library.path("agent_system.md") == Path(harness.resource_dir) / "prompts" / "agent_system.md"
    assert library.path("agent_reminder.md") == DEFAULT_PROMPTS.path("agent_reminder.md")

    model, gateway = scripted(count_script)
    rollout = ExecutionAgent(gateway, AgentConfig(mode="none"), prompts=library).run(harness, harness.tasks("test")[0])
    assert rollout.reward == 1.0
    system = model.calls[0][0]["content"]
    assert system.startswith(f"COUNTING AGENT. Goal: {harness.task_description}\nAt most 6 actions.")
    assert "## The environment" not in system  # the default system prompt is gone entirely
    reminder = render("agent_reminder.md").strip()
    assert model.calls[0][-1]["content"].endswith(reminder)  # the prompts it does not override stay the defaults

    _, default_gateway = scripted(count_script)
    default_agent = ExecutionAgent(default_gateway, AgentConfig(mode="none"))
    assert default_agent.system_prompt(harness, [], [], 6).startswith("You are an agent that solves one task")


def test_harness_override_replaces_exactly_that_optimizer_role_prompt(tmp_path):
    override = "PLAN FOR COUNTING.\n<t>{{task_description}}</t>\nGive {{num_requirements}} requirements."
    harness = harness_with_prompts(tmp_path, {"optimizer_query_init.md": override})()
    library = PromptLibrary.for_harness(harness)
    model, gateway = scripted([QUERY_INIT_REPLY, SKILL_REPLY])
    result = RFSI(InitOptions(method="rfsi", num_requirements=1)).init(RunContext(
        gateway, task_description="Count to 3.", harness_description="Say numbers.", prompts=library))
    assert result.skill.body.strip() == "1. Say the next number."
    query_init_call, skill_init_call = model.calls
    assert query_init_call[0]["content"] == render("optimizer_system.md").strip()
    assert query_init_call[1]["content"].startswith("PLAN FOR COUNTING.\n<t>Count to 3.</t>\nGive 1 requirements.")

    expected = roles.skill_init_messages(roles.SkillInitInput(
        task_description="Count to 3.", harness_description="Say numbers.",
        requirements=result.requirements), PromptLimits())
    assert skill_init_call[1]["content"].startswith(expected[1]["content"])  # skill-init kept its default


def test_harness_override_of_a_gateway_prompt_reaches_structured_calls(tmp_path):
    override = "ANSWER AS JSON FOR THIS SCHEMA:\n{{schema}}"
    harness = harness_with_prompts(tmp_path, {"structured_instructions.md": override})()
    library = PromptLibrary.for_harness(harness)
    model, gateway = scripted([QUERY_INIT_REPLY])
    roles.query_init(gateway, roles.QueryInitInput(task_description="T", harness_description="H",
                                                   num_requirements=1), PromptLimits(), prompts=library)
    user = model.calls[0][1]["content"]
    assert "\n\nANSWER AS JSON FOR THIS SCHEMA:\n{" in user
    assert "Reply with a single JSON object" not in user


def test_misspelt_override_file_is_rejected(tmp_path):
    harness = harness_with_prompts(tmp_path, {"agent_sytem.md": "hello {{task_description}}"})
    with pytest.raises(PromptNotFoundError, match="agent_sytem.md.* overrides no prompt"):
        PromptLibrary.for_harness(harness)


def test_override_with_an_unknown_slot_is_rejected(tmp_path):
    harness = harness_with_prompts(tmp_path, {"agent_system.md": "Goal: {{task_descripton}}"})
    with pytest.raises(PromptSlotError, match="task_descripton"):
        PromptLibrary.for_harness(harness)
