"""Every table's config end to end on the toy harness with scripted models: cells, shared s0 and decomposition,
equal rollout accounting, resume, tables and plots, and the `raso experiment run` command."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from test_experiments_support import MARKER, calls_matching, overrides, scripted_models

from experiments.config import Method, load_experiment
from experiments.results import CellResult, read_results
from experiments.runner import run_experiment
from raso.errors import ConfigError

CONFIGS = Path(__file__).resolve().parent.parent / "experiments" / "configs"
SMALL = {"schedule.epochs": 1, "schedule.minibatch": 3, "schedule.workers": 2, "init.num_requirements": 2, "retrieval.k": 2}
TWO_EPOCHS = {**SMALL, "schedule.epochs": 2}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _run(tmp_path: Path, config: str, **extra):
    agent, optimizer = scripted_models()
    values = overrides(tmp_path, agent, optimizer, **extra)
    values.setdefault("optimize", SMALL)
    summary = run_experiment(CONFIGS / config, values)
    assert summary.failed == [], summary.failed
    return summary, agent, optimizer


def _by_method(results: list[CellResult]) -> dict[str, list[CellResult]]:
    out: dict[str, list[dict]] = {}
    for r in results:
        out.setdefault(r.method, []).append(r)
    return out


def test_every_config_file_is_valid() -> None:
    names = sorted(p.stem for p in CONFIGS.glob("*.yaml"))
    assert names == ["adaptation_ablation", "corpus_fraction", "cost", "init_table", "k_sweep", "stage_ablation",
                     "update_table"]
    for path in CONFIGS.glob("*.yaml"):
        config = load_experiment(path)
        assert len(config.seeds) >= 3 and config.name == path.stem


def test_bad_configs_are_refused_with_the_reason() -> None:
    with pytest.raises(ConfigError, match="unknown method 'rasx'"):
        load_experiment(CONFIGS / "init_table.yaml", {"methods": ["rasx"]})
    with pytest.raises(ConfigError, match="unknown option"):
        load_experiment(CONFIGS / "init_table.yaml", {"optimize": {"epoch": 1}})
    with pytest.raises(ConfigError, match="set per cell"):
        load_experiment(CONFIGS / "init_table.yaml", {"optimize": {"schedule.seed": 3}})
    assert Method.parse("gepa").init == "rfsi" and Method.parse("raso").label == "RASO (RASI + RASU)"


def test_init_table_end_to_end(tmp_path: Path) -> None:
    summary, agent, optimizer = _run(tmp_path, "init_table.yaml")
    root = Path(summary.results_dir)
    results = read_results(root)
    assert summary.cells == len(results) == 5 * 3  # RASI also with the shipped two-stage retriever: its own row
    by = _by_method(results)
    assert [r.test_mean for r in by["none"]] == [0.0] * 3
    assert [r.test_mean for r in by["rfsi"]] == [0.0] * 3   # no lesson: the plain skill
    assert [r.test_mean for r in by["rasi"]] == [1.0] * 3   # the corpus lesson carries the marker
    assert all(r.rollouts == 0 and r.n_test == 6 for r in results)
    # RFSI and RASI share one requirement decomposition per seed: one query-init call each seed
    assert calls_matching(optimizer, '"requirements": {') == 3
    for seed in (0, 1, 2):
        inits = {r.method: json.loads((Path(r.config["results_dir"]) / "init_table" / "shared" /
                                          r.harness / f"seed{seed}").glob(f"{r.method}-*/init.json")
                                         .__next__().read_text()) for r in results
                 if r.seed == seed and r.method in ("rfsi", "rasi")}
        assert inits["rfsi"]["requirements"] == inits["rasi"]["requirements"]
        assert inits["rfsi"]["lessons"] == [] and inits["rasi"]["lessons"]
    # the paper's layout: methods down, the harness across, mean ± standard error in percent
    table = (root / "init.md").read_text()
    assert "| Method | CountingHarness(n_tasks=6) |" in table
    assert "| No skill | 0.00 ± 0.00 (n=" in table and "| RASI | 100.00 ± 0.00 (n=" in table
    assert table.index("No skill") < table.index("SkillRouter") < table.index("RFSI") < table.index("| RASI")
    rows = list(csv.DictReader((root / "per_task.csv").open()))
    assert len(rows) == 15 * 6  # every cell's per-task rewards, for paired comparisons
    # every result file carries the config and the commit
    assert all(r.config["name"] == "init_table" and r.git.commit is not None for r in results)
    # more seeds may join the table later; a changed budget or model may not mix into it
    with pytest.raises(ConfigError, match="made with other optimize"):
        run_experiment(CONFIGS / "init_table.yaml",
                       overrides(tmp_path, agent, optimizer, optimize={**SMALL, "retrieval.k": 3}))


def test_update_table_equal_budgets_shared_s0_and_resume(tmp_path: Path) -> None:
    # 2 epochs: room for one GEPA iteration (it re-scores the mutated candidate on its minibatch before val)
    summary, agent, optimizer = _run(tmp_path, "update_table.yaml", seeds=[0, 1, 2], optimize=TWO_EPOCHS)
    root = Path(summary.results_dir)
    results = read_results(root)
    by = _by_method(results)
    assert sorted(by) == ["gepa", "raso", "raso@two_stage", "rasu", "rfsi", "rfsu", "textgrad"]
    assert [r.test_mean for r in by["rfsi"]] == [0.0] * 3  # the shared s0 itself: the reference row
    assert "Δ vs rfsi" in (root / "update.md").read_text()
    updates = [r for r in results if r.method != "rfsi"]
    # every method from RFSI's s0 fixes the skill through its own proposal step; RASO starts from RASI (already 1)
    for method in ("gepa", "rasu", "rfsu", "textgrad"):
        assert [r.val_initial for r in by[method]] == [0.0] * 3, method
        assert [r.test_mean for r in by[method]] == [1.0] * 3, method
    # one shared s0 file per seed for the four update methods, identical text
    for seed in (0, 1, 2):
        s0 = {(root / "cells" / r.cell / "s0.md").read_text() for r in results
              if r.seed == seed and not r.method.startswith("raso")}
        assert len(s0) == 1 and MARKER not in next(iter(s0))
    # identical budgets; no method spends more than it
    budgets = {r.budget_rollouts for r in updates}
    assert budgets == {3 + 2 * (3 + 3)}  # s0 on val, then per epoch a minibatch of 3 and a candidate on 3 val
    assert all(0 < r.rollouts_used <= r.budget_rollouts for r in updates)
    # the paper's convention reports minibatches + candidate val evaluations, without s0's val evaluation
    assert all(r.rollouts == r.rollouts_used - 3 for r in updates)
    # TextGrad and GEPA calls are on the update stage's bill
    assert all(r.usage.update.calls > 0 for r in by["textgrad"] + by["gepa"])
    assert (root / "update.md").exists() and (root / "curves.png").read_bytes().startswith(PNG_MAGIC)

    # resume: a finished experiment reruns nothing; a cell without its result.json finishes from its run dir
    agent_calls, optimizer_calls = len(agent.calls), len(optimizer.calls)
    again = run_experiment(CONFIGS / "update_table.yaml", overrides(tmp_path, agent, optimizer, seeds=[0, 1, 2],
                                                                    optimize=TWO_EPOCHS))
    assert (again.ran, again.skipped) == (0, 21)
    assert (len(agent.calls), len(optimizer.calls)) == (agent_calls, optimizer_calls)
    cell = next(r for r in results if r.method == "rfsu")
    (root / "cells" / cell.cell / "result.json").unlink()
    third = run_experiment(CONFIGS / "update_table.yaml", overrides(tmp_path, agent, optimizer, seeds=[0, 1, 2],
                                                                    optimize=TWO_EPOCHS))
    assert (third.ran, third.skipped) == (1, 20)
    assert (len(agent.calls), len(optimizer.calls)) == (agent_calls, optimizer_calls)  # replayed, not re-paid
    redone = json.loads((root / "cells" / cell.cell / "result.json").read_text())
    assert redone["test_per_task"] == [t.to_dict() for t in cell.test_per_task]
    assert redone["rollouts_used"] == cell.rollouts_used


@pytest.mark.parametrize("config", ["stage_ablation.yaml", "adaptation_ablation.yaml", "cost.yaml"])
def test_ablation_and_cost_tables_end_to_end(tmp_path: Path, config: str) -> None:
    summary, _, _ = _run(tmp_path, config, seeds=[0, 1, 2])
    root = Path(summary.results_dir)
    results = read_results(root)
    cfg = load_experiment(CONFIGS / config)
    assert summary.cells == len(results) == len(cfg.methods) * 3
    table = (root / f"{cfg.table}.md").read_text()
    for method in cfg.parsed_methods():
        assert method.label in table
    if cfg.table == "cost":
        assert "USD update" in table and "Tokens init" in table
    else:
        rows = {r.method: r for r in results}
        assert "±" in table and set(rows) == {m.name for m in cfg.parsed_methods()}


@pytest.mark.parametrize(("config", "axis", "png"), [("k_sweep.yaml", "k", "k_sweep.png"),
                                                     ("corpus_fraction.yaml", "corpus_fraction", "corpus_fraction.png")])
def test_sweeps_end_to_end(tmp_path: Path, config: str, axis: str, png: str) -> None:
    extra = {}
    if axis == "corpus_fraction":  # a fraction of the starter corpus is refused: an index of its sections instead
        from corpus_tools.index import SectionIndex
        from corpus_tools.starter import starter_index

        index = SectionIndex.build(starter_index().iter_sections()).save(tmp_path / "index")
        extra["optimize"] = {**SMALL, "retrieval.index": str(index)}
    summary, _, _ = _run(tmp_path, config, seeds=[0, 1, 2], **extra)
    root = Path(summary.results_dir)
    results = read_results(root)
    cfg = load_experiment(CONFIGS / config)
    assert {r.setting_index for r in results} == set(range(len(cfg.settings)))
    assert (root / png).read_bytes().startswith(PNG_MAGIC)
    if axis == "k":
        used = {json.loads(next((root / "cells" / r.cell / "run").glob("config.resolved.json")).read_text())["retrieval"]["k"]
                for r in results}
        assert used == {1, 3, 5, 10}
    else:
        subsamples = sorted((root / "shared" / "corpus").glob("fraction-*.json"))
        sizes = {json.loads(p.read_text())["fraction"]: json.loads(p.read_text())["skills"] for p in subsamples}
        assert sizes[0.01] < sizes[0.1] < sizes[0.3]


def test_cli_runs_a_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from raso.cli.main import main

    agent, optimizer = scripted_models()
    harness = "raso.testing.toy:CountingHarness"
    code = main(["experiment", "run", str(CONFIGS / "init_table.yaml"), "--model", agent.model,
                 "--optimizer-model", optimizer.model, "--harness", harness, "--seeds", "0",
                 "--backend", "threading", "--results-dir", str(tmp_path / "out"), "--set", "init.num_requirements=2",
                 "--test-limit", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    summary = json.loads(out)
    assert summary["cells"] == 5 and summary["failed"] == []
    assert (tmp_path / "out" / "init_table" / "init.md").exists()


def test_an_interrupted_cell_resumes_from_its_run_directory(tmp_path: Path) -> None:
    from test_experiments_support import Interrupted, InterruptOnceHarness

    agent, optimizer = scripted_models()
    values = overrides(tmp_path, agent, optimizer, seeds=[0], methods=["rfsu"], optimize=TWO_EPOCHS, jobs=1,
                       harnesses=[{"name": "test_experiments_support:InterruptOnceHarness",
                                   "options": {"n_tasks": 6}}])
    InterruptOnceHarness.armed = True
    with pytest.raises(Interrupted):
        run_experiment(CONFIGS / "update_table.yaml", values)
    run = next((tmp_path / "results" / "update_table" / "cells").glob("*/rfsu/*/run"))
    assert not (run.parent / "result.json").exists()
    stopped_at = json.loads((run / "checkpoint.json").read_text())
    assert (stopped_at["phase"], stopped_at["rollouts_used"]) == ("iterate", 3)  # s0 scored on val, then killed

    summary = run_experiment(CONFIGS / "update_table.yaml", values)
    assert (summary.ran, summary.failed) == (1, [])
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert sum(1 for e in events if e["kind"] == "resumed") == 1
    # s0's val evaluation was not run again: one s0_val batch in the whole run
    assert sum(1 for e in events if e["kind"] == "batch_started" and e.get("batch") == "s0_val") == 1
    result = read_results(Path(summary.results_dir))[0]
    assert result.test_mean == 1.0 and result.rollouts_used <= result.budget_rollouts


def test_a_test_evaluation_hit_by_an_outage_is_not_recorded_and_reruns(tmp_path: Path) -> None:
    from test_experiments_support import agent_reply

    from raso.llm._litellm import litellm
    from raso.llm.scripted import ScriptedModel

    outage = {"on": True}

    def agent_with_outage(messages: list) -> str:
        if outage["on"]:
            raise litellm.AuthenticationError(message="key revoked", llm_provider="scripted", model="m")
        return agent_reply(messages)

    agent = ScriptedModel(agent_with_outage, name="exp-agent-outage")
    _, optimizer = scripted_models()
    values = overrides(tmp_path, agent, optimizer, seeds=[0], methods=["none"], jobs=1)
    values["optimize"] = SMALL
    summary = run_experiment(CONFIGS / "init_table.yaml", values)
    assert summary.ran == 0 and len(summary.failed) == 1 and "got no agent result" in summary.failed[0]
    assert read_results(Path(summary.results_dir)) == []  # the outage's zeros are not the method's score

    outage["on"] = False
    again = run_experiment(CONFIGS / "init_table.yaml", values)
    assert (again.ran, again.failed) == (1, [])
    assert [r.test_mean for r in read_results(Path(again.results_dir))] == [0.0]  # scored now: no skill


def test_a_gepa_cell_killed_mid_cell_resumes_without_paying_twice(tmp_path: Path) -> None:
    """Killed at its first reflection (after the seed's val evaluation and the first minibatch were paid), a GEPA
    cell resumed from its folder ends with the uninterrupted cell's result, rollout count and paid calls: gepa's
    rerun of the seed's val evaluation and of the interrupted iteration replays from the cell's response cache and
    is not counted again."""
    from test_experiments_support import Interrupted, optimizer_reply

    from raso.llm.scripted import ScriptedModel

    def gepa_cell(root: Path, kill: bool) -> tuple[CellResult, dict, int]:
        armed = {"on": kill}

        def optimizer_killed_at_reflection(messages: list) -> str:
            if armed["on"] and "Provide the new instructions" in "\n".join(str(m.get("content")) for m in messages):
                armed["on"] = False
                raise Interrupted("killed at GEPA's first reflection")
            return optimizer_reply(messages)

        agent, _ = scripted_models()
        optimizer = ScriptedModel(optimizer_killed_at_reflection, name="exp-optimizer-killed")
        # one worker: concurrent rollouts with the same prompt would hit or miss the cache by timing alone
        values = overrides(root, agent, optimizer, seeds=[0], methods=["gepa"], jobs=1,
                           optimize={**TWO_EPOCHS, "schedule.workers": 1})
        if kill:
            with pytest.raises(Interrupted):
                run_experiment(CONFIGS / "update_table.yaml", values)
            cell = next((root / "results" / "update_table" / "cells").glob("*/gepa/*"))
            assert not (cell / "result.json").exists()
            assert len(list((cell / "gepa" / "trajectories").glob("gepa*/*.json"))) == 6  # seed on val, a minibatch
        summary = run_experiment(CONFIGS / "update_table.yaml", values)
        assert summary.failed == []
        result = next(r for r in read_results(Path(summary.results_dir)) if r.method == "gepa")
        return result, result.usage.to_dict(), len(agent.calls) + len(optimizer.calls)

    straight, straight_usage, straight_calls = gepa_cell(tmp_path / "straight", kill=False)
    resumed, resumed_usage, resumed_calls = gepa_cell(tmp_path / "killed", kill=True)
    assert straight.test_mean == 1.0 and straight.update.gepa["candidates"] >= 2  # GEPA really found the fix
    # the same cell: counted rollouts, the candidates and when GEPA found them, the test scores
    assert resumed.rollouts_used == straight.rollouts_used <= resumed.budget_rollouts
    assert resumed.update.gepa["val_scores"] == straight.update.gepa["val_scores"]
    assert resumed.update.gepa["discovery_eval_counts"] == straight.update.gepa["discovery_eval_counts"]
    assert resumed.test_per_task == straight.test_per_task
    # the same bill: every stage's paid calls and tokens; the replays are cache hits
    for stage in ("init", "update", "test"):
        for key in ("calls", "prompt_tokens", "completion_tokens"):
            assert resumed_usage[stage][key] == straight_usage[stage][key], (stage, key)
    assert resumed_usage["update"]["cache_hits"] > 0
    # the models were asked no more often, but for the one killed call
    assert resumed_calls == straight_calls + 1


def _changed(value):
    """Another JSON value of the same kind (what a changed option looks like in a dumped config)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return value + "-changed"
    if isinstance(value, list):
        return [*value, {"changed": 1}]
    if isinstance(value, dict):
        return {**value, "changed": 1}
    return "changed"  # None


def test_every_experiment_option_is_a_result_key_unless_declared_not_to_change_results() -> None:
    from experiments.config import NOT_AFFECTING_RESULTS, ExperimentConfig
    from experiments.runner import RESULT_KEYS, differing_result_options

    fields = set(ExperimentConfig.model_fields)
    assert set(NOT_AFFECTING_RESULTS) <= fields  # no stale declaration
    assert "textgrad_trajectories" in RESULT_KEYS and "gepa_minibatch" in RESULT_KEYS
    base = load_experiment(CONFIGS / "update_table.yaml").model_dump(mode="json")
    for name in sorted(fields):
        # exactly one of the two, and the comparison a finished cell is reused under sees a change of it
        assert (name in RESULT_KEYS) != (name in NOT_AFFECTING_RESULTS), name
        changed = differing_result_options(base, {**base, name: _changed(base[name])})
        assert changed == ([name] if name in RESULT_KEYS else []), name


def test_a_changed_result_option_reuses_no_finished_or_unfinished_cell(tmp_path: Path) -> None:
    agent, optimizer = scripted_models()
    values = overrides(tmp_path, agent, optimizer, seeds=[0], methods=["none"], test_limit=2, jobs=1)
    summary = run_experiment(CONFIGS / "update_table.yaml", values)
    assert (summary.ran, summary.failed) == (1, [])
    assert load_experiment(CONFIGS / "update_table.yaml").textgrad_trajectories == "full"
    changed = {**values, "textgrad_trajectories": "equal"}
    with pytest.raises(ConfigError, match="made with other textgrad_trajectories"):
        run_experiment(CONFIGS / "update_table.yaml", changed)
    # the refused run left the experiment's record of its config alone
    root = Path(summary.results_dir)
    assert json.loads((root / "config.json").read_text())["config"]["textgrad_trajectories"] == "full"
    # an interrupted cell (its folder, no result.json) is not finished under another value either
    cell = next((root / "cells").glob("*/none/*"))
    (cell / "result.json").unlink()
    with pytest.raises(ConfigError, match="unfinished cell .* started with other textgrad_trajectories"):
        run_experiment(CONFIGS / "update_table.yaml", changed)
    again = run_experiment(CONFIGS / "update_table.yaml", values)  # under its own config it finishes
    assert (again.ran, again.failed) == (1, [])


#: Where each kill lands. "proposal": the second optimizer call of the method's first update step, one call
#: of that step paid (s0's val evaluation and the first train minibatch too): RFSU's / RASU's second reflection
#: chunk, TextGrad's second loss critique. "rollout": the fifth train rollout, one rollout after the first
#: minibatch of 3: for the engine's methods in the second epoch's minibatch (after the first epoch's
#: checkpoint), for GEPA in its first iteration's re-scoring of the new candidate on its minibatch (after the
#: reflection was paid: the resumed run reruns that iteration). RASO is killed only mid-rollout: its s0 (RASI's)
#: already solves every toy task, so its update makes no optimizer call to kill. (GEPA's kill at its reflection
#: is the test above.)
UPDATE_PROPOSAL_PROMPT = {"rfsu": '"gradients": {', "rasu": '"gradients": {', "textgrad": "You evaluate one trajectory"}
TRAIN_ENVS_BEFORE_THE_ROLLOUT_KILL = 3 + 1  # the first minibatch of 3, then one rollout


@pytest.mark.parametrize(("method", "kill"), [*((m, "proposal") for m in UPDATE_PROPOSAL_PROMPT),
                                              *((m, "rollout") for m in ("rfsu", "rasu", "textgrad", "raso", "gepa"))])
def test_a_cell_killed_mid_cell_resumes_to_the_uninterrupted_result(tmp_path: Path, method: str, kill: str) -> None:
    """TextGrad, RASU, RFSU and RASO (raso's engine) and GEPA (its package), killed mid-cell and resumed from the
    cell's folder, end with the uninterrupted cell's result, rollout count, ledger and table; what the resumed run
    redoes (the interrupted minibatch's paid rollouts, the interrupted proposal's paid calls) replays from the
    cell's response cache and is not paid or counted again."""
    from test_experiments_support import Interrupted, InterruptOnceHarness, optimizer_reply

    from raso.llm.scripted import ScriptedModel

    def engine_cell(root: Path, killed: bool) -> tuple[CellResult, dict, int, str]:
        armed = {"on": killed and kill == "proposal", "let_through": 1}

        def optimizer_killed_at_proposal(messages: list) -> str:
            text = "\n".join(str(m.get("content")) for m in messages)
            if armed["on"] and UPDATE_PROPOSAL_PROMPT[method] in text:
                if armed["let_through"] == 0:
                    armed["on"] = False
                    raise Interrupted(f"killed in {method}'s first proposal")
                armed["let_through"] -= 1
            return optimizer_reply(messages)

        agent, _ = scripted_models()
        optimizer = ScriptedModel(optimizer_killed_at_proposal, name="exp-optimizer-killed")
        # one worker: concurrent rollouts with the same prompt would hit or miss the cache by timing alone
        values = overrides(root, agent, optimizer, seeds=[0], methods=[method], jobs=1,
                           optimize={**TWO_EPOCHS, "schedule.workers": 1},
                           harnesses=[{"name": "test_experiments_support:InterruptOnceHarness",
                                       "options": {"n_tasks": 6}}])
        InterruptOnceHarness.armed = killed and kill == "rollout"
        InterruptOnceHarness.let_through = TRAIN_ENVS_BEFORE_THE_ROLLOUT_KILL
        if killed:
            with pytest.raises(Interrupted):
                run_experiment(CONFIGS / "update_table.yaml", values)
            assert not InterruptOnceHarness.armed and not armed["on"]  # the kill happened where it was meant to
            cell = next((root / "results" / "update_table" / "cells").glob(f"*/{method}/*"))
            saved = cell / "gepa" / "gepa_state" / "gepa_state.bin" if method == "gepa" else cell / "run" / "checkpoint.json"
            assert not (cell / "result.json").exists() and saved.exists()
        summary = run_experiment(CONFIGS / "update_table.yaml", values)
        assert (summary.ran, summary.failed) == (1, [])
        results_dir = Path(summary.results_dir)
        result = next(r for r in read_results(results_dir) if r.method == method)
        # the table names the models; each run's scripted stand-ins have their own names
        table = (results_dir / "update.md").read_text().replace(agent.model, "AGENT").replace(optimizer.model, "OPT")
        return result, result.usage.to_dict(), len(agent.calls) + len(optimizer.calls), table

    straight, straight_usage, straight_calls, straight_table = engine_cell(tmp_path / "straight", killed=False)
    resumed, resumed_usage, resumed_calls, resumed_table = engine_cell(tmp_path / "killed", killed=True)
    assert straight.test_mean == 1.0 and straight.update.accepted == (0 if method == "raso" else 1)
    # the same cell: counted rollouts, the update's path (iterations, accepted candidates, curve), the test scores
    assert resumed.rollouts_used == straight.rollouts_used <= resumed.budget_rollouts
    assert resumed.rollouts == straight.rollouts
    for field in ("val_best", "val_initial", "train_rollouts", "val_rollouts", "iterations", "accepted",
                  "stop_reason"):
        assert getattr(resumed.update, field) == getattr(straight.update, field), field
    assert [(p.rollouts, p.val) for p in resumed.curve] == [(p.rollouts, p.val) for p in straight.curve]
    assert resumed.update.gepa == straight.update.gepa  # None but for GEPA: its candidates and when it found them
    assert resumed.test_per_task == straight.test_per_task
    # the same ledger: every stage's paid calls and tokens; the replays are cache hits
    for stage in ("init", "update", "test"):
        for key in ("calls", "prompt_tokens", "completion_tokens"):
            assert resumed_usage[stage][key] == straight_usage[stage][key], (stage, key)
    assert resumed_usage["update"]["cache_hits"] > straight_usage["update"]["cache_hits"]
    # the models were asked no more often, but for the killed optimizer call (a rollout kill asks none)
    assert resumed_calls == straight_calls + (1 if kill == "proposal" else 0)
    # the same table: the rows (scores, intervals) are the uninterrupted run's
    assert resumed_table == straight_table and "AGENT" in resumed_table
