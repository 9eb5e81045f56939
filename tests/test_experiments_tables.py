"""Tables from cell results: mean ± standard error over seeds, the paper's layout, sweeps and the cost table."""

from __future__ import annotations

import math
from pathlib import Path

from experiments.config import load_experiment
from experiments.tables import aggregate, cost_table, mean_se, score_table, write_tables

CONFIGS = Path(__file__).resolve().parent.parent / "experiments" / "configs"


def _result(method: str, label: str, seed: int, test: float, *, harness: str = "spreadsheet", setting: int = 0,
            cost: float = 0.0) -> dict:
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "cost_usd": cost, "calls": 1}
    return {"cell": f"{harness}/{method}/s{setting}_seed{seed}", "harness": harness, "harness_label": harness,
            "method": method, "label": label, "seed": seed, "setting_index": setting,
            "setting_label": f"k={[1, 3][setting]}", "test_mean": test, "val_best": None, "rollouts": 6,
            "rollouts_used": 9, "wall_time_s": 1.0, "usage": {"init": usage, "update": usage, "test": usage},
            "test_per_task": [{"task_id": "t1", "reward": test}], "curve": [], "git": {"commit": "abc123"}}


def test_mean_and_standard_error() -> None:
    mean, se = mean_se([0.0, 1.0, 1.0])
    assert math.isclose(mean, 2 / 3) and math.isclose(se, math.sqrt(1 / 3) / math.sqrt(3))
    assert mean_se([0.5]) == (0.5, None) and mean_se([]) == (None, None)


def test_score_table_has_methods_down_harnesses_across(tmp_path: Path) -> None:
    config = load_experiment(CONFIGS / "init_table.yaml", {"harnesses": ["spreadsheet", "officeqa"],
                                                           "results_dir": str(tmp_path)})
    results = [_result("rasi", "RASI", s, t) for s, t in enumerate([0.0, 1.0, 1.0])]
    results += [_result("none", "No skill", s, 0.25) for s in range(3)]
    results += [_result(m, lab, s, 0.5, harness="officeqa") for m, lab in (("rasi", "RASI"), ("none", "No skill"))
                for s in range(3)]
    table = score_table(config, aggregate(results))
    lines = table.splitlines()
    assert lines[0] == "| Method | spreadsheet | officeqa | Avg. |"
    # the config's method order; every cell states its n (test tasks x seeds)
    assert lines[2] == "| No skill | 25.00 ± 0.00 (n=1×3) | 50.00 ± 0.00 (n=1×3) | 37.50 |"
    assert lines[3] == "| RASI | 66.67 ± 33.33 (n=1×3) | 50.00 ± 0.00 (n=1×3) | 58.33 |"
    paths = write_tables(config, results)
    assert paths["csv"].read_text().splitlines()[0].startswith("harness,harness_label,data,method,label,setting")
    assert "abc123" in paths["markdown"].read_text()  # the commit is on the table


def test_sweep_table_and_cost_table(tmp_path: Path) -> None:
    config = load_experiment(CONFIGS / "k_sweep.yaml", {"harnesses": ["spreadsheet"], "results_dir": str(tmp_path),
                                                        "settings": [{"k": 1}, {"k": 3}]})
    results = [_result("raso", "RASO (RASI + RASU)", s, t, setting=i, cost=0.5)
               for i, t in enumerate([0.2, 0.6]) for s in range(3)]
    rows = aggregate(results)
    table = score_table(config, rows).splitlines()
    assert table[0] == "| Setting | Method | spreadsheet |"
    assert table[2:] == ["| k=1 | RASO (RASI + RASU) | 20.00 ± 0.00 (n=1×3) |",
                         "| k=3 | RASO (RASI + RASU) | 60.00 ± 0.00 (n=1×3) |"]
    cost = cost_table(config, rows).splitlines()
    # the headline is init + update (USD, tokens); the test evaluation has its own column
    assert cost[0].split(" | ")[3:5] == ["USD (init + update)", "Tokens (init + update)"]
    assert cost[2].split(" | ")[2:11] == ["6", "1.0000", "30", "0.5000", "0.5000", "15", "15", "0.5000", "15 |"]
    assert write_tables(config, results)["plot"].read_bytes().startswith(b"\x89PNG")
