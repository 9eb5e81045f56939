"""Rollout throughput per executor (issue 27): a minibatch of toy counting games (2-4 steps each) against a
loopback stand-in model server (an OpenAI-compatible HTTP server in this process that answers after `--latency`
seconds) and a toy environment that takes `--step-delay` seconds per step, run by each executor of
raso.execution.executors: threads (16), processes, and a local Dask and Ray cluster (`--remote-workers` each). The
baseline, measured in the same run, is the serial run (1 thread).

Then the per-rollout overhead of each executor with a zero-latency model and a zero-delay environment, one rollout at
a time: (wall per rollout) - (the serial in-process wall per rollout). Startup (a first batch of one task per worker:
pool, cluster, imports) is reported apart.

Every model call goes through the driver's gateway (the design under test), so the ledger of each executor is
checked to hold the serial run's number of calls.

    python benchmarks/bench_executors.py [--tasks 40] [--latency 1.0] [--step-delay 0.5] [--remote-workers 2]
        [--executors threads,processes,dask,ray] [--overhead-tasks 20]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENAI_API_KEY", "loopback-stand-in")  # the stand-in server ignores it; the SDK wants one
for path in (str(HERE.parent), str(HERE)):
    if path not in sys.path:
        sys.path.insert(0, path)
# Ray's workers are started by its raylet, not forked from here: they find this checkout and this module by path
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE.parent), str(HERE), os.environ.get("PYTHONPATH", "")) if p)

from raso.harness import Task  # noqa: E402
from raso.testing.toy import CountingEnv, CountingHarness, count_script  # noqa: E402


class SlowCountingEnv(CountingEnv):
    def __init__(self, task: Task, delay_s: float) -> None:
        super().__init__(task)
        self.delay_s = delay_s

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.delay_s:
            time.sleep(self.delay_s)
        return super().step(action)


class SlowCountingHarness(CountingHarness):
    """The toy counting game; every environment step takes `step_delay_s` (a stand-in for a slow environment)."""

    def __init__(self, n_tasks: int = 4, step_delay_s: float = 0.0) -> None:
        super().__init__(n_tasks)
        self.step_delay_s = step_delay_s
        # a distinct prompt per task: no rollout replays another's reply
        self._tasks = [t.model_copy(update={"instruction": f"{t.instruction} (game {t.id})"}) for t in self._tasks]

    def make_env(self, task: Task) -> SlowCountingEnv:
        return SlowCountingEnv(task, self.step_delay_s)


class StandInModel(BaseHTTPRequestHandler):
    """POST /v1/chat/completions: sleeps `latency`, then plays the counting game correctly."""

    latency = 0.0

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.latency:
            time.sleep(self.latency)
        text = count_script(body.get("messages", []))
        reply = json.dumps({
            "id": "stand-in", "object": "chat.completion", "created": int(time.time()), "model": body.get("model", ""),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: Any) -> None:
        pass


def start_server() -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandInModel)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


def make_executor(executor: str, workers: int, gateway: Any, harness: Any, options: Mapping[str, Any]) -> Any:
    from raso.execution.executors import make_executor as build
    from raso.execution.options import ExecutionOptions

    return build(ExecutionOptions(executor=executor, workers=workers), gateway=gateway, harness=harness,
                 harness_name="bench_executors:SlowCountingHarness", harness_options=dict(options),
                 default_workers=workers)


def run_batch(executor: Any, gateway: Any, harness: Any, tasks: list[Task], unit: str) -> tuple[float, float]:
    """(wall seconds, mean reward) of one batch; a failed rollout's error is printed."""
    from raso.agent import AgentConfig, ExecutionAgent
    from raso.agent.evaluate import evaluate

    agent = executor.agent(lambda gw: ExecutionAgent(gw, AgentConfig(mode="none")), gateway, unit)
    started = time.perf_counter()
    result = evaluate(harness, agent, tasks, executor=executor)
    wall = time.perf_counter() - started
    failed = [r for r in result.rollouts if r.error]
    if failed:
        print(f"  {len(failed)} rollout(s) failed on {executor.name}: {failed[0].error.splitlines()[0]}", flush=True)
    return wall, result.mean_reward


def cpu_s() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    from raso.llm import GatewayConfig, LLMGateway, RetryConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--step-delay", type=float, default=0.5)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--remote-workers", type=int, default=2)
    parser.add_argument("--executors", default="threads,processes,dask,ray")
    parser.add_argument("--overhead-tasks", type=int, default=20)
    args = parser.parse_args()
    executors = [b for b in args.executors.split(",") if b]

    server, api_base = start_server()
    gateway = LLMGateway(GatewayConfig.for_models("openai/stand-in", api_base=api_base, max_concurrency=64,
                                                  retry=RetryConfig(max_attempts=1)))

    def measure(latency: float, delay: float, n: int, plan: list[tuple[str, int]]) -> dict[str, tuple]:
        StandInModel.latency = latency
        options = {"n_tasks": n, "step_delay_s": delay}
        # the class by its module name, which the workers import (this script itself runs as __main__)
        from bench_executors import SlowCountingHarness as ByName

        harness = ByName(**options)
        tasks = harness.tasks("test")
        out: dict[str, tuple] = {}
        for kind, workers in plan:
            name = f"{kind}" if kind != "threads" else f"threads ({workers})"
            calls_before = int(gateway.ledger.totals()["calls"])
            cpu_before = cpu_s()
            with make_executor(kind, workers, gateway, harness, options) as executor:
                # the first batch starts every worker (pools and clusters start theirs on demand): startup, apart
                warm = 1 if kind == "threads" else workers
                startup, _ = run_batch(executor, gateway, harness, tasks[:warm], f"{name}-{latency}-warm")
                calls_before = int(gateway.ledger.totals()["calls"])
                wall, reward = run_batch(executor, gateway, harness, tasks, f"{name}-{latency}")
                calls = int(gateway.ledger.totals()["calls"]) - calls_before
            out[name] = (workers, startup, wall, reward, cpu_s() - cpu_before, calls)
            print(f"  {name:14s} workers {workers:2d}  startup {startup:6.2f} s  wall {wall:7.2f} s  reward "
                  f"{reward:.2f}  calls {calls}  driver CPU {out[name][4]:.1f} s", flush=True)
        return out

    print(f"throughput: {args.tasks} tasks, model latency {args.latency} s/call, env {args.step_delay} s/step",
          flush=True)
    plan = [("threads", 1)] + [(b, args.threads if b == "threads" else args.remote_workers) for b in executors]
    slow = measure(args.latency, args.step_delay, args.tasks, plan)
    print(f"overhead: {args.overhead_tasks} tasks, zero latency, zero step delay, one rollout at a time", flush=True)
    fast = measure(0.0, 0.0, args.overhead_tasks, [("threads", 1)] + [(b, 1) for b in executors if b != "threads"])
    server.shutdown()

    serial = slow["threads (1)"]
    base = fast["threads (1)"][2] / args.overhead_tasks
    print("\n| executor | workers | first batch s (1 task per worker: startup) | wall s (batch) | vs serial | calls "
          "| driver CPU s | overhead ms/rollout |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (workers, startup, wall, _reward, cpu, calls) in slow.items():
        one_at_a_time = fast.get(name)  # the remote executors and threads (1), the baseline
        overhead = "" if one_at_a_time is None else f"{(one_at_a_time[2] / args.overhead_tasks - base) * 1000:+.1f}"
        print(f"| {name} | {workers} | {startup:.2f} | {wall:.2f} | {serial[2] / wall:.2f}x | {calls} | {cpu:.1f} | "
              f"{overhead} |")
    print(f"\nserial in-process rollout with a zero-latency model: {base * 1000:.1f} ms (the overhead baseline); every "
          f"executor's reward: {sorted({round(v[3], 3) for v in slow.values()})}; calls per batch equal: "
          f"{len({v[5] for v in slow.values()}) == 1}")


if __name__ == "__main__":
    main()
