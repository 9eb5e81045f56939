"""A rollout's failure status is one field, `outcome`, set where the failure is classified; `counts` is the one
rule of whether its reward enters a mean. Rollouts saved before (`model_unusable` + `failure_kind`) are converted once
by `raso migrate` (tests/test_config_migration.py)."""

from __future__ import annotations

import pytest

from raso.agent import AgentConfig, ExecutionAgent
from raso.harness import Task, failed_rollout
from raso.llm.errors import BudgetExceededError, LLMAuthError, LLMError, LLMUnavailableError
from raso.testing import CountingHarness, count_script, scripted_gateway


class RaisingGateway:
    """A gateway whose every model call fails with `exc` (as LLMGateway raises after its retries)."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def complete(self, *args: object, **kwargs: object) -> None:
        raise self.exc


@pytest.mark.parametrize(("exc", "outcome"), [
    (LLMUnavailableError("m still failing after 3 attempt(s)"), "infrastructure"),
    (LLMAuthError("authentication failed for model m"), "unusable"),
    (LLMError("call to m failed"), "unusable"),
    (BudgetExceededError("USD budget reached"), "budget"),
    (ValueError("junk"), "agent_error"),
])
def test_the_agent_sets_the_outcome_of_a_failed_model_call(exc: Exception, outcome: str) -> None:
    harness = CountingHarness()
    agent = ExecutionAgent(RaisingGateway(exc), AgentConfig(mode="none", constrain_replies=False))
    rollout = harness.rollout(harness.tasks("val")[0], [], agent)
    assert rollout.outcome == outcome and rollout.counts == (outcome == "agent_error")
    assert rollout.error.startswith(f"{type(exc).__name__}: {exc}\nTraceback (most recent call last):")


def test_a_finished_rollout_is_ok_and_a_tool_crash_is_the_agents_error() -> None:
    harness = CountingHarness()
    gw, _ = scripted_gateway(count_script)
    agent = ExecutionAgent(gw, AgentConfig(mode="none"))
    done = harness.rollout(harness.tasks("val")[0], [], agent)
    assert (done.outcome, done.error, done.counts) == ("ok", None, True)
    crash = Task(id="crash", instruction="Count from 1 to 2.", metadata={"target": 2, "crash_at": 1})
    crashed = harness.rollout(crash, [], agent)
    assert crashed.outcome == "agent_error" and crashed.counts and "counting tool crashed" in crashed.error


def test_a_crash_outside_the_agent_gets_its_outcome_the_same_way() -> None:
    task = CountingHarness().tasks("val")[0]
    crashed = failed_rollout("toy", task, [], LLMUnavailableError("m still failing"))
    assert crashed.outcome == "infrastructure" and not crashed.counts
    assert crashed.error.startswith("LLMUnavailableError: m still failing\n")
    assert failed_rollout("toy", task, [], OSError("disk")).outcome == "agent_error"
