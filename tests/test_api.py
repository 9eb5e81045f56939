"""The public API (raso.optimize / resume / init_skill / evaluate) with scripted models: the README's Python
snippet, parity with the CLI, errors raised before anything is written, and the built-in test-split score."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_cli_runs import algorithm_reply
from test_engine_support import ToyHarness, named_scripted_model, toy_agent_reply, toy_initializer, toy_proposer

import raso
from raso.cli.main import main as raso_main
from raso.engine.run_dir import read_jsonl
from raso.llm.scripted import ScriptedModel

README = Path(__file__).resolve().parent.parent / "README.md"
TOY = "test_engine_support:ToyHarness"
_ASIN = re.compile(r"\bB0[A-Z0-9]{8}\b")


def shopper_or_optimizer(messages: list[dict[str, Any]]) -> str:
    """One scripted model for both roles (the snippet gives one model): optimizer prompts ask for JSON; the
    agent searches, opens the first product and buys it."""
    text = "\n".join(str(m.get("content") or "") for m in messages)
    if "single JSON object" in text:
        return algorithm_reply(messages)
    last = str(messages[-1].get("content") or "")
    if "Buy Now" in last:
        return "Action: click[Buy Now]"
    asin = _ASIN.search(last)
    if asin:
        return f"Action: click[{asin.group(0)}]"
    return "Action: search[hair dryer]"


def readme_python_snippet() -> str:
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    snippet = next((b for b in blocks if "raso.optimize(" in b), None)
    assert snippet is not None, "the README's Python section shows raso.optimize"
    return snippet


def test_the_readme_python_snippet_runs_on_the_scripted_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    snippet = readme_python_snippet()
    assert ('raso.optimize("webshop", models={"target": "openai/gpt-4o-mini"}, schedule={"epochs": 2}, '
            'run_dir="runs/x")') in snippet
    model = named_scripted_model("readme-snippet", shopper_or_optimizer)
    monkeypatch.chdir(tmp_path)
    exec(compile(snippet.replace('"openai/gpt-4o-mini"', f'"{model}"'), "README.md", "exec"), {})
    run = tmp_path / "runs" / "x"
    state = json.loads((run / "checkpoint.json").read_text())
    assert state["phase"] == "done" and state["iterations_done"] >= 1
    assert (run / "SKILL.md").is_file() and (run / "report.md").is_file()
    assert {t["label"] for t in state["test"]} >= {"s0"}  # scored on test at the end
    assert "best" in capsys.readouterr().out  # the snippet prints the result


def _cli_and_api_run(tmp_path: Path) -> tuple[Path, Path]:
    agent = named_scripted_model("parity-agent", toy_agent_reply)
    optimizer = named_scripted_model("parity-optimizer", algorithm_reply)
    options = {"harness": TOY, "models.target": agent, "models.optimizer": optimizer, "init": "rfsi", "update": "rfsu",
               "schedule.epochs": 1, "schedule.minibatch": 3, "schedule.workers": 1, "schedule.seed": 5}
    flags = {"harness": "--harness", "models.target": "--model", "models.optimizer": "--optimizer-model",
             "init": "--init", "update": "--update", "schedule.epochs": "--epochs", "schedule.minibatch": "--minibatch",
             "schedule.workers": "--workers", "schedule.seed": "--seed"}
    cli_dir, api_dir = tmp_path / "cli", tmp_path / "api"
    argv = ["optimize", "--no-progress", "--run-dir", str(cli_dir)]
    for key, value in options.items():
        argv += [flags[key], str(value)]
    assert raso_main(argv) == 0
    raso.optimize(run_dir=api_dir, **options)
    return cli_dir, api_dir


def _comparable(run_dir: Path) -> dict[str, Any]:
    """A run directory's contents without what differs between any two runs (times, absolute paths)."""
    files = sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file() and "cache" not in p.parts)
    config = json.loads((run_dir / "config.resolved.json").read_text())
    config.pop("run_dir")
    state = json.loads((run_dir / "checkpoint.json").read_text())
    for key in ("wall_time_s", "started_at", "finished_at", "config_digest"):  # the digest covers run_dir
        state.pop(key)
    skills = {str(p.relative_to(run_dir)): p.read_text() for p in sorted((run_dir / "skills").rglob("*"))
              if p.is_file()}  # each version's .md and its folder
    candidates = [{k: v for k, v in row.items()} for row in read_jsonl(run_dir / "candidates.jsonl")]
    ledger = json.loads((run_dir / "ledger.json").read_text())["totals"]
    ledger.pop("latency_s", None)
    return {"files": files, "config": config, "state": state, "skills": skills, "candidates": candidates,
            "ledger": {k: ledger[k] for k in ("calls", "prompt_tokens", "completion_tokens", "cost_usd")}}


def test_cli_and_python_api_with_the_same_options_write_the_same_run(tmp_path: Path) -> None:
    cli_dir, api_dir = _cli_and_api_run(tmp_path)
    cli, api = _comparable(cli_dir), _comparable(api_dir)
    assert cli["files"] == api["files"] and "SKILL.md" in cli["files"] and "report.md" in cli["files"]
    for key in ("config", "state", "skills", "candidates", "ledger"):
        assert cli[key] == api[key], key
    assert cli["state"]["test"], "the run was scored on test"


def test_test_split_scores_s0_and_the_best_skill_outside_the_budget(tmp_path: Path) -> None:
    agent = ScriptedModel(toy_agent_reply, name="test-split-agent")
    optimizer = ScriptedModel(["LEVEL=1", "LEVEL=2", "LEVEL=3"], name="test-split-optimizer")
    result = raso.optimize(ToyHarness(), **{"models.target": agent.model, "models.optimizer": optimizer.model,
                                            "schedule.epochs": 1, "schedule.minibatch": 3,
                                            "schedule.workers": 1, "budget.rollouts": 14}, init="rfsi",
                           update="rfsu",
                           run_dir=tmp_path / "run", initializer=toy_initializer, proposer=toy_proposer)
    # s0 val 4 + (3 train + 4 val) = 11 <= 14; a second iteration does not fit: the budget holds train + val only
    assert result.rollouts_used == 11 and result.best_version == 1
    assert [(t.label, t.version, t.tasks) for t in result.test] == [("s0", 0, 1), ("best", 1, 1)]
    assert result.test_rollouts == 2 and result.initial_test == 1.0 and result.best_test == 1.0
    assert len(agent.calls) == 11 + 2
    batches = sorted(p.name for p in (tmp_path / "run" / "trajectories").glob("test_*.rollouts.jsonl"))
    assert batches == ["test_v000.rollouts.jsonl", "test_v001.rollouts.jsonl"]
    report = (tmp_path / "run" / "report.md").read_text()
    assert "test" in report.lower() and "never used for selection" in report

    off = raso.optimize(ToyHarness(), **{"models.target": agent.model, "models.optimizer": optimizer.model,
                                         "schedule.epochs": 1, "schedule.minibatch": 3, "schedule.workers": 1,
                                         "schedule.max_iterations": 1, "schedule.test": False}, init="rfsi",
                        update="rfsu",
                        run_dir=tmp_path / "off", initializer=toy_initializer, proposer=toy_proposer)
    assert off.test == [] and off.test_rollouts == 0 and off.finished


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--harness", "no-such-harness"], "cannot load harness 'no-such-harness'"),
        (["--harness", TOY, "--minibatch", "0"], "minibatch: Input should be greater than or equal to 1"),
        (["--harness", TOY, "--model", "openai/gpt-4o-mini"], "OPENAI_API_KEY"),
        (["--harness", TOY, "--init", "no/such/SKILL.md"], "no file exists"),
        (["--harness", TOY, "--harness-arg", "n_train=0"], "no train tasks"),
    ],
)
def test_start_errors_print_one_line_exit_2_and_create_no_run_dir(
        argv: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    run_dir = tmp_path / "run"
    assert raso_main(["optimize", *argv, "--run-dir", str(run_dir), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not run_dir.exists()


def test_init_skill_and_evaluate_from_python(tmp_path: Path) -> None:
    optimizer = named_scripted_model("api-init-optimizer", algorithm_reply)
    agent = named_scripted_model("api-eval-agent", toy_agent_reply)
    init = raso.init_skill(TOY, **{"models.target": agent, "models.optimizer": optimizer,
                                   "init.num_requirements": 2}, retrieval=False)
    assert init.mode == "rfsi" and len(init.requirements) == 2 and "LEVEL=1" in init.skill.body

    skill_path = init.skill.save(tmp_path / "SKILL.md")
    scored = raso.evaluate(TOY, skill_path, split="val", **{"models.target": agent}, out_dir=tmp_path / "eval")
    assert [r.task_id for r in scored.rollouts] == ["v1", "v2", "v3", "v4"]
    assert [r.reward for r in scored.rollouts] == [1.0, 0.0, 0.0, 0.0]  # LEVEL=1 solves difficulty 1 only
    assert len(list((tmp_path / "eval" / "trajectories").glob("*.json"))) == 4
    baseline = raso.evaluate(ToyHarness(), None, split="val", **{"models.target": agent})
    assert baseline.mean_reward == 0.0 and all(r.mode == "none" for r in baseline.rollouts)


def test_evaluate_gives_each_task_its_own_skills(tmp_path: Path) -> None:
    from test_engine_support import level_skill

    agent = named_scripted_model("api-eval-own-agent", toy_agent_reply)

    def own(task: Any) -> list[Any]:  # just the level each val task needs (v3: LEVEL=3)
        return [level_skill(f"LEVEL={task.id[1:]}")]

    scored = raso.evaluate(TOY, split="val", **{"models.target": agent}, task_skills=own)
    assert [r.reward for r in scored.rollouts] == [1.0] * 4 and all(r.mode == "full" for r in scored.rollouts)
    with pytest.raises(raso.ConfigError, match="not both"):
        raso.evaluate(TOY, level_skill("LEVEL=4"), split="val", **{"models.target": agent}, task_skills=own)
    with pytest.raises(raso.ConfigError, match="runs without a skill"):
        raso.evaluate(TOY, split="val", **{"models.target": agent}, task_skills=own, **{"agent.mode": "none"})


def test_resume_rebuilds_an_instance_harness_from_its_recorded_target(tmp_path: Path) -> None:
    agent = named_scripted_model("api-resume-agent", toy_agent_reply)
    optimizer = ScriptedModel(["LEVEL=1", "LEVEL=2"], name="api-resume-optimizer")
    result = raso.optimize(ToyHarness(n_train=3), **{"models.target": agent,
                                                     "models.optimizer": optimizer.model, "schedule.epochs": 1,
                                                     "schedule.minibatch": 3}, init="rfsi",
                           update="rfsu", run_dir=tmp_path / "run",
                           initializer=toy_initializer, proposer=toy_proposer)
    config = json.loads((tmp_path / "run" / "config.resolved.json").read_text())
    assert config["harness"] == TOY  # not the registered name 'toy', which is another class
    again = raso.resume(tmp_path / "run")
    assert again.finished and again.best_val == result.best_val and again.test == result.test
