"""One command per table: `raso experiment table NAME` / `run CONFIG` with --dry-run (cells, data, rollouts, calls,
USD, no model called) and --harness-arg; demo data named as such in every row and result.json; typed results
that still read older result files; the corpus-fraction sweep on a blocklisted index; TextGrad at the run's chunk
size and each cell's notes. Scripted models only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_experiments_support import SMALL_OPTIONS, calls_matching, overrides, scripted_models

from experiments.accounting import PAPER_TABLE10
from experiments.config import load_experiment
from experiments.plan import plan_experiment
from experiments.results import DATA_NOT_RECORDED, CellResult, read_results
from experiments.runner import run_experiment
from experiments.tables import write_tables
from raso.errors import ConfigError

CONFIGS = Path(__file__).resolve().parent.parent / "experiments" / "configs"
SIZED = "test_experiments_support:SizedHarness"
PAPER_SIZES = {"officeqa": (50, 24, 172), "spreadsheetbench": (80, 40, 280), "alfworld": (39, 18, 134),
               "webshop": (80, 40, 500)}
# which rollout convention gives each Table 10 count (tests/test_experiments_accounting.py)
CONVENTION = {"officeqa": "candidates", "spreadsheetbench": "candidates", "alfworld": "candidates",
              "webshop": "candidates+s0"}


def _sized(train: int, val: int, test: int, *, demo: bool) -> dict:
    return {"name": SIZED, "options": {"train": train, "val": val, "test": test, "demo": demo}}


@pytest.mark.parametrize("benchmark", sorted(PAPER_TABLE10))
def test_dry_run_gives_the_papers_rollout_counts(tmp_path: Path, benchmark: str) -> None:
    agent, optimizer = scripted_models()
    train, val, test = PAPER_SIZES[benchmark]
    config = load_experiment(CONFIGS / "update_table.yaml", overrides(
        tmp_path, agent, optimizer, harnesses=[_sized(train, val, test, demo=False)], seeds=[0],
        rollout_convention=CONVENTION[benchmark]))
    plan = plan_experiment(config)
    by_method = {c.method: c for c in plan.cells}
    assert set(by_method) == {"rfsi", "textgrad", "gepa", "rfsu", "rasu", "raso", "raso@two_stage"}
    assert PAPER_TABLE10[benchmark][:2] == (train, val)
    for method in ("textgrad", "rfsu", "rasu", "raso"):
        cell = by_method[method]
        assert cell.counted_rollouts == PAPER_TABLE10[benchmark][2], method
        assert (cell.n_train, cell.n_val, cell.n_test, cell.rollouts["test"]) == (train, val, test, test)
        assert cell.rollouts["train"] == 2 * train and cell.optimizer_calls > 0 and cell.agent_calls > 0
    assert by_method["rfsi"].counted_rollouts == 0 and by_method["rfsi"].rollouts["test"] == test
    assert by_method["rfsi"].init_calls == 2 and by_method["raso"].init_calls > 2  # RASI adapts per requirement
    assert not plan.demo_harnesses and all(c.data == "paper split of /data/toy" for c in plan.cells)
    assert agent.calls == [] and optimizer.calls == []


def test_table_command_dry_run_prints_cells_and_calls_no_model(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from raso.cli.main import main

    agent, optimizer = scripted_models()
    code = main(["experiment", "table", "update", "--dry-run", "--model", agent.model, "--optimizer-model",
                 optimizer.model, "--harness", SIZED, "--harness-arg", "SizedHarness.train=6",
                 "--harness-arg", "SizedHarness.val=3", "--seeds", "0,1", "--results-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "14 cell(s)" in out and "DEMO DATA" in out and "demo data (toy counting games)" in out  # 7 methods x 2
    assert f"{SIZED}-" in out and "/textgrad/s0_seed1 |" in out and "| 6/3/2 |" in out
    assert "estimated total:" in out
    assert agent.calls == [] and optimizer.calls == [] and not (tmp_path / "update_table").exists()


def test_harness_args_reach_one_harness_and_bad_ones_are_refused(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from raso.cli.main import main

    agent, optimizer = scripted_models()
    base = overrides(tmp_path, agent, optimizer, harnesses=[SIZED, "raso.testing.toy:CountingHarness"])
    config = load_experiment(CONFIGS / "init_table.yaml", {**base, "harness_args": ["SizedHarness.test=5"]})
    assert [h.options for h in config.harnesses] == [{"test": 5}, {}]
    with pytest.raises(ConfigError, match="has no option.*tset"):
        load_experiment(CONFIGS / "init_table.yaml", {**base, "harness_args": ["SizedHarness.tset=5"]})
    with pytest.raises(ConfigError, match="runs no harness 'webshop'"):
        load_experiment(CONFIGS / "init_table.yaml", {**base, "harness_args": ["webshop.data_dir=/x"]})
    # an option in the config file's harness entry is checked the same way, before any cell runs
    with pytest.raises(ConfigError, match="has no option.*colour"):
        run_experiment(CONFIGS / "init_table.yaml", {**base, "harnesses": [
            {"name": SIZED, "options": {"colour": "red"}}]})
    code = main(["experiment", "run", str(CONFIGS / "init_table.yaml"), "--dry-run", "--harness", SIZED,
                 "--harness-arg", "SizedHarness=3"])
    assert code == 2 and "expected HARNESS.OPTION=VALUE" in capsys.readouterr().err


def test_demo_data_is_named_in_every_row_and_result(tmp_path: Path) -> None:
    agent, optimizer = scripted_models()
    summary = run_experiment(CONFIGS / "init_table.yaml", overrides(
        tmp_path, agent, optimizer, harnesses=[_sized(3, 2, 2, demo=True), _sized(3, 2, 3, demo=False)],
        methods=["none"], seeds=[0]))
    assert summary.failed == []
    root = Path(summary.results_dir)
    results = {r.n_test: r for r in read_results(root)}
    demo, real = results[2], results[3]
    assert (demo.data, demo.demo_data, real.data, real.demo_data) == (
        "demo data (toy counting games)", True, "paper split of /data/toy", False)
    assert demo.harness_label.endswith("[demo data]") and "[demo data]" not in real.harness_label
    raw = json.loads(next(root.glob("cells/**/result.json")).read_text())
    assert {"data", "demo_data", "notes"} <= set(raw)
    table = (root / "init.md").read_text()
    assert "**Demo data, not the benchmark:**" in table and "[demo data]" in table.splitlines()[2]
    data = json.loads((root / "init.json").read_text())
    assert data["demo_harnesses"] == [demo.harness] and data["rows"][0]["data"] in (demo.data, real.data)


def test_a_result_json_from_before_the_typed_results_still_loads(tmp_path: Path) -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "cost_usd": 0.25, "calls": 1, "retries": 0,
             "cache_hits": 0, "failures": 0, "unpriced_calls": 0}
    old = {  # the keys the previous cells.py wrote, without data, demo_data or notes
        "experiment": "update_table", "table": "update", "cell": "toy/rfsu/s0_seed0", "method": "rfsu",
        "label": "RFSU", "harness": "toy", "harness_label": "toy", "seed": 0, "setting": {}, "setting_label": "default",
        "setting_index": 0, "test_mean": 0.5, "test_success_rate": 0.5,
        "test_per_task": [{"task_id": 1, "reward": 1.0, "error": False}, {"task_id": "t2", "reward": 0.0,
                                                                          "error": False}],
        "val_best": 1.0, "val_initial": 0.0, "rollouts_used": 9, "rollout_convention": "candidates", "rollouts": 6,
        "budget_rollouts": 9, "n_train": 3, "n_val": 3, "n_test": 2,
        "usage": {"init": usage, "update": usage, "test": usage},
        "update": {"val_best": 1.0, "val_initial": 0.0, "rollouts_used": 9, "train_rollouts": 3, "val_rollouts": 6,
                   "iterations": 1, "accepted": 1, "stop_reason": "schedule done", "s0_evaluated": True},
        "curve": [{"rollouts": 3, "cost_usd": 0.0, "val": 0.0}, {"rollouts": 9, "cost_usd": 0.1, "val": 1.0}],
        "wall_time_s": 2.0, "ran_on": {"host": "h", "pid": 1, "thread": "t"}, "finished_at": "2026-12-01T00:00:00Z",
        "git": {"commit": "abc", "dirty": False}, "config": {"name": "update_table"},
    }
    result = CellResult.from_dict(old)
    assert result.data == DATA_NOT_RECORDED and not result.demo_data and result.notes.iterations is None
    assert [t.task_id for t in result.test_per_task] == ["1", "t2"] and result.usage.update.retries == 0
    assert result.cost_usd("init", "update") == 0.5 and result.curve[-1].val == 1.0
    assert CellResult.from_dict(result.to_dict()) == result
    config = load_experiment(CONFIGS / "update_table.yaml", {"results_dir": str(tmp_path), "harnesses": ["toy"]})
    text = write_tables(config, [old])["markdown"].read_text()
    assert f"- toy: {DATA_NOT_RECORDED}" in text


def test_textgrad_runs_at_the_runs_chunk_size_and_cells_carry_notes(tmp_path: Path) -> None:
    agent, optimizer = scripted_models()
    summary = run_experiment(CONFIGS / "update_table.yaml", overrides(
        tmp_path, agent, optimizer, methods=["textgrad"], seeds=[0], jobs=1,
        optimize={**SMALL_OPTIONS, "update": {"chunk_size": 2}}))
    assert summary.failed == []
    # one iteration over a minibatch of 3 failed rollouts: TGD steps over chunks of 2 -> 2 steps (8 would give 1)
    assert calls_matching(optimizer, r"<IMPROVED_VARIABLE>") == 2
    result = read_results(Path(summary.results_dir))[0]
    assert (result.notes.iterations, result.notes.no_candidate, result.notes.no_candidate_note) == (1, 0, "")
    assert result.notes.assembled_fallback is not None and result.data == "toy tasks"


def test_corpus_fraction_refuses_the_starter_corpus(tmp_path: Path) -> None:
    agent, optimizer = scripted_models()
    with pytest.raises(ValueError, match="starter corpus is not the paper's experiment"):
        run_experiment(CONFIGS / "corpus_fraction.yaml", overrides(tmp_path, agent, optimizer, seeds=[0]))
    assert agent.calls == [] and optimizer.calls == []


def test_corpus_fraction_keeps_the_blocklists_of_a_shared_corpus_index(shared_corpus: Path, tmp_path: Path) -> None:
    from corpus_tools.blocklist import index_blocklists
    from corpus_tools.build import build_corpus_index
    from experiments.artifacts import SharedArtifacts
    from raso.api import check_index_blocklist, load_harness
    from raso.engine.config import validate

    repos = sorted(p for p in (shared_corpus / "skills").iterdir() if p.is_dir())[:4]
    base = tmp_path / "index"
    build_corpus_index(repos, base, blocklists=["spreadsheetbench"], scan=False)
    cfg = validate({"harness": "spreadsheet", "retrieval": {"index": str(base)}}, "test")
    shared = SharedArtifacts(tmp_path / "shared")
    assert shared.index_path(cfg, 1.0, 0) == base  # 100 %: the index itself
    sub = shared.index_path(cfg, 0.01, 0)
    assert sub is not None and sub != base
    assert index_blocklists(sub) == index_blocklists(base) and index_blocklists(sub) == ["spreadsheet"]
    record = json.loads((sub.parent / f"{sub.name}.json").read_text())
    assert record["skills"] == max(1, round(0.01 * record["of_skills"])) and record["of_skills"] > 10
    # the leakage guard, which refused the subsample before it kept the blocklists, lets it through
    check_index_blocklist(cfg.updated({"retrieval.index": str(sub)}), load_harness("spreadsheet"))


# ---------------------------------------------------------------- issue 36: retriever, s0 keys, rollouts in tables

def test_every_paper_config_states_the_papers_retriever_and_the_default_is_its_own_row(tmp_path: Path) -> None:
    from experiments.cells import cell_optimize_config
    from experiments.config import expand_cells

    for path in sorted(CONFIGS.glob("*.yaml")):
        config = load_experiment(path, {"harnesses": ["raso.testing.toy:CountingHarness"], "seeds": [0],
                                        "results_dir": str(tmp_path)})
        for cell in expand_cells(config):
            retrieval = cell_optimize_config(config, cell).retrieval
            if cell.method.retriever is not None:  # the shipped default, as a labelled row of its own
                assert retrieval.kind == cell.method.retriever == "two_stage", path.name
                assert cell.method.label.endswith("[two-stage retriever]")
            else:  # the paper's section BM25 (no per-skill cap), K = 5 unless the sweep sets K
                assert retrieval.kind == "bm25", (path.name, cell.method.name)
                assert retrieval.k == cell.setting.get("retrieval.k", 5), path.name
    methods = {name: load_experiment(CONFIGS / f"{name}.yaml").methods for name in ("init_table", "update_table")}
    assert "rasi@two_stage" in methods["init_table"] and "raso@two_stage" in methods["update_table"]
    with pytest.raises(ConfigError, match="retrieves nothing"):
        load_experiment(CONFIGS / "update_table.yaml", {"methods": ["gepa@two_stage"]})


def test_s0_and_the_decomposition_are_not_reused_across_models(tmp_path: Path) -> None:
    from test_experiments_support import optimizer_reply

    from experiments.artifacts import SharedArtifacts
    from raso.engine.config import validate
    from raso.llm.scripted import ScriptedModel
    from raso.testing import CountingHarness

    agent, first = scripted_models()
    second = ScriptedModel(optimizer_reply, name="exp-optimizer-2")
    harness = CountingHarness(n_tasks=6)
    shared = SharedArtifacts(tmp_path / "shared")

    def s0(optimizer: ScriptedModel) -> Path:
        cfg = validate({"harness": "raso.testing.toy:CountingHarness",
                        "models": {"target": agent.model, "optimizer": optimizer.model},
                        "init": {"num_requirements": 2}, "retrieval": {"k": 2}}, "test")
        return shared.initial_skill(harness, "toy", cfg, init="rasi", seed=0)

    made_by_first = s0(first)
    assert s0(first) == made_by_first and first.calls  # the same models: reused
    made_by_second = s0(second)
    assert made_by_second != made_by_first  # another optimizer: its own s0 and decomposition, made by it
    assert calls_matching(second, '"requirements": {') == 1 and calls_matching(second, '"lesson": {') >= 1
    decompositions = sorted((tmp_path / "shared" / "toy" / "seed0").glob("decomposition-*"))
    assert len(decompositions) == 2


def test_an_index_rebuilt_at_the_same_path_makes_a_new_s0(tmp_path: Path) -> None:
    import shutil

    from corpus_tools.identity import corpus_identity
    from corpus_tools.index import SectionIndex
    from corpus_tools.starter import starter_index
    from experiments.artifacts import SharedArtifacts
    from raso.engine.config import validate
    from raso.testing import CountingHarness

    agent, optimizer = scripted_models()
    harness = CountingHarness(n_tasks=6)
    shared = SharedArtifacts(tmp_path / "shared")
    sections = list(starter_index().iter_sections())
    skills = sorted({s.skill_id for s in sections})
    index = tmp_path / "index"
    cfg = validate({"harness": "raso.testing.toy:CountingHarness",
                    "models": {"target": agent.model, "optimizer": optimizer.model},
                    "init": {"num_requirements": 2}, "retrieval": {"k": 2, "index": str(index)}}, "test")

    def build(keep: set[str]) -> str:
        shutil.rmtree(index, ignore_errors=True)
        SectionIndex.build(s for s in sections if s.skill_id in keep).save(index)
        return corpus_identity(index).digest

    first_digest = build(set(skills[: len(skills) // 2]))
    first = shared.initial_skill(harness, "toy", cfg, init="rasi", seed=0)
    lessons = calls_matching(optimizer, '"lesson": {')
    assert shared.initial_skill(harness, "toy", cfg, init="rasi", seed=0) == first  # the same corpus: reused
    assert calls_matching(optimizer, '"lesson": {') == lessons

    second_digest = build(set(skills[len(skills) // 2:]))  # another corpus, at the same path
    assert second_digest != first_digest
    second = shared.initial_skill(harness, "toy", cfg, init="rasi", seed=0)
    assert second != first and calls_matching(optimizer, '"lesson": {') > lessons  # made again, from it
    recorded = [json.loads((p.parent / "init.json").read_text())["corpus"]["digest"] for p in (first, second)]
    assert recorded == [first_digest, second_digest]
    # the decomposition reads no corpus: one, shared by both
    assert len(list((tmp_path / "shared" / "toy" / "seed0").glob("decomposition-*"))) == 1
    assert calls_matching(optimizer, '"requirements": {') == 1


def test_a_toy_update_table_shows_every_methods_rollouts_within_its_budget(tmp_path: Path) -> None:
    import re

    agent, optimizer = scripted_models()
    summary = run_experiment(CONFIGS / "update_table.yaml", overrides(
        tmp_path, agent, optimizer, seeds=[0], jobs=1, budget_rollouts=15,
        methods=["rfsi", "textgrad", "gepa", "rfsu", "rasu", "raso"], optimize={**SMALL_OPTIONS, "schedule.epochs": 3}))
    assert summary.failed == []
    table = (Path(summary.results_dir) / "update.md").read_text()
    shown = {label: (int(used), int(budget)) for label, used, budget in
             re.findall(r"^\| ([^|]+?) \| [^|]*; rollouts (\d+)/(\d+)", table, flags=re.MULTILINE)}
    assert set(shown) == {"TextGrad", "GEPA", "RFSU", "RASU", "RASO (RASI + RASU)"}
    assert all(used <= budget for used, budget in shown.values()), shown
    for result in read_results(Path(summary.results_dir)):
        assert result.rollouts_used <= result.budget_rollouts or result.method == "rfsi"
