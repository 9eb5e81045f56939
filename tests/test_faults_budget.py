"""Cost is never silently zero (issue 15): a price table for models litellm does not price, unpriced calls
marked in the report, a USD budget refused for an unpriced model and enforced before each call with a
worst-case estimate, so the spend passes the budget by at most one call."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from test_engine_support import FunctionProposer, ToyHarness, toy_agent_reply, toy_initializer, toy_propose, toy_proposer

from raso.api import optimize
from raso.engine import ConfigError, OptimizeConfig, RunDir
from raso.llm import BudgetExceededError, CallRecord, GatewayConfig, LLMGateway, RoleConfig
from raso.llm.config import ModelPrice
from raso.llm.scripted import ScriptedModel
from raso.skill import Skill

SELF_HOSTED = "openai/raso-test-self-hosted-model"  # a model litellm's bundled price map does not know
UNPRICED = "openai/raso-test-never-priced-model"  # never given a price here (registration with litellm is global)


def test_prices_parse_from_a_pair_a_string_or_a_table() -> None:
    assert ModelPrice.model_validate("0.5, 2") == ModelPrice(input=0.5, output=2.0)
    assert ModelPrice.model_validate([1, 3]).cost(1_000_000, 500_000) == pytest.approx(2.5)
    config = OptimizeConfig(prices={SELF_HOSTED: "0.1,0.4"})
    assert config.models.prices[SELF_HOSTED] == ModelPrice(input=0.1, output=0.4)
    with pytest.raises(ValueError):
        ModelPrice.model_validate("1,2,3")


def test_an_unpriced_model_has_no_cost_not_zero_and_a_price_table_prices_it() -> None:
    response = SimpleNamespace(_hidden_params={}, model="raso-test-self-hosted-model", choices=[], usage=None)
    plain = LLMGateway(GatewayConfig(roles={"agent": RoleConfig(model=SELF_HOSTED, api_base="http://127.0.0.1:9")}))
    assert plain.price(SELF_HOSTED) is None and plain.unpriced_models() == [SELF_HOSTED]
    assert plain._cost(SELF_HOSTED, response, 1000, 100) is None
    priced = LLMGateway(GatewayConfig(roles={"agent": RoleConfig(model=SELF_HOSTED)},
                                      prices={SELF_HOSTED: ModelPrice(input=2.0, output=8.0)}))
    assert priced.unpriced_models() == []
    assert priced._cost(SELF_HOSTED, response, 1000, 100) == pytest.approx((1000 * 2 + 100 * 8) / 1e6)
    from raso.llm._litellm import litellm  # registered with litellm too, so its own cost functions agree

    assert litellm.get_model_info(model=SELF_HOSTED)["input_cost_per_token"] == pytest.approx(2e-6)


def _config(tmp_path: Path, agent: ScriptedModel, optimizer: ScriptedModel, **overrides: Any) -> OptimizeConfig:
    values = dict(harness="toy", model=agent.model, optimizer_model=optimizer.model, init="rfsi", update="rfsu",
                  epochs=1, minibatch=2, workers=2, seed=3, run_dir=tmp_path / "run", test=False)
    values.update(overrides)
    return OptimizeConfig(**values)


def test_a_usd_budget_with_an_unpriced_model_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    optimizer = ScriptedModel(["LEVEL=1"], name="optimizer")
    config = OptimizeConfig(harness="toy", model=UNPRICED, api_base="http://127.0.0.1:9/v1",
                            optimizer_model=optimizer.model, init="rfsi", update="rfsu", budget_usd=1.0,
                            run_dir=tmp_path / "run", test=False)
    with pytest.raises(ConfigError, match=r"--budget-usd cannot be enforced: no price is known for "
                                          r"'openai/raso-test-never-priced-model'.*--price"):
        optimize(ToyHarness(), config, initializer=toy_initializer, proposer=toy_proposer)
    assert not (tmp_path / "run").exists()


def test_unpriced_calls_are_marked_cost_unknown_in_the_report(tmp_path: Path) -> None:
    def self_hosted_propose(ctx: Any, skill: Skill, rollouts: Any) -> Any:
        # what the gateway books for a call to a model without a price (see the test above)
        ctx.gateway.ledger.record(CallRecord(role="optimizer", stage="rasu.update", model=SELF_HOSTED, prompt_tokens=10,
                                    completion_tokens=5, unpriced=True))
        return toy_propose(ctx, skill, rollouts)

    agent, optimizer = ScriptedModel(toy_agent_reply, name="agent"), ScriptedModel(["LEVEL=1", "LEVEL=2"], name="opt")
    config = _config(tmp_path, agent, optimizer, max_iterations=1)
    optimize(ToyHarness(), config, initializer=toy_initializer, proposer=FunctionProposer(self_hosted_propose))
    report = RunDir(config.run_dir).report.read_text()
    assert f"| cost | $0.0000 + cost unknown for 1 call(s) to {SELF_HOSTED}" in report


def test_the_usd_budget_is_checked_before_each_call_and_overshoots_by_at_most_one_call(tmp_path: Path) -> None:
    agent, optimizer = ScriptedModel(toy_agent_reply, name="agent"), ScriptedModel(
        ["LEVEL=1", "LEVEL=2", "LEVEL=3", "LEVEL=3\nx"], name="optimizer")
    # $1000 per million tokens: a toy agent turn (~100 prompt words, ~12 reply words) costs about $0.1
    price = ModelPrice(input=1000.0, output=1000.0)
    budget = 1.0
    config = _config(tmp_path, agent, optimizer, prices={agent.model: price, optimizer.model: ModelPrice(input=0, output=0)},
                     budget_usd=budget, agent_max_tokens=16)
    result = optimize(ToyHarness(), config, initializer=toy_initializer, proposer=toy_proposer)
    rd = RunDir(config.run_dir)
    calls = [CallRecord.model_validate(c) for c in json.loads(rd.ledger.read_text())["calls"]]
    costs = [c.cost_usd for c in calls if not c.cached]
    spent = sum(costs)
    overshoot = spent - budget
    print(f"\nUSD budget ${budget:.4f}: spent ${spent:.4f} in {len(costs)} calls, overshoot ${overshoot:+.4f} "
          f"(largest call ${max(costs):.4f})")
    assert overshoot <= max(costs)  # the bound the issue asks for: at most one call past the budget
    assert spent > budget - max(costs) * config.schedule.workers  # the budget was used, not refused early
    assert result.finished and "USD budget reached" in result.stop_reason
    assert result.cost_usd == pytest.approx(spent)
    assert len(agent.calls) + len(optimizer.calls) == len(costs)  # a refused call never reached the model
    state = json.loads(rd.checkpoint.read_text())
    # the batch cut short by the budget was not counted: every counted rollout has a record
    rolled = sum(len([r for r in json.loads("[" + ",".join(p.read_text().split("\n")[:-1]) + "]")])
                 for p in rd.trajectories.glob("*.rollouts.jsonl"))
    assert state["rollouts_used"] == rolled


def test_the_gateway_admits_calls_until_the_spend_and_the_calls_in_flight_reach_the_budget() -> None:
    model = ScriptedModel(["short reply"] * 3, name="priced")
    gw = LLMGateway(GatewayConfig(roles={"agent": RoleConfig(model=model.model, max_tokens=100)},
                                  prices={model.model: ModelPrice(input=1000.0, output=1000.0)}, budget_usd=0.005))
    messages = [{"role": "user", "content": "hello there"}]
    worst = gw.worst_case_cost(model.model, messages, {"max_tokens": 100})
    assert worst >= 0.1  # 100 completion tokens at $0.001 each, plus the prompt: far past the budget
    gw.complete("agent", messages)  # nothing spent yet: admitted; costs ~$0.004 (its worst case bounds the overshoot)
    gw.complete("agent", messages, max_tokens=200)  # $0.004 < $0.005: admitted, and passes the budget
    spent = gw.ledger.totals()["cost_usd"]
    assert 0.005 < spent <= 0.005 + worst
    with pytest.raises(BudgetExceededError, match="USD budget reached"):
        gw.complete("agent", messages)
    assert len(model.calls) == 2
