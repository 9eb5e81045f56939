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


# ---------------------------------------------------------------- issue 36: every claim paired, n exact, headline

def _swept(method: str, seed: int, setting: int, rewards: list[float], label: str) -> dict:
    return {**cell(method, seed, rewards, label=label), "setting_index": setting, "setting_label": f"k={setting}",
            "cell": f"spreadsheet/{method}/s{setting}_seed{seed}"}


def test_the_n_column_is_tasks_times_seeds_of_the_pairing():
    # 6 tasks; the method has 3 seeds, its reference 2: 12 pairs are 6 tasks x 2 seeds (main showed "4 x 3")
    config = load_experiment(CONFIGS / "init_table.yaml", {"harnesses": ["spreadsheet"], "results_dir": "/tmp/x"})
    results = [cell("none", s, [0.0] * 6, label="No skill") for s in range(2)]
    results += [cell("rasi", s, [1.0] * 6, label="RASI") for s in range(3)]
    from experiments.tables import difference_table

    row = next(r for r in aggregate(results) if r.method == "rasi")
    assert (row.diff_tasks, row.diff_seeds) == (6, 2)
    assert "| RASI | spreadsheet | +100.00 [+100.00, +100.00]* | 6 × 2 |" in difference_table(config, aggregate(results))


def test_ablation_rows_are_paired_with_the_full_method(tmp_path: Path):
    config = load_experiment(CONFIGS / "stage_ablation.yaml", {"harnesses": ["spreadsheet"],
                                                               "results_dir": str(tmp_path)})
    assert config.reference == "rasi+rasu"
    rng = random.Random(3)
    results = [cell("rasi+rasu", s, noisy(rng, 0.9), label="RASI + RASU") for s in range(3)]
    results += [cell("rfsi+rfsu", s, noisy(rng, 0.1), label="RFSI + RFSU") for s in range(3)]
    text = write_tables(config, results)["markdown"].read_text()
    assert "Δ vs rasi+rasu (points) [95 % CI]" in text
    expected = paired_difference(results[3:], results[:3], "rasi+rasu")
    assert f"| RFSI + RFSU | spreadsheet | {expected.text()} | 20 × 3 |" in text


def test_sweep_rows_are_paired_with_the_full_method_at_the_papers_setting(tmp_path: Path):
    config = load_experiment(CONFIGS / "k_sweep.yaml", {"harnesses": ["spreadsheet"], "results_dir": str(tmp_path)})
    assert (config.reference, config.reference_setting) == ("raso", 2)
    rng = random.Random(4)
    results = [_swept("raso", s, k, noisy(rng, 0.2 + 0.2 * k), "RASO") for k in range(4) for s in range(2)]
    rows = {r.setting_index: r for r in aggregate(results, reference="raso", reference_setting=2)}
    assert rows[2].diff_mean is None  # the reference itself
    for k in (0, 1, 3):
        expected = paired_difference([r for r in results if r["setting_index"] == k],
                                     [r for r in results if r["setting_index"] == 2], "raso")
        assert (rows[k].diff_mean, rows[k].diff_low, rows[k].diff_high) == (expected.mean, expected.low, expected.high)
    text = write_tables(config, results)["markdown"].read_text()
    assert "Δ vs raso (k=2)" in text and text.count("| RASO (k=") == 3  # one difference per other K


def test_the_headline_raso_vs_the_strongest_baseline_is_in_the_markdown(tmp_path: Path):
    config = load_experiment(CONFIGS / "update_table.yaml", {"harnesses": ["spreadsheet"],
                                                             "results_dir": str(tmp_path)})
    rng = random.Random(5)
    results = [cell("rfsi", s, noisy(rng, 0.2), label="RFSI") for s in range(3)]
    results += [cell("gepa", s, noisy(rng, 0.5), label="GEPA") for s in range(3)]
    results += [cell("textgrad", s, noisy(rng, 0.3), label="TextGrad") for s in range(3)]
    results += [cell("rasu", s, noisy(rng, 0.95), label="RASU") for s in range(3)]  # a part of RASO: no baseline
    results += [cell("raso", s, noisy(rng, 0.8), label="RASO (RASI + RASU)") for s in range(3)]
    text = write_tables(config, results)["markdown"].read_text()
    expected = paired_difference(results[-3:], results[3:6], "gepa")
    assert "Headline: RASO (RASI + RASU) minus the strongest baseline" in text
    assert f"| RASO (RASI + RASU) | GEPA | spreadsheet | {expected.text()} | 20 × 3 |" in text
