"""The open loop (raso.engine.loop): a candidate selector, a stopper and a gate plug into `raso.optimize` without
touching the engine, and every event the engine emits is a typed dataclass that events.jsonl records whole."""

from __future__ import annotations

import ast
import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from test_engine_support import ToyHarness, toy_agent_reply, toy_initializer, toy_proposer

import raso
from raso.engine import OptimizeConfig, RunDir
from raso.engine.errors import RunError
from raso.engine.events import EVENT_TYPES, Snapshot
from raso.engine.gate import GateDecision, overall_mean
from raso.engine.loop import LoopStrategies, LoopView
from raso.engine.run_dir import read_jsonl
from raso.llm.scripted import ScriptedModel

ENGINE = Path(raso.__file__).parent / "engine" / "engine.py"


def _config(tmp_path: Path, agent: ScriptedModel, optimizer: ScriptedModel, **overrides) -> OptimizeConfig:
    values = {"harness": "toy", "models.target": agent.model, "models.optimizer": optimizer.model,
              "init.method": "rfsi", "update.method": "rfsu", "schedule.epochs": 2, "schedule.minibatch": 2,
              "schedule.workers": 2, "schedule.seed": 3, "schedule.test": False, "run_dir": tmp_path / "run"}
    return OptimizeConfig(**{**values, **overrides})


class NewestOnParetoFront:
    """GEPA-style: the parent is a version on the Pareto front of per-task val scores (none scores at least as well
    on every task and better on one); of the front, the newest."""

    def __init__(self) -> None:
        self.chosen: list[int] = []

    def select(self, view: LoopView) -> int:
        scores = view.state.val_scores

        def dominated(v: int) -> bool:
            return any(all(scores[w][t] >= scores[v][t] for t in view.val_task_ids)
                       and any(scores[w][t] > scores[v][t] for t in view.val_task_ids) for w in scores if w != v)

        choice = max(v for v in scores if not dominated(v))
        self.chosen.append(choice)
        return choice


class Patience:
    """Stops after `rejections` rejected candidates in a row."""

    def __init__(self, rejections: int) -> None:
        self.rejections = rejections

    def stop_reason(self, view: LoopView) -> str | None:
        last = view.state.candidates[-self.rejections:]
        if len(last) == self.rejections and not any(c.accepted for c in last):
            return f"patience: {self.rejections} rejections in a row"
        return None


def test_a_pareto_selector_and_a_patience_stopper_plug_into_optimize(tmp_path: Path) -> None:
    # s0 LEVEL=1 solves v1 of the val tasks v1..v4 (difficulty 1..4); LEVEL=2 solves v1, v2 (accepted); a reworded
    # LEVEL=2 ties (rejected, yet on the Pareto front, the newest there); LEVEL=1 from it is worse (rejected)
    agent = ScriptedModel(toy_agent_reply, name="toy-agent")
    optimizer = ScriptedModel(["LEVEL=1", "LEVEL=2", "LEVEL=2\nalt wording", "LEVEL=1\nworse"], name="opt")
    selector = NewestOnParetoFront()
    config = _config(tmp_path, agent, optimizer)
    result = raso.optimize(ToyHarness(), config, initializer=toy_initializer, proposer=toy_proposer,
                           loop=LoopStrategies(selector=selector, stoppers=[Patience(2)]))

    rd = RunDir(config.run_dir)
    decisions = read_jsonl(rd.candidates)
    assert [(d["version"], d["parent_version"], d["accepted"]) for d in decisions] == [
        (1, 0, True), (2, 1, False), (3, 2, False)]
    assert selector.chosen == [0, 1, 2]
    # the third proposal was made from v2, the rejected tie, not from the incumbent v1
    assert "alt wording" in str(optimizer.calls[3]) and "alt wording" not in str(optimizer.calls[2])
    assert result.stop_reason == "patience: 2 rejections in a row" and result.iterations == 3
    assert result.best_version == 1 and result.best_val == 0.5
    val_scores = json.loads(rd.checkpoint.read_text())["val_scores"]  # per version and task, for the selector
    assert {int(v): sum(per_task.values()) / len(per_task) for v, per_task in val_scores.items()} == {
        0: 0.25, 1: 0.5, 2: 0.5, 3: 0.25}
    events = read_jsonl(rd.events)
    assert [e["version"] for e in events if e["kind"] == "parent_selected"] == [0, 1, 2]


class AtLeastAsGood:
    """A gate that accepts ties too (never the product's rule: it shows a gate is a plug-in)."""

    mode = "at-least-as-good"
    paired = False

    def decision_rollouts(self, n_val: int) -> int:
        return n_val

    def decide(self, candidate: Mapping[str, Sequence[float]], *, stored_incumbent_val: float,
               incumbent: Mapping[str, Sequence[float]] | None = None) -> GateDecision:
        val = overall_mean(candidate)
        return GateDecision(accepted=val >= stored_incumbent_val, candidate_val=val,
                            incumbent_val=stored_incumbent_val, statistic=val - stored_incumbent_val,
                            reason=f"{val:.2f} vs {stored_incumbent_val:.2f}")


def test_a_gate_plugs_into_optimize(tmp_path: Path) -> None:
    agent = ScriptedModel(toy_agent_reply, name="toy-agent")
    optimizer = ScriptedModel(["LEVEL=1", "LEVEL=1\ntie", "LEVEL=1\nanother tie", "LEVEL=0"], name="opt")
    config = _config(tmp_path, agent, optimizer, **{"schedule.epochs": 1})
    result = raso.optimize(ToyHarness(), config, initializer=toy_initializer, proposer=toy_proposer,
                           loop=LoopStrategies(gate=AtLeastAsGood()))
    decisions = read_jsonl(RunDir(config.run_dir).candidates)
    # the strict gate would reject both ties
    assert [(d["version"], d["accepted"], d["gate_mode"]) for d in decisions] == [
        (1, True, "at-least-as-good"), (2, True, "at-least-as-good"), (3, False, "at-least-as-good")]
    assert result.best_version == 2


def test_a_selector_that_names_no_written_version_stops_the_run_with_one_clear_error(tmp_path: Path) -> None:
    class Broken:
        def select(self, view: LoopView) -> int:
            return 7

    agent = ScriptedModel(toy_agent_reply, name="toy-agent")
    config = _config(tmp_path, agent, ScriptedModel(["LEVEL=1"], name="opt"))
    with pytest.raises(RunError, match="chose 7, which is not a skill version this run has written"):
        raso.optimize(ToyHarness(), config, initializer=toy_initializer, proposer=toy_proposer,
                      loop=LoopStrategies(selector=Broken()))
    class Strangers:
        def batches(self, train_ids: Sequence[str], epoch: int) -> list[list[str]]:
            return [["t1", "not-a-task"]]

    with pytest.raises(RunError, match=r"gave ids that are not train tasks \(\['not-a-task'\]\) as minibatch 0"):
        raso.optimize(ToyHarness(), _config(tmp_path / "strangers", agent, ScriptedModel(["LEVEL=1"], name="opt2")),
                      initializer=toy_initializer, proposer=toy_proposer, loop=LoopStrategies(sampler=Strangers()))
    with pytest.raises(TypeError, match="has no stop_reason"):
        LoopStrategies(stoppers=[object()])  # type: ignore[list-item]
    with pytest.raises(raso.ConfigError, match="is not a raso.engine.loop.LoopStrategies"):
        raso.optimize(ToyHarness(), config.model_copy(update={"run_dir": tmp_path / "other"}),
                      loop=[Broken()])  # type: ignore[arg-type]


def test_every_event_the_engine_emits_is_a_declared_dataclass_and_events_jsonl_records_its_fields(
        tmp_path: Path) -> None:
    # the engine names each event by its class: no string kinds, and each class is registered in EVENT_TYPES
    tree = ast.parse(ENGINE.read_text())
    emitted = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "_event":
            first = node.args[0]
            assert isinstance(first, ast.Name), f"line {node.lineno}: an event named by a string, not its class"
            emitted.add(first.id)
    declared = {cls.__name__ for cls in EVENT_TYPES.values()}
    assert emitted <= declared and len(emitted) >= 15
    assert len(EVENT_TYPES) == len(declared)  # one class per kind

    agent = ScriptedModel(toy_agent_reply, name="toy-agent")
    config = _config(tmp_path, agent, ScriptedModel(["LEVEL=1", "LEVEL=2", "LEVEL=3", "LEVEL=4"], name="opt"),
                     **{"schedule.epochs": 1, "schedule.test": True})
    raso.optimize(ToyHarness(), config, initializer=toy_initializer, proposer=toy_proposer)
    snapshot_fields = {f.name for f in dataclasses.fields(Snapshot)}
    seen = set()
    for event in read_jsonl(RunDir(config.run_dir).events):
        cls = EVENT_TYPES[event["kind"]]
        own = {f.name for f in dataclasses.fields(cls)} - {"snapshot", "time"}
        assert set(event) == {"kind", "time"} | snapshot_fields | own, event["kind"]
        seen.add(event["kind"])
    assert {"run_started", "init_done", "batch_started", "batch_done", "parent_selected", "proposal_done",
            "decision", "checkpoint", "stopped", "test_done", "run_finished"} <= seen


def test_the_engine_decides_nothing_a_strategy_decides() -> None:
    """Finding 2 of issue 38: batch sampling, candidate selection, the gate's rule and stopping lived inside the
    engine. It now asks the run's strategies (self.loop) and the schedule, and holds none of their rules."""
    tree = ast.parse(ENGINE.read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    imported = {alias.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom | ast.Import) for alias in n.names}
    assert not (names | imported) & {"random", "decide", "split_holdout", "GateOptions", "make_event"}
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert {"self.loop.selector.select", "stopper.stop_reason", "gate.decide", "self.schedule.next_batch",
            "self.schedule.fit"} <= calls
