"""report.html of a run and of an experiment: its sections built from a scripted RASI/RASU run's directory,
hostile markup from models and the corpus kept as text, integer plot axes, and the CLI entry points."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest
from report_html_support import HOSTILE, audit, make_gate_run, make_run, plant_hostile_corpus_section

from raso.engine import RunDir
from raso.engine.html_report import PAGE_SCRIPT, build_html_report, cut
from raso.engine.run_dir import read_jsonl


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("html") / "run")


@pytest.fixture(scope="module")
def page(run_dir: Path) -> str:
    return build_html_report(run_dir)


def _section(page: str, section_id: str) -> str:
    start = page.index(f'<section id="{section_id}">')
    return page[start:page.index("</section>", start)]


def test_the_run_writes_report_html_beside_report_md(run_dir: Path) -> None:
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and (run_dir / "report.md").exists()
    found = audit(page)
    assert {"glance", "lineage", "skill", "lessons", "scores", "cost", "plots"} <= found.ids
    # self-contained: no URL outside the page itself
    assert all(href.startswith("#") for href in found.hrefs), found.hrefs
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:|//)""", page)


def test_hostile_markup_from_models_and_the_corpus_renders_as_text(run_dir: Path, tmp_path: Path) -> None:
    planted = tmp_path / "run"
    import shutil

    shutil.copytree(run_dir, planted)
    plant_hostile_corpus_section(planted)
    page = build_html_report(planted)
    found = audit(page)
    assert found.scripts == [PAGE_SCRIPT]  # the page's own script, nothing else
    assert found.handlers == [] and found.javascript_urls == [] and found.embeds == []
    assert "<script>" not in page.replace("<script>" + PAGE_SCRIPT, "")
    # ... and every planted copy is on the page as text, in the sections it was planted in
    for section in ("skill", "lessons", "scores"):
        text = "".join(audit(_section(page, section)).text)
        assert HOSTILE in text, section
    lessons = audit(_section(page, "lessons"))
    assert sum(HOSTILE in t for t in lessons.text) >= 3  # the lesson, the section's heading path and quoted text
    assert "Content-Security-Policy" in page and "script-src 'sha256-" in page


def test_glance_lineage_and_diffs_follow_the_run_state(run_dir: Path, page: str) -> None:
    decisions = read_jsonl(run_dir / "candidates.jsonl")
    assert decisions and any(d["accepted"] for d in decisions)
    glance = "".join(audit(_section(page, "glance")).text)
    state = json.loads((run_dir / "checkpoint.json").read_text())
    assert f"{state['curve'][0]['best_val']:.3f} → {state['current_val']:.3f}" in glance
    assert "stopped because: " + state["stop_reason"] in " ".join(glance.split())
    kind = json.loads((run_dir / "config.resolved.json").read_text())["retrieval"]["kind"]
    assert f"init rasi; update rasu; retrieval {kind}" in glance
    from raso.llm.profiles import profile_for

    summary = profile_for("scripted/html-report-agent").summary()
    assert f"target profile{summary}" in glance and f"optimizer profile{summary}" in glance
    tests = {t["label"]: t["mean_reward"] for t in state["test"]}
    assert f"{tests['s0']:.3f} → {tests['best']:.3f}" in glance

    lineage = _section(page, "lineage")
    for d in decisions:
        node = f"<strong>v{d['version']:03d}</strong>"
        assert node in lineage
        after = lineage[lineage.index(node):]
        status = "accepted" if d["accepted"] else "rejected"
        assert after.index(f'badge {status}') < after.index("</span></span>")
        assert f"val {d['candidate_val']:.3f}" in after[:400]
        # nested under the skill it was proposed from
        parent = f"<strong>v{d['current_version']:03d}</strong>"
        assert lineage.index(parent) < lineage.index(node)

    skill = _section(page, "skill")
    final = (run_dir / "SKILL.md").read_text(encoding="utf-8")
    assert "".join(audit(skill).text).count(final) == 1
    accepted = [d for d in decisions if d["accepted"]]
    for d in accepted:
        assert f'id="diff-v{d["version"]:03d}"' in skill
    # the diff adds the new level; the added line that repeats the lesson's words is marked with it
    diff_text = audit(skill).text
    assert any(t == f"+LEVEL={accepted[-1]['version'] + 1}" for t in diff_text), diff_text[:50]
    assert 'class="mark" href="#diff-v' in skill


def test_lessons_show_requirements_sources_and_quoted_text(run_dir: Path, page: str) -> None:
    lessons = _section(page, "lessons")
    init = json.loads((run_dir / "proposals" / "init.json").read_text())
    assert init["lessons"], "the scripted run made no lesson"
    for lesson in init["lessons"]:
        for src in lesson["sources"]:
            assert f"<code>{src['repo']}</code> / <code>{src['path']}</code> @ <code>{src['commit'][:12]}</code>" \
                in lessons
    quoted = {s["text"] for sections in init["retrieved"] for s in sections}
    shown = {t.strip() for t in audit(lessons).text}
    assert any(cut(q, 4000).strip() in shown for q in quoted)
    assert lessons.count('class="badge used"') >= len(init["lessons"])
    assert "written into s0" in lessons and re.search(r"written into v\d{3}, (accepted|rejected)", lessons)


def test_per_task_scores_link_each_score_to_its_trajectory(run_dir: Path, page: str) -> None:
    scores = _section(page, "scores")
    found = audit(scores)
    s0 = read_jsonl(run_dir / "trajectories" / "s0_val.rollouts.jsonl")
    links = re.findall(r'<a class="score r[01p]" href="#(b-s0_val-\d+)">([0-9.]+)</a>', scores)
    assert sorted(float(v) for _, v in links) == sorted(round(r["reward"], 2) for r in s0)
    assert all(anchor in found.ids for anchor, _ in links)
    every = sum(len(read_jsonl(p)) for p in (run_dir / "trajectories").glob("*.rollouts.jsonl"))
    assert scores.count('<details class="trajectory"') == every
    assert "Test (s0 and the best skill)" in scores and 'href="#b-test_v000-0"' in scores


def test_cost_section_and_svg_plots(run_dir: Path, page: str) -> None:
    cost = _section(page, "cost")
    ledger = json.loads((run_dir / "ledger.json").read_text())
    for stage in ledger["by_stage"]:
        assert f"<code>{stage}</code>" in cost
    for role in ledger["by_role"]:
        assert f"<code>{role}</code>" in cost
    assert "- (no priced call)" in cost  # scripted models are free: no cost per point is made up
    plots = _section(page, "plots")
    # the run's calls were all free: the rollout plot only, and a note instead of a vertical line against $0
    assert plots.count("<svg") == 1 and "<?xml" not in plots and "No plot against cost" in plots


def test_priced_runs_get_a_cost_plot_and_cost_per_point(run_dir: Path, tmp_path: Path) -> None:
    import shutil

    priced = tmp_path / "run"
    shutil.copytree(run_dir, priced)
    state = json.loads((priced / "checkpoint.json").read_text())
    for i, point in enumerate(state["curve"]):
        point["cost_usd"] = 0.25 * (i + 1)
    (priced / "checkpoint.json").write_text(json.dumps(state))
    ledger = json.loads((priced / "ledger.json").read_text())
    ledger["totals"]["cost_usd"] = 1.0
    (priced / "ledger.json").write_text(json.dumps(ledger))
    page = build_html_report(priced)
    assert _section(page, "plots").count("<svg") == 2
    gain = (state["current_val"] - state["curve"][0]["best_val"]) * 100
    assert f"${1.0 / gain:.4f}" in _section(page, "cost")


def _tick_labels(svg: str) -> list[str]:
    """The x tick labels matplotlib wrote as text (svg.fonttype none) inside the x axis group."""
    axis = svg[svg.index('<g id="matplotlib.axis_1">'):svg.index('<g id="matplotlib.axis_2">')]
    ticks = axis.split('<g id="xtick_')[1:]
    return [re.search(r"<text[^>]*>([^<]*)</text>", tick).group(1) for tick in ticks]


def test_one_point_plot_has_an_integer_rollout_axis(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", budget_rollouts=4)  # s0's val evaluation only: one point
    state = json.loads((run / "checkpoint.json").read_text())
    assert len(state["curve"]) == 1
    svg = _section(build_html_report(run), "plots").split("<svg")[1]
    labels = _tick_labels(svg)
    assert labels and all(re.fullmatch(r"\d+", label) for label in labels), labels
    assert "0" in labels and str(state["curve"][0]["rollouts_used"]) in labels


def test_cli_report_html_prints_the_page_path(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from raso.cli import runs

    parser = argparse.ArgumentParser(prog="raso")
    runs.register(parser.add_subparsers(dest="command"))
    RunDir(run_dir).report_html.unlink()
    args = parser.parse_args(["report", str(run_dir), "--html"])
    assert args.func(args) == 0
    assert capsys.readouterr().out.strip() == str(run_dir / "report.html")
    assert (run_dir / "report.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


# ------------------------------------------------------------------ the experiment page
def _result(cell: str, method: str, label: str, seed: int, rewards: dict[str, float]) -> dict:
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "cost_usd": 0.01, "calls": 1}
    return {"cell": cell, "harness": "toy", "harness_label": "Toy", "method": method, "label": label, "seed": seed,
            "setting_index": 0, "setting_label": "", "test_mean": sum(rewards.values()) / len(rewards),
            "val_best": 0.5, "rollouts": 6, "rollouts_used": 9, "wall_time_s": 1.0,
            "usage": {"init": usage, "update": usage, "test": usage},
            "test_per_task": [{"task_id": t, "reward": r} for t, r in rewards.items()], "curve": [],
            "git": {"commit": "abc1234567890"}}


def _experiment(root: Path, run_report: Path | None = None) -> Path:
    results = [
        _result("toy/rfsi/s0_seed0", "rfsi", "RFSI", 0, {"t1": 0.0, "t2": 1.0, "t3": 0.0}),
        _result("toy/rfsi/s0_seed1", "rfsi", "RFSI", 1, {"t1": 0.0, "t2": 0.0, "t3": 0.0}),
        _result("toy/raso/s0_seed0", "raso", f"RASO {HOSTILE}", 0, {"t1": 1.0, "t2": 1.0, "t3": 0.0}),
        _result("toy/raso/s0_seed1", "raso", f"RASO {HOSTILE}", 1, {"t1": 1.0, "t2": 1.0, "t3": 1.0}),
    ]
    for r in results:
        folder = root / "cells" / r["cell"]
        folder.mkdir(parents=True)
        (folder / "result.json").write_text(json.dumps(r))
    (root / "config.json").write_text(json.dumps({"config": {"name": "toy-exp", "table": "update",
                                                            "model": "scripted/x", "methods": ["rfsi", "raso"]},
                                                 "git": {"commit": "abc"}}))
    if run_report is not None:
        target = root / "cells" / "toy/raso/s0_seed0" / "run"
        target.mkdir(parents=True)
        (target / "report.html").write_text(run_report.read_text(encoding="utf-8"))
    return root


def test_experiment_page_has_cis_paired_differences_and_cell_links(run_dir: Path, tmp_path: Path) -> None:
    from experiments.html_report import build_experiment_html, t_interval

    root = _experiment(tmp_path / "exp", run_dir / "report.html")
    page = build_experiment_html(root)
    found = audit(page)
    assert found.scripts == [PAGE_SCRIPT] and not found.handlers and not found.javascript_urls
    text = " ".join("".join(found.text).split())
    # RFSI seeds: 33.33 and 0 -> mean 16.67 ± 16.67; the 95% t interval with 1 df is wide
    low, high = t_interval([100 / 3, 0.0])
    assert "16.67 ± 16.67" in text and f"[{low:.2f}, {high:.2f}]" in text
    # per task, seeds averaged: RFSI t1 0, t2 50, t3 0; RASO t1 100, t2 100, t3 50 -> diffs 100, 50, 50
    assert "3 / 0 / 0" in text
    assert 'href="cells/toy/raso/s0_seed0/run/report.html"' in page
    assert page.count("run report</a>") == 1 and HOSTILE in text


def test_experiment_report_cli(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from experiments import cli as experiment

    root = _experiment(tmp_path / "exp")
    parser = argparse.ArgumentParser(prog="raso")
    experiment.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["experiment", "report", str(root), "--html"])
    assert args.func(args) == 0
    assert capsys.readouterr().out.strip() == str(root / "report.html")
    assert "RASO experiment: toy-exp" in (root / "report.html").read_text(encoding="utf-8")
    args = parser.parse_args(["experiment", "report", str(tmp_path / "empty"), "--html"])
    assert args.func(args) == 2
    assert "holds no experiment results" in capsys.readouterr().err


def test_long_trajectories_show_their_ends_and_say_what_was_cut() -> None:
    from raso.engine.html_report import MAX_STEPS, OBSERVATION_CHARS, _steps

    rollout = {"trajectory": [{"observation": f"obs {n} " + "x" * 5000, "action": str(n), "reply": "r"}
                              for n in range(1, 61)]}
    steps, hidden = _steps(rollout)
    assert hidden == 60 - MAX_STEPS and len(steps) == MAX_STEPS + 1
    numbers = [s.get("number") for s in steps]
    assert numbers[:2] == [1, 2] and numbers[-1] == 60 and {"gap": hidden} in steps
    first = steps[0]["observation"]
    assert first.startswith("obs 1 ") and len(first) < OBSERVATION_CHARS + 60
    assert f"[{5006 - OBSERVATION_CHARS * 2 // 3 - OBSERVATION_CHARS // 3} characters cut]" in first


def test_an_experiment_run_writes_its_page_with_working_cell_links(tmp_path: Path) -> None:
    from test_experiments_support import overrides, scripted_models

    from experiments.runner import run_experiment

    agent, optimizer = scripted_models()
    values = overrides(tmp_path, agent, optimizer, seeds=[0], methods=["rfsi", "raso"],
                       optimize={"schedule": {"epochs": 1, "minibatch": 3, "workers": 2}, "init": {"num_requirements": 2},
                                 "retrieval": {"k": 2}})
    summary = run_experiment(Path(__file__).resolve().parent.parent / "experiments" / "configs" / "update_table.yaml",
                             values)
    assert summary.failed == [] and Path(summary.tables["html"]).name == "report.html"
    root = Path(summary.results_dir)
    page = (root / "report.html").read_text(encoding="utf-8")
    hrefs = audit(page).hrefs
    links = [h for h in hrefs if not h.startswith("#")]
    assert len(links) == 1 and links[0].endswith("/run/report.html")  # RASO's update run; RFSI alone has none
    from urllib.parse import unquote

    assert (root / unquote(links[0])).read_text(encoding="utf-8").startswith("<!DOCTYPE html>")  # as a browser reads it


def test_an_interrupted_format1_run_directory_renders_with_its_pending_candidate_once_migrated(tmp_path: Path) -> None:
    import shutil

    from raso.cli.migrate import migrate

    fixture = tmp_path / "run"
    shutil.copytree(Path(__file__).resolve().parent / "fixtures" / "run_format1", fixture)
    migrate(fixture)
    page = build_html_report(fixture)
    lineage = _section(page, "lineage")
    assert "<strong>v001</strong>" in lineage and 'badge pending' in lineage  # proposed, killed before its gate
    glance = " ".join("".join(audit(_section(page, "glance")).text).split())
    assert "in progress (phase iterate)" in glance and "pending: the run has not reached its end" in glance
    assert "iter001 (rfsu) — no decision recorded" in " ".join("".join(audit(_section(page, "lessons")).text).split())


def test_the_gate_table_shows_each_decisions_statistic_interval_p_value_and_cost(tmp_path: Path) -> None:
    """The significant-gate run of make_gate_run: one rejected and one accepted candidate."""
    run = make_gate_run(tmp_path / "run")
    decisions = read_jsonl(RunDir(run).candidates)
    assert [(d["accepted"], d["p_value"]) for d in decisions] == [(False, 0.5), (True, 1 / 16)]

    page = (run / "report.html").read_text(encoding="utf-8")
    lineage = _section(page, "lineage")
    text = " ".join("".join(audit(lineage).text).split())
    assert "Gate significant: a candidate is paired, and the gain must be significant" in text
    assert "at level 0.1" in text and "Every val task was rolled out 2 times" in text
    rows = lineage[lineage.index('<table class="gate">'):].split("<tr")[2:]
    assert len(rows) == len(decisions) == 2
    for row, d in zip(rows, decisions, strict=True):
        cells = [" ".join(c.split()) for c in audit("<tr" + row).text if c.strip()]
        cost = sum(u["cost_usd"] for u in d["cost"].values())
        calls = sum(u["calls"] for u in d["cost"].values())
        assert cost > 0 and calls > 0
        low, high = d["interval"]
        expected = [str(d["iteration"]), f"v{d['version']:03d}", f"v{d['current_version']:03d}", "significant",
                    f"{d['candidate_val']:.3f}", f"{d['incumbent_val']:.3f}", "(re-scored)",
                    f"{d['statistic']:+.3f}", f"[{low:+.3f}, {high:+.3f}]", f"{d['p_value']:.3f}",
                    "accepted" if d["accepted"] else "rejected", d["reason"], str(d["gate_rollouts"]), str(calls),
                    f"${cost:.4f}"]
        assert cells == expected, (cells, expected)
    assert decisions[0]["gate_rollouts"] == 2 * 4 * 2  # candidate and incumbent, two repeats of 4 val tasks
    # each node of the tree carries its decision's numbers too
    node = lineage[lineage.index("<strong>v002</strong>"):]
    assert f"significant: Δ +1.000 [+1.000, +1.000], p={1 / 16:.3f}, 16 val rollouts" in node[:600]
    glance = " ".join("".join(audit(_section(page, "glance")).text).split())
    assert "gatesignificant (level 0.1); 2 rollout(s) per val and test task" in glance  # <dt>gate</dt><dd>...


def test_a_candidate_identical_to_its_parent_shows_as_not_evaluated(tmp_path: Path) -> None:
    from test_engine_support import ToyHarness, toy_agent_reply, toy_initializer, toy_proposer

    from raso.api import optimize
    from raso.engine import OptimizeConfig
    from raso.llm.scripted import ScriptedModel

    agent, optimizer = ScriptedModel(toy_agent_reply, name="same-agent"), ScriptedModel(["LEVEL=1"] * 2, name="same")
    config = OptimizeConfig(harness="toy", **{"models.target": agent.model,
                                              "models.optimizer": optimizer.model, "schedule.epochs": 1,
                                              "schedule.minibatch": 2, "schedule.workers": 1,
                                              "schedule.test": False, "schedule.max_iterations": 1}, init="rfsi",
                            update="rfsu", run_dir=tmp_path / "run")
    optimize(ToyHarness(), config, initializer=toy_initializer, proposer=toy_proposer)
    (d,) = read_jsonl(RunDir(config.run_dir).candidates)
    assert d["candidate_val"] is None and "identical" in d["reason"]
    lineage = _section((config.run_dir / "report.html").read_text(encoding="utf-8"), "lineage")
    assert lineage.count('badge not-evaluated') == 2  # the tree's node and the gate table's row
    row = lineage[lineage.index('<tr class="not-evaluated">'):]
    cells = [" ".join(c.split()) for c in audit(row[:row.index("</tr>")]).text if c.strip()]
    assert cells[4:10] == ["-", f"{d['current_val']:.3f}", "(stored)", "-", "-", "-"]


def test_the_experiment_page_pairs_like_the_markdown_and_carries_the_demo_banner(tmp_path: Path) -> None:
    from experiments.html_report import build_experiment_html
    from experiments.results import read_results
    from experiments.stats import paired_difference

    root = _experiment(tmp_path / "exp")
    cells = read_results(root)
    expected = paired_difference([c for c in cells if c.method == "raso"], [c for c in cells if c.method == "rfsi"],
                                 "rfsi")
    text = " ".join("".join(audit(build_experiment_html(root)).text).split())
    # the paired row: the markdown's bootstrap over tasks and seeds (not a t-interval over seed-averaged tasks)
    assert f"3 × 2 {expected.mean * 100:+.2f} [{expected.low * 100:+.2f}, {expected.high * 100:+.2f}]" in text
    assert "Demo data, not the benchmark" not in text
    # the headline (RASO vs the strongest baseline, here RFSI) with the same interval
    assert (f"{HOSTILE}RFSIToy {expected.mean * 100:+.2f}[{expected.low * 100:+.2f}, {expected.high * 100:+.2f}]"
            "3 × 2") in text
    for path in (root / "cells").glob("**/result.json"):
        path.write_text(json.dumps({**json.loads(path.read_text()), "demo_data": True, "data": "demo data (toy)"}))
    text = " ".join("".join(audit(build_experiment_html(root)).text).split())
    assert "Demo data, not the benchmark: Toy ran on the small data shipped with raso" in text
    # a failed cell is a row marked failed in the score table (one column per harness), and listed with its reason
    cell = {"harness": {"name": "toy"}, "seed": 0, "setting": {}, "setting_index": 0,
            "method": {"name": "gepa", "init": "rfsi", "update": "gepa"}}
    (root / "failures.json").write_text(json.dumps([{"cell": cell, "error": "OptimizerUnavailableError: down"}]))
    text = " ".join("".join(audit(build_experiment_html(root)).text).split())
    assert text.count("GEPAfailed (1 seed(s)): OptimizerUnavailableError: down Headline") == 1
    assert "Failed cellsGEPA · toy · default · seed 0: OptimizerUnavailableError: down" in text
