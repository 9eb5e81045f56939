"""One schedule (raso.engine.schedule.Schedule): the engine walks it, the cost plan and the experiments' rollout
accounting replay it, so a change of the schedule reaches all three; the plan's optimizer calls are what the run's
strategies report."""

from __future__ import annotations

import ast
import json
from collections.abc import Sequence
from pathlib import Path

from test_engine_support import ToyHarness, toy_agent_reply, toy_initializer, toy_proposer

import experiments.accounting
import raso
import raso.engine.engine
import raso.engine.plan
from experiments.accounting import schedule_rollouts
from raso.engine import OptimizeConfig, RunDir
from raso.engine.loop import LoopStrategies
from raso.engine.plan import plan_run
from raso.llm.scripted import ScriptedModel


class FullBatchesOnly:
    """A changed schedule: train in its own order, minibatches of `size`, the last partial one dropped."""

    def __init__(self, size: int) -> None:
        self.size = size

    def batches(self, train_ids: Sequence[str], epoch: int) -> list[list[str]]:
        ids = list(train_ids)
        return [ids[i:i + self.size] for i in range(0, len(ids) - self.size + 1, self.size)]


def test_one_schedule_change_reaches_the_engine_the_plan_and_the_accounting(tmp_path: Path) -> None:
    sampler = FullBatchesOnly(3)
    loop = LoopStrategies(sampler=sampler)
    agent = ScriptedModel(toy_agent_reply, name="toy-agent")
    optimizer = ScriptedModel(["LEVEL=1"] + [f"LEVEL=1\nv{i}" for i in range(4)], name="opt")
    config = OptimizeConfig(**{
        "harness": "toy", "models.target": agent.model, "models.optimizer": optimizer.model, "init.method": "rfsi",
        "update.method": "rfsu", "schedule.epochs": 2, "schedule.minibatch": 2, "schedule.workers": 2,
        "schedule.test": False, "run_dir": tmp_path / "run"})
    harness = ToyHarness(n_train=7)  # 4 val tasks
    result = raso.optimize(harness, config, initializer=toy_initializer, proposer=toy_proposer, loop=loop)

    # the engine: two full minibatches of 3 per epoch (the 7th task and minibatch 2 are the sampler's to ignore)
    assert (result.iterations, result.train_rollouts, result.val_rollouts) == (4, 12, 4 + 4 * 4)
    plan = plan_run(config, harness, loop=loop)
    assert (plan.iterations, plan.rollouts["train"], plan.rollouts["s0_val"] + plan.rollouts["val"]) == (4, 12, 20)
    written = json.loads(RunDir(config.run_dir).plan.read_text())  # the plan the engine wrote, with the run's loop
    assert written["iterations"] == 4 and written["rollouts"] == plan.rollouts
    count = schedule_rollouts(7, 4, epochs=2, minibatch=2, convention="candidates+s0", sampler=sampler)
    assert (count.iterations, count.train, count.val) == (4, 12, 20)
    # and without the change all three say otherwise: four minibatches of 2, 2, 2, 1 per epoch
    assert schedule_rollouts(7, 4, epochs=2, minibatch=2).iterations == 8
    assert plan_run(config, harness).iterations == 8


class ReportingProposer:
    """A proposer that says what one proposal costs (7 calls for any minibatch)."""

    def propose(self, ctx, skill, rollouts):  # never called: the plan calls no model
        raise AssertionError("the plan must not propose")

    def expected_calls(self, train_rollouts: int, failure_modes: int) -> float:
        return 7.0


def test_the_plans_optimizer_calls_are_what_the_strategies_report(tmp_path: Path) -> None:
    config = OptimizeConfig(**{"harness": "toy", "models.target": "scripted/x", "init.method": "rasi",
                               "update.method": "rasu", "schedule.epochs": 1, "schedule.minibatch": 2,
                               "schedule.test": False, "run_dir": tmp_path / "r", "init.num_requirements": 3})
    default = plan_run(config, ToyHarness())
    # RASI: query-init, 3 adaptations, skill-init; RASU per minibatch of 2: one gradient chunk, merge, update and
    # an adapted lesson per expected failure mode (as many as requirements); 3 iterations
    assert {r.role: r.calls for r in default.roles}["optimizer"] == 5 + 3 * (1 + 2 + 3)
    assert "reported by init rasi" in default.roles[1].basis
    own = plan_run(config, ToyHarness(), proposer=ReportingProposer())
    assert {r.role: r.calls for r in own.roles}["optimizer"] == 5 + 3 * 7
    silent = plan_run(config, ToyHarness(), proposer=toy_proposer)  # reports nothing: the configured count
    assert {r.role: r.calls for r in silent.roles}["optimizer"] == 5 + 3 * 6
    assert "reports no expected_calls" in silent.roles[1].basis


def _module_tree(module: object) -> ast.Module:
    return ast.parse(Path(module.__file__).read_text())  # type: ignore[attr-defined]


def test_the_schedule_is_kept_once() -> None:
    """Finding 1 of issue 38: the engine, the plan and the accounting each walked the schedule themselves, and the
    plan hard-coded RASI/RASU's calls."""
    for module in (raso.engine.engine, raso.engine.plan, experiments.accounting):
        tree = _module_tree(module)
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    and (node.module or "").endswith("schedule") for alias in node.names}
        assert "Schedule" in imported, module.__name__
        # no walk of their own: no loop over epochs, no ceil of train over minibatch, no shuffling
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        assert "random" not in names and "ceil" not in attrs, module.__name__
        for loop in (n for n in ast.walk(tree) if isinstance(n, ast.For)):
            assert "epochs" not in ast.unparse(loop.iter), f"{module.__name__}:{loop.lineno} walks the epochs"
    plan_attrs = {n.attr for n in ast.walk(_module_tree(raso.engine.plan)) if isinstance(n, ast.Attribute)}
    assert not plan_attrs & {"chunk_size", "adapt", "init_kind_calls"}  # the strategies count their own calls
