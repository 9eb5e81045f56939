"""`raso.testing`, the public test kit: the scripted model and the toy counting harness registered as `toy`."""

from __future__ import annotations

import pytest

import raso.testing
from raso.agent import AgentConfig, ExecutionAgent
from raso.harness import available_harnesses, get_harness
from raso.llm import scripted
from raso.testing import CountingHarness, ScriptedModel, count_script, scripted_gateway


def test_toy_is_registered_by_name_and_loads() -> None:
    # the pyproject entry point, as a user's own harness package would register one
    assert available_harnesses()["toy"] == "raso.testing.toy:CountingHarness"
    harness = get_harness("toy", n_tasks=6)
    assert isinstance(harness, CountingHarness) and harness.name == "toy"
    assert [len(harness.tasks(split)) for split in ("train", "val", "test")] == [3, 3, 6]
    assert harness.task_description.startswith("Count from 1 to a target number")


def test_scripted_model_is_the_product_provider() -> None:
    assert raso.testing.ScriptedModel is scripted.ScriptedModel
    assert raso.testing.ScriptExhaustedError is scripted.ScriptExhaustedError
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        raso.testing.Nope  # noqa: B018


def test_scripted_rollouts_through_the_toy_harness_win_every_game() -> None:
    gw, model = scripted_gateway(count_script)
    harness = get_harness("toy")
    agent = ExecutionAgent(gw, AgentConfig(mode="none"))
    rollouts = [harness.rollout(task, [], agent) for task in harness.tasks("test")]
    targets = [int(task.metadata["target"]) for task in harness.tasks("test")]
    assert [r.reward for r in rollouts] == [1.0] * len(targets)
    assert [r.env_steps for r in rollouts] == targets  # one action per number, no wasted step
    assert len(model.calls) == sum(targets)
    assert harness.harness_description in model.calls[0][0]["content"]  # the prompt the gateway really sent


def test_a_scripted_list_answers_in_order_then_is_exhausted() -> None:
    gw, model = scripted_gateway(["Action: 1", "Action: stop"])
    assert isinstance(model, ScriptedModel) and model.remaining == 2
    replies = [gw.complete("agent", [{"role": "user", "content": f"turn {i}"}]).text for i in range(2)]
    assert replies == ["Action: 1", "Action: stop"]
    assert [call[-1]["content"] for call in model.calls] == ["turn 0", "turn 1"]
    with pytest.raises(Exception, match="no replies left"):
        gw.complete("agent", [{"role": "user", "content": "turn 2"}])
