"""The execution agent with the embedded local model for real (short: a toy game, a few small turns)."""

from __future__ import annotations

import pytest

from raso.agent import AgentConfig, ExecutionAgent
from raso.harness import Task
from raso.llm import DEFAULT_LOCAL_MODEL, GatewayConfig, LLMGateway, RetryConfig
from raso.skill import Skill
from raso.testing import CountingHarness


@pytest.mark.embedded
def test_embedded_model_plays_the_counting_game_through_the_agent_loop() -> None:
    # no skip: without the `local` extra this fails with the install hint in rollout.error
    gw = LLMGateway(GatewayConfig.for_models(target=DEFAULT_LOCAL_MODEL, retry=RetryConfig(max_attempts=1)))
    agent = ExecutionAgent(gw, AgentConfig(mode="full", max_steps=3, max_tokens=40, temperature=0.0))
    skill = Skill(name="count-up", description="Counting games.", body="Say 1, then 2, then 3: one number per action.")
    task = Task(id="emb", instruction="Count from 1 to 2, one number per action.", metadata={"target": 2})
    rollout = CountingHarness().rollout(task, [skill], agent)

    assert rollout.error is None, rollout.error
    assert 1 <= rollout.env_steps <= 3 and rollout.model_calls == rollout.env_steps
    assert all(step.reply.strip() for step in rollout.trajectory)  # real replies, parsed into actions
    assert rollout.prompt_tokens > 100 and rollout.completion_tokens > 0 and rollout.cost_usd == 0.0
    assert rollout.reward in (0.0, 1.0) and (rollout.terminated or rollout.truncated)
