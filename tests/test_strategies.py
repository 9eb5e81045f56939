"""Strategies with one context: the options models, RunContext, a user's proposer object plugged into
raso.optimize on the toy counting harness (scripted models), and the six-parameter rule of raso/optimizer and
raso/engine."""

from __future__ import annotations

import ast
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from optimizer_helpers import SpyRetriever, context, gateway, router, section
from pydantic import ValidationError

import raso
import raso.api
from raso.engine.run_dir import RunDir, read_jsonl
from raso.errors import ConfigError, RunError
from raso.harness import Rollout
from raso.llm.scripted import ScriptedModel
from raso.llm.view import UnitGateway
from raso.optimizer.context import NoRetrieverError, RunContext
from raso.optimizer.options import InitOptions, UpdateOptions
from raso.optimizer.rasi import RASI, RFSI, initializer_for
from raso.optimizer.rasu import RASU, RFSU, proposer_for
from raso.optimizer.types import Gradient, UpdateProposal
from raso.skill import Skill
from raso.testing import CountingHarness, count_script

ROOT = Path(__file__).resolve().parent.parent
MAX_PARAMETERS = 6
MARKER = "COUNT-UP"
PLAIN = Skill(name="counting", description="Count to the target.", body="# Steps\n1. Read the task.\n")


# ---------------------------------------------------------------------------------------------- the rule
def _parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> int:
    args = node.args
    return (len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs) + (args.vararg is not None)
            + (args.kwarg is not None))


def test_no_function_in_the_optimizer_or_the_engine_takes_more_than_six_parameters() -> None:
    over = []
    for package in ("raso/optimizer", "raso/engine"):
        files = sorted((ROOT / package).rglob("*.py"))
        assert files, package
        for path in files:
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    if _parameter_count(node) > MAX_PARAMETERS:
                        name = getattr(node, "name", "<lambda>")
                        over.append(f"{path.relative_to(ROOT)}:{node.lineno} {name} ({_parameter_count(node)})")
    assert over == [], "functions over six parameters (self, keyword-only, *args and **kwargs count):\n" + "\n".join(over)


def test_the_parameter_count_counts_self_keyword_only_and_star_arguments() -> None:
    [node] = ast.parse("def f(self, a, /, b, *args, c, d=1, **kw): pass").body
    assert isinstance(node, ast.FunctionDef) and _parameter_count(node) == 7


# ---------------------------------------------------------------------------------------------- options
def test_init_options_name_the_method_and_forbid_unknown_fields() -> None:
    assert InitOptions().kind == "rasi" and InitOptions().num_requirements == 5 and InitOptions().adapt
    assert InitOptions(method=" RFSI ").kind == "rfsi"
    assert InitOptions(method="skills/s0/SKILL.md").kind == "file"
    with pytest.raises(ValidationError, match="num_requirements"):
        InitOptions(num_requirements=0)
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        InitOptions(k=3)
    with pytest.raises(ValidationError, match="'rasi', 'rfsi' or the path"):
        InitOptions(method="  ")


def test_update_options_defaults_and_choices() -> None:
    options = UpdateOptions()
    assert (options.method, options.chunk_size, options.adapt, options.failures_only) == ("rasu", 8, True, True)
    with pytest.raises(ValidationError):
        UpdateOptions(method="textgrad")
    with pytest.raises(ValidationError, match="chunk_size"):
        UpdateOptions(chunk_size=0)
    assert all(field.description for field in [*InitOptions.model_fields.values(), *UpdateOptions.model_fields.values()])


def test_the_options_build_the_strategy_they_name() -> None:
    rasi = InitOptions(num_requirements=3, adapt=False)
    assert initializer_for(rasi) == RASI(rasi)
    assert initializer_for(InitOptions(method="rfsi", num_requirements=2)) == RFSI(InitOptions(method="rfsi",
                                                                                               num_requirements=2))
    with pytest.raises(ValueError, match="is a file"):
        initializer_for(InitOptions(method="s0.md"))
    rasu = UpdateOptions(chunk_size=4, failures_only=False)
    assert proposer_for(rasu) == RASU(rasu)
    assert isinstance(proposer_for(UpdateOptions(method="rfsu")), RFSU)


# ---------------------------------------------------------------------------------------------- RunContext
def test_a_unit_view_tags_the_calls_and_shares_one_lazily_built_retriever() -> None:
    gw, _ = gateway(router())
    built: list[int] = []
    spy = SpyRetriever([section(1)])

    def factory() -> SpyRetriever:
        built.append(1)
        return spy

    ctx = RunContext(gw, task_description="T", harness_description="H", retriever_factory=factory)
    assert built == []  # nothing is built until a step asks
    view = ctx.with_gateway(UnitGateway(gw, "iter001/propose"))
    assert isinstance(view.gateway, UnitGateway) and view.gateway.unit == "iter001/propose"
    assert ctx.gateway is gw and view.task_description == "T" and view.prompt_limits == ctx.prompt_limits
    assert view.retriever() is spy and ctx.retriever() is spy and ctx.with_gateway(UnitGateway(gw, "init")).retriever() is spy
    assert built == [1]
    with pytest.raises(AttributeError):
        ctx.workers = 3  # type: ignore[misc]


def test_a_retrieval_step_without_a_retriever_says_so() -> None:
    gw, sm = gateway(router())
    with pytest.raises(NoRetrieverError, match="no retriever"):
        RASI(InitOptions(num_requirements=1)).init(context(gw))
    assert RFSI(InitOptions(method="rfsi", num_requirements=2)).init(context(gw)).mode == "rfsi"  # the retrieval-free step never asks


def test_k_and_workers_come_from_the_context() -> None:
    gw, _ = gateway(router())
    spy = SpyRetriever([section(i) for i in range(1, 6)])
    init = RASI(InitOptions(num_requirements=2)).init(context(gw, spy, k=2, workers=2))
    assert [c["k"] for c in spy.calls] == [2, 2] and [len(r) for r in init.retrieved] == [2, 2]
    assert len(init.lessons) == 2 and [lesson.requirement for lesson in init.lessons] == [
        r.requirement for r in init.requirements]  # parallel adaptation keeps the requirements' order


# ---------------------------------------------------------------------------------------------- a user's proposer
def counting_agent(messages: list[dict[str, Any]]) -> str:
    """Counts only when the skill it was given holds the marker; otherwise stops (reward 0)."""
    if any(MARKER in str(m.get("content") or "") for m in messages):
        return count_script(messages)
    return "Thought: unsure.\nAction: stop"


class MarkerProposer:
    """A user's proposer: only `propose(ctx, skill, rollouts)`. It asks the optimizer model for one line and adds
    it to the skill, recording what the engine gave it."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def propose(self, ctx: Any, skill: Skill, rollouts: Sequence[Rollout]) -> UpdateProposal:
        self.seen.append({"unit": ctx.gateway.unit, "skill": skill.name, "rewards": [r.reward for r in rollouts],
                          "task": ctx.task_description, "harness": ctx.harness_description})
        line = ctx.gateway.complete("optimizer", [{"role": "user", "content": "one rule"}], stage="user.rule").text
        candidate = Skill(name=skill.name, description=skill.description, body=skill.body + line + "\n")
        return UpdateProposal(mode="rfsu", candidate=candidate,
                              gradients=[Gradient(failure_mode=f"{len(rollouts)} rollouts lost reward")])


def test_a_proposer_object_with_only_propose_plugs_into_optimize(tmp_path: Path) -> None:
    harness = CountingHarness(n_tasks=6)
    agent = ScriptedModel(counting_agent, name="strategies-agent")
    optimizer = ScriptedModel([f"{MARKER}: say 1, then 2, one number per action."], name="strategies-optimizer")
    s0 = PLAIN.save(tmp_path / "s0" / "SKILL.md")
    proposer = MarkerProposer()
    result = raso.optimize(harness, **{"models.target": agent.model, "models.optimizer": optimizer.model,
                                       "schedule.epochs": 1, "schedule.minibatch": 3,
                                       "schedule.max_iterations": 1, "schedule.workers": 1,
                                       "schedule.test": False}, init=str(s0),
                           update="rasu",
                           run_dir=tmp_path / "run", proposer=proposer)

    assert proposer.seen == [{"unit": "iter001/propose", "skill": "counting", "rewards": [0.0, 0.0, 0.0],
                              "task": harness.task_description, "harness": harness.harness_description}]
    assert result.initial_val == 0.0 and result.best_val == 1.0 and result.accepted == 1
    rd = RunDir(tmp_path / "run")
    assert MARKER in Skill.load(rd.best_skill).body
    assert json.loads((rd.proposals / "iter001.json").read_text())["gradients"][0]["failure_mode"] == (
        "3 rollouts lost reward")
    assert [c["accepted"] for c in read_jsonl(rd.candidates)] == [True]
    assert len(optimizer.calls) == 1  # RASU's own calls were not made: the user's proposer replaced it


def test_a_plain_function_as_proposer_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    def old_style(gw: Any, **kwargs: Any) -> Any:
        raise AssertionError("never called")

    with pytest.raises(ConfigError, match=r"has no propose\(ctx, skill, rollouts\) method"):
        raso.optimize(CountingHarness(), **{"models.target": "scripted/never-used"}, run_dir=tmp_path / "run", proposer=old_style)
    assert not (tmp_path / "run").exists()


def test_rfsi_and_rfsu_never_build_the_retriever(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_cli_runs import algorithm_reply

    def no_index(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a retrieval-free run built the retriever")

    monkeypatch.setattr(raso.api, "make_retriever", no_index)
    agent = ScriptedModel(counting_agent, name="strategies-rf-agent")
    optimizer = ScriptedModel(algorithm_reply, name="strategies-rf-optimizer")
    result = raso.optimize(CountingHarness(n_tasks=4), **{"models.target": agent.model,
                                                          "models.optimizer": optimizer.model,
                                                          "init.num_requirements": 2, "schedule.epochs": 1,
                                                          "schedule.minibatch": 2,
                                                          "schedule.max_iterations": 1, "schedule.workers": 1,
                                                          "schedule.test": False},
                           init="rfsi", update="rfsu", run_dir=tmp_path / "run")
    assert result.finished and result.iterations == 1
    init = json.loads((RunDir(tmp_path / "run").proposals / "init.json").read_text())
    assert init["mode"] == "rfsi" and len(init["requirements"]) == 2


def test_a_retriever_that_cannot_be_built_stops_the_run_instead_of_burning_the_iteration(tmp_path: Path,
                                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from test_cli_runs import algorithm_reply

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError("index directory vanished")

    monkeypatch.setattr(raso.api, "make_retriever", broken)
    monkeypatch.setattr(raso.api, "check_index_blocklist", lambda *args: None)
    agent = ScriptedModel(counting_agent, name="strategies-broken-agent")
    optimizer = ScriptedModel(algorithm_reply, name="strategies-broken-optimizer")
    with pytest.raises(RunError, match="cannot build the 'two_stage' retriever .*index directory vanished"):
        raso.optimize(CountingHarness(n_tasks=4), **{"models.target": agent.model,
                                                     "models.optimizer": optimizer.model,
                                                     "init.num_requirements": 2, "schedule.epochs": 1,
                                                     "schedule.minibatch": 2, "schedule.workers": 1,
                                                     "schedule.test": False}, init="rfsi",
                      update="rasu",
                      run_dir=tmp_path / "run")
    state = json.loads((tmp_path / "run" / "checkpoint.json").read_text())
    assert state["candidates"] == [] and state["pending"]["step"] == "rolled_out"  # resumable, nothing burnt
