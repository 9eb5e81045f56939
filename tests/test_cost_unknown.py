"""An unpriced model's cost is "unknown" on every screen, file and plot, never $0 (issue 45): the ledger's totals,
the live progress panel, report.md, report.html, the val-vs-cost plot, `raso init`, `raso eval`'s summary.json
and `raso models check`. The unpriced model is a loopback stand-in server reached as `openai/<name>` through
`--api-base` (litellm prices no such name); the same stand-in given a price shows dollars."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from loopback_model_server import loopback_model_server
from test_cli_runs import TOY, algorithm_reply
from test_cli_runs import _main as runs_main
from test_engine_support import (
    ToyHarness,
    deterministic_optimizer_reply,
    toy_agent_reply,
    toy_initializer,
    toy_proposer,
)

from raso.api import optimize
from raso.cli import main as raso_main
from raso.engine import OptimizeConfig, RichProgress, RunDir
from raso.engine.report_facts import val_curve_figure
from raso.engine.run_dir import read_jsonl
from raso.engine.state import RunState
from raso.llm import CallRecord, UsageLedger
from raso.llm.ledger import cost_text
from raso.llm.scripted import ScriptedModel

# Never given a price anywhere (a price registers the name with litellm for the whole process).
UNPRICED_AGENT = "raso-test-cost-unknown-agent"
UNPRICED_OPTIMIZER = "raso-test-cost-unknown-optimizer"
UNPRICED_TOY_OPTIMIZER = "raso-test-cost-unknown-toy-optimizer"
# Given a price by the tests that show dollars.
PRICED_AGENT = "raso-test-cost-priced-agent"
PRICED_OPTIMIZER = "raso-test-cost-priced-optimizer"
PRICE = "1000,1000"  # USD per million tokens: a toy call costs about $0.1, so a priced run is never $0.0000


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    models = {UNPRICED_AGENT: toy_agent_reply, PRICED_AGENT: toy_agent_reply,
              UNPRICED_OPTIMIZER: algorithm_reply, PRICED_OPTIMIZER: algorithm_reply,
              UNPRICED_TOY_OPTIMIZER: deterministic_optimizer_reply}
    with loopback_model_server(models) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a local server that takes no key


def _optimize_with_progress(tmp_path: Path, server: Any, agent: str, optimizer: str,
                            **overrides: Any) -> tuple[RunDir, str]:
    """A short toy run whose agent is the stand-in `agent` and whose optimizer is `optimizer` (a model string);
    returns the run directory and what the live progress panel showed."""
    from rich.console import Console

    console = Console(file=io.StringIO(), width=160, force_terminal=False)
    progress = RichProgress(console=console, title="toy")
    config = OptimizeConfig(harness="toy", **{"models.target": f"openai/{agent}", "models.api_base": server.api_base,
                                              "models.optimizer": optimizer,
                                              "models.optimizer_api_base": server.api_base, "schedule.epochs": 1,
                                              "schedule.minibatch": 2, "schedule.workers": 2,
                                              "schedule.max_iterations": 1, "schedule.test": False},
                            init="rfsi", update="rfsu", run_dir=tmp_path / "run", **overrides)
    with progress:
        optimize(ToyHarness(), config, initializer=toy_initializer, proposer=toy_proposer, sinks=[progress])
    return RunDir(config.run_dir), console.file.getvalue()


@pytest.fixture(scope="module")
def unpriced_run(tmp_path_factory: pytest.TempPathFactory, server: Any) -> tuple[RunDir, str]:
    """Every call unpriced: agent and optimizer are stand-ins litellm does not price."""
    return _optimize_with_progress(tmp_path_factory.mktemp("unpriced"), server, UNPRICED_AGENT,
                                   f"openai/{UNPRICED_TOY_OPTIMIZER}")


@pytest.fixture(scope="module")
def priced_run(tmp_path_factory: pytest.TempPathFactory, server: Any) -> tuple[RunDir, str]:
    """The agent priced; the optimizer a free scripted model."""
    optimizer = ScriptedModel(["LEVEL=1", "LEVEL=2", "LEVEL=3"], name="cost-optimizer")
    return _optimize_with_progress(tmp_path_factory.mktemp("priced"), server, PRICED_AGENT, optimizer.model,
                                   **{"models.prices": {f"openai/{PRICED_AGENT}": PRICE}})


# ------------------------------------------------------------------ the ledger and the one formatting function
def test_the_ledger_says_null_for_an_unpriced_call_and_keeps_the_priced_part_apart() -> None:
    ledger = UsageLedger([CallRecord(role="agent", stage="rollout", model="m", cost_usd=0.0123),
                          CallRecord(role="agent", stage="rollout", model="m"),
                          CallRecord(role="agent", stage="rollout", model="n", unpriced=True)])
    totals = ledger.totals()
    assert totals["cost_usd"] is None and totals["unpriced_calls"] == 1
    assert totals["priced_cost_usd"] == pytest.approx(0.0123) and ledger.priced_cost() == pytest.approx(0.0123)
    assert ledger.by_model()["m"]["cost_usd"] == pytest.approx(0.0123) and ledger.by_model()["n"]["cost_usd"] is None
    assert json.loads(json.dumps(ledger.to_dict()))["totals"]["cost_usd"] is None
    # the aggregates are rebuilt from the calls, so a saved ledger reads back the same
    assert UsageLedger.from_dict(ledger.to_dict()).totals() == totals


def test_a_cost_reads_as_dollars_unknown_or_a_lower_bound() -> None:
    assert cost_text(0.0123, 0) == "$0.0123"
    assert cost_text(0.0, 0) == "$0.0000"  # every call priced, at $0 (a free local model): measured, so shown
    assert cost_text(0.0, 5) == "unknown (5 unpriced call(s))"
    assert cost_text(None, 5) == "unknown (5 unpriced call(s))"
    assert cost_text(0.0123, 5) == "≥ $0.0123 (+ 5 unpriced call(s) of unknown cost)"
    assert "--price MODEL=INPUT,OUTPUT" in cost_text(0.0, 5, hint=True)


# ------------------------------------------------------------------ the run's screens
def test_progress_panel_of_an_unpriced_run_says_unknown(unpriced_run: tuple[RunDir, str]) -> None:
    shown = unpriced_run[1]
    assert "cost so far" in shown and "unknown (" in shown and "unpriced call(s)" in shown
    assert "$0.0000" not in shown


def test_events_jsonl_of_an_unpriced_run_says_null_with_the_count(unpriced_run: tuple[RunDir, str]) -> None:
    events = read_jsonl(unpriced_run[0].events)
    last = events[-1]
    assert last["cost_usd"] is None and last["unpriced_calls"] > 0 and last["priced_cost_usd"] == 0.0


def test_events_jsonl_of_a_priced_run_has_dollars(priced_run: tuple[RunDir, str]) -> None:
    last = read_jsonl(priced_run[0].events)[-1]
    assert last["unpriced_calls"] == 0 and last["cost_usd"] == last["priced_cost_usd"] > 0


def test_progress_panel_of_a_priced_run_shows_dollars(priced_run: tuple[RunDir, str]) -> None:
    shown = priced_run[1]
    assert "cost so far" in shown and "$" in shown and "unknown" not in shown and "$0.0000" not in shown


def test_report_md_of_an_unpriced_run_says_unknown_in_every_cost_cell(unpriced_run: tuple[RunDir, str]) -> None:
    report = unpriced_run[0].report.read_text(encoding="utf-8")
    assert "| cost | unknown (" in report and f"`openai/{UNPRICED_AGENT}`" in report and "--price" in report
    stage_rows = [line for line in report.splitlines() if line.startswith("| rollout |")]
    assert stage_rows and "unknown (" in stage_rows[0]
    assert "$0.0000" not in report


def test_report_md_of_a_priced_run_shows_dollars(priced_run: tuple[RunDir, str]) -> None:
    report = priced_run[0].report.read_text(encoding="utf-8")
    assert "| cost | $" in report and "| cost | $0.0000" not in report and "unpriced call" not in report


def test_report_html_of_an_unpriced_run_says_unknown(unpriced_run: tuple[RunDir, str]) -> None:
    page = unpriced_run[0].report_html.read_text(encoding="utf-8")
    assert "unknown (" in page and "--price MODEL=INPUT,OUTPUT" in page
    assert "No cost to plot: the cost of the" in page
    assert "$0.0000" not in page


def test_report_html_of_a_priced_run_shows_dollars_and_a_cost_plot(priced_run: tuple[RunDir, str]) -> None:
    page = priced_run[0].report_html.read_text(encoding="utf-8")
    assert "best val score against cost" in page and "unpriced call" not in page
    cost = page.split('<section id="cost">')[1].split("</section>")[0]
    assert "<dt>total</dt><dd>$" in cost


def _figure_text(fig: Any) -> str:
    ax = fig.axes[0]
    return "\n".join([ax.get_title(), *(t.get_text() for t in ax.texts)])


def test_the_cost_plot_of_an_unpriced_run_draws_no_dollars_and_says_why(unpriced_run: tuple[RunDir, str]) -> None:
    rd = unpriced_run[0]
    state = RunState.model_validate_json(rd.checkpoint.read_text(encoding="utf-8"))
    assert state.curve and all(p.unpriced_calls > 0 for p in state.curve)
    fig = val_curve_figure(state, "cost_usd", "cost (USD)")
    assert "cost unknown" in _figure_text(fig) and not fig.axes[0].lines  # no curve on a $0 axis
    assert (rd.plots / "val_vs_cost.png").exists()
    assert "No cost to plot: the cost of the" in rd.report.read_text(encoding="utf-8")


def test_the_cost_plot_leaves_out_unpriced_spend_and_says_so(unpriced_run: tuple[RunDir, str]) -> None:
    """Some calls priced, some not: the priced part is drawn and the title names the calls it leaves out."""
    state = RunState.model_validate_json(unpriced_run[0].checkpoint.read_text(encoding="utf-8"))
    for i, point in enumerate(state.curve):
        point.cost_usd = 0.01 * (i + 1)
    fig = val_curve_figure(state, "cost_usd", "cost (USD)")
    unpriced = max(p.unpriced_calls for p in state.curve)
    assert f"cost of {unpriced} unpriced call(s) not shown" in _figure_text(fig) and fig.axes[0].lines


def test_the_cost_plot_of_a_priced_run_has_no_note(priced_run: tuple[RunDir, str]) -> None:
    state = RunState.model_validate_json(priced_run[0].checkpoint.read_text(encoding="utf-8"))
    assert max(p.cost_usd for p in state.curve) > 0
    assert "unpriced" not in _figure_text(val_curve_figure(state, "cost_usd", "cost (USD)"))


# ------------------------------------------------------------------ raso init
def test_init_of_an_unpriced_optimizer_says_its_cost_is_unknown(tmp_path: Path, server: Any,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "SKILL.md"
    assert runs_main(["init", "--harness", TOY, "--model", f"openai/{UNPRICED_AGENT}", "--api-base", server.api_base,
                      "--optimizer-model", f"openai/{UNPRICED_OPTIMIZER}", "--optimizer-api-base", server.api_base,
                      "--no-retrieval", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "wrote" in printed and "unknown (" in printed and "$0.0000" not in printed
    usage = json.loads((tmp_path / "SKILL.lessons.json").read_text())["usage"]
    assert usage["cost_usd"] is None and usage["unpriced_calls"] == usage["calls"] > 0


def test_init_of_a_priced_optimizer_shows_dollars(tmp_path: Path, server: Any,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "SKILL.md"
    assert runs_main(["init", "--harness", TOY, "--model", f"openai/{UNPRICED_AGENT}", "--api-base", server.api_base,
                      "--optimizer-model", f"openai/{PRICED_OPTIMIZER}", "--optimizer-api-base", server.api_base,
                      "--price", f"openai/{PRICED_OPTIMIZER}={PRICE}", "--no-retrieval", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "tokens, $" in printed and "unknown" not in printed and "$0.0000" not in printed


def test_init_refuses_a_usd_budget_for_an_unpriced_optimizer_before_calling_it(
        tmp_path: Path, server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    out, calls_before = tmp_path / "SKILL.md", len(server.calls)
    assert runs_main(["init", "--harness", TOY, "--model", f"openai/{UNPRICED_AGENT}", "--api-base", server.api_base,
                      "--optimizer-model", f"openai/{UNPRICED_OPTIMIZER}", "--optimizer-api-base", server.api_base,
                      "--set", "budget.usd=1", "--no-retrieval", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "cannot be enforced: no price is known" in err and len(err.strip().splitlines()) == 1
    assert not out.exists() and len(server.calls) == calls_before


# ------------------------------------------------------------------ raso eval
def _eval(tmp_path: Path, server: Any, agent: str, *extra: str) -> tuple[int, Path]:
    out = tmp_path / "out"
    code = raso_main(["eval", "--harness", TOY, "--model", f"openai/{agent}", "--api-base", server.api_base,
                      "--split", "val", "--limit", "2", "--workers", "1", "--out", str(out), *extra])
    return code, out


def test_eval_summary_of_an_unpriced_model_is_null_with_the_count(tmp_path: Path, server: Any,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _eval(tmp_path, server, UNPRICED_AGENT)
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    # the run's total and the ledger's agree: null, never 0.0 beside a null
    assert summary["cost_usd"] is None and summary["ledger_totals"]["cost_usd"] is None
    assert summary["unpriced_calls"] == summary["ledger_totals"]["unpriced_calls"] == summary["ledger_totals"]["calls"]
    assert summary["unpriced_calls"] > 0 and summary["priced_cost_usd"] == 0.0
    assert json.loads((out / "ledger.json").read_text())["totals"]["cost_usd"] is None
    printed = capsys.readouterr().out
    assert "unknown (" in printed and "$0.0000" not in printed


def test_eval_summary_of_a_priced_model_has_dollars(tmp_path: Path, server: Any,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _eval(tmp_path, server, PRICED_AGENT, "--price", f"openai/{PRICED_AGENT}={PRICE}")
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["unpriced_calls"] == 0 and summary["cost_usd"] > 0
    assert summary["ledger_totals"]["cost_usd"] == pytest.approx(summary["cost_usd"])
    printed = capsys.readouterr().out
    assert f"${summary['cost_usd']:.4f}" in printed and "unknown" not in printed


def test_eval_refuses_a_usd_budget_for_an_unpriced_model_before_writing(tmp_path: Path, server: Any,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    calls_before = len(server.calls)
    code, out = _eval(tmp_path, server, UNPRICED_AGENT, "--set", "budget.usd=1")
    err = capsys.readouterr().err
    assert code == 2 and "cannot be enforced: no price is known" in err and "--price" in err
    assert len(err.strip().splitlines()) == 1 and not out.exists() and len(server.calls) == calls_before


# ------------------------------------------------------------------ raso models check
def test_models_check_ledger_line_of_an_unpriced_model_says_null(server: Any,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert raso_main(["models", "check", f"openai/{UNPRICED_AGENT}", "--api-base", server.api_base]) == 0
    out = capsys.readouterr().out
    assert "cost:    unknown (1 unpriced call(s)" in out and "$0.0000" not in out
    ledger = json.loads(out.split("ledger:  ", 1)[1].splitlines()[0])
    assert ledger["cost_usd"] is None and ledger["unpriced_calls"] == 1 and ledger["priced_cost_usd"] == 0.0


def test_models_check_ledger_line_of_a_free_scripted_model_has_its_dollars(capsys: pytest.CaptureFixture[str]) -> None:
    model = ScriptedModel(["ready"])
    assert raso_main(["models", "check", model.model]) == 0
    out = capsys.readouterr().out
    ledger = json.loads(out.split("ledger:  ", 1)[1].splitlines()[0])
    assert "cost:    $0.000000" in out and ledger["cost_usd"] == 0.0 and ledger["unpriced_calls"] == 0
