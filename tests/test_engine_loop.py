"""The optimization loop on the toy harness with scripted models: the validation gate, budgets, crashes,
the run directory's contents and the report."""

from __future__ import annotations

import json
from pathlib import Path

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
from raso.engine import OptimizeConfig, RunDir
from raso.engine.run_dir import read_jsonl
from raso.llm.scripted import ScriptedModel
from raso.skill import Skill

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _run(tmp_path: Path, optimizer_replies: list, *, harness: ToyHarness | None = None, propose=toy_proposer,
         **overrides) -> tuple:
    agent = ScriptedModel(toy_agent_reply, name="toy-agent")
    optimizer = ScriptedModel(optimizer_replies, name="toy-optimizer")
    values = {"harness": "toy", "models.target": agent.model, "models.optimizer": optimizer.model,
              "init.method": "rfsi", "update.method": "rfsu", "schedule.epochs": 1, "schedule.minibatch": 2,
              "schedule.workers": 2, "schedule.seed": 3, "schedule.test": False, "run_dir": tmp_path / "run"}
    config = OptimizeConfig(**{**values, **overrides})
    result = optimize(harness or ToyHarness(), config, initializer=toy_initializer, proposer=propose)
    return result, RunDir(config.run_dir), agent, optimizer


def test_gate_accepts_strictly_better_and_rejects_equal_and_worse(tmp_path: Path) -> None:
    # s0 LEVEL=1 scores 1/4 on val; LEVEL=2 scores 2/4; a reworded LEVEL=2 ties; LEVEL=1 is worse.
    replies = ["LEVEL=1", "LEVEL=2", "LEVEL=2\nBe brief.", "LEVEL=1\nShorter."]
    result, rd, agent, _ = _run(tmp_path, replies)

    decisions = read_jsonl(rd.candidates)
    assert [(d["version"], d["candidate_val"], d["current_val"], d["accepted"]) for d in decisions] == [
        (1, 0.5, 0.25, True), (2, 0.5, 0.5, False), (3, 0.25, 0.5, False)]
    assert "=" in decisions[1]["reason"] and "rejected" in decisions[1]["reason"]
    assert result.best_version == 1 and result.best_val == 0.5 and result.initial_val == 0.25
    assert Skill.load(rd.best_skill).body == Skill.load(rd.skill_path(1)).body
    assert "LEVEL=2" in Skill.load(rd.best_skill).body
    # s_t's val score is reused, never re-rolled: one val evaluation for s0 and one per candidate
    val_batches = sorted(p.name for p in rd.trajectories.glob("*_val.rollouts.jsonl"))
    assert val_batches == ["iter001_val.rollouts.jsonl", "iter002_val.rollouts.jsonl", "iter003_val.rollouts.jsonl",
                           "s0_val.rollouts.jsonl"]
    assert result.rollouts_used == 4 * 4 + 6 == len(agent.calls)  # one model turn per toy rollout
    assert (result.train_rollouts, result.val_rollouts) == (6, 16)
    assert result.stop_reason.startswith("schedule complete")


def test_minibatches_cover_train_once_per_epoch_in_a_seeded_order(tmp_path: Path) -> None:
    replies = ["LEVEL=1"] + [f"LEVEL=1\nv{i}" for i in range(10)]
    result, rd, _, _ = _run(tmp_path, replies, **{"schedule.epochs": 2, "schedule.minibatch": 4})
    batches = [d["train_task_ids"] for d in read_jsonl(rd.candidates)]
    assert [len(b) for b in batches] == [4, 2, 4, 2]  # the last minibatch of an epoch is smaller
    assert sorted(batches[0] + batches[1]) == sorted(batches[2] + batches[3]) == [f"t{i}" for i in range(1, 7)]
    assert batches[0] + batches[1] != batches[2] + batches[3]  # reshuffled per epoch

    again, rd2, _, _ = _run(tmp_path / "again", replies, **{"schedule.epochs": 2, "schedule.minibatch": 4})
    assert [d["train_task_ids"] for d in read_jsonl(rd2.candidates)] == batches  # same seed, same order


def test_rollout_budget_stops_the_run_exactly_at_its_limit(tmp_path: Path) -> None:
    # s0 val 4 + iteration 1 (2 train + 4 val) = 10; iteration 2 has 5 left: 1 train + 4 val = 15
    replies = ["LEVEL=1", "LEVEL=2", "LEVEL=3", "LEVEL=3\nmore"]
    result, rd, agent, _ = _run(tmp_path, replies, **{"budget.rollouts": 15})
    assert result.rollouts_used == 15
    rolled = sum(len(read_jsonl(p)) for p in rd.trajectories.glob("*.rollouts.jsonl"))
    assert rolled == 15 == len(agent.calls)
    assert [len(d["train_task_ids"]) for d in read_jsonl(rd.candidates)] == [2, 1]
    assert "rollout budget" in result.stop_reason


def test_budget_too_small_for_the_val_set_stops_before_any_rollout(tmp_path: Path) -> None:
    result, rd, agent, _ = _run(tmp_path, ["LEVEL=1"], **{"budget.rollouts": 3})
    assert result.rollouts_used == 0 and agent.calls == []
    assert "cannot cover evaluating s0" in result.stop_reason
    assert rd.skill_path(0).exists() and rd.best_skill.exists()


def test_crashing_rollout_scores_zero_and_the_run_goes_on(tmp_path: Path) -> None:
    replies = ["LEVEL=4", "LEVEL=4\nagain", "LEVEL=4\nmore", "LEVEL=4\nstill"]
    result, rd, _, _ = _run(tmp_path, replies, harness=ToyHarness(crash_val=True))
    s0 = {r["task_id"]: r for r in read_jsonl(rd.rollouts_path("s0_val"))}
    assert s0["v4"]["reward"] == 0.0 and "toy tool crashed" in s0["v4"]["error"]
    assert s0["v1"]["reward"] == 1.0
    assert result.initial_val == 0.75  # LEVEL=4 would solve all four; the crash scores 0
    assert result.iterations == 3 and result.finished


def test_a_failing_proposal_is_logged_and_the_run_goes_on(tmp_path: Path) -> None:
    calls = {"n": 0}

    def flaky_propose(ctx, skill, rollouts):
        calls["n"] += 1
        if calls["n"] == 1:
            raise ValueError("optimizer returned junk")
        return toy_propose(ctx, skill, rollouts)

    result, rd, _, _ = _run(tmp_path, ["LEVEL=1", "LEVEL=2", "LEVEL=3"], propose=FunctionProposer(flaky_propose))
    decisions = read_jsonl(rd.candidates)
    assert decisions[0]["version"] is None and "junk" in decisions[0]["error"] and not decisions[0]["accepted"]
    assert decisions[0]["candidate_val"] is None
    assert [d["accepted"] for d in decisions[1:]] == [True, True]
    assert result.best_val == 0.75


def test_identical_candidate_is_rejected_without_spending_val_rollouts(tmp_path: Path) -> None:
    result, rd, _, _ = _run(tmp_path, ["LEVEL=1", "LEVEL=1", "LEVEL=1", "LEVEL=1"])
    decisions = read_jsonl(rd.candidates)
    assert all(not d["accepted"] and "identical" in d["reason"] for d in decisions)
    assert result.val_rollouts == 4 and result.rollouts_used == 4 + 6


def test_run_directory_layout_and_lesson_provenance(tmp_path: Path) -> None:
    result, rd, _, _ = _run(tmp_path, ["LEVEL=1", "LEVEL=2", "LEVEL=3", "LEVEL=3\nx"])
    root = rd.root
    for name in ("config.resolved.json", "config.resolved.yaml", "task_description.md", "harness_description.md",
                 "SKILL.md", "candidates.jsonl", "lessons.jsonl", "ledger.json", "ledger.calls.jsonl",
                 "checkpoint.json", "report.md", "events.jsonl", "proposals/init.json", "proposals/iter001.json"):
        assert (root / name).is_file(), name
    assert (root / "task_description.md").read_text() == ToyHarness().task_description + "\n"
    assert len(list((root / "trajectories" / "s0_val").glob("*.json"))) == 4
    lessons = read_jsonl(rd.lessons)
    init_lesson = next(lesson for lesson in lessons if lesson["stage"] == "init")
    assert [s["repo"] for s in init_lesson["sources"]] == ["owner/repo1", "owner/repo2"]
    assert init_lesson["sources"][0]["heading_path"] == "Usage > Step 1" and init_lesson["sources"][0]["commit"]
    assert {lesson["skill_version"] for lesson in lessons if lesson["stage"] == "update"} == {1, 2, 3}
    ledger = json.loads(rd.ledger.read_text())
    assert ledger["totals"]["calls"] == result.model_calls == 22 + 4  # 22 rollouts + 4 optimizer calls
    assert set(ledger["by_stage"]) == {"rollout", "rasi.skill_init", "rasu.update"}
    resolved = json.loads(rd.config_json.read_text())
    assert resolved["schedule"]["minibatch"] == 2 and resolved["run_dir"] == str(root.resolve())


def test_report_has_the_score_table_and_png_plots(tmp_path: Path) -> None:
    result, rd, _, _ = _run(tmp_path, ["LEVEL=1", "LEVEL=2", "LEVEL=2\nsame", "LEVEL=1\nworse"])
    report = rd.report.read_text()
    assert "| 1 | 1 | 2 |" in report and "accepted" in report and "rejected" in report
    assert "| best val score | 0.500 |" in report
    assert "owner/repo1/skills/s1/SKILL.md" in report  # lesson provenance
    for name in ("val_vs_rollouts.png", "val_vs_cost.png"):
        png = rd.plots / name
        assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 2000
        assert f"plots/{name}" in report


def test_rerunning_into_an_existing_run_dir_is_refused(tmp_path: Path) -> None:
    _run(tmp_path, ["LEVEL=1", "LEVEL=1", "LEVEL=1", "LEVEL=1"])
    from raso.errors import RunError

    with pytest.raises(RunError, match="raso resume"):
        _run(tmp_path, ["LEVEL=1"])


def test_usd_budget_stops_the_run_cleanly(tmp_path: Path) -> None:
    from raso.llm import CallRecord

    def priced_propose(ctx, skill, rollouts):
        proposal = toy_propose(ctx, skill, rollouts)
        # scripted models are free; book a priced call as a paid provider would
        ctx.gateway.ledger.record(CallRecord(role="optimizer", stage="rasu.update", model="paid/model", cost_usd=0.75))
        return proposal

    result, rd, _, _ = _run(tmp_path, ["LEVEL=1", "LEVEL=2", "LEVEL=3"], propose=FunctionProposer(priced_propose),
                            **{"budget.usd": 0.5})
    decisions = read_jsonl(rd.candidates)
    assert len(decisions) == 1 and decisions[0]["reason"] == "not evaluated: USD budget reached"
    assert result.stop_reason == "USD budget reached ($0.7500 of $0.5000)"
    assert result.rollouts_used == 4 + 2 and result.cost_usd == 0.75 and result.finished
    assert "USD budget reached" in rd.report.read_text()


def test_progress_display_shows_iteration_rollouts_best_val_and_cost(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from raso.engine import RichProgress

    console = Console(file=io.StringIO(), width=100, force_terminal=False)
    progress = RichProgress(console=console, title="toy")
    agent = ScriptedModel(toy_agent_reply, name="toy-agent")
    optimizer = ScriptedModel(["LEVEL=1", "LEVEL=2", "LEVEL=2\nx", "LEVEL=1\ny"], name="toy-optimizer")
    config = OptimizeConfig(harness="toy", models={"target": agent.model, "optimizer": optimizer.model},
                            init={"method": "rfsi"}, update={"method": "rfsu"}, budget={"rollouts": 30},
                            schedule={"epochs": 1, "minibatch": 2, "test": False}, run_dir=tmp_path / "run")
    with progress:
        optimize(ToyHarness(), config, initializer=toy_initializer, proposer=toy_proposer, sinks=[progress])
    shown = console.file.getvalue()
    for expected in ("iteration", "3", "rollouts used", "22/30", "best val score", "0.500", "cost so far",
                     "$0.0000", "candidate v1: 0.500 vs 0.250 -> accepted", "candidate v3: 0.250 vs 0.500 -> rejected"):
        assert expected in shown, expected


def test_an_unusable_agent_model_stops_the_run_and_resume_continues_after_the_fix(tmp_path: Path) -> None:
    from test_engine_support import named_scripted_model

    from raso.engine import ModelUnusableError

    optimizer = ScriptedModel(["LEVEL=1", "LEVEL=2", "LEVEL=3", "LEVEL=3\nx"], name="toy-optimizer")
    config = OptimizeConfig(harness="toy", models={"target": "scripted/engine-agent-registered-later",
                                                   "optimizer": optimizer.model},
                            init={"method": "rfsi"}, update={"method": "rfsu"},
                            schedule={"epochs": 1, "minibatch": 2, "test": False}, run_dir=tmp_path / "run")
    steps = dict(harness=ToyHarness(), initializer=toy_initializer, proposer=toy_proposer)
    with pytest.raises(ModelUnusableError, match="every rollout of s0_val failed because the model is unusable"):
        optimize(config=config, **steps)
    state = json.loads((tmp_path / "run" / "checkpoint.json").read_text())
    assert state["phase"] == "s0_val" and state["rollouts_used"] == 0  # nothing counted, s0 kept

    named_scripted_model("engine-agent-registered-later", toy_agent_reply)  # "the fix"
    result = resume(tmp_path / "run", **steps)
    assert result.finished and result.initial_val == 0.25 and result.best_val == 0.75


def test_a_failed_initialization_is_retried_afresh_on_resume_not_replayed(tmp_path: Path) -> None:
    def picky_initialize(ctx):
        result = toy_initialize(ctx)
        if "junk" in result.skill.body:
            raise ValueError("the optimizer model returned junk")
        return result

    agent = ScriptedModel(toy_agent_reply, name="toy-agent")
    optimizer = ScriptedModel(["junk", "LEVEL=1", "LEVEL=2", "LEVEL=3", "LEVEL=3\nx"], name="toy-optimizer")
    config = OptimizeConfig(harness="toy", models={"target": agent.model, "optimizer": optimizer.model},
                            init={"method": "rfsi"}, update={"method": "rfsu"},
                            schedule={"epochs": 1, "minibatch": 2, "test": False}, run_dir=tmp_path / "run")
    steps = dict(harness=ToyHarness(), initializer=FunctionInitializer(picky_initialize), proposer=toy_proposer)
    with pytest.raises(ValueError, match="junk"):
        optimize(config=config, **steps)
    state = json.loads((tmp_path / "run" / "checkpoint.json").read_text())
    assert state["phase"] == "init" and state["failed_attempts"] == {"init": 1}
    result = resume(tmp_path / "run", **steps)  # the cached "junk" reply is not replayed: a fresh call
    assert result.finished and result.initial_val == 0.25 and len(optimizer.calls) == 5
