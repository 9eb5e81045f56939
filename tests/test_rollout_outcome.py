"""A rollout's failure status is one field, `outcome`, set where the failure is classified; `counts` is the one
rule of whether its reward enters a mean. Rollouts saved before (`model_unusable` + `failure_kind`) still load:
tests/fixtures/rollouts_before_outcome.jsonl was written by that code (a toy rollout that finished, one whose tool
crashed, then model calls failing with LLMUnavailableError, LLMAuthError, BudgetExceededError and a bare LLMError,
and a crash recorded by failed_rollout)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raso.agent import AgentConfig, ExecutionAgent
from raso.agent.evaluate import EvalResult, load_trajectories
from raso.engine.run_dir import read_jsonl
from raso.harness import Rollout, Task, failed_rollout
from raso.llm.errors import BudgetExceededError, LLMAuthError, LLMError, LLMUnavailableError
from raso.testing import CountingHarness, count_script, scripted_gateway

BEFORE = Path(__file__).parent / "fixtures" / "rollouts_before_outcome.jsonl"
EXPECTED_BEFORE = ["ok", "agent_error", "infrastructure", "unusable", "budget", "unusable", "unusable"]


class RaisingGateway:
    """A gateway whose every model call fails with `exc` (as LLMGateway raises after its retries)."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def complete(self, *args: object, **kwargs: object) -> None:
        raise self.exc


def test_rollouts_saved_with_the_three_fields_load_with_their_outcome(tmp_path: Path) -> None:
    rows = read_jsonl(BEFORE)
    assert all("failure_kind" in r and "model_unusable" in r and "outcome" not in r for r in rows)
    rollouts = [Rollout.model_validate(r) for r in rows]
    assert [r.outcome for r in rollouts] == EXPECTED_BEFORE
    assert [r.counts for r in rollouts] == [True, True, False, False, False, False, False]
    assert [r.error for r in rollouts] == [r["error"] for r in rows]  # the message text is kept as it was
    # the same files as trajectories: read back, summarised, written in the new form
    folder = tmp_path / "trajectories"
    folder.mkdir()
    for i, row in enumerate(rows):
        (folder / f"{i:04d}_{row['task_id']}.json").write_text(json.dumps(row), encoding="utf-8")
    result = EvalResult(harness="toy", rollouts=load_trajectories(folder))
    assert result.infrastructure_failures == 5 and result.mean_reward_of_completed == 0.5
    again = json.loads(result.rollouts[2].model_dump_json())
    assert again["outcome"] == "infrastructure" and "failure_kind" not in again and "model_unusable" not in again


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
