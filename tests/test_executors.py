"""Rollout executors (raso.execution.executors): a toy run whose rollouts run in local processes, on a loopback Dask
cluster or on a local Ray gives the threads run's results and, call for call, its ledger (the workers' model calls go
through the driver's gateway, where the scripted model lives); a worker that dies mid-rollout is an infrastructure
failure the engine re-runs, never a 0."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest
from executor_support import DieOnceHarness
from test_engine_support import named_scripted_model, toy_initializer, toy_proposer

from raso.agent import AgentConfig, ExecutionAgent
from raso.agent.evaluate import evaluate
from raso.api import optimize
from raso.engine import OptimizeConfig, RunDir
from raso.engine.config import build_config
from raso.engine.run_dir import read_jsonl
from raso.errors import ConfigError
from raso.execution.executors import ProcessExecutor, harness_spec
from raso.execution.options import ExecutionOptions
from raso.execution.remote import RemoteGateway
from raso.llm.errors import LLMUnavailableError
from raso.testing import count_script, scripted_gateway

TESTS = Path(__file__).resolve().parent
PID_HARNESS = "executor_support:PidCountingHarness"


def _toy_run(run_dir: Path, execution: ExecutionOptions, harness: str = PID_HARNESS,
             harness_options: dict[str, Any] | None = None, **extra: Any) -> tuple[Any, RunDir]:
    agent = named_scripted_model("exec-agent", count_script)
    optimizer = named_scripted_model("exec-optimizer", lambda messages: "Count one number per action.")
    config = OptimizeConfig(harness=harness, harness_options=harness_options or {"n_tasks": 8},
                            **{"models.target": agent, "models.optimizer": optimizer, "schedule.epochs": 1,
                               "schedule.minibatch": 2, "schedule.workers": 2, "schedule.test": True},
                            init="rfsi", update="rfsu", run_dir=run_dir, execution=execution, **extra)
    return optimize(config=config, initializer=toy_initializer, proposer=toy_proposer), RunDir(run_dir)


def _rollouts(rd: RunDir) -> dict[str, list[tuple[str, float, str, int]]]:
    return {p.name: sorted((r["task_id"], r["reward"], r["outcome"], r["model_calls"]) for r in read_jsonl(p))
            for p in sorted(rd.trajectories.glob("*.rollouts.jsonl"))}


def _ledger(rd: RunDir) -> list[tuple]:
    """The bill, call for call (order aside: rollouts finish in any order)."""
    keys = ("role", "stage", "model", "prompt_tokens", "completion_tokens", "cost_usd", "retries", "cached", "failed")
    return sorted(tuple(r[k] for k in keys) for r in read_jsonl(rd.ledger_calls))


def _pids(rd: RunDir) -> set[int]:
    return {r["metadata"]["pid"] for p in rd.trajectories.glob("*.rollouts.jsonl") for r in read_jsonl(p)}


def _same_run(threads: tuple[Any, RunDir], other: tuple[Any, RunDir]) -> None:
    (a, rd_a), (b, rd_b) = threads, other
    assert b.finished and b.stop_reason == a.stop_reason
    assert (b.best_val, b.initial_val, b.rollouts_used, b.iterations) == (a.best_val, a.initial_val, a.rollouts_used,
                                                                          a.iterations)
    assert [t.mean_reward for t in b.test] == [t.mean_reward for t in a.test]
    assert _rollouts(rd_b) == _rollouts(rd_a)
    assert _ledger(rd_b) == _ledger(rd_a) and len(_ledger(rd_a)) == a.model_calls == b.model_calls > 0


@pytest.fixture(scope="module")
def threads_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, RunDir]:
    result, rd = _toy_run(tmp_path_factory.mktemp("threads") / "run", ExecutionOptions())
    assert _pids(rd) == {os.getpid()}
    return result, rd


def test_execution_section_in_the_config() -> None:
    assert OptimizeConfig(execution="ray").execution == ExecutionOptions(executor="ray")
    config = build_config(overrides={"execution": {"executor": "dask", "address": "tcp://10.0.0.5:8786", "workers": 8}},
                          quick_local_defaults=False)
    assert (config.execution.executor, config.execution.address, config.execution.workers) == ("dask",
                                                                                               "tcp://10.0.0.5:8786", 8)
    with pytest.raises(ConfigError, match="execution.executor"):
        build_config(overrides={"execution": {"executor": "slurm"}}, quick_local_defaults=False)
    with pytest.raises(ConfigError, match="address is for a cluster"):
        build_config(overrides={"execution": {"executor": "processes", "address": "tcp://h:8786"}},
                     quick_local_defaults=False)


def test_processes_backend_gives_the_threads_run_and_its_ledger(tmp_path: Path, threads_run: Any) -> None:
    other = _toy_run(tmp_path / "run", ExecutionOptions(executor="processes"))
    _same_run(threads_run, other)
    pids = _pids(other[1])
    assert os.getpid() not in pids and 1 <= len(pids) <= 2  # rollouts ran in the pool's worker processes


@pytest.mark.cluster
def test_dask_cluster_gives_the_threads_run_and_its_ledger(tmp_path: Path, threads_run: Any) -> None:
    import distributed  # the `distributed` extra; installed with `dev`

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        other = _toy_run(tmp_path / "run", ExecutionOptions(executor="dask", address=cluster.scheduler_address))

    _same_run(threads_run, other)
    assert os.getpid() not in _pids(other[1])


@pytest.mark.cluster
def test_local_ray_gives_the_threads_run_and_its_ledger(tmp_path: Path, threads_run: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import ray  # noqa: F401  (the `ray` extra; installed with `dev`)

    # Ray's workers are started by its raylet, not forked from here: they find this checkout and the test
    # harness through PYTHONPATH
    paths = [str(TESTS), str(TESTS.parent), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    other = _toy_run(tmp_path / "run", ExecutionOptions(executor="ray", workers=2))
    _same_run(threads_run, other)
    assert os.getpid() not in _pids(other[1])


def test_a_worker_that_dies_is_an_infrastructure_failure(tmp_path: Path) -> None:
    gateway, _ = scripted_gateway(count_script)
    harness = DieOnceHarness(n_tasks=4, marker=str(tmp_path / "died"))
    spec = harness_spec(harness, "executor_support:DieOnceHarness", {"n_tasks": 4, "marker": str(tmp_path / "died")})
    with ProcessExecutor(gateway, spec, ExecutionOptions(executor="processes"), workers=1) as executor:
        agent = executor.agent(lambda gw: ExecutionAgent(gw, AgentConfig(mode="none")), gateway, "batch")
        first = evaluate(harness, agent, harness.tasks("test"), executor=executor)
        assert (tmp_path / "died").exists()
        by_task = {r.task_id: r for r in first.rollouts}
        assert by_task["count-0"].outcome == "infrastructure" and not by_task["count-0"].counts
        assert "worker" in by_task["count-0"].error
        again = evaluate(harness, agent, harness.tasks("test"), executor=executor)  # a fresh pool after the death
    assert [r.reward for r in again.rollouts] == [1.0] * 4


def test_worker_processes_run_each_task_with_its_own_skills(tmp_path: Path) -> None:
    from executor_support import PidCountingHarness

    from raso.skill import Skill

    gateway, model = scripted_gateway(count_script)
    harness = PidCountingHarness(n_tasks=2)
    spec = harness_spec(harness, "executor_support:PidCountingHarness", {"n_tasks": 2})
    own = {"count-0": Skill(name="apples", description="Count apples.", body="# Steps\n1. Count apples."),
           "count-1": Skill(name="stars", description="Count stars.", body="# Steps\n1. Count stars.")}
    with ProcessExecutor(gateway, spec, ExecutionOptions(executor="processes"), workers=1) as executor:
        agent = executor.agent(lambda gw: ExecutionAgent(gw, AgentConfig(mode="full")), gateway, "batch")
        result = evaluate(harness, agent, harness.tasks("test"), executor=executor, task_skills=lambda t: [own[t.id]])
    assert [(r.task_id, r.skill_names, r.reward) for r in result.rollouts] == [
        ("count-0", ["apples"], 1.0), ("count-1", ["stars"], 1.0)]
    assert all(os.getpid() != r.metadata["pid"] for r in result.rollouts)
    for call in model.calls:  # each prompt quoted its own task's skill and not the other's
        text = "\n".join(str(m.get("content") or "") for m in call)
        mine = "apples" if "(game count-0)" in text else "stars"
        assert f'<skill name="{mine}">' in text and len(text.split("<skill name=")) == 2


def test_the_engine_reruns_a_rollout_whose_worker_died(tmp_path: Path, threads_run: Any) -> None:
    marker = tmp_path / "died"
    result, rd = _toy_run(tmp_path / "run", ExecutionOptions(executor="processes"),
                          harness="executor_support:DieOnceHarness",
                          harness_options={"n_tasks": 8, "marker": str(marker), "die_task": "count-5"},
                          **{"budget.infra_retry_wait_s": 0.0})
    assert marker.exists() and result.finished
    from raso.engine.engine import load_state

    assert load_state(rd).infra_reruns >= 1
    assert result.best_val == threads_run[0].best_val == 1.0  # the died rollout was re-run, never scored 0
    assert _rollouts(rd) == _rollouts(threads_run[1])


def test_a_harness_class_workers_cannot_import_is_refused_before_the_run() -> None:
    from raso.testing.toy import CountingHarness

    class LocalHarness(CountingHarness):
        pass

    with pytest.raises(ValueError, match="workers cannot rebuild it"):
        harness_spec(LocalHarness(), "toy", {})
    assert harness_spec(CountingHarness(), "toy", {"n_tasks": 3}).name == "toy"
    assert harness_spec(DieOnceHarness(), "toy", {}).name == "executor_support:DieOnceHarness"


def test_an_unreachable_driver_is_an_outage_not_the_agents_failure() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    remote = RemoteGateway(("127.0.0.1", port), b"k" * 32, "iter001_train", None)
    with pytest.raises(LLMUnavailableError, match="cannot be reached"):
        remote.complete("agent", [{"role": "user", "content": "hi"}])
