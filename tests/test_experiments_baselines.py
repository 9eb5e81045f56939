"""GEPA and TextGrad really run through their packages on the toy harness, with the scripted models."""

from __future__ import annotations

import json
from pathlib import Path

import gepa  # noqa: E402, F401  (the baselines run through their packages: the `experiments` extra, in `dev`)
import textgrad  # noqa: E402, F401
from test_experiments_support import MARKER, PLAIN_SKILL, scripted_models  # noqa: E402

import raso.api  # noqa: E402
from experiments.baselines.gepa_baseline import HarnessGEPAAdapter, run_gepa  # noqa: E402
from experiments.baselines.textgrad_baseline import TextGradProposer  # noqa: E402
from raso.agent import AgentConfig, ExecutionAgent  # noqa: E402
from raso.engine import OptimizeConfig, RunDir  # noqa: E402
from raso.llm import GatewayConfig, LLMGateway, RetryConfig  # noqa: E402
from raso.skill import Skill  # noqa: E402
from raso.testing import CountingHarness  # noqa: E402

S0 = Skill(**PLAIN_SKILL)


def _gateway(agent, optimizer) -> LLMGateway:
    return LLMGateway(GatewayConfig.for_models(target=agent.model, optimizer=optimizer.model,
                                               retry=RetryConfig(max_attempts=1)))


def test_gepa_adapter_opts_out_of_a_custom_proposer() -> None:
    # gepa 0.1.4 uses its reflective proposer only when the attribute is None (the adapter is not a subclass)
    assert HarnessGEPAAdapter.propose_new_texts is None


def test_gepa_runs_through_the_package_within_the_rollout_budget(tmp_path: Path) -> None:
    agent_model, optimizer_model = scripted_models()
    gw = _gateway(agent_model, optimizer_model)
    harness = CountingHarness(n_tasks=6)
    agent = ExecutionAgent(gw, AgentConfig(role="agent"))
    budget = 3 + 2 * (2 * 3 + 3)  # s0 on val, then room for two iterations
    outcome = run_gepa(harness, agent, gw, seed_skill=S0, train=harness.tasks("train"), val=harness.tasks("val"),
                       budget_rollouts=budget, run_dir=tmp_path / "gepa", seed=1)

    assert outcome.initial_val == 0.0  # the seed skill lacks the marker: the scripted agent stops at once
    assert outcome.best_val == 1.0 and MARKER in outcome.best_skill
    assert outcome.candidates >= 2
    # every rollout GEPA asked for was run by our agent and counted, never more than the budget
    trajectory_files = list((tmp_path / "gepa" / "trajectories").glob("gepa*/*.json"))
    assert outcome.rollouts_used == len(trajectory_files) <= budget
    assert outcome.gepa_metric_calls == outcome.rollouts_used
    assert outcome.max_metric_calls == budget  # the whole budget: the reported candidate was found within it
    # the reflection model was called through the gateway: its calls are in our ledger
    stages = gw.ledger.by_stage()
    assert stages["gepa.reflection"]["calls"] >= 1
    assert any("Provide the new instructions" in m["content"] for call in optimizer_model.calls for m in call)


def test_textgrad_update_runs_inside_the_engine(tmp_path: Path) -> None:
    agent_model, optimizer_model = scripted_models()
    s0_path = S0.save(tmp_path / "s0.md")
    config = OptimizeConfig(models={"target": agent_model.model, "optimizer": optimizer_model.model},
                            init={"method": str(s0_path)}, update={"method": "rfsu"},
                            schedule={"epochs": 1, "minibatch": 3, "workers": 2, "test": False}, run_dir=tmp_path / "run")
    result = raso.api.optimize(CountingHarness(n_tasks=6), config=config, proposer=TextGradProposer())

    assert result.initial_val == 0.0 and result.best_val == 1.0 and result.accepted == 1
    rd = RunDir(config.run_dir)
    assert MARKER in Skill.load(rd.best_skill).body
    proposal = json.loads((rd.proposals / "iter001.json").read_text())
    assert proposal["mode"] == "textgrad"
    assert len(proposal["losses"]) == 3  # one TextLoss per train rollout of the minibatch
    assert proposal["gradients"] and all(MARKER in g for g in proposal["gradients"])
    # TextGrad's calls (3 losses, 3 + 3 backward, 1 TGD step) went through the run's gateway and ledger
    ledger = json.loads(rd.ledger.read_text())
    assert ledger["by_stage"]["textgrad"]["calls"] == 10
    assert result.rollouts_used == 3 + 3 + 3  # s0 val, minibatch, candidate val: the engine's accounting


def test_gepa_stops_at_a_check_error_as_the_engine_does_never_scoring_it() -> None:
    import pytest

    from experiments.baselines.gepa_baseline import refuse_uncounted
    from raso.engine import CheckError, InfrastructureError
    from raso.harness import Rollout

    ok = Rollout(task_id="a", harness="toy", reward=1.0)
    unscored = Rollout(task_id="b", harness="toy", reward=0.0, outcome="check_error",
                       error="check error: the verifier wrote no reward")
    refuse_uncounted([ok])
    with pytest.raises(CheckError, match=r"could not score 1 of 2 GEPA rollouts \(task b: check error: the verifier"):
        refuse_uncounted([ok, unscored])
    with pytest.raises(InfrastructureError):
        refuse_uncounted([ok, Rollout(task_id="c", harness="toy", reward=0.0, outcome="infrastructure", error="x")])
