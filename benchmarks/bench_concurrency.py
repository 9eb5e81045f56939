"""Concurrency of one rollout batch (issue 15): a 40-task minibatch against a model with 1 s of mocked latency
per call, at 16 workers (goal: <= 4 s, i.e. ceil(40/16) = 3 waves of 1 s plus overhead), and the same with 30%
of the calls failing transiently (HTTP 429: answered at once, retried by the gateway with backoff). Goal for the
second: the same scores, and every retry on the ledger (retries counted = failures injected).

The batch runs exactly as the engine runs one (raso.agent.evaluate with the execution agent, the gateway's
concurrency limit = workers); the model is a scripted litellm provider that sleeps, so the figures measure
RASO's own overhead and parallelism, not a model. Baselines measured in the same run: 1 worker (serial) and
the ideal ceil(tasks/workers) x latency.

    python benchmarks/bench_concurrency.py [--tasks 40] [--workers 16] [--latency 1.0] [--failure-rate 0.3]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from raso.agent import AgentConfig, ExecutionAgent  # noqa: E402
from raso.agent.evaluate import evaluate  # noqa: E402
from raso.harness import Task  # noqa: E402
from raso.llm import GatewayConfig, LLMGateway, RetryConfig  # noqa: E402
from raso.llm._litellm import litellm  # noqa: E402
from raso.llm.scripted import ScriptedModel  # noqa: E402
from raso.testing.toy import CountingHarness, count_script  # noqa: E402


class OneTurnCounting(CountingHarness):
    """Counting games with target 1: one model turn per rollout, so a rollout costs exactly one call."""

    def __init__(self, n_tasks: int) -> None:
        super().__init__(n_tasks)
        self._tasks = [Task(id=f"count-{i}", instruction="Count from 1 to 1, one number per action.",
                            metadata={"target": 1}) for i in range(n_tasks)]


class SlowFlakyModel:
    """`latency` seconds per answered call; a fraction `failure_rate` of calls fail at once with a 429."""

    def __init__(self, latency: float, failure_rate: float, seed: int = 15) -> None:
        self.latency, self.failure_rate = latency, failure_rate
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.failures = 0
        self.answered = 0

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        with self.lock:
            fail = self.rng.random() < self.failure_rate
            if fail:
                self.failures += 1
        if fail:
            raise litellm.RateLimitError(message="429 Too Many Requests", model="bench", llm_provider="scripted")
        time.sleep(self.latency)
        with self.lock:
            self.answered += 1
        return count_script(messages)


def run_batch(tasks: int, workers: int, latency: float, failure_rate: float) -> dict[str, Any]:
    fn = SlowFlakyModel(latency, failure_rate)
    model = ScriptedModel(fn, name="bench-latency")
    retry = RetryConfig(max_attempts=12, initial_wait_s=0.05, max_wait_s=0.4, jitter_s=0.05)
    gateway = LLMGateway(GatewayConfig.for_models(model.model, max_concurrency=workers, retry=retry))
    harness = OneTurnCounting(tasks)
    agent = ExecutionAgent(gateway, AgentConfig(mode="none", max_steps=2))
    started = time.perf_counter()
    result = evaluate(harness, agent, harness.tasks("test"), [], max_workers=workers)
    wall = time.perf_counter() - started
    totals = gateway.ledger.totals()
    return {"wall_s": wall, "rewards": [r.reward for r in result.rollouts], "mean": result.mean_reward,
            "errors": result.errors, "injected": fn.failures, "retries": totals["retries"],
            "calls": totals["calls"], "failed_calls": totals["failures"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--failure-rate", type=float, default=0.3)
    parser.add_argument("--skip-serial", action="store_true", help="skip the 1-worker baseline (tasks x latency)")
    args = parser.parse_args(argv)

    ideal = math.ceil(args.tasks / args.workers) * args.latency
    rows = []
    if not args.skip_serial:
        rows.append(("1 worker (serial baseline)", run_batch(args.tasks, 1, args.latency, 0.0)))
    clean = run_batch(args.tasks, args.workers, args.latency, 0.0)
    rows.append((f"{args.workers} workers", clean))
    flaky = run_batch(args.tasks, args.workers, args.latency, args.failure_rate)
    rows.append((f"{args.workers} workers, {args.failure_rate:.0%} transient failures", flaky))

    print(f"{args.tasks}-task batch, {args.latency:g} s per model call; ideal at {args.workers} workers: {ideal:.2f} s")
    print("| setting | wall s | x ideal | mean reward | rollout errors | failures injected | retries counted |")
    print("|---|---|---|---|---|---|---|")
    for name, row in rows:
        print(f"| {name} | {row['wall_s']:.2f} | {row['wall_s'] / ideal:.2f} | {row['mean']:.3f} | {row['errors']} | "
              f"{row['injected']} | {row['retries']} |")
    same = flaky["rewards"] == clean["rewards"]
    counted = flaky["retries"] == flaky["injected"]
    print(f"\nsame scores with failures: {same}; every retry counted: {counted}; "
          f"goal <= 4 s at {args.workers} workers: {clean['wall_s'] <= 4.0} ({clean['wall_s']:.2f} s)")
    return 0 if same and counted else 1


if __name__ == "__main__":
    sys.exit(main())
