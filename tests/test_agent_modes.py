"""Skill incorporation modes of the execution agent: progressive disclosure and LLM selection."""

from __future__ import annotations

from typing import Any

from raso.agent import AgentConfig, ExecutionAgent
from raso.harness import Task
from raso.skill import Skill
from raso.testing import CountingHarness, count_script, scripted_gateway

SKILLS = [
    Skill(name="letters", description="Spelling words letter by letter.", body="BODY-LETTERS: spell slowly."),
    Skill(name="counting-tips", description="Counting up from one.", body="BODY-COUNTING: add one each action."),
    Skill(name="colors", description="Naming colors.", body="BODY-COLORS: red green blue."),
]
BODIES = ["BODY-LETTERS", "BODY-COUNTING", "BODY-COLORS"]


def task(target: int = 2) -> Task:
    return Task(id="t", instruction=f"Count from 1 to {target}.", metadata={"target": target})


def text_of(messages: list[dict[str, Any]]) -> str:
    return "\n".join(m["content"] for m in messages)


def load_then_count(load: str):
    def script(messages: list[dict[str, Any]]) -> str:
        if len(messages) == 2:  # first turn: only system + task
            return f"Thought: a skill may help.\nAction: LOAD_SKILL[{load}]"
        return count_script(messages)
    return script


def test_progressive_shows_catalog_then_loads_body_into_next_prompt() -> None:
    gw, model = scripted_gateway(load_then_count("counting-tips"))
    rollout = CountingHarness().rollout(task(2), SKILLS, ExecutionAgent(gw, AgentConfig(mode="progressive")))

    first_system = model.calls[0][0]["content"]
    for skill in SKILLS:  # the catalog lists names and descriptions ...
        assert skill.name in first_system and skill.description in first_system
    assert not any(body in text_of(model.calls[0]) for body in BODIES)  # ... but no body
    assert "LOAD_SKILL[name]" in first_system

    second = text_of(model.calls[1])
    assert "BODY-COUNTING: add one each action." in second
    assert model.calls[1][-1]["content"].startswith('<skill name="counting-tips">')
    assert "BODY-LETTERS" not in second and "BODY-COLORS" not in second

    assert rollout.reward == 1.0 and rollout.skills_loaded == ["counting-tips"]
    assert rollout.env_steps == 2 and rollout.model_calls == 3  # the load is a turn, not an env step
    assert rollout.trajectory[0].kind == "load_skill" and rollout.trajectory[0].action == "LOAD_SKILL[counting-tips]"
    assert [s.kind for s in rollout.trajectory[1:]] == ["env", "env"]
    assert rollout.mode == "progressive"


def test_progressive_load_by_number_and_unknown_name() -> None:
    gw, model = scripted_gateway(load_then_count("3"))
    rollout = CountingHarness().rollout(task(2), SKILLS, ExecutionAgent(gw, AgentConfig(mode="progressive")))
    assert rollout.skills_loaded == ["colors"] and "BODY-COLORS" in text_of(model.calls[1])

    gw, model = scripted_gateway(load_then_count("juggling"))
    rollout = CountingHarness().rollout(task(2), SKILLS, ExecutionAgent(gw, AgentConfig(mode="progressive")))
    assert rollout.skills_loaded == [] and rollout.reward == 1.0
    assert "no skill named 'juggling'" in model.calls[1][-1]["content"]
    assert "2. counting-tips" in model.calls[1][-1]["content"]


def test_load_cap_and_turn_cap_are_enforced() -> None:
    gw, model = scripted_gateway(lambda messages: "Action: LOAD_SKILL[letters]")
    agent = ExecutionAgent(gw, AgentConfig(mode="progressive", max_loads=2, max_steps=3))
    rollout = CountingHarness().rollout(task(2), SKILLS, agent)
    assert rollout.skills_loaded == ["letters", "letters"]
    assert len(model.calls) == 3 + 2  # hard turn cap = max_steps + max_loads
    assert rollout.env_steps == 0 and rollout.reward == 0.0 and rollout.truncated
    assert rollout.metadata["stop_reason"] == "turn_cap"
    refused = [s for s in rollout.trajectory if "limit of 2 loads" in s.result]
    assert len(refused) == 3


def test_loaded_skills_stay_in_context_when_history_is_trimmed() -> None:
    replies = ["Action: LOAD_SKILL[counting-tips]"] + ["Thought: " + "zzz " * 150 + "\nAction: 0"] * 4 + ["Action: 1", "Action: 2"]
    gw, model = scripted_gateway(replies)
    agent = ExecutionAgent(gw, AgentConfig(mode="progressive", max_steps=8, context_chars=2_500))
    rollout = CountingHarness().rollout(task(2), SKILLS, agent)
    assert rollout.reward == 1.0
    late = model.calls[5]
    assert "earlier turn(s) are omitted" in late[1]["content"]
    assert "BODY-COUNTING" in text_of(late)


def test_load_skill_is_an_ordinary_action_outside_progressive_mode() -> None:
    gw, model = scripted_gateway(["Action: LOAD_SKILL[letters]", "Action: 1", "Action: 2"])
    rollout = CountingHarness().rollout(task(2), SKILLS, ExecutionAgent(gw, AgentConfig(mode="full")))
    assert rollout.skills_loaded == [] and rollout.env_steps == 3
    assert rollout.trajectory[0].kind == "env" and rollout.trajectory[0].result.startswith("Wrong")


def test_select_mode_injects_only_the_chosen_skill() -> None:
    replies = iter(['{"skill_number": 2}'])

    def script(messages: list[dict[str, Any]]) -> str:
        if messages[0]["role"] == "user":  # the selection call has no system prompt
            return next(replies)
        return count_script(messages)

    gw, model = scripted_gateway(script)
    rollout = CountingHarness().rollout(task(2), SKILLS, ExecutionAgent(gw, AgentConfig(mode="select")))

    selection = text_of(model.calls[0])
    for skill in SKILLS:
        assert skill.name in selection and skill.description in selection
    assert not any(body in selection for body in BODIES)
    assert "Count from 1 to 2." in selection

    system = model.calls[1][0]["content"]
    assert "BODY-COUNTING" in system and "BODY-LETTERS" not in system and "BODY-COLORS" not in system
    assert rollout.metadata["selected_skill"] == "counting-tips"
    assert rollout.metadata["skills_in_prompt"] == ["counting-tips"]
    assert rollout.reward == 1.0 and rollout.model_calls == 3  # selection + 2 turns
    assert rollout.prompt_tokens == gw.ledger.totals()["prompt_tokens"]  # the selection call is counted too


def test_select_none_or_junk_runs_without_a_skill() -> None:
    for answer, expect_error in (('{"skill_number": 0}', False), ("I cannot decide, sorry", True), ("7", True)):
        answers = iter([answer])

        def script(messages: list[dict[str, Any]], answers=answers) -> str:
            return next(answers) if messages[0]["role"] == "user" else count_script(messages)

        gw, model = scripted_gateway(script)
        rollout = CountingHarness().rollout(task(2), SKILLS, ExecutionAgent(gw, AgentConfig(mode="select")))
        assert rollout.metadata["selected_skill"] is None
        assert not any(body in model.calls[1][0]["content"] for body in BODIES)
        assert ("select_error" in rollout.metadata) == expect_error
        assert rollout.reward == 1.0
