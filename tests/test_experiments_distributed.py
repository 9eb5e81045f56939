"""Cells on a Dask cluster (scheduler + 2 workers on loopback, started and stopped here) give the same results as
a local run; an experiment can log its cells to MLflow (a local file store)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_experiments_support import overrides, scripted_models

from experiments.results import read_results
from experiments.runner import run_experiment

CONFIGS = Path(__file__).resolve().parent.parent / "experiments" / "configs"
SMALL = {"schedule.epochs": 1, "schedule.minibatch": 3, "schedule.workers": 2, "init.num_requirements": 2, "retrieval.k": 2}


def _scores(root: Path) -> dict[str, tuple]:
    return {r.cell: (r.test_mean, tuple(t.reward for t in r.test_per_task), r.rollouts_used)
            for r in read_results(root)}


@pytest.mark.timeout(300)
def test_dask_cluster_gives_the_same_results_as_local(tmp_path: Path) -> None:
    import distributed  # the `experiments-dask` extra, in `dev`
    agent, optimizer = scripted_models()
    local = run_experiment(CONFIGS / "stage_ablation.yaml",
                           overrides(tmp_path / "local", agent, optimizer, seeds=[0, 1], optimize=SMALL))
    # in-process workers (threads) on loopback: the scripted models live in this process
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp", host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        assert len(cluster.workers) == 2
        remote = run_experiment(CONFIGS / "stage_ablation.yaml", overrides(
            tmp_path / "dask", agent, optimizer, seeds=[0, 1], optimize=SMALL, backend="dask",
            cluster=cluster.scheduler_address, jobs=2))
    assert local.failed == remote.failed == []
    assert remote.cells == local.cells == 8
    assert _scores(Path(remote.results_dir)) == _scores(Path(local.results_dir))
    # the cells really ran on the cluster's worker threads, not in the caller's
    assert all("Dask" in r.ran_on["thread"] for r in read_results(Path(remote.results_dir)))
    assert not any("Dask" in r.ran_on["thread"] for r in read_results(Path(local.results_dir)))


def test_mlflow_sink_logs_cells_to_a_file_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mlflow  # the `experiments-mlflow` extra, in `dev`
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 deprecates the file store; a test may use it
    agent, optimizer = scripted_models()
    store = (tmp_path / "mlruns").resolve()
    summary = run_experiment(CONFIGS / "update_table.yaml", overrides(
        tmp_path, agent, optimizer, seeds=[0], methods=["rfsu"], optimize={**SMALL, "schedule.epochs": 2},
        mlflow_uri=store.as_uri(), jobs=1))
    assert summary.failed == []
    result = read_results(Path(summary.results_dir))[0]
    client = mlflow.tracking.MlflowClient(tracking_uri=store.as_uri())
    run = client.get_run(result.mlflow_run_id)
    assert run.data.params["method"] == "rfsu" and run.data.params["seed"] == "0"
    assert run.data.metrics["test_mean"] == result.test_mean
    curve = client.get_metric_history(run.info.run_id, "val_curve")
    assert [(m.step, m.value) for m in curve] == [(p.rollouts, p.val) for p in result.curve]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id, "skills")}
    assert {"skills/s0.md", "skills/best.md"} <= artifacts


@pytest.mark.cluster
@pytest.mark.timeout(600)
def test_a_local_ray_gives_the_same_two_cells_as_a_local_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two cells of a table on a local Ray instance (2 CPUs; its workers are separate processes started by Ray,
    which reach the scripted models through a loopback stand-in server) equal the same cells run locally."""
    import os

    import ray  # the `ray` extra; installed with `dev`
    from loopback_model_server import loopback_model_server
    from test_experiments_support import agent_reply, optimizer_reply

    tests = Path(__file__).resolve().parent
    paths = [str(tests), str(tests.parent), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    with loopback_model_server({"ray-agent": agent_reply, "ray-optimizer": optimizer_reply}) as server:
        def config(root: Path, **extra: object) -> dict[str, object]:
            return {"harnesses": [{"name": "raso.testing.toy:CountingHarness", "options": {"n_tasks": 6}}],
                    "model": "openai/ray-agent", "optimizer_model": "openai/ray-optimizer",
                    "api_base": server.api_base, "optimizer_api_base": server.api_base,
                    "results_dir": str(root / "results"), "seeds": [0], "test_limit": None,
                    "methods": ["rasi+rasu", "rfsi+rasu"], "optimize": SMALL, **extra}

        monkeypatch.setenv("OPENAI_API_KEY", "loopback-stand-in")
        local = run_experiment(CONFIGS / "stage_ablation.yaml", config(tmp_path / "local", backend="threading", jobs=2))
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"], "OPENAI_API_KEY": "loopback-stand-in",
                                           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}})
        try:
            remote = run_experiment(CONFIGS / "stage_ablation.yaml", config(tmp_path / "ray", backend="ray", jobs=2))
        finally:
            ray.shutdown()
    assert local.failed == remote.failed == []
    assert remote.cells == local.cells == 2
    assert _scores(Path(remote.results_dir)) == _scores(Path(local.results_dir))
    # the cells ran in Ray's worker processes, not in this one
    assert {r.ran_on["pid"] for r in read_results(Path(remote.results_dir))}.isdisjoint({os.getpid()})
    assert all(r.ran_on["pid"] == os.getpid() for r in read_results(Path(local.results_dir)))
