"""How many prompt tokens each WebShop agent turn adds, and how many of them repeat what the context already holds.

Replays the agent replies recorded in a run directory (`RUN_DIR/trajectories/*/*.json` of a `raso optimize` or
`raso eval` on the WebShop harness) through a code tree's own WebShop harness and agent loop, with a scripted model
that answers each call with the recorded reply, so every page is the one the recorded actions lead to. Each call's
messages are rendered in ChatML (the Qwen2.5 chat format) and tokenized with the embedded model's own vocabulary
(`Llama(vocab_only=True)`: no weights are loaded, no text is generated). No model time, a few seconds of CPU.

Per call: the prompt's tokens, and its new tokens = those after the longest prefix it shares with the previous
call's prompt (what the embedded model's KV state cache must evaluate). Of the new tokens: a repeated
"Instruction: ..." line, an "Available actions: ..." line, and a page already shown earlier in the same rollout.

    python benchmarks/bench_webshop_turn_tokens.py RUN_DIR [--code TREE] [--model local/qwen2.5-coder-0.5b]

`--code TREE` measures another checkout (e.g. the baseline tree `bench_main_job.py --work-dir` leaves behind)
with the same replies; the default is this checkout.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def chatml(messages: list[dict[str, str]]) -> str:
    body = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return body + "<|im_start|>assistant\n"


def shared_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--code", type=Path, default=ROOT, help="the code tree to measure (default: this checkout)")
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b", help="whose tokenizer counts the tokens")
    parser.add_argument("--free-text", action="store_true",
                        help="replay without the reply grammar (history then keeps the thoughts)")
    args = parser.parse_args(argv)
    files = sorted((args.run_dir / "trajectories").glob("*/*.json"))
    if not files:
        print(f"no trajectories under {args.run_dir / 'trajectories'}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(args.code.resolve()))  # the measured tree's harness and agent, not the installed ones
    from harnesses.webshop import WebShopHarness
    from raso.agent import AgentConfig, ExecutionAgent
    from raso.llm.local import _import_llama_cpp, assemble, spec_for
    from raso.testing import scripted_gateway

    config = json.loads((args.run_dir / "config.resolved.json").read_text())
    harness = WebShopHarness(**(config.get("harness_options") or {}))
    tasks = {t.id: t for split in ("train", "val", "test") for t in harness.tasks(split)}
    agent_options = {k: v for k, v in config["agent"].items() if k in AgentConfig.model_fields}
    agent_options.update(mode="none", constrain_replies=not args.free_text)  # skills only lengthen the system prompt
    vocab = _import_llama_cpp().Llama(model_path=str(assemble(spec_for(args.model))), vocab_only=True, verbose=False)

    def tokens(text: str) -> list[int]:
        return list(vocab.tokenize(text.encode(), add_bos=False, special=True))

    calls = later = prompt = new = instruction = action_list = seen_page = 0
    for path in files:
        recorded = json.loads(path.read_text())
        if recorded.get("harness") != "webshop" or recorded["task_id"] not in tasks:
            continue
        gateway, model = scripted_gateway([step["reply"] for step in recorded["trajectory"]])
        harness.rollout(tasks[recorded["task_id"]], [], ExecutionAgent(gateway, AgentConfig(**agent_options)))
        previous: list[int] | None = None
        pages: set[str] = set()
        for messages in model.calls:
            ids = tokens(chatml(messages))
            calls += 1
            prompt += len(ids)
            newest = messages[-1]["content"]
            page = newest.split("\n", 1)[1] if newest.startswith("Observation (") else newest
            page = page.split("\n\nReply now:", 1)[0]
            if previous is not None:
                later += 1
                new += len(ids) - shared_prefix(previous, ids)
                lines = page.split("\n")
                instruction += sum(len(tokens(line)) for line in lines if line.startswith("Instruction: "))
                action_list += sum(len(tokens(line)) for line in lines if line.startswith("Available actions: "))
                body = "\n".join(line for line in lines
                                 if not line.startswith(("Instruction: ", "Available actions: "))).strip()
                if body in pages:
                    seen_page += len(tokens(body))
            pages.add("\n".join(line for line in page.split("\n")
                                if not line.startswith(("Instruction: ", "Available actions: "))).strip())
            previous = ids
    if not later:
        print("no multi-turn WebShop rollouts in this run directory", file=sys.stderr)
        return 2
    rows = [("agent calls (rollouts' turns)", f"{calls}"),
            ("prompt tokens per call, mean", f"{prompt / calls:.0f}"),
            ("new prompt tokens per later turn, mean", f"{new / later:.1f}"),
            ("  of which a repeated Instruction line", f"{instruction / later:.1f}"),
            ("  of which an Available actions line", f"{action_list / later:.1f}"),
            ("  of which a page shown before in the rollout", f"{seen_page / later:.1f}")]
    print(f"{args.code}: {len(files)} rollouts of {args.run_dir}, tokenizer of {args.model} (ChatML)\n")
    print("| measure | tokens |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
