"""Optimizer tokens per update iteration: RASU, RFSU, GEPA and TextGrad fed the same recorded rollouts.

The paper claims RASO's update costs 42-75 % less than TextGrad's at equal rollouts. This measures what each
method's proposal step sends to and gets from the optimizer model for one iteration, with everything else fixed:

* the same 40 rollouts (the paper's minibatch), 24 of them failed, 20 steps each with ~600-character observations
  and results, built deterministically from a seed (a WebShop-sized trajectory; none is a real agent's);
* the same skill (~4,000 characters), the same task and harness descriptions (the WebShop harness's files);
* RASU/RFSU with chunk 8, M = 5 failure modes per gradient and after the merge, K = 5 retrieved sections per query
  (fixed 1,500-character sections: retrieval itself is not measured);
* TextGrad with one TGD step per chunk of 8 (this branch), and as one step over all 40 (before it);
* GEPA's reflection over the same 40 rollouts, and over its default minibatch of 3 (one GEPA iteration);
* a deterministic stand-in optimizer model (raso.llm.scripted) whose replies have fixed lengths per role
  (failure-mode lists ~1.3k characters, a lesson 600, a critique or gradient 800, a skill 4,000).

Tokens are counted with litellm's tokenizer for gpt-4o (tiktoken o200k) over the exact messages sent and the
replies; every prompt is the product's own (raso's roles, GEPA's reflection template, TextGrad's graph).

    python benchmarks/bench_optimizer_cost.py

One iteration on synthetic rollouts, in tokens; the cost of whole runs in USD, replayed from recorded rollouts at
identical rollout counts (the paper's figure), is benchmarks/bench_run_cost.py.
"""

from __future__ import annotations

import json
import os
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from experiments.baselines.common import task_and_harness  # noqa: E402
from experiments.baselines.gepa_baseline import (  # noqa: E402
    HarnessGEPAAdapter,
    gateway_reflection_lm,
    reflection_template,
)
from experiments.baselines.textgrad_baseline import textgrad_step  # noqa: E402
from raso.harness import Rollout, Step  # noqa: E402
from raso.llm import GatewayConfig, LLMGateway, RetryConfig  # noqa: E402
from raso.llm._litellm import litellm  # noqa: E402
from raso.llm.scripted import ScriptedModel  # noqa: E402
from raso.optimizer.context import RunContext  # noqa: E402
from raso.optimizer.options import UpdateOptions  # noqa: E402
from raso.optimizer.rasu import RASU, RFSU  # noqa: E402
from raso.optimizer.render import PromptLimits  # noqa: E402
from raso.retrieval.retrievers import RetrievalOptions  # noqa: E402
from raso.skill import Skill  # noqa: E402

MINIBATCH, CHUNK, K, M = 40, 8, 5, 5
FAILED, STEPS = 24, 20
T = (ROOT / "harnesses" / "webshop" / "task_description.md").read_text(encoding="utf-8")
H = (ROOT / "harnesses" / "webshop" / "harness_description.md").read_text(encoding="utf-8")
WORDS = ("product price size color option search results page click buy back next item rating review shipping "
         "material pack count brand quality fit style budget dollars query attribute").split()


def words(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    while sum(len(w) + 1 for w in out) < chars:
        out.append(rng.choice(WORDS))
    return " ".join(out)[:chars]


def recorded_rollouts(seed: int = 7) -> list[Rollout]:
    rng = random.Random(seed)
    rollouts = []
    for i in range(MINIBATCH):
        steps = [Step(observation=words(rng, 600), action=f"click[{words(rng, 40)}]", result=words(rng, 600))
                 for _ in range(STEPS)]
        reward = 0.0 if i < FAILED else 1.0
        rollouts.append(Rollout(task_id=f"task-{i:02d}", harness="webshop", reward=reward, trajectory=steps))
    return rollouts


SKILL = Skill(name="webshop-buyer", description="Buy the product that matches every attribute within the budget.",
              body="# Steps\n" + "\n".join(f"{i}. {words(random.Random(i), 190)}" for i in range(1, 21)))


def skill_markdown() -> str:
    return SKILL.to_markdown()


def failure_modes(n: int) -> str:
    rng = random.Random(n)
    return json.dumps({"gradients": [{"failure_mode": words(rng, 150), "evidence": words(rng, 60),
                                      "query": words(rng, 50)} for _ in range(n)]})


def reply(messages: list[dict[str, Any]]) -> str:
    """Fixed-length replies per role, told apart by the prompt (raso's templates, TextGrad's and GEPA's)."""
    system = str(messages[0].get("content") or "")
    text = "\n".join(str(m.get("content") or "") for m in messages)
    rng = random.Random(len(messages))
    if "<IMPROVED_VARIABLE>" in system:
        return f"<IMPROVED_VARIABLE>{skill_markdown()}</IMPROVED_VARIABLE>"
    if "You evaluate one trajectory" in system or "<ROLE>" in text:
        return words(rng, 800)
    if "Provide the new instructions within ``` blocks" in text:
        return f"```\n{skill_markdown()}```"
    if "Write one short lesson" in text:
        return json.dumps({"supported": True, "lesson": words(rng, 600)})
    if "Find out why it lost reward" in text or "Merge failure-mode reports" in text:
        return failure_modes(M)
    if "Improve an agent skill" in text:
        return json.dumps({"name": SKILL.name, "description": SKILL.description, "body": SKILL.body})
    raise AssertionError(f"unrecognised prompt: {text[:200]!r}")


@dataclass
class FixedSections:
    """K fixed 1,500-character sections for every query (retrieval is not what is measured)."""

    sections: list[Any] = field(default_factory=list)

    def search(self, query: str, k: int = 5, exclude_repos: Any = (), exclude_skills: Any = ()) -> list[Any]:
        return [type("Hit", (), {"section": s, "score": 1.0})() for s in self.sections[:k]]


def sections() -> FixedSections:
    rng = random.Random(3)
    made = []
    for i in range(K):
        made.append(type("Section", (), dict(
            id=f"sec-{i}", skill_name=f"skill {i}", heading_path=f"skill {i} > step", text=words(rng, 1500),
            repo=f"owner/repo{i}", path=f"skills/s{i}/SKILL.md", commit=f"{i:040x}", license="MIT"))())
    return FixedSections(made)


def measure(name: str, run: Any) -> dict[str, Any]:
    model = ScriptedModel(reply, name="bench-optimizer")
    gw = LLMGateway(GatewayConfig.for_models(target=model.model, optimizer=model.model,
                                             retry=RetryConfig(max_attempts=1)))
    run(gw)
    prompt = sum(litellm.token_counter(model="gpt-4o", messages=call) for call in model.calls)
    completion = sum(litellm.token_counter(model="gpt-4o", text=reply(call)) for call in model.calls)
    longest = max(sum(len(str(m.get("content") or "")) for m in call) for call in model.calls)
    return {"method": name, "calls": len(model.calls), "prompt": prompt, "completion": completion,
            "total": prompt + completion, "longest_prompt_chars": longest}


def main() -> None:
    rollouts = recorded_rollouts()
    limits = PromptLimits()
    retriever = sections()

    def context(gw: LLMGateway) -> RunContext:
        return RunContext(gateway=gw, task_description=T, harness_description=H, limits=limits,
                          retriever_factory=lambda: retriever, retrieval=RetrievalOptions(k=K))

    def gepa(batch: list[Rollout]) -> Any:
        from gepa.strategies.instruction_proposal import InstructionProposalSignature

        def run(gw: LLMGateway) -> None:
            adapter = HarnessGEPAAdapter(None, None, seed_skill=SKILL, limits=limits)  # type: ignore[arg-type]
            batch_record = type("Batch", (), {"trajectories": batch, "outputs": batch})()
            records = adapter.make_reflective_dataset({"skill": SKILL.to_markdown()}, batch_record, ["skill"])["skill"]
            prompt = InstructionProposalSignature.prompt_renderer({
                "current_instruction_doc": SKILL.to_markdown(), "dataset_with_feedback": records,
                "prompt_template": reflection_template(T, H, limits)})
            gateway_reflection_lm(gw)(prompt)
        return run

    context_text = task_and_harness(T, H, limits)
    rows = [
        measure("RASU", lambda gw: RASU(UpdateOptions(method="rasu", chunk_size=CHUNK)).propose(
            context(gw), SKILL, rollouts)),
        measure("RFSU", lambda gw: RFSU(UpdateOptions(method="rfsu", chunk_size=CHUNK)).propose(
            context(gw), SKILL, rollouts)),
        measure("GEPA (reflection over the 40)", gepa(rollouts)),
        measure("GEPA (one iteration, minibatch 3)", gepa(rollouts[:2] + rollouts[-1:])),
        measure("TextGrad (step per chunk of 8)", lambda gw: textgrad_step(
            gw, SKILL, rollouts, chunk_size=CHUNK, context=context_text, limits=limits)),
        measure("TextGrad (one step over 40)", lambda gw: textgrad_step(
            gw, SKILL, rollouts, chunk_size=MINIBATCH, context=context_text, limits=limits)),
    ]
    textgrad = next(r for r in rows if r["method"].startswith("TextGrad (step"))
    print(f"One update iteration over the same {MINIBATCH} rollouts ({FAILED} failed, {STEPS} steps each); "
          f"chunk {CHUNK}, K {K}, M {M}; tokens by litellm's gpt-4o tokenizer\n")
    header = ("method", "calls", "prompt tok", "completion tok", "total tok", "vs TextGrad", "longest prompt (chars)")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for r in rows:
        ratio = r["total"] / textgrad["total"]
        print(f"| {r['method']} | {r['calls']} | {r['prompt']:,} | {r['completion']:,} | {r['total']:,} | "
              f"{ratio:.2f} ({(1 - ratio) * 100:.0f} % below) | {r['longest_prompt_chars']:,} |")


if __name__ == "__main__":
    main()
