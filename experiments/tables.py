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

from raso.fileio import atomic_write_text

from .config import Cell, ExperimentConfig, Method
from .results import CellResult, Headline, Record, TableResult, TableRow
from .stats import HEADLINE_METHODS, cell_n, is_baseline, paired_difference, reference_for

STAGES = ("init", "update", "test")


def mean_se(given: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Mean and standard error of the mean of the values that are not None (None with fewer than 2 values)."""
    values = [v for v in given if v is not None]
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


class FailedCell(Record):
    """A cell that did not finish (from the runner's failures): which one and why. Tables show it as a row marked
    failed instead of dropping it."""

    harness: str
    harness_label: str
    method: str
    label: str
    setting_index: int = 0
    setting: str = "default"
    seed: int
    error: str

    @classmethod
    def from_failure(cls, failure: Mapping[str, Any]) -> "FailedCell":
        """From one entry of failures.json (`{"cell": Cell data, "error": "Type: message", ...}`)."""
        cell = Cell.model_validate(failure["cell"])
        return cls(harness=cell.harness.key, harness_label=cell.harness.label, method=cell.method.name,
                   label=cell.method.label, setting_index=cell.setting_index, setting=cell.setting_label,
                   seed=cell.seed, error=str(failure.get("error") or "no error recorded"))

    @property
    def reason(self) -> str:
        """The error's first line, short enough for a table cell (no `|`: it would split the markdown row)."""
        first = (self.error.splitlines() or ["?"])[0].replace("|", "/")
        return first if len(first) <= 160 else first[:157] + "..."


def failed_cells(failures: Sequence[Mapping[str, Any] | FailedCell] | None) -> list[FailedCell]:
    return [f if isinstance(f, FailedCell) else FailedCell.from_failure(f) for f in failures or []]


def aggregate(results: Sequence[CellResult | Mapping[str, Any]], *, reference: str | None = None,
              reference_setting: int | None = None,
              failures: Sequence[Mapping[str, Any] | FailedCell] | None = None) -> list[TableRow]:
    """One row per (harness, method, setting): seeds pooled, each paired with the reference (`reference`, else
    `stats.reference_for`'s default) at `reference_setting` (None: the row's own setting). Seeds that failed are
    counted in `failed_seeds`; a (harness, method, setting) whose every seed failed is a row marked failed."""
    groups: dict[tuple[str, str, int], list[CellResult]] = defaultdict(list)
    for r in _typed(results):
        groups[(r.harness, r.method, r.setting_index)].append(r)
    failed: dict[tuple[str, str, int], list[FailedCell]] = defaultdict(list)
    for f in failed_cells(failures):
        failed[(f.harness, f.method, f.setting_index)].append(f)
    reference = reference_for(sorted({method for _, method, _ in groups}), reference)
    rows = []
    for (harness, method, setting_index), cells in sorted(groups.items(), key=lambda kv: kv[0]):
        first = cells[0]
        n_tasks, n_seeds = cell_n(cells)
        ref_setting = setting_index if reference_setting is None else reference_setting
        ref_cells: list[CellResult] = []
        if reference is not None:
            ref_cells = groups.get((harness, reference, ref_setting)) or (
                groups.get((harness, reference, 0)) or [] if reference_setting is None else [])
        is_reference = method == reference and setting_index == ref_setting
        diff = (paired_difference(cells, ref_cells, reference)
                if reference is not None and not is_reference and ref_cells else None)
        test, test_se = mean_se([c.test_mean for c in cells])
        val, val_se = mean_se([c.val_best for c in cells])
        no_candidate = [c.notes for c in cells if c.notes.no_candidate]
        shares = [c.notes.supported_share for c in cells if c.notes.supported_share is not None]
        seeds_failed = failed.pop((harness, method, setting_index), [])
        row = TableRow(
            harness=harness, harness_label=first.harness_label, data=first.data, method=method, label=first.label,
            setting=first.setting_label, setting_index=setting_index, seeds=len(cells), test_mean=test,
            test_se=test_se, val_best_mean=val, val_best_se=val_se,
            rollouts_mean=statistics.fmean(c.rollouts for c in cells),
            rollouts_used_mean=statistics.fmean(c.rollouts_used for c in cells),
            rollouts_used_max=max(c.rollouts_used for c in cells),
            budget_rollouts=max(c.budget_rollouts for c in cells),
            cost_usd_mean=statistics.fmean(c.cost_usd() for c in cells),
            wall_time_s_mean=statistics.fmean(c.wall_time_s for c in cells),
            commit=first.git.commit, n_tasks=n_tasks, n_seeds=n_seeds,
            reference=diff.reference if diff else None,
            reference_setting=(ref_cells[0].setting_label if diff and ref_cells else None),
            diff_mean=diff.mean if diff else None,
            diff_low=diff.low if diff else None, diff_high=diff.high if diff else None,
            diff_excludes_zero=diff.excludes_zero if diff else None, diff_n=diff.n if diff else None,
            diff_tasks=diff.tasks if diff else None, diff_seeds=diff.seeds if diff else None,
            # "no candidate" (engine methods) or "reflection failed" (GEPA), as the cells' own notes say
            no_candidate_note=(f"{no_candidate[0].no_candidate_note.split(':')[0] or 'no candidate'}: "
                               f"{sum(n.no_candidate or 0 for n in no_candidate)} of "
                               f"{sum(n.iterations or 0 for n in no_candidate)} iterations in {len(no_candidate)} "
                               f"of {len(cells)} seed(s)") if no_candidate else "",
            produced_nothing_seeds=sum(1 for c in cells if c.notes.produced_nothing),
            supported_share_mean=statistics.fmean(shares) if shares else None,
            assembled_fallbacks=sum(1 for c in cells if c.notes.assembled_fallback),
            failed_seeds=len(seeds_failed), failure=seeds_failed[0].reason if seeds_failed else "",
            **{f"{stage}_cost_usd": statistics.fmean(c.cost_usd(stage) for c in cells) for stage in STAGES},
            **{f"{stage}_tokens": statistics.fmean(c.usage.stage(stage).tokens for c in cells) for stage in STAGES},
        )
        rows.append(row)
    # a harness's label as its finished cells give it (with "[demo data]" when it is), else the config's
    labels = {r.harness: r.harness_label for cells in groups.values() for r in cells}
    for (harness, method, setting_index), seeds_failed in sorted(failed.items(), key=lambda kv: kv[0]):
        f = seeds_failed[0]
        rows.append(TableRow(
            harness=harness, harness_label=labels.get(harness, f.harness_label), data="", method=method, label=f.label,
            setting=f.setting, setting_index=setting_index, seeds=0, test_mean=None, test_se=None,
            val_best_mean=None, val_best_se=None, rollouts_mean=0.0, rollouts_used_mean=0.0, cost_usd_mean=0.0,
            wall_time_s_mean=0.0, commit=None, n_tasks=0, n_seeds=0, failed_seeds=len(seeds_failed),
            failure=f.reason))
    return rows


def headline(results: Sequence[CellResult | Mapping[str, Any]]) -> list[Headline]:
    """Per (harness, setting): the table's headline method (full RASO; RASI in an init table) against the
    strongest baseline (the method using no part of RASO with the best mean test score), as a paired difference
    with its bootstrap interval (the same computation as every other difference)."""
    groups: dict[tuple[str, int], dict[str, list[CellResult]]] = defaultdict(lambda: defaultdict(list))
    for r in _typed(results):
        groups[(r.harness, r.setting_index)][r.method].append(r)
    out = []
    for (harness, setting_index), methods in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        target = next((m for m in HEADLINE_METHODS if m in methods), None)
        means = {m: statistics.fmean(c.test_mean for c in cells if c.test_mean is not None)
                 for m, cells in methods.items() if is_baseline(m) and any(c.test_mean is not None for c in cells)}
        if target is None or not means:
            continue
        strongest = max(sorted(means), key=lambda m: means[m])
        diff = paired_difference(methods[target], methods[strongest], strongest)
        if diff is None:
            continue
        first = methods[target][0]
        out.append(Headline(harness=harness, harness_label=first.harness_label, setting=first.setting_label,
                            setting_index=setting_index, method=target, label=first.label, baseline=strongest,
                            baseline_label=methods[strongest][0].label, mean=diff.mean, low=diff.low,
                            high=diff.high, excludes_zero=diff.excludes_zero, tasks=diff.tasks, seeds=diff.seeds))
    return out


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
            line += [score_cell(c) for c in cells]
            if len(harnesses) > 1:
                means = [c.test_mean for c in cells if c and c.test_mean is not None]
                line.append(f"{statistics.fmean(means) * 100:.2f}" if len(means) == len(harnesses) else "–")
            body.append(line)
    return _markdown(header, body)


def score_cell(row: TableRow | None) -> str:
    """A score cell: mean ± s.e. (n = tasks × seeds), the most rollouts any seed's update ran against its budget,
    and failed seeds; a row whose every seed failed says so with the reason."""
    if row is None:
        return "–"
    if row.seeds == 0:
        return f"**failed** ({row.failed_seeds} seed(s)): {row.failure}"
    text = f"{fmt(row.test_mean, row.test_se)} (n={row.n_tasks}×{row.n_seeds})"
    if row.budget_rollouts:
        text += f"; rollouts {row.rollouts_used_max}/{row.budget_rollouts}"
    if row.failed_seeds:
        text += f"; **{row.failed_seeds} seed(s) failed**"
    return text


def difference_table(config: ExperimentConfig, rows: list[TableRow]) -> str:
    """Per method and harness: the paired difference from the reference (points of test score), its 95 %
    bootstrap interval over tasks and seeds (* = excludes 0) and its n; "" when the table has no reference."""
    shown = [r for r in rows if r.diff_mean is not None]
    if not shown:
        return ""
    sweep = len(config.settings) > 1
    reference = (shown[0].reference or "") + (f" ({shown[0].reference_setting})" if sweep and shown[0].reference_setting
                                      and config.reference_setting is not None else "")
    header = ["Method", "Harness", f"Δ vs {reference} (points) [95 % CI]", "n (tasks × seeds)"]
    body = [[r.label + (f" ({r.setting})" if sweep else ""), r.harness_label,
             f"{r.diff_mean * 100:+.2f} [{r.diff_low * 100:+.2f}, {r.diff_high * 100:+.2f}]"
             + ("*" if r.diff_excludes_zero else ""),
             f"{r.diff_tasks} × {r.diff_seeds}"] for r in shown
            if r.diff_mean is not None and r.diff_low is not None and r.diff_high is not None]
    return _markdown(header, body)


def headline_table(config: ExperimentConfig, lines: list[Headline]) -> str:
    """The headline per harness: RASO minus the strongest baseline, with its interval; "" when the table has
    no headline method or no baseline."""
    if not lines:
        return ""
    header = ["Method", "Strongest baseline", "Harness", "Δ (points) [95 % CI]", "n (tasks × seeds)"]
    body = [[h.label, h.baseline_label, h.harness_label + (f" ({h.setting})" if len(config.settings) > 1 else ""),
             f"{h.mean * 100:+.2f} [{h.low * 100:+.2f}, {h.high * 100:+.2f}]" + ("*" if h.excludes_zero else ""),
             f"{h.tasks} × {h.seeds}"] for h in lines]
    return _markdown(header, body)


def cost_table(config: ExperimentConfig, rows: list[TableRow], results: Sequence[CellResult] | None = None) -> str:
    """Per method and harness: the headline cost of producing the skill (init + update: USD and tokens), then each
    stage, the test evaluation in its own column (means over seeds)."""
    header = ["Method", "Harness", "Rollouts", "USD (init + update)", "Tokens (init + update)", "USD init",
              "USD update", "Tokens init", "Tokens update", "USD test", "Tokens test", "Rollouts used / budget"]
    failed = [[r.label + (f" ({r.setting})" if len(config.settings) > 1 else ""), r.harness_label,
               f"**failed** ({r.failed_seeds} seed(s)): {r.failure}"] + ["–"] * (len(header) - 3)
              for r in rows if r.seeds == 0]
    body = [[r.label + (f" ({r.setting})" if len(config.settings) > 1 else ""), r.harness_label,
             f"{r.rollouts_mean:.0f}", f"{r.init_cost_usd + r.update_cost_usd:.4f}",
             f"{r.init_tokens + r.update_tokens:.0f}", f"{r.init_cost_usd:.4f}",
             f"{r.update_cost_usd:.4f}", f"{r.init_tokens:.0f}", f"{r.update_tokens:.0f}",
             f"{r.test_cost_usd:.4f}", f"{r.test_tokens:.0f}",
             f"{r.rollouts_used_max}/{r.budget_rollouts}" if r.budget_rollouts else "–"] for r in rows if r.seeds]
    return _markdown(header, body + failed) + textgrad_setting_line(config, results)


TEXTGRAD_SETTINGS = {
    "full": "full trajectories (every step unclipped, the paper's setting)",
    "equal": "equal information (each trajectory clipped to limits.trajectory_chars_each, as every method's "
             "reflection; the paper's setting is `textgrad_trajectories: full`)",
}


def textgrad_setting_line(config: ExperimentConfig, results: Sequence[CellResult] | None = None) -> str:
    """Which trajectories TextGrad's loss read (its cost depends on it), for a table with a TextGrad row: what its
    finished cells ran (each result's config; one made before the option existed ran `equal`), else the config's."""
    if not any(m.update == "textgrad" for m in config.parsed_methods()):
        return ""
    ran = sorted({str(r.config.get("textgrad_trajectories", "equal")) for r in results or ()
                  if Method.parse(r.method).update == "textgrad"}) or [config.textgrad_trajectories]
    if len(ran) == 1:
        return f"\n\nTextGrad: {TEXTGRAD_SETTINGS.get(ran[0], ran[0])}."
    return "\n\nTextGrad: cells ran under different settings: " + "; ".join(
        f"`{name}`, {TEXTGRAD_SETTINGS.get(name, name)}" for name in ran) + "."


def _plot_sweep(config: ExperimentConfig, rows: list[TableRow], axis: str, path: Path, *, log: bool) -> Path:
    from matplotlib.figure import Figure  # the object API: no pyplot state shared between threads

    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    for (_harness, _method), group in _groups(rows, ("harness", "method")).items():
        points = sorted(((float(config.settings[r.setting_index].get(axis, 0)), r) for r in group),
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
        costed = [p for p in r.curve if p.cost_usd is not None]
        if costed:
            axes[1].step([p.cost_usd for p in costed], [p.val * 100 for p in costed], where="post",
                         color=color, alpha=0.7)
        if r.test_mean is not None:  # the final test score as a star (a cell scored on test)
            axes[0].plot([r.rollouts_used], [r.test_mean * 100], marker="*", color=color, markersize=10)
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


def table_result(config: ExperimentConfig, results: Sequence[CellResult | Mapping[str, Any]],
                 failures: Sequence[Mapping[str, Any] | FailedCell] | None = None) -> TableResult:
    """The table as data: its rows (failed cells as rows marked failed), the headline, the data each harness ran
    on, which harnesses ran on demo data."""
    typed = _typed(results)
    data = {r.harness: r.data for r in typed}
    corpora: dict[str, set[str]] = {}
    for r in typed:
        corpora.setdefault(r.setting_label, set()).add(r.corpus_label)
    rows = aggregate(typed, reference=config.reference, reference_setting=config.reference_setting,
                     failures=failures)
    return TableResult(name=config.name, table=config.table, model=config.model, rows=rows, data=data,
                       demo_harnesses=sorted({r.harness for r in typed if r.demo_data}),
                       corpora={k: "; ".join(sorted(v)) for k, v in corpora.items()},
                       demo_corpus=any(r.demo_corpus for r in typed),
                       commits=sorted({str(r.git.commit) for r in typed}), headline=headline(typed))


def notes_table(config: ExperimentConfig, rows: list[TableRow]) -> str:
    """Per row with something to say: whether its optimizer produced nothing at all (the reported skill is s0),
    how often its update produced no candidate, its init's share of
    requirements with a supported lesson, how many of its s0 came from the assembled fallback; "" if none."""
    shown = [r for r in rows if r.no_candidate_note or r.supported_share_mean is not None or r.assembled_fallbacks
             or r.produced_nothing_seeds]
    if not shown:
        return ""
    header = ["Method", "Harness", "Update proposals", "Supported lessons (share of requirements)",
              "s0 from the assembled fallback"]
    body = [[r.label + (f" ({r.setting})" if len(config.settings) > 1 else ""), r.harness_label,
             "; ".join(filter(None, [
                 f"**optimizer produced nothing** in {r.produced_nothing_seeds} of {r.seeds} seed(s): the reported "
                 "skill is s0" if r.produced_nothing_seeds else "", r.no_candidate_note])) or "–",
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


def corpus_lines(table: TableResult) -> str:
    """Which corpus the table's cells retrieved from (per setting when they differ); the starter corpus is called
    out first."""
    lines = []
    if table.demo_corpus:
        lines.append("**Starter corpus, not the paper's corpus:** cells retrieved from the few hundred skills shipped "
                     "with raso for demos (--set retrieval.index=DIR names a built corpus index).")
    labels = set(table.corpora.values())
    if len(labels) == 1:
        lines.append(f"- every cell: {labels.pop()}")
    else:
        lines += [f"- {setting}: {label}" for setting, label in sorted(table.corpora.items())]
    return "\n".join(lines)


def write_tables(config: ExperimentConfig, results: Sequence[CellResult | Mapping[str, Any]],
                 failures: Sequence[Mapping[str, Any] | FailedCell] | None = None) -> dict[str, Path]:
    """Write <table>.csv, <table>.md, <table>.json (TableResult), cells.csv, per_task.csv, cost.md and the
    table's PNGs; return their paths. `failures` (failures.json's entries) become rows marked failed."""
    root = config.results_root
    root.mkdir(parents=True, exist_ok=True)
    typed = _typed(results)
    failed = failed_cells(failures)
    table = table_result(config, typed, failed)
    rows = table.rows
    out: dict[str, Path] = {}
    out["csv"] = atomic_write_text(root / f"{config.table}.csv", _csv([r.to_dict() for r in rows]))
    out["json"] = atomic_write_text(root / f"{config.table}.json", json.dumps(table.to_dict(), indent=1))
    cells = [{"cell": r.cell, "harness": r.harness, "data": r.data, "corpus": r.corpus_label, "method": r.method,
              "seed": r.seed,
              "setting_label": r.setting_label, "test_mean": r.test_mean, "val_best": r.val_best,
              "rollouts": r.rollouts, "rollouts_used": r.rollouts_used, "wall_time_s": r.wall_time_s,
              "cost_usd": r.cost_usd(), "commit": r.git.commit} for r in typed]
    out["cells"] = atomic_write_text(root / "cells.csv", _csv(cells))
    per_task = [{"cell": r.cell, "harness": r.harness, "method": r.method, "seed": r.seed,
                 "setting": r.setting_label, "task_id": t.task_id, "reward": t.reward}
                for r in typed for t in r.test_per_task]
    out["per_task"] = atomic_write_text(root / "per_task.csv", _csv(per_task))
    seeds = sorted({r.seed for r in typed})
    footer = (f"\n\nTest score (%), mean ± standard error over seeds {seeds}, n = test tasks × seeds; \"rollouts "
              "U/B\": the most rollouts any seed's update ran (U, s0's val evaluation included) against its budget "
              f"(B); config "
              f"`{config.name}` ({config.table}); model `{config.model}`; commit(s) "
              f"{', '.join(c[:10] for c in table.commits)}.\n\nData:\n{data_lines(table)}\n"
              f"\nCorpus:\n{corpus_lines(table)}\n")
    main = cost_table(config, rows, typed) if config.table == "cost" else score_table(config, rows)
    headlines = headline_table(config, table.headline)
    if headlines:
        footer += (f"\nHeadline: {table.headline[0].label} minus the strongest baseline (the method "
                   "using no part of RASO with the best mean test score), paired over test tasks and seeds, 95 % "
                   f"bootstrap interval; * marks an interval that excludes 0.\n\n{headlines}\n")
    differences = difference_table(config, rows)
    if differences:
        footer += (f"\nPaired difference from the reference, 95 % bootstrap interval over test tasks and seeds "
                   f"(fixed seed); * marks an interval that excludes 0.\n\n{differences}\n")
    notes = notes_table(config, rows)
    if notes:
        footer += f"\nNotes per row:\n\n{notes}\n"
    if failed:
        footer += "\nFailed cells (not in the scores; rerun the experiment to retry them):\n\n" + "\n".join(
            f"- {f.label} · {f.harness_label} · {f.setting} · seed {f.seed}: {f.reason}" for f in failed) + "\n"
    out["markdown"] = atomic_write_text(root / f"{config.table}.md", f"# {config.name}\n\n{main}{footer}")
    out["cost"] = atomic_write_text(root / "cost.md", f"# {config.name}: cost\n\n{cost_table(config, rows, typed)}\n")
    scored = [r for r in rows if r.seeds]  # a row whose every seed failed has no point to plot
    if scored and config.table == "k_sweep":
        out["plot"] = _plot_sweep(config, scored, "retrieval.k", root / "k_sweep.png", log=False)
    elif scored and config.table == "corpus_fraction":
        out["plot"] = _plot_sweep(config, scored, "corpus_fraction", root / "corpus_fraction.png", log=True)
    curves = _plot_curves(config, typed, root / "curves.png")
    if curves is not None:
        out["curves"] = curves
    return out


__all__ = ["FailedCell", "aggregate", "corpus_lines", "cost_table", "data_lines", "difference_table", "failed_cells", "fmt",
           "headline", "headline_table", "mean_se", "notes_table", "score_cell", "score_table", "table_result",
           "write_tables"]
