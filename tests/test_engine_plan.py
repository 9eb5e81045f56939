"""The cost plan (raso.engine.plan): made before a run without calling a model, it must predict the scripted
toy run's rollouts per phase and model calls per role; the report sets it against the spend."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_engine_support import ToyHarness, toy_agent_reply, toy_initializer, toy_proposer

import raso
from raso.api import optimize
from raso.cli import main as raso_main
from raso.engine import OptimizeConfig, RunDir
from raso.engine.plan import format_plan, plan_run
from raso.engine.run_dir import read_jsonl
from raso.llm.scripted import ScriptedModel


def _config(tmp_path: Path, name: str, agent: ScriptedModel, optimizer: ScriptedModel, **overrides) -> OptimizeConfig:
    values = dict(harness="toy", **{"models.target": agent.model, "models.optimizer": optimizer.model,
                                    "schedule.epochs": 1, "schedule.minibatch": 2, "schedule.workers": 2,
                                    "schedule.seed": 3, "schedule.test": False}, init="rfsi", update="rfsu", run_dir=tmp_path / name)
    values.update(overrides)
    return OptimizeConfig(**values)


def test_the_plan_predicts_a_runs_rollouts_per_phase_and_calls_per_role(tmp_path: Path) -> None:
    agent = ScriptedModel(toy_agent_reply, name="toy-agent")
    first = _config(tmp_path, "a", agent, ScriptedModel(["LEVEL=1", "LEVEL=2", "LEVEL=3", "LEVEL=4"], name="opt"))
    optimize(ToyHarness(), first, initializer=toy_initializer, proposer=toy_proposer)

    optimizer = ScriptedModel(["LEVEL=1", "LEVEL=3", "LEVEL=4"], name="opt")
    config = _config(tmp_path, "b", agent, optimizer, **{"schedule.epochs": 2, "schedule.minibatch": 4,
                                                         "budget.rollouts": 40, "schedule.test": True},
                     gate={"mode": "paired", "rollouts_per_task": 2, "val_holdout": 1})
    plan = plan_run(config, ToyHarness(), previous_run=tmp_path / "a")  # rollout length measured in run a
    # s0 on 3 gated val tasks x 2 repeats; a decision costs 3 x 2 x 2 = 12; 40 - 6 leaves iterations of 4 + 12 and
    # 2 + 12, then no room; the held-out task x 2; test: s0 and the best skill x 1 task x 2
    assert plan.rollouts == {"s0_val": 6, "train": 6, "val": 24, "holdout": 2, "test": 4} and plan.iterations == 2
    calls = {r.role: r.calls for r in plan.roles}
    assert calls == {"agent": 42, "optimizer": 3}

    result = optimize(ToyHarness(), config, initializer=toy_initializer, proposer=toy_proposer)
    rd = RunDir(config.run_dir)
    assert result.iterations == plan.iterations and result.train_rollouts == plan.rollouts["train"]
    assert result.val_rollouts == plan.rollouts["s0_val"] + plan.rollouts["val"]
    assert result.holdout is not None and result.holdout.rollouts == plan.rollouts["holdout"]
    assert result.test_rollouts == plan.rollouts["test"]
    records = read_jsonl(rd.ledger_calls)
    assert {role: sum(1 for r in records if r["role"] == role) for role in ("agent", "optimizer")} == calls
    report = rd.report.read_text()
    assert "## Plan against spend" in report and "| val | 24 | 24 |" in report and "| holdout | 2 | 2 |" in report
    assert f"| agent | {agent.model} | 42 | 42 |" in report
    assert (rd.plan).is_file() and "previous_run" in rd.plan.read_text()  # written before the run, from run a


def test_without_a_previous_run_the_plan_assumes_a_turn_per_allowed_step_and_prices_it(tmp_path: Path) -> None:
    config = OptimizeConfig(harness="toy", **{"models.target": "openai/priced-agent",
                                              "models.optimizer": "openai/priced-opt", "schedule.epochs": 1,
                                              "schedule.minibatch": 2, "schedule.test": False,
                                              "models.prices": {"openai/priced-agent": "1,2", "openai/priced-opt": "3,4"}},
                            init="rfsi", update="rfsu", run_dir=tmp_path / "r")
    plan = plan_run(config, ToyHarness())
    rollouts = sum(plan.rollouts.values())
    assert rollouts == 4 + 3 * (2 + 4)  # s0 val, then three minibatches of 2 with a val decision each
    agent, opt = plan.roles
    assert agent.calls == rollouts * ToyHarness.max_steps and "default" in agent.basis
    assert agent.usd == pytest.approx((agent.prompt_tokens * 1 + agent.completion_tokens * 2) / 1e6)
    assert opt.usd == pytest.approx((opt.prompt_tokens * 3 + opt.completion_tokens * 4) / 1e6)
    assert plan.usd == pytest.approx(agent.usd + opt.usd)
    text = format_plan(plan)
    assert "no model was called" in text and f"${plan.usd:.4f}" in text


def test_raso_plan_and_the_cli_flag_print_the_plan_and_call_nothing(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    plan = raso.plan(ToyHarness(), **{"models.target": "scripted/never-called", "schedule.epochs": 1,
                                      "schedule.minibatch": 2, "schedule.test": False}, init="rfsi", update="rfsu")
    assert plan.rollouts["s0_val"] == 4 and plan.iterations == 3
    code = raso_main(["optimize", "--plan", "--harness", "test_engine_support:ToyHarness", "--model",
                           "scripted/never-called", "--init", "rfsi", "--update", "rfsu", "--epochs", "1",
                           "--minibatch", "2", "--no-test"])
    out = capsys.readouterr().out
    assert code == 0 and "no model was called" in out and "s0_val         4" in out
    assert not (tmp_path / "runs").exists()  # no run directory was made


def test_an_unreadable_previous_run_falls_back_to_the_defaults_and_says_so(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "ledger.calls.jsonl").write_text("")
    (broken / "checkpoint.json").write_text("{not json")
    config = OptimizeConfig(harness="toy", **{"models.target": "scripted/x", "schedule.epochs": 1,
                                              "schedule.minibatch": 2, "schedule.test": False},
                                           init="rfsi", update="rfsu", run_dir=tmp_path / "r")
    plan = plan_run(config, ToyHarness(), previous_run=broken)
    assert plan.previous_run is None and "unreadable" in plan.roles[0].basis and "default" in plan.roles[0].basis


def test_the_plan_sets_its_estimate_against_budget_usd_and_budget_test_usd(tmp_path: Path, capsys) -> None:
    prices = {"openai/priced-agent": "1,2", "openai/priced-opt": "3,4"}
    config = OptimizeConfig(harness="toy", **{"models.target": "openai/priced-agent",
                                              "models.optimizer": "openai/priced-opt", "schedule.epochs": 1,
                                              "schedule.minibatch": 2, "schedule.test": True,
                                              "models.prices": prices},
                            init="rfsi", update="rfsu", run_dir=tmp_path / "r", budget={"usd": 1.0, "test_usd": 0.001})
    plan = plan_run(config, ToyHarness())
    assert plan.rollouts["test"] == 2 and plan.budget_usd == 1.0 and plan.budget_test_usd == 0.001
    agent = plan.roles[0]
    # the test evaluation's part: its rollouts' share of the agent's calls, priced the same way
    assert plan.test_usd == pytest.approx(agent.usd * 2 / sum(plan.rollouts.values()), rel=1e-3)
    rest = plan.usd - plan.test_usd
    lines = plan.budget_lines()
    assert lines == [f"budget.usd $1.0000 covers every call but the test evaluation: estimate ${rest:.4f} fits",
                     f"budget.test_usd $0.0010 covers the test evaluation: estimate ${plan.test_usd:.4f} exceeds it: "
                     "the test evaluation is cut short"]
    shared = plan_run(config.model_copy(update={"budget": config.budget.model_copy(update={"test_usd": None})}),
                      ToyHarness())
    assert shared.budget_lines() == [f"budget.usd $1.0000 covers every call, the test evaluation included: "
                                     f"estimate ${shared.usd:.4f} fits"]
    # the flag reaches the plan the CLI prints
    code = raso_main(["optimize", "--plan", "--harness", "test_engine_support:ToyHarness", "--model",
                      "openai/priced-agent", "--optimizer-model", "openai/priced-opt", "--price",
                      "openai/priced-agent=1,2", "--price", "openai/priced-opt=3,4", "--init", "rfsi", "--update",
                      "rfsu", "--epochs", "1", "--minibatch", "2", "--budget-test-usd", "0.5",
                      "--run-dir", str(tmp_path / "cli")])
    out = capsys.readouterr().out
    assert code == 0 and "budget.test_usd $0.5000 covers the test evaluation: estimate $" in out and "fits" in out
