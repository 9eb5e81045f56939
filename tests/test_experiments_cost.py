"""The cost comparison of whole runs (issue 36): TextGrad's full-trajectory setting (the paper's) beside the
equal-information default, the experiment option that selects it and the cost table that names it, and the
benchmark's whole runs at identical rollout counts (benchmarks/bench_run_cost.py, on a scripted recording)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import gepa  # noqa: F401  (the baselines run through their packages: the `experiments` extra, in `dev`)
import textgrad  # noqa: F401
from test_experiments_support import PLAIN_SKILL, overrides, scripted_models

from experiments.baselines.textgrad_baseline import textgrad_step
from experiments.runner import run_experiment
from raso.harness import Rollout, Step
from raso.llm import GatewayConfig, LLMGateway, RetryConfig
from raso.optimizer.render import PromptLimits
from raso.skill import Skill

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "experiments" / "configs"
S0 = Skill(**PLAIN_SKILL)


def long_rollout(task: str, steps: int = 30) -> Rollout:
    """A failed rollout whose steps together are far longer than the equal per-trajectory budget."""
    return Rollout(task_id=task, harness="toy", reward=0.0, trajectory=[
        Step(observation=f"{task} observation {i}: " + "x" * 150, action=f"act {i} " + "y" * 100,
             reply=f"Thought: step {i} of {task}\nAction: act {i} " + "y" * 100,
             result=f"{task} result {i}: " + "z" * 150) for i in range(steps)])


def loss_prompts(model: Any) -> str:
    return "\n".join(str(m.get("content")) for call in model.calls for m in call
                     if "You evaluate one trajectory" in str(call[0].get("content")))


def test_textgrad_full_setting_sends_every_step_of_every_trajectory_unclipped() -> None:
    rollouts = [long_rollout(f"task-{i}") for i in range(3)]
    limits = PromptLimits()
    assert sum(len(s.observation) + len(s.reply) + len(s.result) for s in rollouts[0].trajectory) > \
        3 * limits.trajectory_chars_each

    agent, optimizer = scripted_models()
    gw = LLMGateway(GatewayConfig.for_models(target=agent.model, optimizer=optimizer.model,
                                             retry=RetryConfig(max_attempts=1)))
    textgrad_step(gw, S0, rollouts, chunk_size=8, limits=limits, trajectories="full")
    full = loss_prompts(optimizer)
    for rollout in rollouts:
        for step in rollout.trajectory:
            assert step.observation in full and step.reply in full and step.result in full

    equal_agent, equal_optimizer = scripted_models()
    gw = LLMGateway(GatewayConfig.for_models(target=equal_agent.model, optimizer=equal_optimizer.model,
                                             retry=RetryConfig(max_attempts=1)))
    textgrad_step(gw, S0, rollouts, chunk_size=8, limits=limits)  # the default: equal information
    equal = loss_prompts(equal_optimizer)
    assert "task-0 result 0: " not in equal and "task-0 result 29: " in equal  # its first steps are omitted
    assert len(full) > 3 * len(equal)


def test_textgrad_trajectories_option_reaches_the_cell_and_the_cost_table_names_it(tmp_path: Path) -> None:
    agent, optimizer = scripted_models()
    values = overrides(tmp_path, agent, optimizer, methods=["textgrad"], seeds=[0], textgrad_trajectories="full",
                       optimize={"schedule": {"epochs": 1, "minibatch": 3, "workers": 2}, "init": {"num_requirements": 2}})
    summary = run_experiment(CONFIGS / "cost.yaml", values)
    assert summary.failed == [], summary.failed
    # the loss read the whole trajectory, every step numbered with its observation (the equal rendering shows
    # "first observation:" and the last steps' actions only)
    assert re.search(r"\[step 1\] observation: ", loss_prompts(optimizer))
    assert "first observation:" not in loss_prompts(optimizer)
    table = (Path(summary.results_dir) / "cost.md").read_text()
    assert "TextGrad: full trajectories" in table


def load_bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_run_cost", ROOT / "benchmarks" / "bench_run_cost.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_run_cost"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def test_bench_run_cost_runs_every_method_at_identical_rollout_counts(tmp_path: Path) -> None:
    bench = load_bench()
    # a scripted recording (test data, not a run): 4 rollouts, 3 of them failed, and replies of fixed lengths
    rollouts = [long_rollout(f"rec-{i}", steps=12).model_copy(update={"harness": "webshop", "prompt_tokens": 1000 + i,
                                                                        "completion_tokens": 50})
                for i in range(4)]
    rollouts[3] = rollouts[3].model_copy(update={"reward": 1.0})
    recording = bench.Recording(source="scripted test recording", harness="webshop", rollouts=rollouts,
                                reply_tokens={"rasi.query_init": 60, "adapt": 40, "rasi.skill_init": 200,
                                              "rasu.gradient": 80, "rasu.merge": 70, "rasu.update": 220})
    sizes = bench.SIZES["small"]
    costs = bench.run_costs(recording, sizes, work=tmp_path)
    by = {c.method: c for c in costs}
    assert sorted(by) == sorted(bench.METHODS)
    budget = bench.engine_budget(sizes.n_train, sizes.n_val, epochs=sizes.epochs, minibatch=sizes.minibatch)
    # every method spent the whole budget
    assert {c.rollouts for c in costs} == {budget}
    # the engine's methods roll out every train task and the val set: the same replayed rollouts, the same agent
    # share (GEPA samples its own train minibatches: as many rollouts, other recorded ones)
    engine = [c for c in costs if c.method != "gepa"]
    assert len({(c.agent_prompt_tokens, c.agent_completion_tokens) for c in engine}) == 1
    assert engine[0].agent_usd > 0
    # the optimizer's share is each method's own; the paper's TextGrad setting reads more than the equal one
    assert all(c.optimizer_calls > 0 and c.optimizer_usd > 0 for c in costs)
    assert by["textgrad-full"].optimizer_prompt_tokens > by["textgrad"].optimizer_prompt_tokens
