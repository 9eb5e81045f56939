"""Run an experiment: expand its cells, run the unfinished ones in parallel (joblib: processes, threads, or an
existing Ray / Dask cluster), then write its tables.

    from experiments import run_experiment
    summary = run_experiment("experiments/configs/init_table.yaml", overrides={"seeds": [0]})

Finished cells (their result.json exists) are skipped; an interrupted cell resumes from its directory. Every result
file carries the experiment's config and the git commit that made it.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from raso.engine.config import merge, nested
from raso.engine.run_dir import atomic_write_json
from raso.errors import ConfigError

from .cells import cell_dir, git_commit, load_result, run_cell
from .config import (
    RUNNER_SETTING_KEYS,
    Cell,
    ExperimentConfig,
    check_harness_options,
    expand_cells,
    load_experiment,
    result_options,
)
from .results import CellResult


class ExperimentSummary(BaseModel):
    name: str
    results_dir: str
    cells: int
    ran: int
    skipped: int
    failed: list[str]
    tables: dict[str, str]
    wall_time_s: float


@contextlib.contextmanager
def _backend(config: ExperimentConfig) -> Iterator[dict[str, Any]]:
    """joblib Parallel arguments for the configured backend; Ray and Dask attach to `config.cluster`."""
    import joblib

    if config.backend == "sequential":
        yield {"n_jobs": 1, "backend": "sequential"}
    elif config.backend in ("loky", "threading"):
        yield {"n_jobs": config.jobs, "backend": config.backend}
    elif config.backend == "dask":
        from dask.distributed import Client

        client = Client(config.cluster) if config.cluster else Client(processes=False)
        try:
            with joblib.parallel_config(backend="dask"):
                yield {"n_jobs": config.jobs}
        finally:
            client.close()
    elif config.backend == "ray":
        import ray
        from ray.util.joblib import register_ray

        register_ray()
        started_here = not ray.is_initialized()
        if started_here:
            ray.init(address=config.cluster, include_dashboard=False, log_to_driver=False)
        try:
            with joblib.parallel_config(backend="ray"):
                yield {"n_jobs": config.jobs}
        finally:
            if started_here:
                ray.shutdown()
    else:  # pragma: no cover - the config's Literal rules it out
        raise ValueError(f"unknown backend {config.backend!r}")


def _guarded(config_data: dict[str, Any], cell_data: dict[str, Any]) -> dict[str, Any]:
    """A failing cell reports its error instead of stopping the others; rerunning the experiment retries it."""
    try:
        return {"ok": True, "result": run_cell(config_data, cell_data)}
    except Exception as exc:  # noqa: BLE001 - reported per cell, the experiment goes on
        import traceback

        return {"ok": False, "cell": cell_data, "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(limit=12)}


#: Config keys that change what a cell computes; cells made under other values must not share a table.
RESULT_KEYS = result_options()


def _comparable(config: dict[str, Any]) -> dict[str, Any]:
    """An experiment config with its options under their nested names (cells made before the nested config
    spelled them flat), and an option its cell's config did not have yet at its default (what that cell ran)."""
    out = {name: field.get_default(call_default_factory=True) for name, field in ExperimentConfig.model_fields.items()
           if name in RESULT_KEYS and not field.is_required()}
    out.update(config)
    out["optimize"] = nested(out.get("optimize") or {})
    out["settings"] = [nested({k: v for k, v in s.items() if k not in RUNNER_SETTING_KEYS}) | {
        k: v for k, v in s.items() if k in RUNNER_SETTING_KEYS} for s in out.get("settings") or [{}]]
    return out


def differing_result_options(made: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    """The result options (RESULT_KEYS) in which two experiment configs (as dumped) differ."""
    a, b = _comparable(made), _comparable(wanted)
    return [k for k in RESULT_KEYS if a.get(k) != b.get(k)]


def _refuse_mixed_results(config: ExperimentConfig, results: list[CellResult]) -> None:
    """Finished cells are reused only when they were made under the same result-defining options (more seeds,
    methods or harnesses may be added; a changed model or budget needs another results folder)."""
    wanted = config.model_dump(mode="json")
    for result in results:
        differ = differing_result_options(result.config, wanted)
        if differ:
            raise ConfigError(
                f"{config.results_root} holds cell {result.cell} made with other {', '.join(differ)}; its "
                "results cannot share a table with this config: use another results_dir (or name), or delete it")


def _refuse_changed_unfinished(config: ExperimentConfig, unfinished: list[Cell]) -> None:
    """An interrupted cell resumes from its folder only under the result options it was started with (the
    experiment's config.json, written by the run that started it): a changed option would finish it half under
    each."""
    path = config.results_root / "config.json"
    started = [c.key for c in unfinished if cell_dir(config, c).exists()]
    if not started or not path.is_file():
        return
    made = json.loads(path.read_text(encoding="utf-8")).get("config") or {}
    differ = differing_result_options(made, config.model_dump(mode="json"))
    if differ:
        raise ConfigError(
            f"{config.results_root} holds unfinished cell {started[0]} started with other {', '.join(differ)}; "
            "finishing it under this config would mix the two: use another results_dir (or name), or rerun "
            "with the config it was started with")


def preflight(config: ExperimentConfig) -> None:
    """Checks before any cell runs, the dry run's too (ConfigError / ValueError with the reason): every harness
    option is one its harness takes, every configured corpus index exists, a corpus-fraction sweep has a real
    corpus index to subsample, and a paper-split harness does not retrieve from the starter corpus (unless
    `allow_starter_corpus`)."""
    from .artifacts import check_fraction_index

    check_harness_options(config.harnesses)
    retrieves = any(m.uses_corpus for m in config.parsed_methods())
    for setting in config.settings:
        options = merge(nested(config.optimize), nested({k: v for k, v in setting.items()
                                                         if k not in RUNNER_SETTING_KEYS}))
        index = (options.get("retrieval") or {}).get("index")
        if index is not None and not (Path(index) / "meta.json").is_file():
            what = "does not exist" if not Path(index).exists() else "is not a corpus index (no meta.json)"
            raise ConfigError(f"retrieval.index {index} {what}: build one with `raso corpus build SOURCE --out DIR` "
                              "and pass --set retrieval.index=DIR")
        fraction = setting.get("corpus_fraction")
        if fraction is not None and float(fraction) < 1.0:
            check_fraction_index(index)
        paper = [h.label for h in config.harnesses if h.options.get("split") == "paper"]
        if index is None and retrieves and paper and not config.allow_starter_corpus:
            raise ConfigError(f"{', '.join(paper)}: split=paper refuses the starter corpus (a few hundred skills "
                              "shipped for demos, not the paper's corpus); pass --set retrieval.index=DIR with an "
                              "index built by `raso corpus build`, or --allow-starter-corpus to run on it anyway")


def run_experiment(source: str | Path | dict[str, Any] | ExperimentConfig,
                   overrides: dict[str, Any] | None = None) -> ExperimentSummary:
    """Run every unfinished cell of the experiment, then write its CSV, markdown and PNG outputs."""
    from joblib import Parallel, delayed

    from .html_report import write_experiment_html
    from .tables import write_tables

    config = source if isinstance(source, ExperimentConfig) else load_experiment(source, overrides)
    if isinstance(source, ExperimentConfig) and overrides:
        config = load_experiment(config.model_dump(mode="json"), overrides)
    preflight(config)
    started = time.perf_counter()
    root = config.results_root
    root.mkdir(parents=True, exist_ok=True)
    cells = expand_cells(config)
    finished = {c.key: load_result(config, c) for c in cells}
    _refuse_mixed_results(config, [r for r in finished.values() if r is not None])
    _refuse_changed_unfinished(config, [c for c in cells if finished[c.key] is None])
    atomic_write_json(root / "config.json", {"config": config.model_dump(mode="json"), "git": git_commit()})
    todo = [c for c in cells if finished[c.key] is None]
    data = config.model_dump(mode="json")
    outcomes: list[dict[str, Any]] = []
    if todo:
        with _backend(config) as parallel_args:
            outcomes = Parallel(**parallel_args)(delayed(_guarded)(data, c.model_dump(mode="json")) for c in todo)
    failed = [o for o in outcomes if not o["ok"]]
    if failed:
        atomic_write_json(root / "failures.json", failed)
    elif (root / "failures.json").exists():
        (root / "failures.json").unlink()
    results = [r for r in (load_result(config, c) for c in cells) if r is not None]
    tables = write_tables(config, results, failed)
    tables["html"] = write_experiment_html(root)
    summary = ExperimentSummary(
        name=config.name, results_dir=str(root), cells=len(cells), ran=len(todo) - len(failed),
        skipped=len(cells) - len(todo), failed=[f"{Cell.model_validate(o['cell']).key}: {o['error']}" for o in failed],
        tables={k: str(v) for k, v in tables.items()}, wall_time_s=time.perf_counter() - started,
    )
    atomic_write_json(root / "summary.json", summary.model_dump(mode="json"))
    return summary


__all__ = ["RESULT_KEYS", "ExperimentSummary", "differing_result_options", "preflight", "run_experiment"]
