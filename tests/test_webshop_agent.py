"""WebShop through the real execution agent and gateway, with a scripted model (no LLM)."""

from __future__ import annotations

import re

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
    assert "WebShop search page\n[Search]" in model.calls[0][-1]["content"]


def test_a_junk_reply_costs_a_step_and_the_budget_ends_with_zero():
    harness = WebShopHarness(max_steps=3)
    task = harness.tasks("val")[0]
    gw, _ = scripted_gateway(["I am not sure what to do.", "Action: click[Buy Now]", "Action: search[anything]"])
    rollout = harness.rollout(task, [], ExecutionAgent(gw, AgentConfig(mode="none")))
    assert rollout.reward == 0.0 and not rollout.success and len(rollout.trajectory) == 3
    assert rollout.trajectory[0].result.startswith("Invalid action")


def test_scripted_shopper_sees_the_instruction_once_and_each_page_action_once():
    """Each turn adds only the new page: the instruction stays in the first message (never repeated), and the
    page's [bracketed] buttons, ASINs and option values are its valid clicks, with no second list of them."""
    harness = WebShopHarness()
    task = harness.tasks("test")[0]
    goal = harness.goal(task)
    title = harness.catalog.by_asin[goal.asin].title
    replies = [f"Action: search[{title}]", f"Action: click[{goal.asin}]", "Action: click[Features]",
               "Action: click[< Prev]", *[f"Action: click[{o}]" for o in goal.goal_options], "Action: click[Buy Now]"]
    gw, model = scripted_gateway(replies)
    rollout = harness.rollout(task, [], ExecutionAgent(gw, AgentConfig(mode="none")))
    assert rollout.reward == 1.0 and len(model.calls) == len(replies)

    last_call = model.calls[-1]  # the whole history of the episode, as the model read it on its last turn
    user_text = "\n".join(m["content"] for m in last_call if m["role"] == "user")
    assert user_text.count(goal.instruction_text) == 1
    assert goal.instruction_text in last_call[1]["content"]  # the task message, which history trimming keeps
    assert "Available actions" not in user_text and "click[" not in user_text.replace("click[...]", "")

    pages = [step for step in rollout.trajectory if step.info.get("available_actions")]
    assert len(pages) == len(replies) - 1  # every page but the one after Buy Now
    for step in pages:
        shown = re.findall(r"(?<!search)\[([^\[\]]+)\]", step.result)  # not the "for search[...]" header
        clicks = [a[len("click["):-1] for a in step.info["available_actions"]]
        assert sorted(b.lower() for b in shown) == sorted(clicks)  # each valid click shown once, nothing else
