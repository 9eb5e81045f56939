"""Total USD of whole runs per method at identical rollout counts, replayed from a recorded run (the paper's cost
figure: WebShop, RASO $10.28 vs TextGrad $41.03 with gpt-4.1-mini).

Every method runs its whole schedule through the product's own code (raso's engine for RASO = RASI + RASU, RASU,
RFSU and TextGrad; the gepa package for GEPA, as experiments/ runs them) at the paper's WebShop sizes by default
(80 train, 40 val, minibatch 40, 2 epochs, chunks of 8, K = 5 sections, M = 5 requirements), with the same rollout
budget. What is replayed, and from where:

* the agent: `ReplayingAgent` answers each task with a rollout recorded in a real run (trajectories, rewards and
  the agent's prompt/completion tokens as that run's ledger counted them), the same recording for the same task in
  every method, so the agent's share differs between methods only through how many rollouts each ran;
* the optimizer: `replaying_optimizer`, a scripted model (raso.llm.scripted) that answers every optimizer prompt
  (raso's roles, TextGrad's graph, GEPA's reflection) with text of the length the recorded run's optimizer wrote
  for that kind of reply (mean completion tokens per ledger stage); kinds the recording lacks take the nearest
  recorded kind (named in the table's notes). Every skill it writes differs from the last, so no candidate is
  skipped as unchanged and every method spends its whole budget;
* retrieval: the real retriever (section BM25) over the starter corpus shipped with raso.

Tokens are counted with litellm's tokenizer for the price model over the exact messages each method sent and the
replies it got; USD from litellm's bundled price table for that model (default gpt-4.1-mini). The agent's share is
priced from the recorded token counts. TextGrad runs in both settings: equal information (each trajectory clipped
to limits.trajectory_chars_each, the default of experiments/) and full trajectories (the paper's setting).

    python benchmarks/bench_run_cost.py [--recording benchmarks/data/webshop_recording] [--price-model gpt-4.1-mini]
                                        [--sizes paper-webshop|small] [--methods raso,textgrad-full,...]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from experiments.accounting import engine_budget  # noqa: E402
from raso.harness import Harness, Rollout, Task, TextEnv, TextTasks  # noqa: E402
from raso.llm.scripted import ScriptedModel  # noqa: E402
from raso.skill import Skill  # noqa: E402

DEFAULT_RECORDING = ROOT / "benchmarks" / "data" / "webshop_recording"
#: Methods as experiments/ names them; textgrad-full is TextGrad with the paper's full trajectories.
METHODS = ("raso", "rasu", "rfsu", "textgrad", "textgrad-full", "gepa")


@dataclass(frozen=True)
class RunSizes:
    n_train: int
    n_val: int
    minibatch: int
    epochs: int = 2
    chunk_size: int = 8
    k: int = 5
    num_requirements: int = 5
    gepa_minibatch: int = 3


SIZES = {"paper-webshop": RunSizes(n_train=80, n_val=40, minibatch=40),
         "small": RunSizes(n_train=6, n_val=3, minibatch=3, chunk_size=2, k=2, num_requirements=2)}


# ----------------------------------------------------------------------------------------------- the recording
@dataclass
class Recording:
    """A recorded run: its rollouts and the mean completion tokens per optimizer stage (from its ledger)."""

    source: str
    harness: str
    rollouts: list[Rollout]
    reply_tokens: dict[str, float]


def load_recording(folder: Path) -> Recording:
    """`folder` holds a run's `trajectories/*.rollouts.jsonl`, its `ledger.calls.jsonl` and a README naming where
    it came from; only rollouts that ran (outcome "ok") are replayed."""
    if not (folder / "ledger.calls.jsonl").is_file():
        raise SystemExit(f"{folder}: not a recorded run (no ledger.calls.jsonl and trajectories/*.rollouts.jsonl)")
    rollouts = [Rollout.model_validate_json(line) for path in sorted((folder / "trajectories").glob("*.rollouts.jsonl"))
                for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rollouts = [r for r in rollouts if r.outcome == "ok" and r.trajectory]
    if not rollouts:
        raise SystemExit(f"{folder}: no recorded rollouts (trajectories/*.rollouts.jsonl) to replay")
    sums: dict[str, list[int]] = {}
    for line in (folder / "ledger.calls.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line) if line.strip() else {}
        if record.get("role") != "agent" and not record.get("cached") and record.get("completion_tokens"):
            sums.setdefault(str(record["stage"]), []).append(int(record["completion_tokens"]))
    readme = folder / "README.md"
    source = readme.read_text(encoding="utf-8").splitlines()[0].lstrip("# ") if readme.exists() else str(folder)
    return Recording(source=source, harness=rollouts[0].harness, rollouts=rollouts,
                     reply_tokens={stage: sum(v) / len(v) for stage, v in sums.items()})


class ReplayHarness(Harness, TextTasks):
    """The recorded harness's descriptions (T, H) with `n_train` / `n_val` placeholder tasks; rollouts come from
    `ReplayingAgent`, never from an environment."""

    name = "replay"
    max_steps = 30

    def __init__(self, resource_dir: Path, n_train: int, n_val: int) -> None:
        self.resource_dir = resource_dir
        self._splits = {"train": [Task(id=f"train-{i:03d}", instruction=f"recorded task {i}", metadata={"slot": i})
                                  for i in range(n_train)],
                        "val": [Task(id=f"val-{i:03d}", instruction=f"recorded task {n_train + i}",
                                     metadata={"slot": n_train + i}) for i in range(n_val)],
                        "test": []}

    def splits(self) -> dict[str, list[Task]]:
        return self._splits

    def make_env(self, task: Task) -> TextEnv:
        raise RuntimeError("the replay harness has no environment: its rollouts are replayed by ReplayingAgent")


@dataclass
class ReplayingAgent:
    """Answers task slot i with recorded rollout i mod n (its trajectory, reward and token counts)."""

    recordings: Sequence[Rollout]
    replayed: list[Rollout] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, harness: Harness, task: Task, skills: Sequence[Skill]) -> Rollout:
        recorded = self.recordings[int(task.metadata["slot"]) % len(self.recordings)]
        rollout = recorded.model_copy(update={"task_id": task.id, "harness": harness.name}, deep=True)
        with self._lock:
            self.replayed.append(rollout)
        return rollout


# ------------------------------------------------------------------------------------------ the replaying model
#: Which recorded ledger stage gives the length of each kind of reply, nearest first.
REPLY_STAGES = {
    "requirements": ("rasi.query_init",),
    "lesson": ("adapt",),
    "skill_init": ("rasi.skill_init", "rasu.update"),
    "failure_modes": ("rasu.gradient", "rasi.query_init"),  # a JSON list of items, as the requirements are
    "merge": ("rasu.merge", "rasu.gradient", "rasi.query_init"),
    "skill_update": ("rasu.update", "rasi.skill_init"),
    # TextGrad's loss and backward: a critique of rollouts (free text, as a failure report or a lesson)
    "textgrad_critique": ("textgrad", "rasu.gradient", "adapt"),
    "textgrad_skill": ("textgrad", "rasu.update", "rasi.skill_init"),  # TGD's step: the rewritten skill
    "gepa_skill": ("gepa.reflection", "rasu.update", "rasi.skill_init"),  # GEPA's reflection: the rewritten skill
}


#: Each reply kind's cap for a hosted model (raso's PromptLimits defaults: plan, lesson and skill tokens); TextGrad's
#: critiques and GEPA's skill take the cap of the raso role that writes the same kind of text.
REPLY_CAPS = {"requirements": 2048, "lesson": 1024, "skill_init": 4096, "failure_modes": 2048, "merge": 2048,
              "skill_update": 4096, "textgrad_critique": 2048, "textgrad_skill": 4096, "gepa_skill": 4096}


def reply_lengths(recording: Recording, overrides: dict[str, int] | None = None) -> tuple[dict[str, int], list[str]]:
    """Tokens per reply kind from the recording (or `overrides`), and a note per kind not taken from its own
    recorded stage."""
    lengths, notes = {}, []
    for kind, stages in REPLY_STAGES.items():
        if overrides and kind in overrides:
            lengths[kind] = overrides[kind]
            notes.append(f"{kind}: {overrides[kind]} tokens (given)")
            continue
        found = next((s for s in stages if s in recording.reply_tokens), None)
        if found is None:
            raise SystemExit(f"the recording has no optimizer replies of stage {' or '.join(stages)} ({kind})")
        lengths[kind] = max(round(recording.reply_tokens[found]), 1)
        if found != stages[0]:
            notes.append(f"{kind}: length of the recorded {found} replies")
    return lengths, notes


def filler(words: Sequence[str], tokens: int, offset: int = 0) -> str:
    """About `tokens` tokens of real words (the harness's own descriptions), deterministic."""
    from raso.llm._litellm import litellm

    cycle = itertools.islice(itertools.cycle(words), offset, None)
    text = " ".join(itertools.islice(cycle, max(round(tokens * 0.8), 1)))
    while litellm.token_counter(model="gpt-4o", text=text) < tokens:
        text += " " + " ".join(itertools.islice(cycle, 8))
    return text


@dataclass
class ReplayingOptimizer:
    """A scripted optimizer whose every reply has the recorded length of its kind; records what was sent and
    answered. Skills it writes carry a revision number, so each differs from the last."""

    lengths: dict[str, int]
    words: Sequence[str]
    num_items: int = 5
    exchanges: list[tuple[list[dict[str, Any]], str]] = field(default_factory=list)
    _revision: itertools.count = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _texts: dict[tuple[str, int], str] = field(default_factory=dict)

    def text(self, kind: str, parts: int = 1, variant: int = 0) -> str:
        """A `parts`-th of the kind's length; each variant distinct (list items are told apart, not merged)."""
        key = (kind, parts, variant)
        if key not in self._texts:
            self._texts[key] = filler(self.words, max(self.lengths[kind] // parts, 1), offset=len(self._texts) * 7)
        return self._texts[key]

    def skill(self, kind: str) -> dict[str, str]:
        with self._lock:
            revision = next(self._revision)
        return {"name": "replayed-skill", "description": f"Replayed skill, revision {revision}.",
                "body": f"# Revision {revision}\n\n{self.text(kind)}"}

    def markdown(self, kind: str) -> str:
        skill = self.skill(kind)
        return f"---\nname: {skill['name']}\ndescription: {skill['description']}\n---\n\n{skill['body']}\n"

    def reply(self, messages: list[dict[str, Any]]) -> str:
        system = str(messages[0].get("content") or "") if messages else ""
        text = "\n".join(str(m.get("content") or "") for m in messages)
        if "<IMPROVED_VARIABLE>" in system:
            answer = f"<IMPROVED_VARIABLE>{self.markdown('textgrad_skill')}</IMPROVED_VARIABLE>"
        elif "You evaluate one trajectory" in system or "<ROLE>" in text:
            answer = self.text("textgrad_critique")
        elif "Provide the new instructions within ``` blocks" in text:
            answer = f"```\n{self.markdown('gepa_skill')}```"
        elif '"requirements": {' in text:
            n = 2 * self.num_items
            answer = json.dumps({"requirements": [
                {"requirement": self.text("requirements", n, 2 * i), "query": self.text("requirements", n, 2 * i + 1)}
                for i in range(self.num_items)]})
        elif '"lesson": {' in text:
            answer = json.dumps({"supported": True, "lesson": self.text("lesson")})
        elif '"gradients": {' in text:
            kind = "merge" if "Merge failure-mode reports" in text else "failure_modes"
            n = 3 * self.num_items
            answer = json.dumps({"gradients": [
                {"failure_mode": self.text(kind, n, 3 * i), "evidence": self.text(kind, n, 3 * i + 1),
                 "query": self.text(kind, n, 3 * i + 2)} for i in range(self.num_items)]})
        elif '"body": {' in text:
            answer = json.dumps(self.skill("skill_update" if "Improve an agent skill" in text else "skill_init"))
        else:
            raise AssertionError(f"unrecognised optimizer prompt: {text[:200]!r}")
        with self._lock:
            self.exchanges.append((messages, answer))
        return answer


# ---------------------------------------------------------------------------------------------- whole runs
@dataclass
class MethodCost:
    method: str
    rollouts: int  # counted as raso's engine counts them (s0's val evaluation included)
    budget: int
    agent_prompt_tokens: int
    agent_completion_tokens: int
    optimizer_calls: int
    optimizer_prompt_tokens: int
    optimizer_completion_tokens: int
    longest_prompt_chars: int
    agent_usd: float = 0.0
    optimizer_usd: float = 0.0

    @property
    def usd(self) -> float:
        return self.agent_usd + self.optimizer_usd


def run_method(method: str, recording: Recording, sizes: RunSizes, work: Path, lengths: dict[str, int],
               price_model: str = "gpt-4.1-mini") -> MethodCost:
    """One whole run of `method` on the replayed recording; tokens counted with `price_model`'s tokenizer."""
    import raso.api
    from experiments.baselines.gepa_baseline import run_gepa
    from experiments.baselines.textgrad_baseline import TextGradProposer
    from raso.engine.config import OptimizeConfig
    from raso.llm import GatewayConfig, LLMGateway, RetryConfig
    from raso.llm._litellm import litellm

    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    resource_dir = ROOT / "harnesses" / recording.harness
    harness = ReplayHarness(resource_dir if resource_dir.is_dir() else ROOT / "harnesses" / "webshop",
                            sizes.n_train, sizes.n_val)
    words = (harness.task_description + " " + harness.harness_description).split()
    optimizer = ReplayingOptimizer(lengths, words, num_items=sizes.num_requirements)
    optimizer_model = ScriptedModel(optimizer.reply, name="replaying-optimizer")
    never = ScriptedModel([], name="agent-is-replayed")  # the agent's model: never called, rollouts are replayed
    agent = ReplayingAgent(recording.rollouts)
    budget = engine_budget(sizes.n_train, sizes.n_val, epochs=sizes.epochs, minibatch=sizes.minibatch)
    init = "rasi" if method == "raso" else "rfsi"
    config = OptimizeConfig.model_validate({
        "models": {"target": never.model, "optimizer": optimizer_model.model},
        "init": {"method": init, "num_requirements": sizes.num_requirements},
        "update": {"method": "rasu" if method in ("raso", "rasu") else "rfsu", "chunk_size": sizes.chunk_size},
        "retrieval": {"kind": "bm25", "k": sizes.k},
        "schedule": {"epochs": sizes.epochs, "minibatch": sizes.minibatch, "workers": 4, "test": False},
        "budget": {"rollouts": budget}, "run_dir": work / method})
    if method == "gepa":
        gateway = LLMGateway(GatewayConfig.for_models(target=never.model, optimizer=optimizer_model.model,
                                                      retry=RetryConfig(max_attempts=1)))
        s0 = raso.api.init_skill(harness, config, gateway=gateway).skill
        outcome = run_gepa(harness, agent, gateway, seed_skill=s0, train=harness.tasks("train"),
                           val=harness.tasks("val"), budget_rollouts=budget, run_dir=work / method,
                           reflection_minibatch=sizes.gepa_minibatch, workers=4)
        rollouts = outcome.rollouts_used
    else:
        proposer = None
        if method.startswith("textgrad"):
            proposer = TextGradProposer(chunk_size=sizes.chunk_size,
                                        trajectories="full" if method == "textgrad-full" else "equal")
        result = raso.api.optimize(harness, config=config, proposer=proposer, agent_factory=lambda _gw: agent)
        rollouts = result.rollouts_used
    prompt = sum(litellm.token_counter(model=price_model, messages=sent) for sent, _ in optimizer.exchanges)
    completion = sum(litellm.token_counter(model=price_model, text=reply) for _, reply in optimizer.exchanges)
    longest = max((sum(len(str(m.get("content") or "")) for m in sent) for sent, _ in optimizer.exchanges), default=0)
    return MethodCost(method=method, rollouts=rollouts, budget=budget,
                      agent_prompt_tokens=sum(r.prompt_tokens for r in agent.replayed),
                      agent_completion_tokens=sum(r.completion_tokens for r in agent.replayed),
                      optimizer_calls=len(optimizer.exchanges), optimizer_prompt_tokens=prompt,
                      optimizer_completion_tokens=completion, longest_prompt_chars=longest)


def price(costs: Sequence[MethodCost], price_model: str) -> list[MethodCost]:
    """USD of each method's agent and optimizer tokens at litellm's bundled prices for `price_model`."""
    from raso.llm._litellm import litellm

    entry = litellm.model_cost.get(price_model)
    if not entry or entry.get("input_cost_per_token") is None:
        raise SystemExit(f"litellm's price table has no per-token price for {price_model!r}")
    per_in, per_out = float(entry["input_cost_per_token"]), float(entry["output_cost_per_token"])
    for c in costs:
        c.agent_usd = c.agent_prompt_tokens * per_in + c.agent_completion_tokens * per_out
        c.optimizer_usd = c.optimizer_prompt_tokens * per_in + c.optimizer_completion_tokens * per_out
    return list(costs)


def run_costs(recording: Recording, sizes: RunSizes, methods: Sequence[str] = METHODS,
              price_model: str = "gpt-4.1-mini", work: Path | None = None,
              reply_tokens: dict[str, int] | None = None) -> list[MethodCost]:
    """Whole runs of every method on the same recording and sizes, priced at `price_model`; `reply_tokens`
    replaces the recorded reply length of the kinds it names."""
    lengths, _ = reply_lengths(recording, reply_tokens)
    with tempfile.TemporaryDirectory(prefix="bench-run-cost-") as tmp:
        where = Path(work) if work is not None else Path(tmp)
        costs = [run_method(m, recording, sizes, where, lengths, price_model) for m in methods]
    return price(costs, price_model)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recording", type=Path, default=DEFAULT_RECORDING)
    parser.add_argument("--price-model", default="gpt-4.1-mini", help="litellm model whose prices (and tokenizer) "
                        "are applied")
    parser.add_argument("--sizes", choices=sorted(SIZES), default="paper-webshop")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--reply-caps", action="store_true", help="every optimizer reply as long as its cap for a "
                        "hosted model (an upper bound) instead of the recorded length")
    args = parser.parse_args()
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        parser.error(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(METHODS)}")
    recording = load_recording(args.recording)
    sizes = SIZES[args.sizes]
    given = REPLY_CAPS if args.reply_caps else None
    lengths, notes = reply_lengths(recording, given)
    costs = run_costs(recording, sizes, methods, args.price_model, reply_tokens=given)
    failed = sum(1 for r in recording.rollouts if r.reward < 1)
    steps = sum(len(r.trajectory) for r in recording.rollouts) / len(recording.rollouts)
    print(f"Whole runs at {args.sizes} sizes ({sizes}), replaying {len(recording.rollouts)} recorded rollouts "
          f"({failed} not solved, {steps:.1f} steps on average) from: {recording.source}")
    print(f"Optimizer reply lengths (tokens): {lengths}" + (f"; {'; '.join(notes)}" if notes else ""))
    print(f"Prices: litellm's bundled table for {args.price_model}; tokens by its tokenizer (agent: as recorded)\n")
    header = ("method", "rollouts", "agent USD", "optimizer USD", "total USD", "optimizer calls",
              "optimizer prompt tok", "optimizer completion tok", "longest prompt (chars)")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for c in costs:
        print(f"| {c.method} | {c.rollouts} | {c.agent_usd:.2f} | {c.optimizer_usd:.2f} | {c.usd:.2f} | "
              f"{c.optimizer_calls:,} | {c.optimizer_prompt_tokens:,} | {c.optimizer_completion_tokens:,} | "
              f"{c.longest_prompt_chars:,} |")
    by = {c.method: c for c in costs}
    for reference in ("textgrad", "textgrad-full"):
        if "raso" in by and reference in by:
            print(f"\nRASO vs {reference}: total {by['raso'].usd / by[reference].usd:.2f}x, optimizer "
                  f"{by['raso'].optimizer_usd / by[reference].optimizer_usd:.2f}x")


if __name__ == "__main__":
    main()
