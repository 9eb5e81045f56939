"""One set of dotted overrides (`--set agent.max_steps=2`) accepted the same way by `raso optimize`,
`raso.optimize(...)`, `raso eval`, `raso.evaluate(...)`, `raso init`, `raso.init_skill(...)` and `raso experiment
run`, on the toy counting harness with scripted models; unknown keys are one-line errors everywhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_engine_support import named_scripted_model
from test_experiments_support import scripted_models

import raso
from raso.cli.main import main as raso_main
from raso.errors import ConfigError
from raso.testing import count_script

CONFIGS = Path(__file__).resolve().parent.parent / "experiments" / "configs"
TOY = "raso.testing.toy:CountingHarness"

#: Targets of the counting tasks are 2, 3 and 4: with 2 agent steps only the target-2 tasks can be won.
OVERRIDES = {"agent.max_steps": 2, "agent.temperature": 0.25, "schedule.epochs": 1, "schedule.minibatch": 2,
             "schedule.workers": 1, "limits.section_chars": 800, "harness_options.n_tasks": 6,
             "init.method": "rfsi", "update.method": "rfsu"}
SET_ARGS = [arg for key, value in OVERRIDES.items() for arg in ("--set", f"{key}={value}")]


def _resolved(run_dir: Path) -> dict[str, Any]:
    config = json.loads((run_dir / "config.resolved.json").read_text())
    config.pop("run_dir")
    return config


def _counting_or_optimizer(messages: list[dict[str, Any]]) -> str:
    from test_cli_runs import algorithm_reply

    text = "\n".join(str(m.get("content") or "") for m in messages)
    return algorithm_reply(messages) if "single JSON object" in text else count_script(messages)


@pytest.fixture(scope="module")
def model() -> str:
    return named_scripted_model("overrides-model", _counting_or_optimizer)


def test_optimize_cli_and_python_resolve_the_same_dotted_overrides(tmp_path: Path, model: str) -> None:
    cli_dir, api_dir = tmp_path / "cli", tmp_path / "api"
    assert raso_main(["optimize", "--no-progress", "--harness", TOY, "--model", model, "--run-dir", str(cli_dir),
                      *SET_ARGS]) == 0
    raso.optimize(TOY, run_dir=api_dir, **{"models.target": model, **OVERRIDES})
    cli, api = _resolved(cli_dir), _resolved(api_dir)
    assert cli == api
    assert (cli["agent"]["max_steps"], cli["agent"]["temperature"], cli["limits"]["section_chars"],
            cli["harness_options"], cli["schedule"]["epochs"]) == (2, 0.25, 800, {"n_tasks": 6}, 1)
    # the same options as nested sections give the same configuration
    nested_dir = tmp_path / "nested"
    raso.optimize(TOY, run_dir=nested_dir, models={"target": model}, agent={"max_steps": 2, "temperature": 0.25},
                  schedule={"epochs": 1, "minibatch": 2, "workers": 1}, limits={"section_chars": 800},
                  harness_options={"n_tasks": 6}, init={"method": "rfsi"}, update={"method": "rfsu"})
    assert _resolved(nested_dir) == cli
    # the agent section reached the agent: no rollout took more than 2 environment steps
    steps = [json.loads(p.read_text())["env_steps"] for p in (cli_dir / "trajectories").rglob("*.json")]
    assert steps and max(steps) <= 2


def test_eval_cli_and_python_take_the_same_dotted_overrides(tmp_path: Path, model: str) -> None:
    agent_keys = ["--set", "agent.max_steps=2", "--set", "agent.temperature=0.25", "--set",
                  "harness_options.n_tasks=6"]
    out = tmp_path / "eval"
    assert raso_main(["eval", "--harness", TOY, "--model", model, "--split", "test", "--out", str(out),
                      *agent_keys]) == 0
    written = json.loads((out / "config.json").read_text())
    assert (written["agent"]["max_steps"], written["agent"]["temperature"], written["mode"]) == (2, 0.25, "none")
    assert len(written["tasks"]) == 6
    summary = json.loads((out / "summary.json").read_text())
    result = raso.evaluate(TOY, None, split="test", **{"models.target": model, "agent.max_steps": 2,
                                                      "agent.temperature": 0.25, "harness_options.n_tasks": 6})
    # targets 2, 3, 4, 2, 3, 4: two of six tasks fit in 2 steps, through either door
    assert result.mean_reward == pytest.approx(summary["mean_reward"]) == pytest.approx(2 / 6)
    assert max(r.env_steps for r in result.rollouts) <= 2


def test_init_cli_and_python_take_dotted_overrides_and_structured_output(tmp_path: Path) -> None:
    from test_cli_runs import algorithm_reply

    optimizer = named_scripted_model("overrides-init", algorithm_reply)
    out = tmp_path / "SKILL.md"
    assert raso_main(["init", "--harness", TOY, "--model", optimizer, "--no-retrieval", "--structured-output",
                      "instructions", "--set", "init.num_requirements=2", "--out", str(out)]) == 0
    lessons = json.loads(out.with_name("SKILL.lessons.json").read_text())
    assert len(lessons["requirements"]) <= 2
    result = raso.init_skill(TOY, retrieval=False, **{"models.target": optimizer, "init.num_requirements": 2,
                                                      "models.structured_output": "instructions"})
    assert len(result.requirements) <= 2 and result.skill.body.strip()


def test_experiment_run_takes_the_same_dotted_overrides(tmp_path: Path) -> None:
    agent, optimizer = scripted_models()
    code = raso_main(["experiment", "run", str(CONFIGS / "update_table.yaml"), "--model", agent.model,
                      "--optimizer-model", optimizer.model, "--harness", TOY, "--seeds", "0",
                      "--backend", "sequential", "--results-dir", str(tmp_path / "out"), "--test-limit", "2",
                      "--set", "agent.max_steps=2", "--set", "schedule.epochs=1", "--set", "schedule.minibatch=2",
                      "--set", "init.num_requirements=2", "--set", "harness_options.n_tasks=6"])
    assert code == 0
    runs = sorted((tmp_path / "out" / "update_table" / "cells").glob("*/*/*/run"))
    assert runs
    for run in runs:
        config = _resolved(run)
        assert (config["agent"]["max_steps"], config["schedule"]["epochs"], config["init"]["num_requirements"],
                config["harness_options"]) == (2, 1, 2, {"n_tasks": 6})


@pytest.mark.parametrize("argv", [
    ["optimize", "--harness", TOY, "--set", "agent.max_stepz=2"],
    ["eval", "--harness", TOY, "--set", "agent.max_stepz=2"],
    ["init", "--harness", TOY, "--set", "agent.max_stepz=2"],
    ["experiment", "run", str(CONFIGS / "init_table.yaml"), "--set", "agent.max_stepz=2"],
])
def test_an_unknown_dotted_key_is_one_line_naming_the_known_ones(argv: list[str], tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert raso_main([*argv[:2], *argv[2:], *(["--results-dir", str(tmp_path)] if argv[0] == "experiment" else [])
                      ]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'agent.max_stepz'" in err and "max_steps" in err
    with pytest.raises(ConfigError, match="agent.max_stepz"):
        raso.optimize(TOY, **{"agent.max_stepz": 2})


def test_raso_never_imports_experiments() -> None:
    """The layer order: `raso experiment` comes from the experiments package's entry point."""
    import ast

    root = Path(__file__).resolve().parent.parent / "raso"
    importers = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "experiments" or n.startswith("experiments.") for n in names):
                importers.append(str(path.relative_to(root)))
    assert importers == []


def test_python_m_experiments_is_the_same_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from experiments.cli import main as experiments_main

    assert experiments_main(["run", str(CONFIGS / "init_table.yaml"), "--results-dir", str(tmp_path),
                             "--set", "agent.max_stepz=2"]) == 2
    assert "'agent.max_stepz'" in capsys.readouterr().err


def test_the_execution_flags_set_the_execution_section() -> None:
    import argparse

    from raso.cli.options import add_config_options, config_overrides
    from raso.engine.config import OptimizeConfig

    parser = argparse.ArgumentParser()
    flags = add_config_options(parser)
    args = parser.parse_args(["--executor", "dask", "--execution-address", "tcp://scheduler:8786",
                              "--execution-workers", "3"])
    config = OptimizeConfig(**config_overrides(args, flags))
    assert (config.execution.executor, config.execution.address, config.execution.workers) == (
        "dask", "tcp://scheduler:8786", 3)
    assert OptimizeConfig(**config_overrides(parser.parse_args(["--execution", "ray"]), flags)).execution.executor == "ray"
