"""An experiment's dry run (`raso experiment run CONFIG --dry-run`): every cell with the data it would run on, its
models, its rollout budget, its rollouts (train, val, test), its expected model calls and an estimate of its USD,
without calling any model or building anything.

Rollouts follow the engine's schedule at the cell's budget (raso.engine.plan.schedule_rollouts); model calls and
tokens per call are raso.engine.plan's defaults (an agent turn per allowed step: an upper bound), with TextGrad and
GEPA's own call patterns; USD uses the run's price table (`models.prices`, then litellm's). An s0 shared by a row's
update cells is made once, but each cell's estimate counts it (the total is an upper bound).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel

from raso.engine.config import OptimizeConfig
from raso.engine.plan import CallShape, default_shapes, schedule_rollouts
from raso.harness import Harness

from .accounting import engine_budget
from .artifacts import check_fraction_index
from .cells import cell_optimize_config, is_demo
from .config import Cell, ExperimentConfig, expand_cells


class CellPlan(BaseModel):
    cell: str
    method: str
    harness: str
    data: str
    demo_data: bool
    corpus: str  # the corpus its retrieval would use (corpus_tools.card), its nested subsample for a fraction
    target_model: str
    optimizer_model: str
    n_train: int
    n_val: int
    n_test: int
    budget_rollouts: int
    rollouts: dict[str, int]  # train, val (candidates' evaluations), s0_val, test
    counted_rollouts: int  # train + val (+ s0_val under "candidates+s0"): the paper's Table 10 count
    init_calls: int  # making s0 (shared by the update cells of its row)
    optimizer_calls: int  # the update's proposals
    agent_calls: int
    usd: float | None  # None: a model has no price
    notes: list[str]


class ExperimentPlan(BaseModel):
    name: str
    table: str
    cells: list[CellPlan]
    usd: float | None
    demo_harnesses: list[str]


def _price(model: str, cfg: OptimizeConfig, calls: float, shape: CallShape) -> float | None:
    from raso.llm.gateway import price_of

    price = price_of(model, cfg.models.prices)
    if price is None:
        return None
    return price.cost(round(calls * shape.prompt_tokens), round(calls * shape.completion_tokens))


def _sum(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else float(sum(v or 0.0 for v in values))


class _Planner:
    def __init__(self, config: ExperimentConfig) -> None:
        self.config = config
        self.harnesses: dict[str, Harness] = {}
        self.corpora: dict[str | None, str] = {}

    def harness(self, cell: Cell) -> Harness:
        from raso.api import load_harness

        if cell.harness.key not in self.harnesses:
            self.harnesses[cell.harness.key] = load_harness(cell.harness.name, cell.harness.options)
        return self.harnesses[cell.harness.key]

    def corpus(self, index: Any, fraction: float | None) -> str:
        """The label of the corpus a cell would retrieve from (read once per index)."""
        from corpus_tools.card import record_label
        from corpus_tools.identity import corpus_record

        key = str(index) if index is not None else None
        if key not in self.corpora:
            self.corpora[key] = record_label(corpus_record(index))
        base = self.corpora[key]
        return base if fraction is None or fraction >= 1.0 else f"nested {fraction:g} subsample of {base}"

    def cell(self, cell: Cell) -> CellPlan:
        config, method = self.config, cell.method
        harness = self.harness(cell)
        cfg = cell_optimize_config(config, cell)
        fraction = cell.setting.get("corpus_fraction")
        if fraction is not None and float(fraction) < 1.0:
            check_fraction_index(cfg.retrieval.index)

        def count(split: str, limit: int | None) -> int:
            tasks = harness.tasks(split)
            return len(tasks[:limit]) if limit is not None else len(tasks)

        n_train, n_val = count("train", cfg.schedule.train_limit), count("val", cfg.schedule.val_limit)
        n_test = count("test", config.test_limit)
        notes: list[str] = []
        init = {"none": None, "skillrouter": None, "rfsi": "rfsi", "rasi": "rasi", "rasi-raw": "rasi"}[method.init]
        budget, iterations, propose_calls = 0, 0, 0.0
        rollouts = {"train": 0, "val": 0, "s0_val": 0, "test": n_test}
        options: dict[str, Any] = {"init.method": init or "rfsi", "init.adapt": method.init != "rasi-raw",
                                   "schedule.test": False}
        if method.update is not None:
            budget = (config.budget_rollouts + (n_val if config.rollout_convention == "candidates" else 0)
                      if config.budget_rollouts is not None else cfg.budget.rollouts
                      or engine_budget(n_train, n_val, epochs=cfg.schedule.epochs, minibatch=cfg.schedule.minibatch,
                                       convention=config.rollout_convention))
            options.update({"update.method": "rasu" if method.update in ("rasu", "rasu-raw") else "rfsu",
                            "update.adapt": method.update != "rasu-raw", "budget.rollouts": budget})
        planned = cfg.updated(options)
        shapes = default_shapes(planned, harness)
        if method.update is not None:
            phases, iterations = schedule_rollouts(planned, n_train, n_val, 0)
            rollouts.update(train=phases["train"], val=phases["val"] + phases["holdout"], s0_val=phases["s0_val"])
            batch, chunk = min(planned.schedule.minibatch, n_train), planned.update.chunk_size
            if method.update == "textgrad":  # per rollout a loss and its gradient, one TGD step per chunk
                propose_calls = 3 * phases["train"] + iterations * math.ceil(batch / chunk)
            elif method.update == "gepa":  # at most one reflection per two minibatch evaluations
                propose_calls = budget // max(2 * config.gepa_minibatch, 1)
                rollouts.update(train=budget - 2 * n_val, val=n_val, s0_val=n_val)
                notes.append("GEPA: its own loop spends the whole budget; reflections are an upper bound")
            else:
                propose_calls = iterations * shapes["propose"].calls_per_unit
        init_calls = shapes["init"].calls_per_unit if init is not None else 0.0
        if method.init == "skillrouter":
            notes.append("SkillRouter: each test task runs with the whole corpus skill routed from its own instruction "
                         "(no model call)")
        agent_calls = sum(rollouts.values()) * shapes["agent"].calls_per_unit
        optimizer = planned.resolved_optimizer_model()
        usd = _sum([_price(planned.models.target, planned, agent_calls, shapes["agent"]),
                    _price(optimizer, planned, init_calls, shapes["init"]),
                    _price(optimizer, planned, propose_calls, shapes["propose"])])
        data = harness.data_label()
        counted = rollouts["train"] + rollouts["val"] + (
            rollouts["s0_val"] if config.rollout_convention == "candidates+s0" else 0)
        corpus = self.corpus(cfg.retrieval.index, float(fraction) if fraction is not None else None)
        if not method.uses_corpus:
            corpus += " (not used by this method)"
        return CellPlan(counted_rollouts=counted, cell=cell.key, method=method.name, harness=cell.harness.key, data=data,
                        demo_data=is_demo(data), corpus=corpus, target_model=planned.models.target, optimizer_model=optimizer,
                        n_train=n_train, n_val=n_val, n_test=n_test, budget_rollouts=budget, rollouts=rollouts,
                        init_calls=round(init_calls), optimizer_calls=round(propose_calls),
                        agent_calls=round(agent_calls), usd=usd, notes=notes)


def plan_experiment(config: ExperimentConfig) -> ExperimentPlan:
    """The dry run of `config`: no model is called, no index or skill is built."""
    planner = _Planner(config)
    cells = [planner.cell(c) for c in expand_cells(config)]
    return ExperimentPlan(name=config.name, table=config.table, cells=cells, usd=_sum([c.usd for c in cells]),
                          demo_harnesses=sorted({c.harness for c in cells if c.demo_data}))


def format_experiment_plan(plan: ExperimentPlan) -> str:
    lines = [f"dry run of experiment {plan.name!r} ({plan.table} table): {len(plan.cells)} cell(s); no model was "
             "called"]
    if plan.demo_harnesses:
        lines.append(f"DEMO DATA: {', '.join(plan.demo_harnesses)} would run on the data shipped with raso, not the "
                     "benchmark; every row and result.json will say so. Pass --harness-arg NAME.data_dir=PATH "
                     "(and NAME.split=paper) for the paper's setting.")
    data = {c.harness: c.data for c in plan.cells}
    lines += ["", "data per harness:"] + [f"  {h}: {d}" for h, d in data.items()]
    corpora = sorted({c.corpus for c in plan.cells})
    lines += ["", "corpus:"] + [f"  {label}" for label in corpora]
    lines += ["", "rollouts: train minibatches / candidates' val evaluations / s0's val evaluation / test; 'counted' is "
              "the paper's count (Table 10) under the config's rollout convention", "",
              "| cell | models (target / optimizer) | tasks train/val/test | budget | rollouts train/val/s0/test | "
              "counted | calls agent / init / update | USD |", "|---|---|---|---|---|---|---|---|"]
    for c in plan.cells:
        usd = f"{c.usd:.4f}" if c.usd is not None else "unpriced"
        lines.append(f"| {c.cell} | {c.target_model} / {c.optimizer_model} | {c.n_train}/{c.n_val}/{c.n_test} | "
                     f"{c.budget_rollouts or '–'} | {c.rollouts['train']}/{c.rollouts['val']}/{c.rollouts['s0_val']}/"
                     f"{c.rollouts['test']} | {c.counted_rollouts or '–'} | "
                     f"{c.agent_calls} / {c.init_calls} / {c.optimizer_calls} | {usd} |")
    notes = sorted({n for c in plan.cells for n in c.notes})
    lines += [""] + [f"note: {n}" for n in notes]
    total = f"${plan.usd:.4f}" if plan.usd is not None else "unknown (a model has no price: add models.prices)"
    lines.append(f"estimated total: {total} (an s0 shared by a row's cells is counted once per cell: an upper "
                 "bound; agent calls assume every allowed step is used)")
    return "\n".join(lines)


__all__ = ["CellPlan", "ExperimentPlan", "format_experiment_plan", "plan_experiment"]
