"""Run directories written before the nested configuration (flat `config.resolved.json`, format 1 of the config)
resume with the current code: a committed fixture, killed mid-iteration by the release that wrote it, ends
like an uninterrupted run of today's code."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from test_engine_resume import _outcome, uninterrupted  # noqa: F401  (a module-scoped fixture)
from test_engine_support import main

from raso.engine.config import load_resolved

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "run_flat_config"


def test_the_fixture_is_a_flat_config_killed_mid_iteration() -> None:
    flat = json.loads((FIXTURE / "config.resolved.json").read_text())
    assert "format_version" not in flat and flat["model"] == "scripted/engine-kill-agent" and "epochs" in flat
    checkpoint = json.loads((FIXTURE / "checkpoint.json").read_text())
    assert checkpoint["phase"] == "iterate" and checkpoint["finished_at"] is None


def test_a_flat_resolved_config_reads_as_the_nested_one() -> None:
    config = load_resolved(FIXTURE / "config.resolved.json")
    assert (config.models.target, config.models.optimizer) == ("scripted/engine-kill-agent",
                                                               "scripted/engine-kill-optimizer")
    assert (config.init.method, config.update.method, config.schedule.epochs, config.schedule.minibatch,
            config.schedule.workers, config.schedule.seed, config.schedule.test) == ("rfsi", "rfsu", 2, 2, 2, 7, False)
    assert (config.budget.infra_retries, config.budget.call_attempts, config.retrieval.k) == (2, 6, 5)


def test_a_run_directory_with_a_flat_config_resumes_like_an_uninterrupted_run(tmp_path: Path,
                                                                             uninterrupted: dict) -> None:  # noqa: F811
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir)
    assert main(["resume", str(run_dir)]) == 0
    state = json.loads((run_dir / "checkpoint.json").read_text())
    assert state["phase"] == "done" and state["finished_at"] is not None
    outcome = _outcome(run_dir)
    for key in ("skill", "decisions", "rollouts", "curve", "skills"):
        assert outcome[key] == uninterrupted[key], key
    assert "scripted/engine-kill-agent" in (run_dir / "report.md").read_text()


def test_experiment_cells_made_with_flat_options_count_as_the_same_options() -> None:
    from experiments.runner import _comparable

    flat = {"optimize": {"epochs": 1, "k": 2, "agent_max_steps": 4}, "settings": [{"k": 3}, {"corpus_fraction": 0.1}]}
    nested = {"optimize": {"schedule": {"epochs": 1}, "retrieval": {"k": 2}, "agent": {"max_steps": 4}},
              "settings": [{"retrieval.k": 3}, {"corpus_fraction": 0.1}]}
    assert _comparable(flat) == _comparable(nested)
    assert _comparable(flat) != _comparable({**nested, "optimize": {"schedule": {"epochs": 2}}})
