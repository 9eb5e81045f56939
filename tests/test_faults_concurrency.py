"""The concurrency benchmark's batch (benchmarks/bench_concurrency.py) at a small size: transient failures
(429s retried by the gateway) change no score, and every retry is on the ledger. Speed is the benchmark's
business (it prints the table); this only checks what it counts."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_concurrency.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_concurrency", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_concurrency"] = module
    spec.loader.exec_module(module)
    return module


def test_transient_failures_change_no_score_and_every_retry_is_counted() -> None:
    bench = _bench()
    clean = bench.run_batch(tasks=12, workers=4, latency=0.02, failure_rate=0.0)
    flaky = bench.run_batch(tasks=12, workers=4, latency=0.02, failure_rate=0.3)
    assert clean["rewards"] == [1.0] * 12 and clean["retries"] == 0
    assert flaky["rewards"] == clean["rewards"] and flaky["errors"] == 0
    assert flaky["injected"] >= 1 and flaky["retries"] == flaky["injected"]
    assert flaky["calls"] == 12 and flaky["failed_calls"] == 0  # one ledger record per call, retries inside it
