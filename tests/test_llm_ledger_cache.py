"""Usage ledger (totals = sum of calls, thread-safe, serializable) and the on-disk response cache."""

from __future__ import annotations

import json
import random
import threading

from raso.llm import CallRecord, GatewayConfig, LLMGateway, RetryConfig, UsageLedger
from raso.llm.scripted import ScriptedModel

FAST = RetryConfig(max_attempts=3, initial_wait_s=0.0, max_wait_s=0.0, jitter_s=0.0)
KEYS = ("prompt_tokens", "completion_tokens", "calls", "retries", "cache_hits")


def summed(records: list[CallRecord]) -> dict:
    return {
        "prompt_tokens": sum(r.prompt_tokens for r in records),
        "completion_tokens": sum(r.completion_tokens for r in records),
        "calls": sum(not r.cached for r in records),
        "retries": sum(r.retries for r in records),
        "cache_hits": sum(r.cached for r in records),
    }


def test_ledger_totals_equal_the_sum_of_calls_across_roles_and_stages():
    agent = ScriptedModel(lambda m: "one two three")
    opt = ScriptedModel(lambda m: "a b")
    gw = LLMGateway(GatewayConfig.for_models(target=agent.model, optimizer=opt.model, retry=FAST))
    gw.complete("agent", [{"role": "user", "content": "w1 w2 w3 w4"}], stage="rollout")
    gw.complete("optimizer", [{"role": "user", "content": "x y"}], stage="rasu.gradient")
    gw.complete("optimizer", [{"role": "user", "content": "x"}], stage="rasu.merge")
    totals = gw.ledger.totals()
    assert totals["prompt_tokens"] == 4 + 2 + 1
    assert totals["completion_tokens"] == 3 + 2 + 2
    assert totals["calls"] == 3
    assert gw.ledger.by_role()["optimizer"]["calls"] == 2
    assert gw.ledger.by_stage()["rollout"]["completion_tokens"] == 3
    for key in KEYS:
        assert totals[key] == summed(gw.ledger.records())[key]
        assert sum(b[key] for b in gw.ledger.by_stage().values()) == totals[key]
        assert sum(b[key] for b in gw.ledger.by_role().values()) == totals[key]


def test_ledger_is_thread_safe():
    sm = ScriptedModel(lambda m: " ".join(["w"] * random.randint(1, 20)))
    gw = LLMGateway(GatewayConfig.for_models(target=sm.model, retry=FAST, max_concurrency=8))

    def work(i: int) -> None:
        for j in range(10):
            gw.complete("agent" if j % 2 else "optimizer", [{"role": "user", "content": "q " * i}], stage=f"s{j % 3}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    totals = gw.ledger.totals()
    assert totals["calls"] == 80 == len(sm.calls)
    expected = summed(gw.ledger.records())
    assert all(totals[k] == expected[k] for k in KEYS)
    assert totals["prompt_tokens"] == sum(i * 10 for i in range(8))


def test_ledger_round_trips_through_dict_and_file(tmp_path):
    ledger = UsageLedger()
    ledger.record(CallRecord(role="agent", stage="rollout", model="m", prompt_tokens=5, completion_tokens=2, cost_usd=0.25))
    ledger.record(CallRecord(role="optimizer", stage="adapt", model="n", retries=2, failed=True))
    ledger.record(CallRecord(role="optimizer", stage="adapt", model="n", cached=True))
    path = ledger.save(tmp_path / "run" / "usage.json")
    data = json.loads(path.read_text())
    assert data["totals"]["cost_usd"] == 0.25 and data["totals"]["cache_hits"] == 1
    restored = UsageLedger.load(path)
    assert restored.to_dict() == ledger.to_dict()
    assert UsageLedger.from_dict(ledger.to_dict()).by_stage()["adapt"]["retries"] == 2


def test_cache_hit_makes_zero_model_calls(tmp_path):
    sm = ScriptedModel(["first answer", "second answer"])
    cfg = GatewayConfig.for_models(target=sm.model, retry=FAST, cache_dir=tmp_path / "cache")
    msg = [{"role": "user", "content": "same question"}]
    first = LLMGateway(cfg).complete("agent", msg, max_tokens=10)
    rerun = LLMGateway(cfg)  # a fresh gateway over the same cache: a resumed experiment
    again = rerun.complete("agent", msg, max_tokens=10)
    assert len(sm.calls) == 1
    assert again.text == first.text == "first answer" and again.cached and not first.cached
    assert rerun.ledger.totals()["cache_hits"] == 1 and rerun.ledger.totals()["calls"] == 0
    assert rerun.ledger.totals()["prompt_tokens"] == 0
    # different params or a different cache_key_extra are a miss
    assert rerun.complete("agent", msg, max_tokens=11).text == "second answer"
    assert len(sm.calls) == 2


def test_cache_is_off_by_default():
    sm = ScriptedModel(["a", "b"])
    gw = LLMGateway(GatewayConfig.for_models(target=sm.model, retry=FAST))
    msg = [{"role": "user", "content": "q"}]
    assert [gw.complete("agent", msg).text for _ in range(2)] == ["a", "b"]


def test_corrupt_cache_entry_is_a_miss(tmp_path):
    sm = ScriptedModel(["a", "b"])
    cfg = GatewayConfig.for_models(target=sm.model, retry=FAST, cache_dir=tmp_path)
    msg = [{"role": "user", "content": "q"}]
    LLMGateway(cfg).complete("agent", msg)
    for entry in tmp_path.rglob("*.json"):
        entry.write_text("{not json")
    assert LLMGateway(cfg).complete("agent", msg).text == "b"
