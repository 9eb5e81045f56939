"""Gateway overhead per call versus calling litellm.completion directly.

Both sides use litellm's `mock_response` (no network, no model), so the difference is what the gateway
adds: role resolution, parameter merging, the credentials check, retry wrapper, semaphore, cost lookup,
Completion object and ledger record. Goal: <= 5 ms overhead per call.

    python benchmarks/bench_gateway.py [--calls 300] [--model openai/gpt-4o-mini]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OPENAI_API_KEY", "sk-benchmark-not-used")  # mock_response never sends it

from raso.llm import GatewayConfig, LLMGateway  # noqa: E402
from raso.llm._litellm import litellm  # noqa: E402

MESSAGES = [
    {"role": "system", "content": "You are a spreadsheet agent."},
    {"role": "user", "content": "Sum column B of Sheet1 and write the total in B11."},
]
REPLY = "ACTION: write B11 =SUM(B1:B10)"


def time_calls(fn, n: int) -> list[float]:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return samples


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, int(round(0.95 * len(values))) - 1)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (reduces drift between the two sides)")
    ap.add_argument("--model", default="openai/gpt-4o-mini")
    args = ap.parse_args()

    gw = LLMGateway(GatewayConfig.for_models(target=args.model))

    def direct() -> None:
        litellm.completion(model=args.model, messages=MESSAGES, mock_response=REPLY, max_tokens=64)

    def via_gateway() -> None:
        gw.complete("agent", MESSAGES, stage="bench", mock_response=REPLY, max_tokens=64)

    for _ in range(20):  # warm-up: litellm's first calls build caches
        direct()
        via_gateway()
    base: list[float] = []
    ours: list[float] = []
    per_round = max(1, args.calls // args.rounds)
    for _ in range(args.rounds):
        base += time_calls(direct, per_round)
        ours += time_calls(via_gateway, per_round)

    assert gw.ledger.totals()["calls"] == 20 + len(ours)

    # The gateway's own work alone: litellm.completion replaced by a function returning a prebuilt response.
    canned = litellm.completion(model=args.model, messages=MESSAGES, mock_response=REPLY, max_tokens=64)
    real_completion = litellm.completion
    litellm.completion = lambda **kw: canned
    try:
        own = time_calls(via_gateway, len(ours))
    finally:
        litellm.completion = real_completion

    b_med, o_med = statistics.median(base), statistics.median(ours)
    rows = [
        ("litellm.completion (baseline)", b_med, p95(base)),
        ("LLMGateway.complete", o_med, p95(ours)),
        ("gateway alone (litellm stubbed)", statistics.median(own), p95(own)),
    ]
    print(f"model={args.model} mock_response, {len(base)} calls per side, {args.rounds} alternating rounds\n")
    print(f"{'path':<32}{'median ms':>12}{'p95 ms':>10}")
    for name, med, hi in rows:
        print(f"{name:<32}{med:>12.3f}{hi:>10.3f}")
    overhead = o_med - b_med
    print(f"\noverhead per call (median): {overhead:.3f} ms; ratio gateway/baseline: {o_med / b_med:.2f}x; "
          f"goal <= 5 ms: {'met' if overhead <= 5 else 'NOT met'}")


if __name__ == "__main__":
    main()
