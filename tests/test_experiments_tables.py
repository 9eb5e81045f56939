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
                                                        "settings": [{"retrieval.k": 1}, {"retrieval.k": 3}],
                                                        "reference_setting": 0})
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
    # the last column: rollouts used / budget ("–" without an update budget)
    assert cost[2].split(" | ")[2:12] == ["6", "1.0000", "30", "0.5000", "0.5000", "15", "15", "0.5000", "15", "– |"]
    assert write_tables(config, results)["plot"].read_bytes().startswith(b"\x89PNG")


def test_cells_show_rollouts_used_beside_the_budget_and_failed_cells_are_rows(tmp_path: Path) -> None:
    config = load_experiment(CONFIGS / "update_table.yaml", {"harnesses": ["spreadsheet"],
                                                             "results_dir": str(tmp_path), "seeds": [0, 1]})
    results = [{**_result("gepa", "GEPA", s, 0.5), "rollouts_used": used, "budget_rollouts": 16}
               for s, used in ((0, 14), (1, 16))]
    results += [{**_result("rasu", "RASU", 0, 0.75), "rollouts_used": 10, "budget_rollouts": 16}]
    cell = {"harness": {"name": "spreadsheet"}, "seed": 1, "setting": {}, "setting_index": 0}
    failures = [{"cell": {**cell, "method": {"name": "raso", "init": "rasi", "update": "rasu"}},
                 "error": "OptimizerUnavailableError: the optimizer model could not be used | 503"},
                {"cell": {**cell, "method": {"name": "rasu", "init": "rfsi", "update": "rasu"}},
                 "error": "InfrastructureError: 3 of 3 rollouts got no agent result"}]
    text = write_tables(config, results, failures)["markdown"].read_text()
    assert "| GEPA | 50.00 ± 0.00 (n=1×2); rollouts 16/16 |" in text
    assert "| RASU | 75.00 (n=1×1); rollouts 10/16; **1 seed(s) failed** |" in text
    # a method whose every seed failed is a row marked failed, with its reason (no `|` to split the row)
    assert ("| RASO (RASI + RASU) | **failed** (1 seed(s)): OptimizerUnavailableError: the optimizer model could "
            "not be used / 503 |") in text
    assert "- RASU · spreadsheet · default · seed 1: InfrastructureError: 3 of 3 rollouts got no agent result" in text
    rows = {r.method: r for r in aggregate(results, failures=failures)}
    assert rows["raso"].seeds == 0 and rows["raso"].failed_seeds == 1 and rows["rasu"].failed_seeds == 1


def test_a_cell_whose_optimizer_produced_nothing_says_so(tmp_path: Path) -> None:
    config = load_experiment(CONFIGS / "update_table.yaml", {"harnesses": ["spreadsheet"],
                                                             "results_dir": str(tmp_path), "seeds": [0]})
    idle = {"iterations": 4, "no_candidate": 4, "no_candidate_note": "reflection failed: 4 of 4 iterations (x)",
            "produced_nothing": True}
    results = [{**_result("gepa", "GEPA", 0, 0.5), "notes": idle},
               {**_result("rfsu", "RFSU", 0, 0.5), "notes": {**idle, "no_candidate_note": "no candidate: 4 of 4 "
                                                              "iterations"}},
               _result("rasu", "RASU", 0, 0.75)]
    text = write_tables(config, results)["markdown"].read_text()
    for label, what in (("GEPA", "reflection failed"), ("RFSU", "no candidate")):  # every method alike
        assert (f"| {label} | spreadsheet | **optimizer produced nothing** in 1 of 1 seed(s): the reported skill is "
                f"s0; {what}: 4 of 4 iterations in 1 of 1 seed(s) |") in text
    assert "| RASU | spreadsheet |" not in text.split("Notes per row:")[1]


def test_the_paper_configs_run_the_papers_textgrad_and_cost_md_names_what_its_cells_ran(tmp_path: Path) -> None:
    with_textgrad = [load_experiment(path) for path in sorted(CONFIGS.glob("*.yaml"))]
    with_textgrad = [c for c in with_textgrad if any(m.update == "textgrad" for m in c.parsed_methods())]
    assert {c.name for c in with_textgrad} == {"cost", "update_table"}
    assert all(c.textgrad_trajectories == "full" for c in with_textgrad)  # the paper's TextGrad setting
    # the line comes from the TextGrad cells' own configs, not the config the tables are written with
    config = load_experiment(CONFIGS / "cost.yaml", {"harnesses": ["spreadsheet"], "results_dir": str(tmp_path),
                                                     "textgrad_trajectories": "full"})
    ran_equal = [{**_result("textgrad", "TextGrad", s, 0.5), "config": {"textgrad_trajectories": "equal"}}
                 for s in range(3)]
    cost = write_tables(config, ran_equal)["cost"].read_text()
    assert "TextGrad: equal information" in cost and "full trajectories" not in cost
    mixed = ran_equal[:2] + [{**ran_equal[2], "config": {"textgrad_trajectories": "full"}}]
    cost = write_tables(config, mixed)["cost"].read_text()
    assert "cells ran under different settings: `equal`" in cost and "`full`, full trajectories" in cost
