"""Old formats are converted once by `raso migrate PATH` (raso.cli.migrate); the rest of the code reads only today's
formats and refuses the old ones with a line naming that command. Tested with the committed fixtures: a run
directory with a flat (format-1) `config.resolved.json`, killed mid-iteration by the release that wrote it, ends like
an uninterrupted run of today's code once migrated; rollouts saved before `outcome` get the outcome their three
fields said."""

from __future__ import annotations

import ast
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from test_engine_resume import _outcome, uninterrupted  # noqa: F401  (a module-scoped fixture)
from test_engine_support import main

from raso.cli.main import main as raso_main
from raso.cli.migrate import FORMAT1_KEYS, migrate
from raso.engine.config import OptimizeConfig, build_config, check_key, load_resolved, read_config_file
from raso.engine.run_dir import read_jsonl
from raso.errors import ConfigError
from raso.harness import Rollout

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FLAT_RUN = FIXTURES / "run_flat_config"
FORMAT1_RUN = FIXTURES / "run_format1"
ROLLOUTS_BEFORE_OUTCOME = FIXTURES / "rollouts_before_outcome.jsonl"
EXPECTED_OUTCOMES = ["ok", "agent_error", "infrastructure", "unusable", "budget", "unusable", "unusable"]
ROOT = Path(__file__).resolve().parent.parent

FLAT_FILES = [
    (".toml", 'model = "openai/gpt-4o"\nepochs = 3\nagent_max_steps = 6\nbudget_rollouts = 50\nk = 2\n'
              'num_requirements = 4\ninit = "rfsi"\nupdate = "rfsu"\nadapt = false\nchunk_size = 3\n'
              'retrieval = "hybrid"\noptimizer_model = "openai/gpt-4o-mini"\nbudget_usd = 1.5\n'),
    (".yaml", "model: openai/gpt-4o\nepochs: 3\nagent_max_steps: 6\nbudget_rollouts: 50\nk: 2\n"
              "num_requirements: 4\ninit: rfsi\nupdate: rfsu\nadapt: false\nchunk_size: 3\nretrieval: hybrid\n"
              "optimizer_model: openai/gpt-4o-mini\nbudget_usd: 1.5\n"),
    (".json", '{"model": "openai/gpt-4o", "epochs": 3, "agent_max_steps": 6, "budget_rollouts": 50, "k": 2, '
              '"num_requirements": 4, "init": "rfsi", "update": "rfsu", "adapt": false, "chunk_size": 3, '
              '"retrieval": {"kind": "hybrid"}, "optimizer_model": "openai/gpt-4o-mini", "budget_usd": 1.5}'),
]


def _migrated_copy(fixture: Path, tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(fixture, run_dir)
    assert raso_main(["migrate", str(run_dir)]) == 0
    return run_dir


def test_the_fixture_is_a_flat_config_killed_mid_iteration() -> None:
    flat = json.loads((FLAT_RUN / "config.resolved.json").read_text())
    assert "format_version" not in flat and flat["model"] == "scripted/engine-kill-agent" and "epochs" in flat
    checkpoint = json.loads((FLAT_RUN / "checkpoint.json").read_text())
    assert checkpoint["phase"] == "iterate" and checkpoint["finished_at"] is None


@pytest.mark.parametrize("fixture", [FLAT_RUN, FORMAT1_RUN])
def test_a_flat_resolved_config_is_refused_then_migrated_to_the_nested_one(fixture: Path, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(ConfigError, match="raso migrate"):
        load_resolved(fixture / "config.resolved.json")
    run_dir = _migrated_copy(fixture, tmp_path)
    assert "config.resolved.json" in capsys.readouterr().out
    config = load_resolved(run_dir / "config.resolved.json")
    assert (config.models.target, config.models.optimizer) == ("scripted/engine-kill-agent",
                                                               "scripted/engine-kill-optimizer")
    assert (config.init.method, config.update.method, config.schedule.epochs, config.schedule.minibatch,
            config.schedule.workers, config.schedule.seed, config.schedule.test) == ("rfsi", "rfsu", 2, 2, 2, 7, False)
    assert (config.budget.infra_retries, config.budget.call_attempts, config.retrieval.k) == (2, 6, 5)
    as_yaml = yaml.safe_load((run_dir / "config.resolved.yaml").read_text())
    assert as_yaml["format_version"] == 2 and as_yaml["schedule"]["epochs"] == 2 and "epochs" not in as_yaml
    # a second run changes nothing
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    assert raso_main(["migrate", str(run_dir)]) == 0
    assert "nothing to migrate" in capsys.readouterr().out
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before


def test_a_run_directory_with_a_flat_config_resumes_like_an_uninterrupted_run_once_migrated(
        tmp_path: Path, uninterrupted: dict) -> None:  # noqa: F811
    run_dir = _migrated_copy(FLAT_RUN, tmp_path)
    assert main(["resume", str(run_dir)]) == 0
    state = json.loads((run_dir / "checkpoint.json").read_text())
    assert state["phase"] == "done" and state["finished_at"] is not None
    outcome = _outcome(run_dir)
    for key in ("skill", "decisions", "rollouts", "curve", "skills"):
        assert outcome[key] == uninterrupted[key], key
    assert "scripted/engine-kill-agent" in (run_dir / "report.md").read_text()


def test_a_run_directory_another_command_works_in_is_not_migrated(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    from raso.engine.run_dir import RunLock

    run_dir = tmp_path / "runs" / "run"
    shutil.copytree(FLAT_RUN, run_dir)
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    with RunLock(run_dir, "resume"):  # as a resume holds it; the holder is this process
        assert raso_main(["migrate", str(tmp_path / "runs")]) == 2
        err = capsys.readouterr().err
        assert f"{run_dir} is in use by pid {os.getpid()} (" in err and "nothing was converted" in err
        assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != "run.lock"} == before
    assert raso_main(["migrate", str(tmp_path / "runs")]) == 0  # released: converted now
    assert "format_version" in json.loads((run_dir / "config.resolved.json").read_text())


def test_rollouts_saved_before_outcome_are_refused_then_migrated_to_their_outcome(tmp_path: Path) -> None:
    rows = read_jsonl(ROLLOUTS_BEFORE_OUTCOME)
    assert all("failure_kind" in r and "model_unusable" in r and "outcome" not in r for r in rows)
    with pytest.raises(ValueError, match="raso migrate"):
        Rollout.model_validate(rows[1])  # never read as "ok"
    folder = tmp_path / "eval" / "trajectories"
    folder.mkdir(parents=True)
    shutil.copy(ROLLOUTS_BEFORE_OUTCOME, folder / "val.rollouts.jsonl")
    for i, row in enumerate(rows):
        (folder / f"{i:04d}_{row['task_id']}.json").write_text(json.dumps(row), encoding="utf-8")
    (folder.parent / "notes.json").write_text(json.dumps(rows[1]))  # outside trajectories/: not a rollout file
    report = migrate(folder.parent)
    assert len(report.changed) == len(rows) + 1
    for rollouts in ([Rollout.model_validate(r) for r in read_jsonl(folder / "val.rollouts.jsonl")],
                     [Rollout.model_validate_json(p.read_text()) for p in sorted(folder.glob("*.json"))]):
        assert [r.outcome for r in rollouts] == EXPECTED_OUTCOMES
        assert [r.error for r in rollouts] == [r["error"] for r in rows]  # the message text is kept as it was
    again = json.loads((folder / "0002_" f"{rows[2]['task_id']}.json").read_text())
    assert again["outcome"] == "infrastructure" and "failure_kind" not in again and "model_unusable" not in again
    assert json.loads((folder.parent / "notes.json").read_text()) == rows[1]


@pytest.mark.parametrize(("suffix", "text"), FLAT_FILES)
def test_a_flat_config_file_is_refused_then_migrated_keeping_the_original(suffix: str, text: str,
                                                                         tmp_path: Path) -> None:
    path = tmp_path / f"old{suffix}"
    path.write_text(text)
    with pytest.raises(ConfigError, match="raso migrate"):
        build_config(path)
    assert raso_main(["migrate", str(path)]) == 0
    assert (tmp_path / f"old{suffix}.bak").read_text() == text  # comments and all
    config = build_config(path)
    assert (config.models.target, config.models.optimizer, config.schedule.epochs, config.agent.max_steps,
            config.budget.rollouts, config.budget.usd) == ("openai/gpt-4o", "openai/gpt-4o-mini", 3, 6, 50, 1.5)
    assert (config.retrieval.k, config.retrieval.kind, config.init.num_requirements, config.init.method,
            config.update.method, config.update.chunk_size, config.init.adapt, config.update.adapt) == (
                2, "hybrid", 4, "rfsi", "rfsu", 3, False, False)
    assert read_config_file(path)["format_version"] == 2


def test_options_that_left_the_agent_section_are_moved_to_the_program_and_the_executor(tmp_path: Path) -> None:
    """Format-2 files written before "backend" stopped naming three things (issue 38): the external program and its
    sandbox limits were `agent.*`, the executor `execution.backend`. Refused as they are, read after migrating."""
    path = tmp_path / "old.toml"
    text = ('format_version = 2\nharness = "toy"\n[agent]\nbackend = "command"\ncommand = "prog {workspace}"\n'
            'max_steps = 5\nmemory_mb = 900\nexternal_wall_s = 120\n[execution]\nbackend = "threads"\n')
    path.write_text(text)
    with pytest.raises(ConfigError):
        build_config(path)
    assert raso_main(["migrate", str(path)]) == 0
    assert (tmp_path / "old.toml.bak").read_text() == text
    config = build_config(path)
    assert (config.program.name, config.program.command.template, config.program.memory_mb, config.program.wall_s,
            config.agent.max_steps, config.execution.executor) == ("command", "prog {workspace}", 900, 120, 5, "threads")
    assert raso_main(["migrate", str(path)]) == 0 and build_config(path).program.name == "command"  # twice: no change
    experiment = tmp_path / "exp.yaml"
    experiment.write_text("name: e\ntable: main\nmodel: scripted/x\nmethods: [rasi]\nharnesses: [toy]\n"
                          "settings: [{agent.backend: command}]\noptimize: {agent: {backend: command, max_steps: 4}}\n")
    assert raso_main(["migrate", str(experiment)]) == 0
    data = yaml.safe_load(experiment.read_text())
    assert data["settings"] == [{"program.name": "command"}]
    assert data["optimize"] == {"agent": {"max_steps": 4}, "program": {"name": "command"}}


def test_an_experiment_config_gets_nested_options_dotted_settings_and_raso_method_names(tmp_path: Path) -> None:
    path = tmp_path / "ablation.yaml"
    path.write_text("name: ablation\ntable: adaptation_ablation\nmodel: scripted/x\n"
                    "methods: [rasi_raw, rasi, rasi_raw+rasu_raw]\nharnesses: [officeqa]\n"
                    "settings: [{k: 3}, {corpus_fraction: 0.1}]\noptimize: {epochs: 1, agent_max_steps: 4}\n")
    assert raso_main(["migrate", str(path)]) == 0
    data = yaml.safe_load(path.read_text())
    assert data["methods"] == ["rasi-raw", "rasi", "rasi-raw+rasu-raw"]
    assert data["settings"] == [{"retrieval.k": 3}, {"corpus_fraction": 0.1}]
    assert data["optimize"] == {"format_version": 2, "schedule": {"epochs": 1}, "agent": {"max_steps": 4}}
    from experiments.config import Method, load_experiment

    assert [m.name for m in load_experiment(path).parsed_methods()] == data["methods"]
    with pytest.raises(ValueError, match="rasi-raw"):  # the old spelling is an unknown method that lists the new one
        Method.parse("rasi_raw")


def test_a_bad_path_is_one_line_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert raso_main(["migrate", str(tmp_path / "missing.toml")]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
    broken = tmp_path / "broken.yaml"
    broken.write_text("epochs: [1\n")
    assert raso_main(["migrate", str(broken)]) == 2
    assert "not valid YAML" in capsys.readouterr().err and not (tmp_path / "broken.yaml.bak").exists()
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("epochs: many\n")
    assert raso_main(["migrate", str(wrong)]) == 2
    assert "schedule.epochs" in capsys.readouterr().err and wrong.read_text() == "epochs: many\n"
    link = tmp_path / "link.yaml"
    link.symlink_to(wrong)
    assert raso_main(["migrate", str(link)]) == 2 and "symbolic link" in capsys.readouterr().err


def test_format1_names_are_no_options_anywhere_but_the_migration() -> None:
    for name, targets in FORMAT1_KEYS.items():
        with pytest.raises(ConfigError, match="raso migrate"):
            build_config(None, {name: 1})
        assert all(check_key(target) == target for target in targets)  # each maps to an option of today


def _updated_keys(tree: ast.AST) -> list[tuple[int, str]]:
    """The string keys of dict literals passed to `.updated(...)` (a configuration's dotted overrides)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "updated":
            for arg in node.args:
                if isinstance(arg, ast.Dict):
                    found += [(k.lineno, k.value) for k in arg.keys if isinstance(k, ast.Constant)
                              and isinstance(k.value, str)]
    return found


def test_code_sets_options_by_todays_names_only() -> None:
    def is_option(key: str) -> bool:
        if "." not in key:
            return key in OptimizeConfig.model_fields
        try:
            return check_key(key) == key
        except ConfigError:
            return False

    wrong = [f"{path.relative_to(ROOT)}:{line}: {key}"
             for folder in ("raso", "experiments", "harnesses") for path in sorted((ROOT / folder).rglob("*.py"))
             for line, key in _updated_keys(ast.parse(path.read_text(encoding="utf-8"))) if not is_option(key)]
    assert not wrong, wrong
    assert _updated_keys(ast.parse('cfg.updated({"adapt": True, "update.method": "rasu"})')) == [
        (1, "adapt"), (1, "update.method")]
    assert not is_option("adapt") and is_option("update.adapt") and is_option("run_dir")
