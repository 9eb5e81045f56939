"""Optional MLflow tracking of an experiment's cells: off unless `mlflow_uri` is set and `mlflow` is installed.

Each finished cell becomes one MLflow run (named by the cell) in an MLflow experiment named after the config:
params (method, harness, seed, setting, model, convention, budget), metrics (test score, best val, rollouts, cost
and tokens per stage), the val curve as a metric stepped by rollouts, and the skills (s0, every version the engine
wrote, the final one) as artifacts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .results import CellResult

STAGES = ("init", "update", "test")


def log_cell(uri: str, experiment: str, cell: CellResult | dict[str, Any], cell_dir: Path) -> str:
    """Log one cell's result to MLflow at `uri`; returns the MLflow run id."""
    result = CellResult.from_dict(cell).to_dict()
    try:
        import mlflow
    except ImportError as exc:
        raise RuntimeError("mlflow_uri is set but mlflow is not installed (pip install mlflow-skinny)") from exc

    client_uri = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        mlflow.set_experiment(experiment)
        with mlflow.start_run(run_name=result["cell"]) as run:
            mlflow.log_params({
                "method": result["method"], "label": result["label"], "harness": result["harness"],
                "seed": result["seed"], "setting": result["setting_label"], "model": result["config"]["model"],
                "optimizer_model": result["config"].get("optimizer_model") or result["config"]["model"],
                "rollout_convention": result["rollout_convention"], "budget_rollouts": result["budget_rollouts"],
                "commit": result["git"].get("commit"), "data": result["data"],
            })
            metrics = {"test_mean": result["test_mean"], "rollouts": result["rollouts"],
                       "rollouts_used": result["rollouts_used"], "wall_time_s": result["wall_time_s"]}
            if result.get("val_best") is not None:
                metrics["val_best"] = result["val_best"]
            for stage in STAGES:
                usage = result["usage"][stage]
                metrics[f"{stage}_cost_usd"] = float(usage.get("cost_usd", 0.0))
                metrics[f"{stage}_tokens"] = int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
            mlflow.log_metrics(metrics)
            for point in result.get("curve", []):
                mlflow.log_metric("val_curve", point["val"], step=int(point["rollouts"]))
            for name in ("s0.md", "best.md"):
                if (cell_dir / name).exists():
                    mlflow.log_artifact(str(cell_dir / name), artifact_path="skills")
            versions = cell_dir / "run" / "skills"
            if versions.is_dir():
                mlflow.log_artifacts(str(versions), artifact_path="skills/versions")
            return run.info.run_id
    finally:
        mlflow.set_tracking_uri(client_uri)


__all__ = ["log_cell"]
