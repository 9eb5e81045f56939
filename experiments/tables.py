"""An experiment's outputs from its cells' results: CSVs, a markdown table in the paper's layout, PNG plots.

Scores are percentages (mean test reward x 100) as mean ± standard error over seeds, each cell with its n (test
tasks × seeds); below the table, each method's paired difference from its row's reference (no skill for init,
RFSI's s0 for update) with a 95 % paired-bootstrap interval over tasks and seeds (experiments.stats), marked * when
it excludes 0. The per-task rewards of every cell are kept in per_task.csv. The cost table's headline is init +
update (what the method spends to produce its skill); the test evaluation has its own column.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from raso.engine.config import dotted
from raso.fileio import atomic_write_text

from .config import ExperimentConfig
from .results import CellResult, TableResult, TableRow
from .stats import cell_n, paired_difference, reference_for

STAGES = ("init", "update", "test")


def mean_se(values: list[float]) -> tuple[float | None, float | None]:
    """Mean and standard error of the mean (None with fewer than 2 values)."""
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    mean = statistics.fmean(values)
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) >= 2 else None
    return mean, se


def fmt(mean: float | None, se: float | None, scale: float = 100.0, digits: int = 2) -> str:
    if mean is None:
        return "–"
    text = f"{mean * scale:.{digits}f}"
    return text + (f" ± {se * scale:.{digits}f}" if se is not None else "")


def _cost(result: CellResult, stage: str | None = None) -> float:
    return result.cost_usd(stage) if stage else result.cost_usd()


def _typed(results: Sequence[CellResult | Mapping[str, Any]]) -> list[CellResult]:
    return [CellResult.from_dict(r) for r in results]


def aggregate(results: Sequence[CellResult | Mapping[str, Any]]) -> list[TableRow]:
    """One row per (harness, method, setting): seeds pooled."""
    groups: dict[tuple[str, str, int], list[CellResult]] = defaultdict(list)
    for r in _typed(results):
        groups[(r.harness, r.method, r.setting_index)].append(r)
    reference = reference_for(sorted({method for _, method, _ in groups}))
    rows = []
    for (harness, method, setting_index), cells in sorted(groups.items(), key=lambda kv: kv[0]):
        first = cells[0]
        n_tasks, n_seeds = cell_n(cells)
        ref_cells = groups.get((harness, reference, setting_index)) or groups.get((harness, reference, 0)) or []
        diff = (paired_difference(cells, ref_cells, reference)
                if reference is not None and method != reference and ref_cells else None)
        test, test_se = mean_se([c.test_mean for c in cells])
        val, val_se = mean_se([c.val_best for c in cells])
        no_candidate = [c.notes for c in cells if c.notes.no_candidate]
        shares = [c.notes.supported_share for c in cells if c.notes.supported_share is not None]
        row = TableRow(
            harness=harness, harness_label=first.harness_label, data=first.data, method=method, label=first.label,
            setting=first.setting_label, setting_index=setting_index, seeds=len(cells), test_mean=test,
            test_se=test_se, val_best_mean=val, val_best_se=val_se,
            rollouts_mean=statistics.fmean(c.rollouts for c in cells),
            rollouts_used_mean=statistics.fmean(c.rollouts_used for c in cells),
            cost_usd_mean=statistics.fmean(c.cost_usd() for c in cells),
            wall_time_s_mean=statistics.fmean(c.wall_time_s for c in cells),
            commit=first.git.commit, n_tasks=n_tasks, n_seeds=n_seeds,
            reference=diff.reference if diff else None, diff_mean=diff.mean if diff else None,
            diff_low=diff.low if diff else None, diff_high=diff.high if diff else None,
            diff_excludes_zero=diff.excludes_zero if diff else None, diff_n=diff.n if diff else None,
            no_candidate_note=(f"no candidate: {sum(n.no_candidate or 0 for n in no_candidate)} of "
                               f"{sum(n.iterations or 0 for n in no_candidate)} iterations in {len(no_candidate)} "
                               f"of {len(cells)} seed(s)") if no_candidate else "",
            supported_share_mean=statistics.fmean(shares) if shares else None,
            assembled_fallbacks=sum(1 for c in cells if c.notes.assembled_fallback),
            **{f"{stage}_cost_usd": statistics.fmean(c.cost_usd(stage) for c in cells) for stage in STAGES},
            **{f"{stage}_tokens": statistics.fmean(c.usage.stage(stage).tokens for c in cells) for stage in STAGES},
        )
        rows.append(row)
    return rows


def _csv(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def _markdown(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def _ordered(values: list[str], order: list[str]) -> list[str]:
    return sorted(set(values), key=lambda v: (order.index(v) if v in order else len(order), v))


def score_table(config: ExperimentConfig, rows: list[TableRow]) -> str:
    """Methods down, harnesses across (init / update / ablations); for sweeps the setting is a leading column."""
    harnesses = _ordered([r.harness for r in rows], [h.key for h in config.harnesses])
    methods = _ordered([r.method for r in rows], [m.name for m in config.parsed_methods()])
    sweep = len(config.settings) > 1
    by_key = {(r.harness, r.method, r.setting_index): r for r in rows}
    names = {r.harness: r.harness_label for r in rows}
    header = ((["Setting"] if sweep else []) + ["Method"] + [names[h] for h in harnesses]
              + (["Avg."] if len(harnesses) > 1 else []))
    body = []
    for si in range(len(config.settings)):
        for method in methods:
            cells = [by_key.get((h, method, si)) for h in harnesses]
            if not any(cells):
                continue
            label = next(c.label for c in cells if c)
            line = ([next(c.setting for c in cells if c)] if sweep else []) + [label]
            line += [f"{fmt(c.test_mean, c.test_se)} (n={c.n_tasks}×{c.n_seeds})" if c else "–"
                     for c in cells]
            if len(harnesses) > 1:
                means = [c.test_mean for c in cells if c and c.test_mean is not None]
                line.append(f"{statistics.fmean(means) * 100:.2f}" if len(means) == len(harnesses) else "–")
            body.append(line)
    return _markdown(header, body)


def difference_table(config: ExperimentConfig, rows: list[TableRow]) -> str:
    """Per method and harness: the paired difference from the reference (points of test score), its 95 %
    bootstrap interval over tasks and seeds (* = excludes 0) and its n; "" when the table has no reference."""
    shown = [r for r in rows if r.diff_mean is not None]
    if not shown:
        return ""
    header = ["Method", "Harness", f"Δ vs {shown[0].reference} (points) [95 % CI]", "n (tasks × seeds)"]
    body = [[r.label + (f" ({r.setting})" if len(config.settings) > 1 else ""), r.harness_label,
             f"{r.diff_mean * 100:+.2f} [{r.diff_low * 100:+.2f}, {r.diff_high * 100:+.2f}]"
             + ("*" if r.diff_excludes_zero else ""),
             f"{r.diff_n // max(r.n_seeds, 1)} × {r.n_seeds}"] for r in shown]
    return _markdown(header, body)


def cost_table(config: ExperimentConfig, rows: list[TableRow]) -> str:
    """Per method and harness: the headline cost of producing the skill (init + update: USD and tokens), then each
    stage, the test evaluation in its own column (means over seeds)."""
    header = ["Method", "Harness", "Rollouts", "USD (init + update)", "Tokens (init + update)", "USD init",
              "USD update", "Tokens init", "Tokens update", "USD test", "Tokens test"]
    body = [[r.label + (f" ({r.setting})" if len(config.settings) > 1 else ""), r.harness_label,
             f"{r.rollouts_mean:.0f}", f"{r.init_cost_usd + r.update_cost_usd:.4f}",
             f"{r.init_tokens + r.update_tokens:.0f}", f"{r.init_cost_usd:.4f}",
             f"{r.update_cost_usd:.4f}", f"{r.init_tokens:.0f}", f"{r.update_tokens:.0f}",
             f"{r.test_cost_usd:.4f}", f"{r.test_tokens:.0f}"] for r in rows]
    return _markdown(header, body) + textgrad_setting_line(config)


def textgrad_setting_line(config: ExperimentConfig) -> str:
    """Which trajectories TextGrad's loss read (its cost depends on it), for a table with a TextGrad row."""
    if not any(m.update == "textgrad" for m in config.parsed_methods()):
        return ""
    if config.textgrad_trajectories == "full":
        return "\n\nTextGrad: full trajectories (every step unclipped, the paper's setting)."
    return ("\n\nTextGrad: equal information (each trajectory clipped to limits.trajectory_chars_each, as every "
            "method's reflection; the paper's setting is `textgrad_trajectories: full`).")


def _plot_sweep(config: ExperimentConfig, rows: list[TableRow], axis: str, path: Path, *, log: bool) -> Path:
    from matplotlib.figure import Figure  # the object API: no pyplot state shared between threads

    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    for (_harness, _method), group in _groups(rows, ("harness", "method")).items():
        points = sorted(((float(dotted(config.settings[r.setting_index]).get(axis, 0)), r) for r in group),
                        key=lambda point: point[0])
        xs = [x for x, _ in points]
        ys = [(r.test_mean or 0) * 100 for _, r in points]
        errs = [(r.test_se or 0) * 100 for _, r in points]
        ax.errorbar(xs, ys, yerr=errs, marker="o", capsize=3,
                    label=f"{group[0].label} · {group[0].harness_label}")
    if log:
        ax.set_xscale("log")
    ax.set_xlabel(axis.replace("_", " "))
    ax.set_ylabel("test score (%)")
    ax.set_title(config.name)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def _groups(rows: list[TableRow], keys: tuple[str, ...]) -> dict[tuple[Any, ...], list[TableRow]]:
    out: dict[tuple[Any, ...], list[TableRow]] = defaultdict(list)
    for r in rows:
        out[tuple(getattr(r, k) for k in keys)].append(r)
    return out


def _plot_curves(config: ExperimentConfig, results: list[CellResult], path: Path) -> Path | None:
    """Val (best so far) and final test score against rollouts and against USD, per method; one line per seed."""
    updates = [r for r in results if r.curve]
    if not updates:
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4))
    axes = fig.subplots(1, 2)
    colors: dict[str, Any] = {}
    labelled: set[str] = set()
    for r in updates:
        key = (f"{r.label} · {r.harness_label}"
               + (f" · {r.setting_label}" if len(config.settings) > 1 else ""))
        color = colors.setdefault(key, f"C{len(colors) % 10}")
        label = None if key in labelled else key
        labelled.add(key)
        xs = [p.rollouts for p in r.curve]
        ys = [p.val * 100 for p in r.curve]
        axes[0].step(xs, ys, where="post", color=color, alpha=0.7, label=label)
        axes[0].plot([r.rollouts_used], [r.test_mean * 100], marker="*", color=color, markersize=10)
        costed = [p for p in r.curve if p.cost_usd is not None]
        if costed:
            axes[1].step([p.cost_usd for p in costed], [p.val * 100 for p in costed], where="post",
                         color=color, alpha=0.7)
        axes[1].plot([_cost(r, "init") + _cost(r, "update")], [r.test_mean * 100], marker="*", color=color,
                     markersize=10)
    axes[0].set_xlabel("rollouts run (s0's val evaluation included)")
    axes[1].set_xlabel("USD (init + update)")
    for ax in axes:
        ax.set_ylabel("score (%): lines val best so far, stars final test")
    axes[0].legend(fontsize=7)
    fig.suptitle(config.name)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def table_result(config: ExperimentConfig, results: Sequence[CellResult | Mapping[str, Any]]) -> TableResult:
    """The table as data: its rows, the data each harness ran on, which harnesses ran on demo data."""
    typed = _typed(results)
    data = {r.harness: r.data for r in typed}
    return TableResult(name=config.name, table=config.table, model=config.model, rows=aggregate(typed), data=data,
                       demo_harnesses=sorted({r.harness for r in typed if r.demo_data}),
                       commits=sorted({str(r.git.commit) for r in typed}))


def notes_table(config: ExperimentConfig, rows: list[TableRow]) -> str:
    """Per row with something to say: how often its update produced no candidate, its init's share of
    requirements with a supported lesson, how many of its s0 came from the assembled fallback; "" if none."""
    shown = [r for r in rows if r.no_candidate_note or r.supported_share_mean is not None or r.assembled_fallbacks]
    if not shown:
        return ""
    header = ["Method", "Harness", "Update proposals", "Supported lessons (share of requirements)",
              "s0 from the assembled fallback"]
    body = [[r.label + (f" ({r.setting})" if len(config.settings) > 1 else ""), r.harness_label,
             r.no_candidate_note or "–",
             f"{r.supported_share_mean:.0%}" if r.supported_share_mean is not None else "–",
             f"{r.assembled_fallbacks} of {r.seeds}"] for r in shown]
    return _markdown(header, body)


def data_lines(table: TableResult) -> str:
    """Which data every harness of the table ran on; demo data is called out first."""
    lines = []
    if table.demo_harnesses:
        lines.append(f"**Demo data, not the benchmark:** {', '.join(table.demo_harnesses)} ran on the small data "
                     "shipped with raso; these rows measure nothing the paper reports.")
    lines += [f"- {harness}: {label}" for harness, label in sorted(table.data.items())]
    return "\n".join(lines)


def write_tables(config: ExperimentConfig, results: Sequence[CellResult | Mapping[str, Any]]) -> dict[str, Path]:
    """Write <table>.csv, <table>.md, <table>.json (TableResult), cells.csv, per_task.csv, cost.md and the
    table's PNGs; return their paths."""
    root = config.results_root
    root.mkdir(parents=True, exist_ok=True)
    typed = _typed(results)
    table = table_result(config, typed)
    rows = table.rows
    out: dict[str, Path] = {}
    out["csv"] = atomic_write_text(root / f"{config.table}.csv", _csv([r.to_dict() for r in rows]))
    out["json"] = atomic_write_text(root / f"{config.table}.json", json.dumps(table.to_dict(), indent=1))
    cells = [{"cell": r.cell, "harness": r.harness, "data": r.data, "method": r.method, "seed": r.seed,
              "setting_label": r.setting_label, "test_mean": r.test_mean, "val_best": r.val_best,
              "rollouts": r.rollouts, "rollouts_used": r.rollouts_used, "wall_time_s": r.wall_time_s,
              "cost_usd": r.cost_usd(), "commit": r.git.commit} for r in typed]
    out["cells"] = atomic_write_text(root / "cells.csv", _csv(cells))
    per_task = [{"cell": r.cell, "harness": r.harness, "method": r.method, "seed": r.seed,
                 "setting": r.setting_label, "task_id": t.task_id, "reward": t.reward}
                for r in typed for t in r.test_per_task]
    out["per_task"] = atomic_write_text(root / "per_task.csv", _csv(per_task))
    seeds = sorted({r.seed for r in typed})
    footer = (f"\n\nTest score (%), mean ± standard error over seeds {seeds}, n = test tasks × seeds; config "
              f"`{config.name}` ({config.table}); model `{config.model}`; commit(s) "
              f"{', '.join(c[:10] for c in table.commits)}.\n\nData:\n{data_lines(table)}\n")
    main = cost_table(config, rows) if config.table == "cost" else score_table(config, rows)
    differences = difference_table(config, rows)
    if differences:
        footer += (f"\nPaired difference from the reference, 95 % bootstrap interval over test tasks and seeds "
                   f"(fixed seed); * marks an interval that excludes 0.\n\n{differences}\n")
    notes = notes_table(config, rows)
    if notes:
        footer += f"\nNotes per row:\n\n{notes}\n"
    out["markdown"] = atomic_write_text(root / f"{config.table}.md", f"# {config.name}\n\n{main}{footer}")
    out["cost"] = atomic_write_text(root / "cost.md", f"# {config.name}: cost\n\n{cost_table(config, rows)}\n")
    if rows and config.table == "k_sweep":
        out["plot"] = _plot_sweep(config, rows, "retrieval.k", root / "k_sweep.png", log=False)
    elif rows and config.table == "corpus_fraction":
        out["plot"] = _plot_sweep(config, rows, "corpus_fraction", root / "corpus_fraction.png", log=True)
    curves = _plot_curves(config, typed, root / "curves.png")
    if curves is not None:
        out["curves"] = curves
    return out


__all__ = ["aggregate", "cost_table", "data_lines", "difference_table", "fmt", "mean_se", "notes_table", "score_table",
           "table_result", "write_tables"]
