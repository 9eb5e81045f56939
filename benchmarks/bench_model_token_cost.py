"""What one token costs the embedded model on this CPU: CPU and wall ms per evaluated prompt token and per
generated token, for 1 and for every batch thread, with and without llama.cpp's flash attention.

The main job's CPU is about (prompt tokens the KV cache missed) x (prompt cost) + (generated tokens) x (generation
cost) (benchmarks/bench_main_job.py reports both counts); this script measures the two costs, one configuration
after the other in one process, on text from this repository's README (no download).

    python benchmarks/bench_model_token_cost.py [--model qwen2.5-coder-0.5b] [--prompt 1000] [--steps 30]
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "passive")


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    from raso.llm import local

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=next(iter(local.EMBEDDED_MODELS)), choices=list(local.EMBEDDED_MODELS))
    parser.add_argument("--prompt", type=int, default=1000, help="prompt tokens evaluated from an empty context")
    parser.add_argument("--steps", type=int, default=30, help="single-token decode steps after the prompt")
    args = parser.parse_args(argv)
    llama_cpp = local._import_llama_cpp()
    path = local.model_path(local.EMBEDDED_MODELS[args.model])
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    rows = []
    for threads in sorted({1, local.n_threads_batch()}):
        for flash in (False, True):
            llm = llama_cpp.Llama(model_path=str(path), n_ctx=local.n_ctx(), n_threads=local.n_threads(),
                                  n_threads_batch=threads, flash_attn=flash, verbose=False)
            tokens = llm.tokenize(text.encode())[: args.prompt + args.steps]
            c0, w0 = _cpu(), time.perf_counter()
            llm.eval(tokens[: args.prompt])
            c1, w1 = _cpu(), time.perf_counter()
            for token in tokens[args.prompt: args.prompt + args.steps]:
                llm.eval([token])
            c2, w2 = _cpu(), time.perf_counter()
            steps = len(tokens) - args.prompt
            rows.append((threads, flash, 1000 * (c1 - c0) / args.prompt, 1000 * (w1 - w0) / args.prompt,
                         1000 * (c2 - c1) / steps, 1000 * (w2 - w1) / steps))
            del llm
    print(f"\n{args.model}: {args.prompt}-token prompt, then {args.steps} generated tokens (1 generation thread); "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print("| batch threads | flash attention | prompt ms/token CPU | wall | generation ms/token CPU | wall |")
    print("|---:|---|---:|---:|---:|---:|")
    for threads, flash, p_cpu, p_wall, g_cpu, g_wall in rows:
        print(f"| {threads} | {'on' if flash else 'off'} | {p_cpu:.1f} | {p_wall:.1f} | {g_cpu:.0f} | {g_wall:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
