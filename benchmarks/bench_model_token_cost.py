"""What one token costs the embedded model on this CPU: CPU and wall ms per evaluated prompt token and per
generated token, for 1 and for every batch thread, with and without llama.cpp's flash attention; and whether
speculative decoding could lower the cost of a generated token.

The main job's CPU is about (prompt tokens the KV cache missed) x (prompt cost) + (generated tokens) x (generation
cost) (benchmarks/bench_main_job.py reports both counts); this script measures the two costs, one configuration
after the other in one process, on text from this repository's README (no download).

Speculative decoding checks B-1 drafted tokens in one pass of B tokens that needs logits at every position (each
position is sampled to accept or reject its draft). The second table is what such a pass costs per token, after the
prompt, against a generated token. With RUN_DIR (a `raso optimize` or `raso eval` run directory), the agent replies
its trajectories recorded are replayed through prompt-lookup drafting (the method of llama-cpp-python's
LlamaPromptLookupDecoding with two changes: the last n tokens, n from 3 down to the table's minimum, are looked up
in the conversation so far most recent match first, where the library takes the oldest match and goes down to
n = 1; the k tokens that followed the match are drafted), every generation pass priced with the 1-thread costs
measured here: the drafted tokens the recorded replies would have accepted, and the CPU of speculative against plain
generation. The conversation is the rollout's observations and replies (system prompt and skill left out, so a
draft is found somewhat less often).

    python benchmarks/bench_model_token_cost.py [RUN_DIR] [--model qwen2.5-coder-0.5b] [--prompt 1000] [--steps 30]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "passive")

CHECK_BATCHES = {1: (2, 3, 4, 5, 6, 7, 8, 9), 2: (2, 4, 8)}  # pass sizes (1 + drafted tokens) per thread count


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _check_pass_cost(llama_cpp, llm, tokens: list[int], base: int, size: int) -> tuple[float, float]:
    """(CPU ms, wall ms) per token of passes of `size` tokens with logits at every position, after `base` tokens."""
    passes, done = max(4, 64 // size), 0
    c0, w0 = _cpu(), time.perf_counter()
    for i in range(passes):
        llm._ctx.kv_cache_seq_rm(-1, base, -1)
        llm._batch.set_batch(batch=tokens[base + i: base + i + size], n_past=base, logits_all=True)
        llm._ctx.decode(llm._batch)
        done += size
    return 1000 * (_cpu() - c0) / done, 1000 * (time.perf_counter() - w0) / done


def _draft(conversation: list[int], ngram_min: int, k: int) -> list[int]:
    for n in range(max(3, ngram_min), ngram_min - 1, -1):
        tail = conversation[-n:]
        for i in range(len(conversation) - n - 1, -1, -1):
            if conversation[i:i + n] == tail:
                return conversation[i + n:i + n + k]
    return []


def replay_drafting(run_dir: Path, tokenize, pass_cpu: dict[int, float]) -> list[str]:
    """The prompt-lookup drafting table for the agent replies recorded under `run_dir`; `pass_cpu[b]` = CPU ms of
    one pass of b tokens at 1 thread (b = 1: a generated token)."""
    rollouts = []
    for path in sorted((run_dir / "trajectories").glob("*.rollouts.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                steps = json.loads(line).get("trajectory") or []
                rollouts.append([(tokenize(str(s.get("observation") or "") + "\n"), tokenize(str(s.get("reply") or "")))
                                 for s in steps])
    if not rollouts:
        raise SystemExit(f"no recorded rollouts in {run_dir / 'trajectories'}/*.rollouts.jsonl")
    lines = [f"\nPrompt-lookup drafting replayed on {run_dir} ({len(rollouts)} rollouts), passes priced at 1 thread:\n",
             "| drafted k | n-gram | generated tokens | passes with a draft | drafted tokens accepted | "
             "CPU, speculative / plain |", "|---:|---|---:|---:|---:|---:|"]
    for k in (2, 4, 8):
        for ngram_min in (1, 2, 3):
            generated = drafted = accepted = 0
            plain = speculative = 0.0
            for steps in rollouts:
                conversation: list[int] = []
                for observation, reply in steps:
                    conversation += observation
                    i = 0
                    while i < len(reply):  # reply[i] is sampled; the pass that evaluates it carries the draft
                        draft = _draft(conversation + reply[:i + 1], ngram_min, k)
                        m = 0
                        while m < len(draft) and i + 1 + m < len(reply) and draft[m] == reply[i + 1 + m]:
                            m += 1
                        speculative += pass_cpu[1 + len(draft)]
                        plain += pass_cpu[1] * (1 + m)
                        drafted, accepted, generated, i = drafted + bool(draft), accepted + m, generated + 1 + m, i + 1 + m
                    conversation += reply
            lines.append(f"| {k} | >= {ngram_min} | {generated:,} | {drafted:,} | {accepted:,} | "
                         f"{speculative / plain:.2f}x |")
    return lines


def main(argv: list[str] | None = None) -> int:
    from raso.llm import local

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=next(iter(local.EMBEDDED_MODELS)), choices=list(local.EMBEDDED_MODELS))
    parser.add_argument("--prompt", type=int, default=1000, help="prompt tokens evaluated from an empty context")
    parser.add_argument("--steps", type=int, default=30, help="single-token decode steps after the prompt")
    parser.add_argument("run_dir", nargs="?", type=Path, help="a run directory whose agent replies to replay")
    args = parser.parse_args(argv)
    llama_cpp = local._import_llama_cpp()
    path = local.model_path(local.EMBEDDED_MODELS[args.model])
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    rows = []
    checks: dict[tuple[int, int], tuple[float, float]] = {}  # (threads, pass size) -> (CPU ms, wall ms) per token
    for threads in sorted({1, local.n_threads_batch()}):
        for flash in (False, True):
            llm = llama_cpp.Llama(model_path=str(path), n_ctx=local.n_ctx(), n_threads=local.n_threads(),
                                  n_threads_batch=threads, flash_attn=flash, verbose=False)
            tokens = llm.tokenize(text.encode())
            if len(tokens) < args.prompt + max(args.steps, 64):
                raise SystemExit(f"README.md gives {len(tokens)} tokens: too few for --prompt {args.prompt}")
            c0, w0 = _cpu(), time.perf_counter()
            llm.eval(tokens[: args.prompt])
            c1, w1 = _cpu(), time.perf_counter()
            generated_tokens = tokens[args.prompt: args.prompt + args.steps]
            for token in generated_tokens:
                llm.eval([token])
            c2, w2 = _cpu(), time.perf_counter()
            steps = len(generated_tokens)
            rows.append((threads, flash, 1000 * (c1 - c0) / args.prompt, 1000 * (w1 - w0) / args.prompt,
                         1000 * (c2 - c1) / steps, 1000 * (w2 - w1) / steps))
            if not flash:
                for size in CHECK_BATCHES.get(threads, CHECK_BATCHES[2]):
                    checks[threads, size] = _check_pass_cost(llama_cpp, llm, tokens, args.prompt, size)
            del llm
    print(f"\n{args.model}: {args.prompt}-token prompt, then {args.steps} generated tokens (1 generation thread); "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print("| batch threads | flash attention | prompt ms/token CPU | wall | generation ms/token CPU | wall |")
    print("|---:|---|---:|---:|---:|---:|")
    for threads, flash, p_cpu, p_wall, g_cpu, g_wall in rows:
        print(f"| {threads} | {'on' if flash else 'off'} | {p_cpu:.1f} | {p_wall:.1f} | {g_cpu:.0f} | {g_wall:.0f} |")
    generated = {threads: g_cpu for threads, flash, _, _, g_cpu, _ in rows if not flash}
    print("\nA pass of B tokens with logits at every position (a speculative check of B-1 drafted tokens), after the "
          "prompt, flash attention off:\n")
    print("| threads | B | ms/token CPU | wall | CPU vs a generated token |")
    print("|---:|---:|---:|---:|---:|")
    for (threads, size), (cpu_ms, wall_ms) in checks.items():
        print(f"| {threads} | {size} | {cpu_ms:.1f} | {wall_ms:.1f} | {cpu_ms / generated[1]:.2f}x |")
    if args.run_dir is not None:
        vocab = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)

        def tokenize(text: str) -> list[int]:
            return vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False)

        pass_cpu = {1: generated[1]} | {size: cpu_ms * size for (threads, size), (cpu_ms, _) in checks.items()
                                        if threads == 1}
        print("\n".join(replay_drafting(args.run_dir, tokenize, pass_cpu)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
