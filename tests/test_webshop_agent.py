"""WebShop through the real execution agent and gateway, with a scripted model (no LLM)."""

from __future__ import annotations

from harnesses.webshop import WebShopHarness
from raso.agent import AgentConfig, ExecutionAgent
from raso.testing import scripted_gateway


def test_scripted_shopper_gets_full_reward_through_the_agent_loop():
    harness = WebShopHarness()
    task = harness.tasks("test")[0]
    goal = harness.goal(task)
    replies = [f"Thought: search for it.\nAction: search[{goal.instruction_text}]",
               f"Action: click[{goal.asin}]",
               *[f"Thought: pick the option.\nAction: click[{o}]" for o in goal.goal_options],
               "Action: click[Buy Now]"]
    gw, model = scripted_gateway(replies)
    rollout = harness.rollout(task, [], ExecutionAgent(gw, AgentConfig(mode="none")))
    assert rollout.error is None and rollout.reward == 1.0 and rollout.success
    assert [s.action for s in rollout.trajectory] == [r.rsplit("Action: ", 1)[1] for r in replies]
    assert "Available actions: search[<keywords>]" in model.calls[0][-1]["content"]


def test_a_junk_reply_costs_a_step_and_the_budget_ends_with_zero():
    harness = WebShopHarness(max_steps=3)
    task = harness.tasks("val")[0]
    gw, _ = scripted_gateway(["I am not sure what to do.", "Action: click[Buy Now]", "Action: search[anything]"])
    rollout = harness.rollout(task, [], ExecutionAgent(gw, AgentConfig(mode="none")))
    assert rollout.reward == 0.0 and not rollout.success and len(rollout.trajectory) == 3
    assert rollout.trajectory[0].result.startswith("Invalid action")
