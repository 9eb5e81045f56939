"""The embedded model on an agent workload: thread settings and the KV-state cache.

Two spreadsheet rollouts share the one llama.cpp context and take turns, as parallel rollouts do in
`raso optimize` (A1, B1, A2, B2, A3, B3). Every turn sends the whole conversation; the replies are
fixed text, so each configuration processes exactly the same prompts. Generation is capped at a few
tokens: this measures prompt processing, which dominates agent turns on a CPU.

Configurations (baseline first; ratios are against it, measured in the same run):
  baseline   1 thread for everything, no state cache (the setup before this benchmark)
  batch      prompt processing on every core (n_threads_batch), no state cache
  batch+kv   ... and the RAM KV-state cache (the default in raso.llm.local)

    python benchmarks/bench_local_model.py [--turns 3] [--gen-tokens 8]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

from raso.agent.agent import AgentConfig, ExecutionAgent, _Turn, cut_middle  # noqa: E402
from raso.harness import get_harness  # noqa: E402
from raso.llm import local  # noqa: E402
from raso.llm.config import DEFAULT_LOCAL_MODEL  # noqa: E402
from raso.skill import Skill  # noqa: E402

SKILL = Skill(
    name="spreadsheet-answers",
    description="Answer spreadsheet questions by writing values into the target cells with openpyxl.",
    body=("# Steps\n1. RUN a short program that prints the sheet names and the rows around the answer range.\n"
          "2. Compute the answer in Python; write plain values, not formulas, unless the task asks for formulas.\n"
          "3. Save the workbook to the output path, then SUBMIT the same program.\n\n"
          "# Pitfalls\n- Keep headers untouched.\n- Leave a cell empty when no row qualifies.\n") * 2,
)
REPLY = ("Thought: I will look at the data first.\nAction: RUN\n```python\nimport openpyxl\n"
         "wb = openpyxl.load_workbook(INPUT_PATH)\nws = wb.active\nfor row in ws.iter_rows(max_row=5, values_only=True):\n"
         "    print(row)\n```")
OBSERVATION = "Observation ({left} actions left):\nexit code 0\nstdout:\n('Name', 'Region', 'Sales')\n('Ann', 'East', 120)\n"


def conversations(turns: int) -> list[list[list[dict[str, str]]]]:
    """For two val tasks: the message list sent at each turn."""
    harness = get_harness("spreadsheet")
    agent = ExecutionAgent(None, AgentConfig())
    out = []
    for task in harness.tasks("val")[:2]:
        env = harness.make_env(task)
        try:
            observation, _ = env.reset()
        finally:
            env.close()
        system = agent.system_prompt(harness, [SKILL], [], turns)
        first = cut_middle(str(observation), agent.config.max_observation_chars)
        history: list[_Turn] = []
        per_turn = []
        for t in range(turns):
            per_turn.append(agent.build_messages(system, first, history))
            history.append(_Turn(reply=REPLY, observation=OBSERVATION.format(left=turns - t - 1)))
        out.append(per_turn)
    return out


def run_config(name: str, threads: int, threads_batch: int, cache: bool, convs, gen_tokens: int) -> dict:
    llama_cpp = local._import_llama_cpp()
    path = str(local.assemble(local.spec_for(DEFAULT_LOCAL_MODEL)))
    llm = llama_cpp.Llama(model_path=path, n_ctx=local.n_ctx(), n_threads=threads, n_threads_batch=threads_batch,
                          verbose=False)
    if cache:
        llm.set_cache(local.make_state_cache(llama_cpp, local.state_cache_bytes()))
    sent = 0
    evaluated_before = llama_cpp.llama_perf_context(llm._ctx.ctx).n_p_eval
    start = time.perf_counter()
    for turn in range(len(convs[0])):
        for conv in convs:  # the rollouts take turns on the shared context
            out = llm.create_chat_completion(messages=conv[turn], max_tokens=gen_tokens, temperature=0.0)
            sent += out["usage"]["prompt_tokens"]
    wall = time.perf_counter() - start
    evaluated = llama_cpp.llama_perf_context(llm._ctx.ctx).n_p_eval - evaluated_before
    held = llm.cache.cache_size if llm.cache is not None else 0
    llm.close()
    return {"config": name, "threads": threads, "batch": threads_batch, "cache": cache, "calls": len(convs) * len(convs[0]),
            "sent": sent, "evaluated": evaluated, "wall": wall, "held_mb": held / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--gen-tokens", type=int, default=8)
    args = parser.parse_args()
    convs = conversations(args.turns)
    cores = local.n_threads_batch()
    rows = [
        run_config("baseline", 1, 1, False, convs, args.gen_tokens),
        run_config("batch", 1, cores, False, convs, args.gen_tokens),
        run_config("batch+kv", 1, cores, True, convs, args.gen_tokens),
    ]
    base = rows[0]["wall"]
    print(f"\n2 interleaved rollouts x {args.turns} turns, {args.gen_tokens} generated tokens per call, load "
          f"{os.getloadavg()[0]:.2f}\n")
    print("| config | threads/batch | KV cache | calls | prompt tok sent | prompt tok evaluated | wall s | speed-up | cache MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['config']} | {r['threads']}/{r['batch']} | {'on' if r['cache'] else 'off'} | {r['calls']} | "
              f"{r['sent']:,} | {r['evaluated']:,} | {r['wall']:.1f} | {base / r['wall']:.2f}x | {r['held_mb']:.0f} |")


if __name__ == "__main__":
    main()
