"""The validation gate's modes (raso.engine.gate), repeats, the val holdout, seeded in-process calls and the
per-candidate cost, on the toy harness whose val score is a known function of the skill's LEVEL (see
test_engine_support): LEVEL=n solves the val tasks of difficulty <= n, one task per difficulty 1-4."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from test_engine_support import ToyHarness, named_scripted_model, toy_agent_reply, toy_initializer, toy_proposer

from raso.api import optimize
from raso.engine import OptimizeConfig, RunDir
from raso.engine.gate import GateOptions, bootstrap_interval, decide, sign_flip_p_value, split_holdout
from raso.engine.run_dir import read_jsonl
from raso.llm import GatewayConfig, LLMGateway
from raso.llm.scripted import ScriptedModel


def _run(tmp_path: Path, optimizer_replies: list, *, agent_model: str | None = None, **overrides) -> tuple:
    agent = ScriptedModel(toy_agent_reply, name="toy-agent") if agent_model is None else None
    optimizer = ScriptedModel(optimizer_replies, name="toy-optimizer")
    values = dict(harness="toy", **{"models.target": agent_model or agent.model,
                                    "models.optimizer": optimizer.model, "schedule.epochs": 1,
                                    "schedule.minibatch": 2, "schedule.workers": 2, "schedule.seed": 3,
                                    "schedule.test": False, "schedule.max_iterations": 1}, init="rfsi",
                  update="rfsu", run_dir=tmp_path / "run")
    values.update(overrides)
    config = OptimizeConfig(**values)
    result = optimize(ToyHarness(), config, initializer=toy_initializer, proposer=toy_proposer)
    return result, RunDir(config.run_dir), agent


# ---------------------------------------------------------------- the rules on given scores
def test_sign_flip_p_value_is_the_exact_share_of_sign_assignments_at_least_as_good() -> None:
    assert sign_flip_p_value([1.0, 1.0, 1.0]) == 1 / 8
    assert sign_flip_p_value([1.0, 0.0, 0.0, 0.0]) == 1 / 2  # zeros carry no sign information
    assert sign_flip_p_value([1.0, -1.0]) == 3 / 4
    assert sign_flip_p_value([0.0, 0.0]) == 1.0
    assert sign_flip_p_value([0.5] * 20) < 1e-3  # sampled above the exact limit, seeded
    assert sign_flip_p_value([0.5] * 20) == sign_flip_p_value([0.5] * 20)


def test_bootstrap_interval_brackets_the_mean_difference() -> None:
    low, high = bootstrap_interval([1.0, 0.0, 0.0, 0.0], 0.05)
    assert low == 0.0 and 0.5 <= high <= 0.75
    assert bootstrap_interval([0.5] * 6, 0.05) == (0.5, 0.5)


def test_a_gain_on_one_task_passes_strict_and_paired_but_not_significant() -> None:
    candidate = {"a": [1.0], "b": [0.0], "c": [1.0], "d": [0.0]}
    incumbent = {"a": [0.0], "b": [0.0], "c": [1.0], "d": [0.0]}
    strict = decide(GateOptions(mode="strict"), candidate, stored_incumbent_val=0.25)
    paired = decide(GateOptions(mode="paired"), candidate, incumbent=incumbent, stored_incumbent_val=0.25)
    significant = decide(GateOptions(mode="significant"), candidate, incumbent=incumbent, stored_incumbent_val=0.25)
    assert strict.accepted and strict.statistic == 0.25 and strict.p_value is None
    assert paired.accepted and paired.statistic == 0.25 and paired.p_value == 0.5
    assert not significant.accepted and "not significant at 0.05" in significant.reason


def test_paired_compares_with_the_incumbent_rescored_not_its_stored_score() -> None:
    # the incumbent's stored 0.25 was an unlucky draw; re-scored on the same tasks it does as well as the candidate
    candidate = {"a": [1.0], "b": [1.0], "c": [0.0], "d": [0.0]}
    incumbent = {"a": [1.0], "b": [1.0], "c": [0.0], "d": [0.0]}
    assert decide(GateOptions(mode="strict"), candidate, stored_incumbent_val=0.25).accepted
    paired = decide(GateOptions(mode="paired"), candidate, incumbent=incumbent, stored_incumbent_val=0.25)
    assert not paired.accepted and paired.statistic == 0.0 and paired.incumbent_val == 0.5


def test_significant_accepts_a_consistent_gain_and_averages_repeats_per_task() -> None:
    candidate = {t: [1.0, 1.0, 0.0] for t in "abcdefgh"}  # 2/3 per task
    incumbent = {t: [0.0, 0.0, 1.0] for t in "abcdefgh"}  # 1/3 per task
    decision = decide(GateOptions(mode="significant", rollouts_per_task=3), candidate, incumbent=incumbent,
                      stored_incumbent_val=0.9)
    assert decision.accepted and decision.p_value == 1 / 256
    assert decision.statistic == pytest.approx(1 / 3) and decision.candidate_val == pytest.approx(2 / 3)
    assert decision.interval == pytest.approx((1 / 3, 1 / 3))


def test_the_holdout_is_drawn_by_the_seed_and_keeps_one_task_for_the_gate() -> None:
    ids = [f"v{i}" for i in range(10)]
    gated, held = split_holdout(ids, GateOptions(val_holdout=0.3), seed=1)
    assert len(held) == 3 and sorted(gated + held) == sorted(ids) and gated == [i for i in ids if i not in held]
    assert split_holdout(ids, GateOptions(val_holdout=0.3), seed=1) == (gated, held)
    assert split_holdout(ids, GateOptions(val_holdout=2), seed=1)[1] != [] and len(
        split_holdout(ids, GateOptions(val_holdout=2), seed=1)[1]) == 2
    assert split_holdout(["v1"], GateOptions(val_holdout=0.5), seed=1) == (["v1"], [])


# ---------------------------------------------------------------- the rules in a run
def test_strict_accepts_a_one_task_gain_that_significant_rejects(tmp_path: Path) -> None:
    # s0 LEVEL=1 solves 1 of 4 val tasks, the candidate LEVEL=2 solves 2: one task better, as noise could be
    strict, rd_s, _ = _run(tmp_path / "strict", ["LEVEL=1", "LEVEL=2"])
    sig, rd_g, _ = _run(tmp_path / "sig", ["LEVEL=1", "LEVEL=2"], gate={"mode": "significant", "rollouts_per_task": 2})

    (s,) = read_jsonl(rd_s.candidates)
    assert s["accepted"] and s["gate_mode"] == "strict" and s["statistic"] == 0.25 and s["gate_rollouts"] == 4
    assert strict.val_rollouts == 4 + 4 and strict.best_version == 1

    (g,) = read_jsonl(rd_g.candidates)
    assert not g["accepted"] and g["gate_mode"] == "significant"
    assert g["p_value"] == 0.5 and g["statistic"] == 0.25 and g["incumbent_val"] == 0.25
    assert g["gate_rollouts"] == 2 * 4 * 2  # candidate and incumbent, two repeats each
    assert sig.val_rollouts == 2 * 4 + 16 and sig.rollouts_used == 2 + 24 and sig.best_version == 0
    for batch in ("s0_val", "s0_val_r2", "iter001_val", "iter001_val_r2", "iter001_val_incumbent",
                  "iter001_val_incumbent_r2"):
        assert len(read_jsonl(rd_g.rollouts_path(batch))) == 4, batch
    report = rd_g.report.read_text()
    assert "- gate: significant (one-sided sign-flip permutation test, level 0.05); 2 rollout(s)" in report
    assert "| +0.250 | [+0.000, +0.750] | 0.500 | 16 |" in report and "not significant" in report


def test_paired_accepts_a_gain_over_the_incumbent_rescored(tmp_path: Path) -> None:
    result, rd, agent = _run(tmp_path, ["LEVEL=1", "LEVEL=3"], gate={"mode": "paired"})
    (d,) = read_jsonl(rd.candidates)
    assert d["accepted"] and d["statistic"] == 0.5 and d["incumbent_val"] == 0.25 and d["gate_rollouts"] == 8
    assert result.best_val == 0.75 and result.val_rollouts == 4 + 8 == len(agent.calls) - 2


def test_significant_accepts_a_gain_on_every_task_at_its_level(tmp_path: Path) -> None:
    result, rd, _ = _run(tmp_path, ["LEVEL=0", "LEVEL=4"], gate={"mode": "significant", "level": 0.1})
    (d,) = read_jsonl(rd.candidates)
    assert d["accepted"] and d["p_value"] == 1 / 16 and result.best_val == 1.0


def test_the_rollout_budget_reserves_the_whole_gate_decision(tmp_path: Path) -> None:
    # paired with 2 repeats: s0 val 8, then a decision costs 16; budget 25 leaves 1 train rollout
    result, rd, _ = _run(tmp_path, ["LEVEL=1", "LEVEL=2", "LEVEL=3"], gate={"mode": "paired", "rollouts_per_task": 2},
                         **{"budget.rollouts": 25, "schedule.max_iterations": None})
    assert [len(d["train_task_ids"]) for d in read_jsonl(rd.candidates)] == [1]
    assert result.rollouts_used == 25 and "rollout budget" in result.stop_reason


def test_the_holdout_is_scored_for_the_final_skill_and_reported(tmp_path: Path) -> None:
    result, rd, agent = _run(tmp_path, ["LEVEL=1", "LEVEL=4"], gate={"val_holdout": 1})
    gated = {r["task_id"] for r in read_jsonl(rd.rollouts_path("s0_val"))}
    held = {r["task_id"] for r in read_jsonl(rd.rollouts_path("holdout_v001"))}
    assert len(gated) == 3 and len(held) == 1 and not gated & held
    assert result.holdout is not None and result.holdout.version == 1 and result.holdout.mean_reward == 1.0
    assert result.holdout.gated_val == result.best_val == 1.0 and result.holdout.rollouts == 1
    assert result.val_rollouts == 3 + 3  # the holdout is counted apart
    assert "| held-out val score (v001, never seen by the gate) | 1.000 on 1 task(s), 1 rollouts; gated val 1.000" \
        in rd.report.read_text()
    page = rd.report_html.read_text()
    assert "1.000 for v001 on 1 task(s) the gate never saw (1 rollouts); gated val 1.000, gap +0.000" in page


# ---------------------------------------------------------------- seeds and cost
def test_every_in_process_call_carries_a_seed_from_the_run_seed_and_its_cache_key(tmp_path: Path) -> None:
    from raso.llm import scripted

    model = named_scripted_model("gate-seeded-agent", toy_agent_reply)
    agent = scripted._registry["gate-seeded-agent"]
    _run(tmp_path / "a", ["LEVEL=1", "LEVEL=2"], agent_model=model, gate={"rollouts_per_task": 2})
    seeds_by_task: dict[str, list[int]] = defaultdict(list)
    for messages, params in zip(agent.calls, agent.params):
        text = "\n".join(str(m.get("content")) for m in messages)
        task = next(t for t in ("v1", "v2", "v3", "v4", "t") if f"task id: {t}" in text)
        seeds_by_task[task].append(params["seed"])
    for task in ("v1", "v2", "v3", "v4"):  # s0 and the candidate, two repeats each: four distinct samples
        assert len(seeds_by_task[task]) == 4 and len(set(seeds_by_task[task])) == 4, task
    first = list(agent.params)
    agent.params.clear()
    _run(tmp_path / "b", ["LEVEL=1", "LEVEL=2"], agent_model=model, gate={"rollouts_per_task": 2})
    assert sorted(p["seed"] for p in agent.params) == sorted(p["seed"] for p in first)  # the same run, again
    agent.params.clear()
    _run(tmp_path / "c", ["LEVEL=1", "LEVEL=2"], agent_model=model, gate={"rollouts_per_task": 2}, **{"schedule.seed": 4})
    assert not {p["seed"] for p in agent.params} & {p["seed"] for p in first}


def test_the_gateway_seeds_by_tag_and_only_when_told() -> None:
    model = ScriptedModel(lambda messages: "ok", name="seed-probe")
    messages = [{"role": "user", "content": "hi"}]
    seeded = LLMGateway(GatewayConfig.for_models(target=model.model, seed=7))
    seeded.complete("agent", messages, cache_key_extra="unit-a")
    seeded.complete("agent", messages, cache_key_extra="unit-a")
    seeded.complete("agent", messages, cache_key_extra="unit-b")
    LLMGateway(GatewayConfig.for_models(target=model.model)).complete("agent", messages)
    seeds = [p.get("seed") for p in model.params]
    assert seeds[0] == seeds[1] and seeds[0] != seeds[2] and seeds[3] is None
    assert isinstance(seeds[0], int) and 0 <= seeds[0] < 2**31


def test_each_candidates_cost_is_its_units_in_the_ledger_and_the_parts_sum_to_it(tmp_path: Path) -> None:
    result, rd, _ = _run(tmp_path, ["LEVEL=1", "LEVEL=2", "LEVEL=3", "LEVEL=3\nx"], **{"schedule.max_iterations": None},
                         gate={"mode": "paired"})
    decisions = read_jsonl(rd.candidates)
    assert len(decisions) == 3
    for d in decisions:
        cost = d["cost"]
        assert cost["propose"]["calls"] == 1 and cost["val"]["calls"] == 8
        assert cost["train"]["calls"] == len(d["train_task_ids"])
    records = read_jsonl(rd.ledger_calls)
    outside = [r for r in records if (r.get("unit") or "").split("|")[0] in ("init", "s0_val")]
    per_candidate = sum(u["calls"] for d in decisions for u in d["cost"].values())
    assert per_candidate + len(outside) == result.model_calls == len(records)
    tokens = sum(u["prompt_tokens"] + u["completion_tokens"] for d in decisions for u in d["cost"].values())
    assert tokens + sum(r["prompt_tokens"] + r["completion_tokens"] for r in outside) == (
        result.prompt_tokens + result.completion_tokens)
    assert "## Cost per candidate" in rd.report.read_text()
