"""What a kill, an outage or a USD cap costs (issue 23): a paid call is billed exactly once, together with its
replayable reply; an outage during init re-pays nothing on resume; every optimizer call carries a reply cap, so
the USD budget's worst-case reservation is realistic (a cap of 1.5x a run's cost completes it, 0.5x stops it
without passing the cap); a budget stop still writes ledger.json."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from optimizer_helpers import SpyRetriever, router, section
from test_engine_support import ToyHarness, named_scripted_model, toy_agent_reply

import raso
from raso.engine.replay import PersistentLedger
from raso.engine.run_dir import read_jsonl
from raso.llm import GatewayConfig, LLMGateway, UsageLedger
from raso.llm._litellm import litellm
from raso.llm.config import ModelPrice
from raso.llm.scripted import ScriptedModel


def _retriever() -> SpyRetriever:
    return SpyRetriever([section(1), section(2)])


def _gateway(model: str, cache: Path, ledger: UsageLedger) -> LLMGateway:
    return LLMGateway(GatewayConfig.for_models(target=model, cache_dir=cache), ledger=ledger)


def _paid(ledger: UsageLedger) -> list[Any]:
    return [r for r in ledger.records() if not r.cached and not r.failed]


def test_a_reply_cached_but_never_billed_is_billed_once_when_replayed(tmp_path: Path) -> None:
    model = ScriptedModel(["the reply"], name="bill-once")
    calls_file, cache = tmp_path / "ledger.calls.jsonl", tmp_path / "cache"
    message = [{"role": "user", "content": "hello"}]
    first = _gateway(model.model, cache, PersistentLedger(calls_file))
    assert first.complete("agent", message, max_tokens=8).text == "the reply"
    assert len(read_jsonl(calls_file)) == 1
    calls_file.write_text("")  # as if the process was killed after the cache write, before the bill was appended

    resumed = _gateway(model.model, cache, PersistentLedger(calls_file))
    assert resumed.complete("agent", message, max_tokens=8).text == "the reply"  # replayed: no new model call
    assert len(model.calls) == 1
    assert [(r.cached, r.prompt_tokens > 0) for r in resumed.ledger.records()] == [(False, True)]  # the bill, once
    resumed.complete("agent", message, max_tokens=8)
    assert [r.cached for r in PersistentLedger(calls_file).records()] == [False, True]  # later replays are free


def test_a_cache_shared_between_runs_replays_for_free(tmp_path: Path) -> None:
    model = ScriptedModel(["shared"], name="shared-cache")
    cache = tmp_path / "cache"
    message = [{"role": "user", "content": "hi"}]
    _gateway(model.model, cache, UsageLedger()).complete("agent", message, max_tokens=8)
    other = _gateway(model.model, cache, UsageLedger())  # another run's ledger: it never paid for this reply
    other.complete("agent", message, max_tokens=8)
    assert [r.cached for r in other.ledger.records()] == [True] and other.ledger.totals()["cost_usd"] == 0


class _Outage:
    """Answers like `router()`, except that the n-th adaptation call fails as an outage while `down` is set."""

    def __init__(self, fail_adaptation: int) -> None:
        self.answer = router()
        self.fail_adaptation = fail_adaptation
        self.adaptations = 0
        self.down = True
        self.lock = threading.Lock()

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        if "Write one short lesson" in "\n".join(str(m.get("content")) for m in messages):
            with self.lock:
                self.adaptations += 1
                failing = self.down and self.adaptations == self.fail_adaptation
            if failing:
                raise litellm.ServiceUnavailableError(message="provider down", model="x", llm_provider="scripted")
        return self.answer(messages)


def test_an_outage_during_init_re_pays_nothing_on_resume(tmp_path: Path) -> None:
    outage = _Outage(fail_adaptation=2)
    optimizer = named_scripted_model("money-outage-optimizer", outage)
    agent = named_scripted_model("money-outage-agent", toy_agent_reply)
    run_dir = tmp_path / "run"
    with pytest.raises(Exception, match="provider down"):
        raso.optimize(ToyHarness(), **{"models.target": agent, "models.optimizer": optimizer,
                                       "schedule.epochs": 1, "init.num_requirements": 2,
                                       "schedule.minibatch": 2, "schedule.workers": 1,
                                       "budget.call_attempts": 1, "schedule.test": False},
                      init="rasi", update="rfsu", run_dir=run_dir, retriever=_retriever())
    state = json.loads((run_dir / "checkpoint.json").read_text())
    assert state["phase"] == "init" and state["failed_attempts"] == {}  # an outage does not re-key the cache
    paid_before = [r["stage"] for r in read_jsonl(run_dir / "ledger.calls.jsonl") if not r["cached"] and not r["failed"]]
    assert paid_before.count("rasi.query_init") == 1

    outage.down = False
    raso.resume(run_dir, harness=ToyHarness(), retriever=_retriever())
    records = read_jsonl(run_dir / "ledger.calls.jsonl")
    paid = [r["stage"] for r in records if not r["cached"] and not r["failed"]]
    replayed = [r["stage"] for r in records if r["cached"]]
    # query-init and the first adaptation were paid once, before the outage, and replayed after it
    assert paid.count("rasi.query_init") == 1 and replayed.count("rasi.query_init") == 1
    assert paid.count("adapt") == 2 and replayed.count("adapt") == 1
    ledger = json.loads((run_dir / "ledger.json").read_text())
    assert ledger["totals"]["calls"] == len([r for r in records if not r["cached"]])


def _priced_run(tmp_path: Path, name: str, budget_usd: float | None) -> Any:
    agent = named_scripted_model("money-cap-agent", toy_agent_reply)
    optimizer = named_scripted_model("money-cap-optimizer", router())
    price = ModelPrice(input=2.0, output=10.0)  # USD per million tokens
    options: dict[str, Any] = {"budget.usd": budget_usd} if budget_usd is not None else {}
    return raso.optimize(ToyHarness(), **{"models.target": agent, "models.optimizer": optimizer,
                                          "schedule.epochs": 1, "schedule.minibatch": 3, "schedule.workers": 1,
                                          "agent.max_tokens": 64, "init.num_requirements": 2,
                                          "models.prices": {agent: price, optimizer: price}},
                         init="rfsi", update="rfsu", run_dir=tmp_path / name, **options)


def test_a_usd_cap_of_one_and_a_half_times_the_cost_completes_and_half_stops_under_it(tmp_path: Path) -> None:
    free = _priced_run(tmp_path, "uncapped", None)
    cost = free.cost_usd
    assert cost > 0 and free.finished and free.stop_reason.startswith("schedule complete")

    roomy = _priced_run(tmp_path, "roomy", 1.5 * cost)
    assert roomy.finished and roomy.stop_reason == free.stop_reason
    assert roomy.cost_usd == pytest.approx(cost) and roomy.model_calls == free.model_calls

    tight = _priced_run(tmp_path, "tight", 0.5 * cost)
    assert "USD budget" in (tight.stop_reason or "")
    calls = [r.cost_usd for r in UsageLedger.load(tmp_path / "tight" / "ledger.json").records() if not r.cached]
    assert 0.5 * cost <= tight.cost_usd <= 0.5 * cost + calls[-1]  # it stopped within one call of the cap
    saved = json.loads((tmp_path / "tight" / "ledger.json").read_text())
    assert saved["totals"]["cost_usd"] == pytest.approx(tight.cost_usd)


def test_every_optimizer_role_sends_a_reply_cap(tmp_path: Path) -> None:
    agent = named_scripted_model("money-maxtok-agent", toy_agent_reply)
    optimizer = ScriptedModel(router(), name="money-maxtok-optimizer")
    raso.optimize(ToyHarness(), **{"models.target": agent, "models.optimizer": optimizer.model,
                                   "schedule.epochs": 1, "init.num_requirements": 2, "schedule.minibatch": 3,
                                   "schedule.workers": 1, "schedule.max_iterations": 1, "schedule.test": False},
                  init="rasi", update="rasu", run_dir=tmp_path / "run",
                  retriever=_retriever())
    assert optimizer.params and all(isinstance(p.get("max_tokens"), int) for p in optimizer.params)


def test_a_torn_last_bill_does_not_swallow_the_next_one(tmp_path: Path) -> None:
    model = ScriptedModel(["one", "two"], name="torn-bill")
    calls_file = tmp_path / "ledger.calls.jsonl"
    first = _gateway(model.model, tmp_path / "cache", PersistentLedger(calls_file))
    first.complete("agent", [{"role": "user", "content": "a"}], max_tokens=8)
    text = calls_file.read_text()
    calls_file.write_text(text + text[: len(text) // 2])  # a kill in the middle of the second append
    resumed = _gateway(model.model, tmp_path / "cache", PersistentLedger(calls_file))
    resumed.complete("agent", [{"role": "user", "content": "b"}], max_tokens=8)
    assert [r.stage for r in PersistentLedger(calls_file).records()] == ["default", "default"]
