"""ALFWorld through the real execution agent and gateway, with a scripted model replaying the walkthrough."""

from __future__ import annotations

from harnesses.alfworld import AlfworldHarness
from harnesses.alfworld.expert import walkthrough
from raso.agent import AgentConfig, ExecutionAgent
from raso.testing import scripted_gateway


def test_scripted_walkthrough_wins_through_the_agent_loop():
    harness = AlfworldHarness()
    task = harness.tasks("train")[0]
    commands = walkthrough(harness.gamefile(task))
    gw, model = scripted_gateway([f"Thought: next step.\nAction: {c}" for c in commands])
    rollout = harness.rollout(task, [], ExecutionAgent(gw, AgentConfig(mode="none")))
    assert rollout.error is None and rollout.reward == 1.0 and rollout.success
    assert [s.action for s in rollout.trajectory] == commands
    assert task.instruction in model.calls[0][-1]["content"]
