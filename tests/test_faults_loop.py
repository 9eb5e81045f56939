"""The loop under real faults (issue 15), on the toy harness with scripted models: an outage of the target
model is never scored (re-run, or the batch is refused and `resume` finishes it), an optimizer outage does not
burn iterations, and what degraded is in the report."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from test_engine_support import (
    FunctionInitializer,
    FunctionProposer,
    ToyHarness,
    toy_agent_reply,
    toy_initialize,
    toy_initializer,
    toy_propose,
    toy_proposer,
)

from raso.api import optimize, resume
from raso.engine import CheckError, InfrastructureError, OptimizeConfig, OptimizerUnavailableError, RunDir
from raso.engine.run_dir import read_jsonl
from raso.llm._litellm import litellm
from raso.llm.scripted import ScriptedModel
from raso.optimizer.types import InitResult, UpdateProposal
from raso.skill import Skill

REPLIES = ["LEVEL=1", "LEVEL=2", "LEVEL=2\nBe brief.", "LEVEL=1\nShorter."]
# what the same run decides without any fault (test_engine_loop's gate test)
CLEAN_DECISIONS = [(1, 0.5, 0.25, True), (2, 0.5, 0.5, False), (3, 0.25, 0.5, False)]
FAST = {"budget.call_attempts": 2, "budget.call_retry_max_wait_s": 0.0, "budget.infra_retries": 2,
        "budget.infra_retry_wait_s": 0.0}


def _rate_limited() -> Exception:
    return litellm.RateLimitError(message="429: slow down", model="scripted", llm_provider="scripted")


class Outage:
    """Wraps a reply function: calls whose prompt contains every marker fail (transiently) while `on`, or
    only for their first `first_n` matching calls."""

    def __init__(self, fn: Any, *markers: str, first_n: int | None = None, error: Any = _rate_limited) -> None:
        self.fn, self.markers, self.first_n, self.error = fn, markers, first_n, error
        self.on = True
        self.failed = 0

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        text = "\n".join(str(m.get("content") or "") for m in messages)
        if self.on and all(m in text for m in self.markers):
            if self.first_n is None or self.failed < self.first_n:
                self.failed += 1
                raise self.error()
        return self.fn(messages)


def _config(tmp_path: Path, agent: ScriptedModel, optimizer: ScriptedModel, **overrides: Any) -> OptimizeConfig:
    values = dict(harness="toy", **{"models.target": agent.model, "models.optimizer": optimizer.model,
                                    "schedule.epochs": 1, "schedule.minibatch": 2, "schedule.workers": 2,
                                    "schedule.seed": 3, "schedule.test": False},
                  init="rfsi", update="rfsu", run_dir=tmp_path / "run", **FAST)
    values.update(overrides)
    return OptimizeConfig(**values)


def _decisions(rd: RunDir) -> list[tuple]:
    return [(d["version"], d["candidate_val"], d["current_val"], d["accepted"]) for d in read_jsonl(rd.candidates)]


def test_a_transient_outage_is_re_run_not_scored_and_the_retries_are_reported(tmp_path: Path) -> None:
    # v1 (solved by s0) loses both gateway attempts of its first rollout: an infrastructure failure, re-run
    outage = Outage(toy_agent_reply, "task id: v1", first_n=2)
    agent, optimizer = ScriptedModel(outage, name="agent"), ScriptedModel(REPLIES, name="optimizer")
    config = _config(tmp_path, agent, optimizer)
    result = optimize(ToyHarness(), config, initializer=toy_initializer, proposer=toy_proposer)
    rd = RunDir(config.run_dir)

    assert outage.failed == 2
    assert result.initial_val == 0.25  # as without the outage (scored, it would have been 0)
    assert _decisions(rd) == CLEAN_DECISIONS
    assert result.rollouts_used == 22  # the re-run replaced the failed rollout; nothing counted twice
    s0 = {r["task_id"]: r for r in read_jsonl(rd.rollouts_path("s0_val"))}
    assert s0["v1"]["reward"] == 1.0 and s0["v1"]["error"] is None
    state = json.loads(rd.checkpoint.read_text())
    assert (state["infra_failed_rollouts"], state["infra_reruns"], state["infra_stops"]) == (1, 1, 0)
    ledger = json.loads(rd.ledger.read_text())
    assert ledger["totals"]["retries"] == 1 and ledger["totals"]["failures"] == 1  # every retry is on the bill
    report = rd.report.read_text()
    assert "## Degradations" in report
    assert "1 model-call retry by the gateway, 1 call(s) failed after them; 1 rollout(s) failed" in report


def test_a_persistent_outage_in_a_candidates_val_pass_stops_uncounted_and_resume_finishes(tmp_path: Path) -> None:
    # the candidate LEVEL=2's val rollout of v1 keeps failing: scored 0, it would tie s0 and be rejected
    outage = Outage(toy_agent_reply, "LEVEL=2", "difficulty 1")
    agent, optimizer = ScriptedModel(outage, name="agent"), ScriptedModel(REPLIES, name="optimizer")
    config = _config(tmp_path, agent, optimizer)
    steps = dict(harness=ToyHarness(), initializer=toy_initializer, proposer=toy_proposer)
    with pytest.raises(InfrastructureError, match=r"1 of 4 rollouts of iter001_val failed (.|\n)* `raso resume`"):
        optimize(config=config, **steps)
    rd = RunDir(config.run_dir)
    state = json.loads(rd.checkpoint.read_text())
    assert state["phase"] == "iterate" and state["pending"]["step"] == "proposed"  # the val pass is redone
    assert state["candidates"] == [] and state["rollouts_used"] == 4 + 2  # the failed batch was not counted
    assert state["infra_failed_rollouts"] == 3 and state["infra_stops"] == 1  # first run + 2 re-runs
    assert not rd.rollouts_path("iter001_val").exists()

    outage.on = False  # the provider is back
    result = resume(config.run_dir, **steps)
    assert result.finished and _decisions(rd) == CLEAN_DECISIONS and result.rollouts_used == 22


def test_infrastructure_failures_never_reach_the_gradient_prompt(tmp_path: Path) -> None:
    seen: list[Any] = []

    def recording_propose(ctx: Any, skill: Skill, rollouts: Any) -> UpdateProposal:
        seen.extend(rollouts)
        return toy_propose(ctx, skill, rollouts)

    outage = Outage(toy_agent_reply, "task id: t1")  # one train task's model calls keep failing
    agent, optimizer = ScriptedModel(outage, name="agent"), ScriptedModel(REPLIES, name="optimizer")
    config = _config(tmp_path, agent, optimizer)
    with pytest.raises(InfrastructureError, match="_train failed"):
        optimize(ToyHarness(), config, initializer=toy_initializer, proposer=FunctionProposer(recording_propose))
    assert all(r.error is None and r.outcome == "ok" for r in seen)
    assert "t1" not in [r.task_id for r in seen]
    state = json.loads(RunDir(config.run_dir).checkpoint.read_text())
    assert state["pending"]["step"] == "start"  # the minibatch is rolled out again on resume


class UnscorableTaskHarness(ToyHarness):
    """The toy harness whose check cannot score train task t1 (as a verifier that writes no reward)."""

    def score(self, task: Any, evidence: Any) -> Any:
        score = super().score(task, evidence)
        if task.id == "t1":
            return score.model_copy(update={"check_error": "the verifier wrote no reward (VERIFIER-OUTPUT)"})
        return score


def test_a_check_error_stops_the_run_uncounted_and_never_reaches_the_gradient_prompt(tmp_path: Path) -> None:
    seen: list[Any] = []

    def recording_propose(ctx: Any, skill: Skill, rollouts: Any) -> UpdateProposal:
        seen.extend(rollouts)
        return toy_propose(ctx, skill, rollouts)

    agent, optimizer = ScriptedModel(toy_agent_reply, name="agent"), ScriptedModel(REPLIES, name="optimizer")
    config = _config(tmp_path, agent, optimizer)
    with pytest.raises(CheckError, match=r"could not score 1 of 2 rollouts of iter\d+_train \(task t1: check error: "
                                         r"the verifier wrote no reward.*fix the task's check") as stopped:
        optimize(UnscorableTaskHarness(), config, initializer=toy_initializer,
                 proposer=FunctionProposer(recording_propose))
    assert seen and "t1" not in [r.task_id for r in seen]  # the batches before it reached the proposer, not it
    batch = re.search(r"rollouts of (iter\d+_train)", str(stopped.value)).group(1)
    rd = RunDir(config.run_dir)
    assert not rd.rollouts_path(batch).exists()  # the batch was never written as scored
    assert json.loads(rd.checkpoint.read_text())["pending"]["step"] == "start"  # resume rolls it out again


@pytest.mark.parametrize("error", [
    lambda: litellm.APIConnectionError(message="connection refused", model="scripted", llm_provider="scripted"),
    lambda: litellm.AuthenticationError(message="401 invalid api key", model="scripted", llm_provider="scripted"),
], ids=["unreachable", "unauthorised"])
def test_an_optimizer_outage_stops_resumably_without_burning_the_iteration(tmp_path: Path, error: Any) -> None:
    replies = iter(REPLIES)
    outage = Outage(lambda messages: next(replies), "update skill", error=error)
    agent, optimizer = ScriptedModel(toy_agent_reply, name="agent"), ScriptedModel(outage, name="optimizer")
    config = _config(tmp_path, agent, optimizer)
    steps = dict(harness=ToyHarness(), initializer=toy_initializer, proposer=toy_proposer)
    with pytest.raises(OptimizerUnavailableError, match=r"proposing iteration 1 (.|\n)*`raso resume`"):
        optimize(config=config, **steps)
    state = json.loads(RunDir(config.run_dir).checkpoint.read_text())
    assert state["pending"]["step"] == "rolled_out" and state["iterations_done"] == 0 and state["candidates"] == []
    agent_calls = len(agent.calls)
    assert agent_calls == 4 + 2

    outage.on = False
    result = resume(config.run_dir, **steps)
    assert result.finished and _decisions(RunDir(config.run_dir)) == CLEAN_DECISIONS
    assert len(agent.calls) - agent_calls == 22 - 6  # the kept train rollouts were not rolled out again


def test_junk_from_a_working_optimizer_stays_no_candidate(tmp_path: Path) -> None:
    from raso.llm import StructuredOutputError

    def junk_once(ctx: Any, skill: Skill, rollouts: Any) -> UpdateProposal:
        proposal = toy_propose(ctx, skill, rollouts)
        if "junk" in proposal.candidate.body:
            raise StructuredOutputError("did not validate", raw_text="junk", validation_error="x")
        return proposal

    agent, optimizer = ScriptedModel(toy_agent_reply, name="agent"), ScriptedModel(
        ["LEVEL=1", "junk", "LEVEL=2", "LEVEL=3"], name="optimizer")
    config = _config(tmp_path, agent, optimizer)
    result = optimize(ToyHarness(), config, initializer=toy_initializer, proposer=FunctionProposer(junk_once))
    decisions = read_jsonl(RunDir(config.run_dir).candidates)
    assert decisions[0]["version"] is None and "StructuredOutputError" in decisions[0]["error"]
    assert result.finished and result.iterations == 3


def test_degradations_are_in_the_report(tmp_path: Path) -> None:
    def degraded_initialize(ctx: Any) -> InitResult:
        logging.getLogger("raso.retrieval.dreamer").warning(
            "SkillDreamer: model call failed (%s); ranking by the query alone", "LLMUnavailableError: 503")
        logging.getLogger("raso.retrieval.retrievers").warning(
            "field retriever: no dense encoder (install the `dense` extra); using tfidf-fields")
        result = toy_initialize(ctx)
        return result.model_copy(update={"errors": [
            "skill_init: the model's draft was unusable (bad JSON); the skill was assembled from the requirements "
            "and lessons without it"]})

    def degraded_propose(ctx: Any, skill: Skill, rollouts: Any) -> UpdateProposal:
        proposal = toy_propose(ctx, skill, rollouts)
        return proposal.model_copy(update={"errors": [
            "lesson 2: the lesson was dropped because it repeats its input: 'Use the tool.'"]})

    agent, optimizer = ScriptedModel(toy_agent_reply, name="agent"), ScriptedModel(REPLIES, name="optimizer")
    config = _config(tmp_path, agent, optimizer, **{"schedule.max_iterations": 1})
    optimize(ToyHarness(), config, initializer=FunctionInitializer(degraded_initialize),
             proposer=FunctionProposer(degraded_propose))
    report = RunDir(config.run_dir).report.read_text()
    section = report.split("## Degradations", 1)[1].split("\n## ", 1)[0]
    assert "1× SkillDreamer: model call failed (LLMUnavailableError: 503); ranking by the query alone" in section
    assert "using tfidf-fields" in section
    assert "init: RASI fallback skill" in section
    assert "iter001: lesson dropped (empty or an echo of its input)" in section
