"""Running one cell: make (or reuse) its s0, run its update method within the shared rollout budget, score the
result on test, and write result.json — last, so its presence means the cell is finished.

An interrupted cell resumes: the engine run (RFSU, RASU, TextGrad) continues from its checkpoint, GEPA from its
saved state (what it reruns replays from its response cache and is not counted again), the test evaluation replays
its cached model replies.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpus_tools.identity import corpus_record
from raso.api import load_harness
from raso.engine.config import OptimizeConfig, merge, nested, validate
from raso.engine.run_dir import atomic_write_json
from raso.harness import Harness
from raso.llm.view import UnitGateway
from raso.skill import Skill

from .accounting import engine_budget, reported_rollouts
from .artifacts import SharedArtifacts, ledger_totals, ledgered_gateway
from .config import RUNNER_SETTING_KEYS, Cell, ExperimentConfig, HarnessSpec
from .proposals import cell_notes, gepa_failures
from .results import CellNotes, CellResult, CurvePoint, GitInfo, StageUsage, TaskScore, UpdateSummary, Usage
from .routing import TaskRouter

RESULT_FILE = "result.json"
REPO = Path(__file__).resolve().parent.parent


def git_commit() -> dict[str, Any]:
    """The commit the code ran at, and whether the tracked files differed from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=20).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no", "--", "raso", "experiments", "harnesses",
                         "corpus_tools"))
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit or None, "dirty": dirty}


def cell_optimize_config(config: ExperimentConfig, cell: Cell, *, index: Path | None = None) -> OptimizeConfig:
    """The OptimizeConfig of a cell: the experiment's shared options, the setting's overrides, the cell's own keys
    (its harness, with the options the experiment gives every harness, is the cell's harness spec; `index`, when
    given, the corpus index it retrieves from: a corpus-fraction subsample)."""
    setting = {k: v for k, v in cell.setting.items() if k not in RUNNER_SETTING_KEYS}
    own: dict[str, Any] = {
        "harness": cell.harness.name, "harness_options": cell.harness.options, "models.target": config.model,
        "models.optimizer": config.optimizer_model, "models.api_base": config.api_base,
        "models.optimizer_api_base": config.optimizer_api_base, "schedule.seed": cell.seed,
        "schedule.test": False,  # the runner scores every method on test itself, the same way
        "retrieval.kind": cell.method.retriever,  # `raso@two_stage`: the row's own retriever (None: the config's)
        "retrieval.index": index,
    }
    values = merge(merge(nested(config.optimize), nested(setting)), nested({k: v for k, v in own.items() if v is not None}))
    values["harness_options"] = dict(cell.harness.options)
    return validate(values, f"cell {cell.key}")


def cell_dir(config: ExperimentConfig, cell: Cell) -> Path:
    return config.results_root / "cells" / cell.key


def load_result(config: ExperimentConfig, cell: Cell) -> CellResult | None:
    """The cell's finished result (older result.json files load too), or None while it is unfinished."""
    path = cell_dir(config, cell) / RESULT_FILE
    return CellResult.from_dict(json.loads(path.read_text(encoding="utf-8"))) if path.exists() else None


def is_demo(data_label: str) -> bool:
    """Whether a harness's `data_label()` names the demo data shipped with raso (never a benchmark's)."""
    return data_label.startswith("demo data")


def harness_row_label(spec: HarnessSpec, data_label: str) -> str:
    """How a table names a harness: on demo data the label says so, so a demo row never reads as the benchmark."""
    return f"{spec.label} [demo data]" if is_demo(data_label) else spec.label


def _limited(tasks: list[Any], limit: int | None) -> list[Any]:
    return tasks[:limit] if limit is not None else tasks


@dataclass
class UpdateOutcome:
    """What an update method produced: its best skill and the numbers a CellResult records."""

    skill: Skill
    summary: UpdateSummary
    usage: Usage
    curve: list[CurvePoint]
    checkpoint: Path | None  # the engine's checkpoint (its candidate records); None for GEPA
    failures: dict[str, Any] | None = None  # GEPA's proposal counts (the engine's are read from `checkpoint`)


class CellRunner:
    """Runs one cell of `config` (a pure function of config and cell: safe in a worker process)."""

    def __init__(self, config: ExperimentConfig, cell: Cell) -> None:
        self.config = config
        self.cell = cell
        self.dir = cell_dir(config, cell)
        self.shared = SharedArtifacts(config.results_root / "shared")
        self.harness: Harness = load_harness(cell.harness.name, cell.harness.options)
        fraction = cell.setting.get("corpus_fraction")
        base = cell_optimize_config(config, cell)
        index = self.shared.index_path(base, float(fraction) if fraction is not None else None, cell.seed)
        self.cfg = cell_optimize_config(config, cell, index=index)
        self.n_train = len(_limited(self.harness.tasks("train"), self.cfg.schedule.train_limit))
        self.n_val = len(_limited(self.harness.tasks("val"), self.cfg.schedule.val_limit))
        self.init_json: Path | None = None  # the shared s0's init record, once s0 is made

    # ------------------------------------------------------------------ pieces
    def initial_skill(self) -> tuple[Skill | None, Usage]:
        """s0 and the usage of making it (the init stage); None for no skill, and for SkillRouter, whose skill is
        each task's own (`task_router`)."""
        method = self.cell.method
        if method.init in ("none", "skillrouter"):
            return None, Usage()
        path = self.shared.initial_skill(self.harness, self.cell.harness.key, self.cfg, init=method.init,
                                         seed=self.cell.seed)
        self.init_json = path.parent / "init.json"
        skill = Skill.load(path)
        skill.save(self.dir / "s0.md")
        return skill, Usage.from_dict(self.shared.init_usage(path))

    def task_router(self) -> TaskRouter | None:
        """SkillRouter row: each task's own whole corpus skill, routed from its instruction and kept in the cell's
        `routing/` folder (None for every other method)."""
        if self.cell.method.init != "skillrouter":
            return None
        return TaskRouter(self.cfg, self.harness, self.dir / "routing")

    def update_budget(self) -> int:
        """The engine budget (it counts s0's val evaluation) equal for every update method of the experiment."""
        cfg, conv = self.cfg, self.config.rollout_convention
        if self.config.budget_rollouts is not None:
            return self.config.budget_rollouts + (self.n_val if conv == "candidates" else 0)
        if cfg.budget.rollouts is not None:
            return cfg.budget.rollouts
        return engine_budget(self.n_train, self.n_val, epochs=cfg.schedule.epochs, minibatch=cfg.schedule.minibatch,
                             convention=conv)

    def run_update(self, s0: Skill) -> UpdateOutcome:
        """RFSU / RASU / TextGrad through raso's engine (raso.api), GEPA through its package."""
        import shutil

        import raso.api
        from raso.engine.run_dir import RunDir

        update = self.cell.method.update
        if update == "gepa":
            return self._run_gepa(s0)
        proposer = None
        if update == "textgrad":
            from .baselines.textgrad_baseline import TextGradProposer

            proposer = TextGradProposer(chunk_size=self.cfg.update.chunk_size,  # RASU's chunks
                                        trajectories=self.config.textgrad_trajectories)
        run_dir = self.dir / "run"
        if (run_dir / "checkpoint.json").exists():
            result = raso.api.resume(run_dir, harness=self.harness, proposer=proposer)
        else:
            if run_dir.exists():  # killed before its first checkpoint: nothing in it is worth keeping
                shutil.rmtree(run_dir)
            cfg = self.cfg.updated({
                "init.method": str((self.dir / "s0.md").resolve()),
                "update.method": "rasu" if update in ("rasu", "rasu-raw") else "rfsu",
                "update.adapt": update != "rasu-raw",
                "budget.rollouts": self.update_budget(), "run_dir": run_dir})
            result = raso.api.optimize(self.harness, config=cfg, proposer=proposer)
        summary = UpdateSummary(
            val_best=result.best_val, val_initial=result.initial_val, rollouts_used=result.rollouts_used,
            train_rollouts=result.train_rollouts, val_rollouts=result.val_rollouts, iterations=result.iterations,
            accepted=result.accepted, stop_reason=result.stop_reason,
            s0_evaluated=any(p.label == "s0" for p in result.curve))
        curve = [CurvePoint(rollouts=p.rollouts_used, cost_usd=p.cost_usd, val=p.best_val) for p in result.curve]
        return UpdateOutcome(skill=Skill.load(RunDir(run_dir).best_skill), summary=summary, curve=curve,
                             usage=Usage.from_dict(ledger_totals(run_dir / "ledger.calls.jsonl")),
                             checkpoint=run_dir / "checkpoint.json")

    def _run_gepa(self, s0: Skill) -> UpdateOutcome:
        from raso.api import make_agent

        from .baselines.gepa_baseline import run_gepa

        run_dir = self.dir / "gepa"
        # cached like every other method's calls: a resumed GEPA run replays the rollouts it reruns (the seed's val
        # evaluation, the interrupted iteration) for free, and its adapter does not count them again
        gw = ledgered_gateway(self.cfg, cache_dir=run_dir / "cache", ledger_path=run_dir / "ledger.calls.jsonl")
        outcome = run_gepa(
            self.harness, make_agent(self.cfg, gw, self.harness), gw, seed_skill=s0,
            train=_limited(self.harness.tasks("train"), self.cfg.schedule.train_limit),
            val=_limited(self.harness.tasks("val"), self.cfg.schedule.val_limit), budget_rollouts=self.update_budget(),
            run_dir=run_dir, seed=self.cell.seed, reflection_minibatch=self.config.gepa_minibatch,
            workers=self.cfg.schedule.workers)
        best_so_far, curve = float("-inf"), []
        for rollouts, score in zip(outcome.discovery_eval_counts, outcome.val_scores):
            best_so_far = max(best_so_far, score)
            curve.append(CurvePoint(rollouts=rollouts, cost_usd=None, val=best_so_far))
        summary = UpdateSummary(
            val_best=outcome.best_val, val_initial=outcome.initial_val, rollouts_used=outcome.rollouts_used,
            accepted=outcome.candidates - 1, stop_reason=outcome.stop_reason, s0_evaluated=True,
            gepa=outcome.model_dump(mode="json", exclude={"best_skill"}))
        return UpdateOutcome(skill=Skill.parse(outcome.best_skill), summary=summary, curve=curve,
                             usage=Usage.from_dict(ledger_totals(run_dir / "ledger.calls.jsonl")), checkpoint=None,
                             failures=gepa_failures(outcome.reflection_calls, outcome.reflection_failures,
                                                    outcome.reflection_note))

    def evaluate_test(self, skill: Skill | None, router: TaskRouter | None = None
                      ) -> tuple[float, float | None, list[TaskScore], Usage]:
        """The same test evaluation for every method (raso.evaluate), its model calls replayed on resume: mean
        reward, success rate, per-task rewards, usage. With `router`, each task runs with its own routed skill."""
        import raso.api

        gw = ledgered_gateway(self.cfg, cache_dir=self.dir / "test_cache", ledger_path=self.dir / "test.calls.jsonl")
        mode: dict[str, Any] = {"agent.mode": "none" if skill is None and router is None else self.cfg.agent.mode}
        result = raso.api.evaluate(
            self.harness, skill, split="test", config=self.cfg, limit=self.config.test_limit,
            gateway=UnitGateway(gw, "test"), out_dir=self.dir / "test", task_skills=router, **mode)
        if result.infrastructure_failures:
            # as the engine does: an outage's zeros are not the method's score; the cell stays unfinished and
            # the next run of the experiment redoes it (the rollouts that worked replay from the cache)
            raise RuntimeError(f"{result.infrastructure_failures} test rollout(s) got no agent result "
                               f"({result.first_infrastructure_error or 'no error text'}); not scored")
        per_task = [TaskScore(task_id=str(r.task_id), reward=r.reward, error=bool(r.error)) for r in result.rollouts]
        return (result.mean_reward, result.success_rate, per_task,
                Usage.from_dict(ledger_totals(self.dir / "test.calls.jsonl")))

    # ------------------------------------------------------------------ the cell
    def run(self) -> CellResult:
        done = load_result(self.config, self.cell)
        if done is not None:
            return done
        self.dir.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        s0, init_usage = self.initial_skill()
        router = self.task_router()
        update: UpdateOutcome | None = None
        final = s0
        if self.cell.method.update is not None:
            assert s0 is not None  # Method.parse guarantees an update starts from rfsi/rasi/rasi-raw
            update = self.run_update(s0)
            final = update.skill
            final.save(self.dir / "best.md")
        test_mean, success_rate, per_task, test_usage = self.evaluate_test(final, router)
        conv = self.config.rollout_convention
        used = update.summary.rollouts_used if update else 0
        data = self.harness.data_label()
        notes = CellNotes.from_dict(cell_notes(self.harness, checkpoint=update.checkpoint if update else None,
                                               init_json=self.init_json,
                                               update_failures=update.failures if update else None))
        result = CellResult(
            experiment=self.config.name, table=self.config.table, cell=self.cell.key,
            method=self.cell.method.name, label=self.cell.method.label, harness=self.cell.harness.key,
            harness_label=harness_row_label(self.cell.harness, data), data=data, demo_data=is_demo(data),
            corpus=corpus_record(self.cfg.retrieval.index),
            seed=self.cell.seed, setting=self.cell.setting, setting_label=self.cell.setting_label,
            setting_index=self.cell.setting_index,
            test_mean=test_mean, test_success_rate=success_rate, test_per_task=per_task,
            val_best=update.summary.val_best if update else None,
            val_initial=update.summary.val_initial if update else None,
            rollouts_used=used, rollout_convention=conv,
            rollouts=reported_rollouts(used, self.n_val, s0_evaluated=update.summary.s0_evaluated,
                                       convention=conv) if update else 0,
            budget_rollouts=self.update_budget() if update else 0,
            n_train=self.n_train, n_val=self.n_val, n_test=len(per_task),
            usage=StageUsage(init=init_usage, update=update.usage if update else Usage(), test=test_usage),
            update=update.summary if update else None, notes=notes, curve=update.curve if update else [],
            routing=router.routes(t.task_id for t in per_task) if router else [],
            wall_time_s=time.perf_counter() - started,
            ran_on={"host": socket.gethostname(), "pid": os.getpid(), "thread": threading.current_thread().name},
            finished_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            git=GitInfo.from_dict(git_commit()), config=self.config.model_dump(mode="json"),
        )
        if self.config.mlflow_uri:  # before result.json: a cell whose tracking failed is retried with it
            from .tracking import log_cell

            result.mlflow_run_id = log_cell(self.config.mlflow_uri, self.config.name, result, self.dir)
        atomic_write_json(self.dir / RESULT_FILE, result.to_dict())
        return result


def run_cell(config_data: dict[str, Any], cell_data: dict[str, Any]) -> dict[str, Any]:
    """Entry point for a worker (process, thread, Ray or Dask): plain data in, plain data out
    (`CellResult.to_dict()`)."""
    config = ExperimentConfig.model_validate(config_data)
    cell = Cell.model_validate(cell_data)
    return CellRunner(config, cell).run().to_dict()


__all__ = ["CellRunner", "RESULT_FILE", "UpdateOutcome", "cell_dir", "cell_optimize_config", "git_commit", "harness_row_label",
           "is_demo", "load_result", "run_cell"]
