"""Paired differences against the row's reference with a bootstrap CI over tasks and seeds (issue 24)."""

from __future__ import annotations

import random
from pathlib import Path

from experiments.config import load_experiment
from experiments.stats import paired_difference, reference_for
from experiments.tables import aggregate, write_tables

CONFIGS = Path(__file__).resolve().parent.parent / "experiments" / "configs"


def cell(method: str, seed: int, rewards: list[float], *, label: str | None = None) -> dict:
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "cost_usd": 0.0, "calls": 1}
    return {"cell": f"spreadsheet/{method}/s0_seed{seed}", "harness": "spreadsheet", "harness_label": "spreadsheet",
            "method": method, "label": label or method, "seed": seed, "setting_index": 0, "setting_label": "",
            "test_mean": sum(rewards) / len(rewards), "val_best": None, "rollouts": 0, "rollouts_used": 0,
            "wall_time_s": 1.0, "usage": {"init": usage, "update": usage, "test": usage},
            "test_per_task": [{"task_id": f"t{i}", "reward": r} for i, r in enumerate(rewards)], "curve": [],
            "git": {"commit": "abc123"}}


def noisy(rng: random.Random, p: float, n: int = 20) -> list[float]:
    return [1.0 if rng.random() < p else 0.0 for _ in range(n)]


def test_a_clear_improvement_excludes_zero_and_noise_does_not():
    rng = random.Random(1)
    base = [cell("none", s, noisy(rng, 0.2)) for s in range(3)]
    better = [cell("rasi", s, [1.0 if r or rng.random() < 0.5 else 0.0 for r in (t["reward"] for t in
                                                                              b["test_per_task"])])
              for s, b in enumerate(base)]
    same = [cell("rfsi", s, list(t["reward"] for t in b["test_per_task"])) for s, b in enumerate(base)]
    up = paired_difference(better, base, "none")
    assert up is not None and up.excludes_zero and up.low > 0 and (up.tasks, up.seeds, up.n) == (20, 3, 60)
    flat = paired_difference(same, base, "none")
    assert flat is not None and flat.mean == 0 and not flat.excludes_zero
    again = paired_difference(better, base, "none")
    assert (again.low, again.high) == (up.low, up.high)  # a fixed bootstrap seed: the table is reproducible


def test_only_shared_seeds_and_tasks_are_paired():
    base = [cell("none", 0, [0.0, 0.0, 1.0]), cell("none", 1, [0.0, 0.0, 0.0])]
    method = [cell("rasi", 1, [1.0, 1.0]), cell("rasi", 2, [1.0, 1.0, 1.0])]
    diff = paired_difference(method, base, "none")
    assert (diff.seeds, diff.tasks, diff.mean) == (1, 2, 1.0)
    assert paired_difference(method, [cell("none", 7, [0.0])], "none") is None
    assert reference_for(["rasi", "none", "rfsi"]) == "none" and reference_for(["rasu", "rfsi"]) == "rfsi"
    assert reference_for(["raso"]) is None


def test_the_table_shows_the_difference_its_interval_and_n(tmp_path: Path):
    config = load_experiment(CONFIGS / "init_table.yaml", {"harnesses": ["spreadsheet"], "results_dir": str(tmp_path)})
    results = [cell("none", s, [0.0] * 10, label="No skill") for s in range(3)]
    results += [cell("rasi", s, [1.0] * 8 + [0.0] * 2, label="RASI") for s in range(3)]
    rows = {r.method: r for r in aggregate(results)}
    assert rows["none"].diff_mean is None and rows["rasi"].reference == "none"
    assert abs(rows["rasi"].diff_mean - 0.8) < 1e-9 and rows["rasi"].diff_excludes_zero is True
    text = write_tables(config, results)["markdown"].read_text()
    assert "| RASI | spreadsheet | +80.00 [" in text and "]* | 10 × 3 |" in text
    assert "(n=10×3)" in text
