"""Ranking metrics for skill retrieval, over ranked skill ids and a set of gold ids per query.

Binary relevance throughout. With G gold ids and a ranking r:

* Hit@1          — 1 if r[0] is gold.
* Recall@K       — |gold ∩ r[:K]| / G.
* Completeness@K — 1 if every gold id is in r[:K] (SkillDreamer's metric for multi-skill queries).
* nDCG@K         — sum over gold at rank i (1-based) of 1/log2(i+1), divided by the ideal
  sum over i = 1..min(G, K).
* MRR            — 1 / rank of the first gold id (0 when none is ranked; no cut-off).

A query with no gold ids is a dataset error, not a zero: it raises ValueError.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

DEFAULT_KS: tuple[int, ...] = (5, 10)


def _gold_set(gold: Iterable[str]) -> set[str]:
    gold_set = set(gold)
    if not gold_set:
        raise ValueError("a query needs at least one gold id")
    return gold_set


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"K must be >= 1, got {k}")


def hit_at_1(ranked: Sequence[str], gold: Iterable[str]) -> float:
    gold_set = _gold_set(gold)
    return 1.0 if ranked and ranked[0] in gold_set else 0.0


def recall_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    _check_k(k)
    gold_set = _gold_set(gold)
    return len(gold_set.intersection(ranked[:k])) / len(gold_set)


def completeness_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    _check_k(k)
    gold_set = _gold_set(gold)
    return 1.0 if gold_set.issubset(ranked[:k]) else 0.0


def ndcg_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    _check_k(k)
    gold_set = _gold_set(gold)
    seen: set[str] = set()
    dcg = 0.0
    for i, doc in enumerate(ranked[:k]):
        if doc in gold_set and doc not in seen:  # a duplicated id earns credit once
            dcg += 1.0 / math.log2(i + 2)
            seen.add(doc)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold_set), k)))
    return dcg / ideal


def reciprocal_rank(ranked: Sequence[str], gold: Iterable[str]) -> float:
    gold_set = _gold_set(gold)
    for i, doc in enumerate(ranked):
        if doc in gold_set:
            return 1.0 / (i + 1)
    return 0.0


def metric_names(ks: Sequence[int] = DEFAULT_KS) -> list[str]:
    names = ["Hit@1"]
    names += [f"R@{k}" for k in ks]
    names += [f"nDCG@{k}" for k in ks if k > 1]
    names += [f"C@{k}" for k in ks if k > 1]
    names.append("MRR")
    return names


def query_metrics(ranked: Sequence[str], gold: Iterable[str], ks: Sequence[int] = DEFAULT_KS) -> dict[str, float]:
    """Every metric for one query, keyed as in `metric_names(ks)`."""
    gold_set = _gold_set(gold)
    out = {"Hit@1": hit_at_1(ranked, gold_set)}
    for k in ks:
        out[f"R@{k}"] = recall_at_k(ranked, gold_set, k)
    for k in ks:
        if k > 1:
            out[f"nDCG@{k}"] = ndcg_at_k(ranked, gold_set, k)
    for k in ks:
        if k > 1:
            out[f"C@{k}"] = completeness_at_k(ranked, gold_set, k)
    out["MRR"] = reciprocal_rank(ranked, gold_set)
    return out


def mean_metrics(
    rankings: Sequence[Sequence[str]], golds: Sequence[Iterable[str]], ks: Sequence[int] = DEFAULT_KS
) -> dict[str, float]:
    """Metrics averaged over queries (macro average). `rankings[i]` pairs with `golds[i]`."""
    if len(rankings) != len(golds):
        raise ValueError(f"{len(rankings)} rankings but {len(golds)} gold sets")
    if not rankings:
        raise ValueError("no queries to score")
    totals = {name: 0.0 for name in metric_names(ks)}
    for ranked, gold in zip(rankings, golds):
        for name, value in query_metrics(ranked, gold, ks).items():
            totals[name] += value
    return {name: value / len(rankings) for name, value in totals.items()}


def format_table(rows: dict[str, dict[str, float]], columns: Sequence[str] | None = None) -> str:
    """A markdown table: one row per method. Metrics in [0, 1] are shown as percentages except MRR;
    columns named like 'ms/query' are shown as they are."""
    if not rows:
        return "(no results)"
    if columns is None:
        columns = list(next(iter(rows.values())).keys())
    head = "| method | " + " | ".join(columns) + " |"
    rule = "|---|" + "|".join("---:" for _ in columns) + "|"
    lines = [head, rule]
    for method, values in rows.items():
        cells = []
        for col in columns:
            value = values.get(col)
            if value is None:
                cells.append("")
            elif col == "MRR":
                cells.append(f"{value:.3f}")
            elif "@" in col:
                cells.append(f"{100 * value:.2f}")
            else:
                cells.append(f"{value:.2f}" if isinstance(value, float) else str(value))
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
