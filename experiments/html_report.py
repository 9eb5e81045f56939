"""An experiment's report.html: the score table with 95% confidence intervals, the headline (RASO vs the
strongest baseline), per-task paired differences between methods, failed cells, and every cell with a link to its
run's report.html. One self-contained page (the run report's template engine and styles: autoescape on, no
network), written next to the experiment's tables. Every paired interval is the markdown table's computation
(`experiments.stats.paired_difference`: a bootstrap over test tasks and seeds), and the page carries the same
demo-data banner (`tables.data_lines`).
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import quote

from raso.engine.html_report import environment
from raso.fileio import atomic_write_text

from .results import CellResult, read_results
from .stats import paired_difference
from .tables import _cost, aggregate, failed_cells, fmt, headline

TEMPLATES = Path(__file__).resolve().parent / "templates"
REPORT_NAME = "report.html"


class NotAnExperimentError(ValueError):
    """The folder holds no experiment results (no config.json and no finished cell)."""


def t_interval(values: list[float], level: float = 0.95) -> tuple[float, float] | None:
    """The Student-t confidence interval of the mean (None with fewer than 2 values)."""
    if len(values) < 2:
        return None
    from scipy.stats import t

    mean = statistics.fmean(values)
    half = t.ppf(0.5 + level / 2, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return mean - half, mean + half


def _ordered(values: list[str], order: list[str]) -> list[str]:
    return sorted(set(values), key=lambda v: (order.index(v) if v in order else len(order), v))


def _score_rows(results: list[CellResult], method_order: list[str], failures: list[dict[str, Any]]) -> dict[str, Any]:
    """Methods down, (harness, setting) across: mean ± s.e. and the 95% CI over seeds, in percent; a method whose
    every seed failed there is marked failed with the reason."""
    rows = aggregate(results, failures=failures)
    named: dict[tuple[str, int], tuple[str, str]] = {}
    for r in sorted(rows, key=lambda r: r.seeds == 0):  # a finished row names its column before a failed one
        named.setdefault((r.harness, r.setting_index), (r.harness_label, r.setting))
    columns = sorted(((h, si, *named[(h, si)]) for h, si in named), key=lambda c: (c[1], c[0]))
    methods = _ordered([r.method for r in rows], method_order)
    by_key = {(r.harness, r.setting_index, r.method): r for r in rows}
    by_cell: dict[tuple[str, int, str], list[float]] = defaultdict(list)
    for result in results:
        if result.test_mean is not None:
            by_cell[(result.harness, result.setting_index, result.method)].append(result.test_mean * 100)
    body = []
    for method in methods:
        cells: list[dict[str, Any] | None] = []
        label = method
        for harness, setting_index, _, _ in columns:
            row = by_key.get((harness, setting_index, method))
            if row is None:
                cells.append(None)
                continue
            label = row.label
            if row.seeds == 0:
                cells.append({"failed": f"failed ({row.failed_seeds} seed(s)): {row.failure}"})
                continue
            ci = t_interval(by_cell[(harness, setting_index, method)])
            cells.append({"text": fmt(row.test_mean, row.test_se), "seeds": row.seeds, "failed": None,
                          "failed_seeds": row.failed_seeds,
                          "ci": None if ci is None else f"[{ci[0]:.2f}, {ci[1]:.2f}]",
                          "cost": row.cost_usd_mean, "rollouts": row.rollouts_used_max,
                          "budget": row.budget_rollouts})
        body.append({"method": method, "label": label, "cells": cells})
    return {"columns": [{"harness": h, "label": lab, "setting": s} for h, _, lab, s in columns], "rows": body,
            "sweep": len({c[1] for c in columns}) > 1}


def _paired(results: list[CellResult], method_order: list[str]) -> list[dict[str, Any]]:
    """For each (harness, setting) and each pair of methods: B minus A in test reward, its 95 % interval from
    the markdown's computation (`stats.paired_difference`: paired bootstrap over tasks and seeds), and the per-task
    differences (each method's reward on a task is its mean over seeds), only on tasks both were scored on."""
    cells_of: dict[tuple[str, int], dict[str, list[CellResult]]] = defaultdict(lambda: defaultdict(list))
    per: dict[tuple[str, int], dict[str, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(dict))
    labels: dict[str, str] = {}
    names: dict[tuple[str, int], str] = {}
    for r in results:
        key = (r.harness, r.setting_index)
        names[key] = f"{r.harness_label}" + (f" · {r.setting_label}"
                                                                   if r.setting_label else "")
        labels[r.method] = r.label
        cells_of[key][r.method].append(r)
        for t in r.test_per_task:
            per[key][r.method].setdefault(str(t.task_id), []).append(float(t.reward))
    groups = []
    for key in sorted(per, key=lambda k: (k[1], k[0])):
        methods = _ordered(list(per[key]), method_order)
        pairs = []
        for a, b in itertools.combinations(methods, 2):
            ra = {task: statistics.fmean(v) for task, v in per[key][a].items()}
            rb = {task: statistics.fmean(v) for task, v in per[key][b].items()}
            tasks = [task for task in ra if task in rb]
            diffs = [(rb[task] - ra[task]) * 100 for task in tasks]
            paired = paired_difference(cells_of[key][b], cells_of[key][a], a)
            pairs.append({
                "a": labels[a], "b": labels[b], "tasks": paired.tasks if paired else len(tasks),
                "seeds": paired.seeds if paired else 0,
                "mean": paired.mean * 100 if paired else None,
                "ci": (paired.low * 100, paired.high * 100) if paired else None,
                "excludes_zero": bool(paired and paired.excludes_zero),
                "wins": sum(d > 0 for d in diffs), "ties": sum(d == 0 for d in diffs),
                "losses": sum(d < 0 for d in diffs),
                "rows": [{"task_id": task, "a": ra[task] * 100, "b": rb[task] * 100, "diff": d}
                         for task, d in zip(tasks, diffs)],
            })
        groups.append({"name": names[key], "pairs": pairs})
    return groups


def _cells(root: Path, results: list[CellResult]) -> list[dict[str, Any]]:
    out = []
    for r in sorted(results, key=lambda r: str(r.cell)):
        report = root / "cells" / str(r.cell) / "run" / REPORT_NAME
        href = None
        if report.is_file():  # a RASO update cell; the path is made here from the folder names, then quoted
            href = "/".join(quote(part, safe="") for part in report.relative_to(root).parts)
        out.append({"cell": r.cell, "label": r.label, "harness": r.harness_label,
                    "seed": r.seed, "setting": r.setting_label, "test": r.test_mean,
                    "val_best": r.val_best, "rollouts": r.rollouts_used, "cost": _cost(r),
                    "href": href})
    return out


def build_experiment_html(results_root: str | Path) -> str:
    """The HTML page of an experiment's results folder (`<results_dir>/<name>`, holding config.json and cells/)."""
    root = Path(results_root)
    meta_path = root / "config.json"
    results = read_results(root)
    if not meta_path.is_file() and not results:
        raise NotAnExperimentError(f"{root} holds no experiment results (no config.json and no cells/*/result.json)")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
    except ValueError as exc:
        raise NotAnExperimentError(f"{meta_path} is not valid JSON ({exc})") from exc
    config = meta.get("config") or (results[0].config if results else {}) or {}
    method_order = [str(m).strip().lower() for m in config.get("methods") or []]
    commits = sorted({str(r.git.commit or "") for r in results} - {""})
    failures: list[str] = []
    failed: list[dict[str, Any]] = []
    if (root / "failures.json").is_file():
        try:
            failed = list(json.loads((root / "failures.json").read_text(encoding="utf-8")))
            failures = [f"{f.label} · {f.harness_label} · {f.setting} · seed {f.seed}: {f.reason}"
                        for f in failed_cells(failed)]
        except (ValueError, AttributeError, TypeError, KeyError):
            failed, failures = [], ["failures.json is unreadable"]
    demo = sorted({r.harness_label for r in results if r.demo_data})
    data = sorted({(r.harness_label, r.data) for r in results})
    return environment(TEMPLATES).get_template("experiment_report.html.j2").render(
        title=f"RASO experiment: {config.get('name', root.name)}", name=config.get("name", root.name),
        table=config.get("table", "?"), model=config.get("model", "?"), root=str(root),
        seeds=sorted({r.seed for r in results}), commits=commits, n_results=len(results),
        scores=_score_rows(results, method_order, failed), paired=_paired(results, method_order),
        headline=[h.to_dict() for h in headline(results)], demo=demo, data=data,
        cells=_cells(root, results), failures=failures,
    )


def write_experiment_html(results_root: str | Path) -> Path:
    root = Path(results_root)
    return atomic_write_text(root / REPORT_NAME, build_experiment_html(root))


__all__ = ["NotAnExperimentError", "build_experiment_html", "t_interval", "write_experiment_html"]
