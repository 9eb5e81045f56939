"""Tests of this harness with a scripted model from `raso.testing` (no real model, no network).

Run: python -m pytest -q path/to/this/folder/test_harness.py
"""

from __future__ import annotations

from raso.agent import AgentConfig, ExecutionAgent
from raso.choices import Split, choices_of
from raso.testing import scripted_gateway

from .harness import TemplateHarness


def test_splits_are_disjoint_and_not_empty() -> None:
    harness = TemplateHarness()
    ids = {split: {task.id for task in harness.tasks(split)} for split in choices_of(Split)}
    assert all(ids.values()), ids
    assert not (ids["train"] & ids["val"] or ids["train"] & ids["test"] or ids["val"] & ids["test"])


def test_a_scripted_agent_that_reads_then_answers_scores_one() -> None:
    harness = TemplateHarness()
    task = harness.tasks("test")[0]
    answer = task.metadata["answer"]
    gw, model = scripted_gateway(["Thought: read first.\nAction: read", f"Thought: found it.\nAction: answer {answer}"])
    rollout = harness.rollout(task, [], ExecutionAgent(gw, AgentConfig(mode="none")))
    assert rollout.error is None and rollout.reward == 1.0 and rollout.terminated
    assert [step.action for step in rollout.trajectory] == ["read", f"answer {answer}"]
    assert task.metadata["document"] in rollout.trajectory[0].result  # what `read` showed the agent
    assert harness.harness_description in model.calls[0][0]["content"]  # H reached the agent's system prompt


def test_a_wrong_answer_scores_zero_and_a_bad_command_costs_an_action() -> None:
    harness = TemplateHarness()
    env = harness.make_env(harness.tasks("train")[0])
    observation, _ = env.reset()
    assert harness.tasks("train")[0].instruction in observation
    observation, reward, terminated, _, _ = env.step("look around")
    assert "Unknown command" in observation and reward == 0.0 and not terminated
    _, reward, terminated, _, info = env.step("answer 4")
    assert reward == 0.0 and terminated and info["soft_score"] == 0.0
