"""Equal information for every reflection (issue 24): RASU/RFSU gradient chunks, GEPA's reflective dataset and
TextGrad's loss see the same per-trajectory budget whatever the chunk size, and GEPA's reflection and TextGrad's
role description carry the task and harness descriptions as RASO's roles do. GEPA never scores an outage as 0 and
reports only a candidate found within the budget; TextGrad steps over chunks. Checked on the prompts themselves."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import gepa  # noqa: E402, F401  (the baselines run through their packages: the `experiments` extra, in `dev`)
import pytest
import textgrad  # noqa: E402, F401
from test_experiments_support import PLAIN_SKILL, scripted_models  # noqa: E402

from experiments.baselines.gepa_baseline import (  # noqa: E402
    HarnessGEPAAdapter,
    best_within_budget,
    reflection_template,
    run_gepa,
)
from experiments.baselines.textgrad_baseline import textgrad_step  # noqa: E402
from raso.agent import AgentConfig, ExecutionAgent  # noqa: E402
from raso.engine import InfrastructureError, ModelUnusableError  # noqa: E402
from raso.harness import Rollout, Step  # noqa: E402
from raso.llm import GatewayConfig, LLMGateway, RetryConfig  # noqa: E402
from raso.optimizer.render import PromptLimits  # noqa: E402
from raso.optimizer.roles import GradientInput, gradient_messages  # noqa: E402
from raso.skill import Skill  # noqa: E402
from raso.testing import CountingHarness  # noqa: E402

S0 = Skill(**PLAIN_SKILL)
TRAJECTORY = re.compile(r"<trajectory [^>]*>.*?</trajectory>", re.DOTALL)


def long_rollout(task: str, steps: int = 30) -> Rollout:
    """A failed 30-step rollout whose every step is long enough that a budget decides how many are shown."""
    return Rollout(task_id=task, harness="toy", reward=0.0, trajectory=[
        Step(observation=f"{task} observation {i}: " + "x" * 150, action=f"act {i} " + "y" * 100,
             result=f"{task} result {i}: " + "z" * 150) for i in range(30)][:steps])


def blocks(text: str) -> dict[str, str]:
    return {re.search(r'task="([^"]+)"', b).group(1): b for b in TRAJECTORY.findall(text)}


def _gateway(agent: Any, optimizer: Any) -> LLMGateway:
    return LLMGateway(GatewayConfig.for_models(target=agent.model, optimizer=optimizer.model,
                                               retry=RetryConfig(max_attempts=1)))


def test_a_gradient_chunk_shows_each_trajectory_in_full_budget_whatever_the_chunk_size() -> None:
    limits = PromptLimits()
    rollouts = [long_rollout(f"task-{i}") for i in range(8)]

    def shown(chunk: list[Rollout]) -> dict[str, str]:
        text = gradient_messages(GradientInput(task_description="T", harness_description="H", skill=S0,
                                               rollouts=chunk), limits)[1]["content"]
        return blocks(text)

    alone, in_chunk = shown(rollouts[:1]), shown(rollouts)
    assert len(in_chunk) == 8
    # the same text for task-0 alone and in a chunk of 8, and it uses the per-trajectory budget
    assert in_chunk["task-0"] == alone["task-0"]
    assert 0.8 * limits.trajectory_chars_each < len(alone["task-0"]) <= limits.trajectory_chars_each + 200
    assert len(re.findall(r"\[step \d+\]", in_chunk["task-7"])) >= 4


def test_every_method_reflects_on_the_same_trajectory_text(tmp_path: Path) -> None:
    """RASU's gradient chunk, GEPA's reflective dataset and TextGrad's loss prompt show one rollout identically."""
    agent_model, optimizer_model = scripted_models()
    gw = _gateway(agent_model, optimizer_model)
    limits = PromptLimits()
    rollouts = [long_rollout(f"task-{i}") for i in range(8)]
    rasu = blocks(gradient_messages(GradientInput(task_description="T", harness_description="H", skill=S0,
                                                  rollouts=rollouts), limits)[1]["content"])

    adapter = HarnessGEPAAdapter(CountingHarness(), ExecutionAgent(gw, AgentConfig(role="agent")),
                                 seed_skill=S0, limits=limits)
    batch = type("Batch", (), {"trajectories": rollouts, "outputs": rollouts})()
    records = adapter.make_reflective_dataset({"skill": S0.to_markdown()}, batch, ["skill"])["skill"]
    gepa = {re.search(r'task="([^"]+)"', r["Generated Outputs"]).group(1): r["Generated Outputs"] for r in records}

    textgrad_step(gw, S0, rollouts, chunk_size=8, limits=limits)
    loss_prompts = "\n".join(str(m.get("content")) for call in optimizer_model.calls for m in call
                             if "You evaluate one trajectory" in str(call[0].get("content")))
    for task in ("task-0", "task-7"):
        assert gepa[task] == rasu[task]
        assert rasu[task] in loss_prompts


def test_gepa_reflection_and_textgrad_role_carry_the_task_and_harness_descriptions(tmp_path: Path) -> None:
    harness = CountingHarness(n_tasks=6)
    task_line = harness.task_description.strip().splitlines()[0]
    harness_line = harness.harness_description.strip().splitlines()[0]
    template = reflection_template(harness.task_description, harness.harness_description)
    assert "<curr_param>" in template and "<side_info>" in template
    assert task_line in template and harness_line in template

    agent_model, optimizer_model = scripted_models()
    gw = _gateway(agent_model, optimizer_model)
    agent = ExecutionAgent(gw, AgentConfig(role="agent"))
    run_gepa(harness, agent, gw, seed_skill=S0, train=harness.tasks("train"), val=harness.tasks("val"),
             budget_rollouts=12, run_dir=tmp_path / "gepa", seed=1)
    reflections = [str(call[-1]["content"]) for call in optimizer_model.calls
                   if "Provide the new instructions" in str(call[-1]["content"])]
    assert reflections and all(task_line in r and harness_line in r for r in reflections)

    optimizer_model.calls.clear()
    context = f"<task_description>\n{harness.task_description}\n</task_description>"
    textgrad_step(gw, S0, [long_rollout("task-0", steps=3)], context=context)
    tgd = [str(call[-1]["content"]) for call in optimizer_model.calls if "IMPROVED_VARIABLE" in str(call[0]["content"])]
    assert tgd and all(task_line in prompt for prompt in tgd)


class OutageAgent:
    """An agent whose model is down for the tasks in `down` (or all): their rollouts get no agent result."""

    def __init__(self, down: set[str] | None = None) -> None:
        self.down = down

    def run(self, harness: Any, task: Any, skills: Any) -> Rollout:
        if self.down is None or task.id in self.down:
            return Rollout(task_id=task.id, harness=harness.name, reward=0.0, outcome="infrastructure",
                           error="APIConnectionError: connection refused")
        return Rollout(task_id=task.id, harness=harness.name, reward=1.0)


def test_gepa_refuses_to_score_an_outage_as_zero(tmp_path: Path) -> None:
    harness = CountingHarness(n_tasks=6)
    tasks = harness.tasks("val")
    partly = HarnessGEPAAdapter(harness, OutageAgent({tasks[0].id}), seed_skill=S0, workers=1)
    with pytest.raises(InfrastructureError, match="1 of 3 GEPA rollouts got no agent result"):
        partly.evaluate(tasks, {"skill": S0.to_markdown()})
    down = HarnessGEPAAdapter(harness, OutageAgent(), seed_skill=S0, workers=1)
    with pytest.raises(ModelUnusableError):
        down.evaluate(tasks, {"skill": S0.to_markdown()})
    working = HarnessGEPAAdapter(harness, OutageAgent(set()), seed_skill=S0, workers=1)
    assert working.evaluate(tasks, {"skill": S0.to_markdown()}).scores == [1.0, 1.0, 1.0]


def test_gepa_gets_the_whole_budget_and_reports_only_what_it_found_within_it(tmp_path: Path) -> None:
    # the best candidate (0.9) was found after the budget (120 > 100): the best within it (0.6) is reported
    assert best_within_budget([0.2, 0.6, 0.5, 0.9], [3, 50, 90, 120], 100) == 1
    assert best_within_budget([0.2, 0.1], [3, 40], 100) == 0

    agent_model, optimizer_model = scripted_models()
    gw = _gateway(agent_model, optimizer_model)
    harness = CountingHarness(n_tasks=6)
    budget = 16  # s0 on val (3) + one iteration (3 + 3 + 3) leaves 7: GEPA starts a second one and overshoots
    outcome = run_gepa(harness, ExecutionAgent(gw, AgentConfig(role="agent")), gw, seed_skill=S0,
                       train=harness.tasks("train"), val=harness.tasks("val"), budget_rollouts=budget,
                       run_dir=tmp_path / "gepa", seed=1)
    assert outcome.max_metric_calls == budget
    assert outcome.discovery_eval_counts[outcome.chosen] <= budget
    assert outcome.best_val == outcome.val_scores[outcome.chosen]


def test_textgrad_takes_one_step_per_chunk_and_each_step_sees_at_most_a_chunk() -> None:
    agent_model, optimizer_model = scripted_models()
    gw = _gateway(agent_model, optimizer_model)
    rollouts = [long_rollout(f"task-{i}", steps=3) for i in range(5)]
    proposal = textgrad_step(gw, S0, rollouts, chunk_size=2)
    steps = [str(call[-1]["content"]) for call in optimizer_model.calls if "IMPROVED_VARIABLE" in str(call[0]["content"])]
    assert len(steps) == 3  # chunks of 2, 2 and 1
    assert all(len(set(re.findall(r'task="(task-\d)"', prompt))) <= 2 for prompt in steps)
    assert len(proposal.losses) == 5 and not proposal.errors


def test_proposal_failures_are_counted_per_run() -> None:
    from experiments.proposals import proposal_failures

    def record(iteration: int, version: int | None, error: str | None = None) -> dict[str, Any]:
        return {"version": version, "iteration": iteration, "epoch": 0, "batch_index": iteration,
                "train_task_ids": [], "train_mean_reward": 0.0, "current_version": 0, "reason": "r",
                "rollouts_used": 0, "cost_usd": 0.0, "error": error}

    runs = [record(1, 1), record(2, None, "IndexError: no tags"), record(3, None, "ValueError: overflow")]
    assert proposal_failures(runs) == {"iterations": 3, "no_candidate": 2,
                                       "no_candidate_note": "no candidate: 2 of 3 iterations"}
    assert proposal_failures(runs[:1])["no_candidate_note"] == ""


class FailingOnce:
    """The real agent, except that every rollout of its `fail_at`-th call to a batch is an outage."""

    def __init__(self, agent: Any, down_for: int) -> None:
        self.agent, self.down_for, self.calls = agent, down_for, 0

    def run(self, harness: Any, task: Any, skills: Any) -> Rollout:
        self.calls += 1
        if self.calls > 3 and self.down_for > 0:  # s0's val evaluation (3 tasks) goes through, then an outage
            self.down_for -= 1
            return Rollout(task_id=task.id, harness=harness.name, reward=0.0, outcome="infrastructure",
                           error="APIConnectionError: connection refused")
        return self.agent.run(harness, task, skills)


def test_gepa_stops_on_an_outage_and_a_rerun_resumes_without_scoring_it(tmp_path: Path) -> None:
    agent_model, optimizer_model = scripted_models()
    gw = _gateway(agent_model, optimizer_model)
    harness = CountingHarness(n_tasks=6)
    agent = ExecutionAgent(gw, AgentConfig(role="agent"))
    kwargs = dict(train=harness.tasks("train"), val=harness.tasks("val"), budget_rollouts=21,
                  run_dir=tmp_path / "gepa", seed=1)
    with pytest.raises(InfrastructureError):
        run_gepa(harness, FailingOnce(agent, down_for=3), gw, seed_skill=S0, workers=1, **kwargs)
    outcome = run_gepa(harness, agent, gw, seed_skill=S0, workers=1, **kwargs)
    assert outcome.best_val == 1.0  # the outage's zeros never reached GEPA's scores
    assert 0.0 not in outcome.val_scores[1:]


def test_a_textgrad_chunk_whose_step_fails_is_recorded_and_the_others_still_count() -> None:
    from test_experiments_support import optimizer_reply

    calls = {"tgd": 0}

    def flaky(messages: list[dict[str, Any]]) -> str:
        if "<IMPROVED_VARIABLE>" in str(messages[0].get("content")):
            calls["tgd"] += 1
            if calls["tgd"] == 1:
                return "I would rather not."  # no tags: this chunk's step gives no skill
        return optimizer_reply(messages)

    from raso.llm.scripted import ScriptedModel

    agent_model, _ = scripted_models()
    optimizer_model = ScriptedModel(flaky, name="flaky-optimizer")
    gw = _gateway(agent_model, optimizer_model)
    proposal = textgrad_step(gw, S0, [long_rollout(f"task-{i}", steps=3) for i in range(3)], chunk_size=2)
    assert len(proposal.errors) == 1 and proposal.errors[0].startswith("TGD step 1 of 2 gave no skill")
    assert "COUNT-UP" in proposal.candidate.body  # the second chunk's step still improved the skill


def test_cell_notes_name_the_data_the_failed_proposals_and_the_init_support(tmp_path: Path) -> None:
    import json as _json

    from experiments.proposals import cell_notes

    record = {"version": None, "iteration": 1, "epoch": 0, "batch_index": 0, "train_task_ids": [],
              "train_mean_reward": 0.0, "current_version": 0, "reason": "no candidate", "rollouts_used": 0,
              "cost_usd": 0.0, "error": "IndexError: no tags"}
    (tmp_path / "checkpoint.json").write_text(_json.dumps({"candidates": [record, {**record, "version": 1,
                                                                                   "error": None}]}))
    (tmp_path / "init.json").write_text(_json.dumps({"supported_share": 0.6, "assembled_fallback": True}))
    notes = cell_notes(CountingHarness(), checkpoint=tmp_path / "checkpoint.json", init_json=tmp_path / "init.json")
    assert notes == {"data": "toy tasks", "iterations": 2, "no_candidate": 1,
                     "no_candidate_note": "no candidate: 1 of 2 iterations", "produced_nothing": False,
                     "supported_share": 0.6, "assembled_fallback": True}


# ---------------------------------------------------------------- GEPA within its budget, never silently idle (36)

def _reflection_outage(error: Any) -> Any:
    """The scripted optimizer, except that GEPA's reflection prompt raises `error()` (an endpoint that is down)."""
    from test_experiments_support import optimizer_reply

    from raso.llm.scripted import ScriptedModel

    def reply(messages: list[dict[str, Any]]) -> str:
        if "Provide the new instructions" in str(messages[-1].get("content")):
            raise error()
        return optimizer_reply(messages)

    return ScriptedModel(reply, name="down-optimizer")


def test_gepa_counts_a_candidates_validation_before_accepting_it_and_never_passes_the_budget(tmp_path: Path) -> None:
    from experiments.baselines.gepa_baseline import validated_at

    # gepa records a discovery count before the candidate's val run: found at 14, validated (3 tasks) at 17
    done = validated_at([0, 14], [{"a": 0.0, "b": 0.0, "c": 0.0}, {"a": 1.0, "b": 1.0, "c": 1.0}])
    assert done == [3, 17] and best_within_budget([0.0, 1.0], done, 16) == 0

    agent_model, optimizer_model = scripted_models()
    gw = _gateway(agent_model, optimizer_model)
    harness = CountingHarness(n_tasks=6)
    budget = 16  # s0 on val (3) + one iteration (3 + 3 + 3) leaves 4: gepa 0.1.4 alone starts another and ends at 26
    outcome = run_gepa(harness, ExecutionAgent(gw, AgentConfig(role="agent")), gw, seed_skill=S0,
                       train=harness.tasks("train"), val=harness.tasks("val"), budget_rollouts=budget,
                       run_dir=tmp_path / "gepa", seed=1)
    ran = list((tmp_path / "gepa" / "trajectories").glob("gepa*/*.json"))
    assert outcome.rollouts_used == len(ran) <= budget
    assert all(at <= budget for at in outcome.validated_at)  # every candidate reported was validated within it
    assert outcome.validated_at[outcome.chosen] <= budget and outcome.best_val == 1.0
    assert outcome.stop_reason.startswith("GEPA budget")
    again = run_gepa(harness, ExecutionAgent(gw, AgentConfig(role="agent")), gw, seed_skill=S0,
                     train=harness.tasks("train"), val=harness.tasks("val"), budget_rollouts=budget,
                     run_dir=tmp_path / "gepa", seed=1)
    assert again.rollouts_used == outcome.rollouts_used and again.val_scores == outcome.val_scores  # rerun: done


def test_gepa_stops_at_once_when_its_optimizer_is_down(tmp_path: Path) -> None:
    import litellm

    from raso.engine import OptimizerUnavailableError

    agent_model, _ = scripted_models()
    optimizer_model = _reflection_outage(lambda: litellm.APIConnectionError(
        message="connection refused", model="scripted", llm_provider="scripted"))
    gw = _gateway(agent_model, optimizer_model)
    harness = CountingHarness(n_tasks=6)
    with pytest.raises(OptimizerUnavailableError, match="GEPA's reflection"):
        run_gepa(harness, ExecutionAgent(gw, AgentConfig(role="agent")), gw, seed_skill=S0,
                 train=harness.tasks("train"), val=harness.tasks("val"), budget_rollouts=40,
                 run_dir=tmp_path / "gepa", seed=1)
    ran = list((tmp_path / "gepa" / "trajectories").glob("gepa*/*.json"))
    assert len(ran) == 3 + 3  # s0's validation and the one minibatch before the failed reflection, not 40


def test_gepa_records_failed_reflections_and_the_table_says_it_produced_nothing(tmp_path: Path) -> None:
    import litellm

    from experiments.proposals import cell_notes, gepa_failures

    agent_model, _ = scripted_models()
    optimizer_model = _reflection_outage(lambda: litellm.ContextWindowExceededError(
        message="prompt too long", model="scripted", llm_provider="scripted"))
    gw = _gateway(agent_model, optimizer_model)
    harness = CountingHarness(n_tasks=6)
    outcome = run_gepa(harness, ExecutionAgent(gw, AgentConfig(role="agent")), gw, seed_skill=S0,
                       train=harness.tasks("train"), val=harness.tasks("val"), budget_rollouts=12,
                       run_dir=tmp_path / "gepa", seed=1)
    assert outcome.candidates == 1 and outcome.reflection_calls >= 2
    assert outcome.reflection_failures == outcome.reflection_calls
    assert outcome.reflection_note.startswith(f"reflection failed: {outcome.reflection_calls} of "
                                              f"{outcome.reflection_calls} iterations (LLMContextWindowError")
    notes = cell_notes(harness, update_failures=gepa_failures(outcome.reflection_calls, outcome.reflection_failures,
                                                              outcome.reflection_note))
    assert notes["produced_nothing"] is True and notes["no_candidate_note"] == outcome.reflection_note
