"""report.html in a real browser: headless Chromium (Debian's `chromium`, never a downloaded one) driven by
Playwright opens the page of a scripted run, finds every section, expands a lesson's sources and a task's
trajectory, and saves screenshots under test-artifacts/ (printed). Selected with `-m browser`; it fails,
never skips, when the browser or Playwright is missing."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_html_support import HOSTILE, make_gate_run, make_run

from raso.engine.run_dir import read_jsonl

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
SECTIONS = ("glance", "lineage", "skill", "lessons", "scores", "cost", "plots")


def _browser_or_fail():
    if not CHROMIUM.is_file():
        pytest.fail(f"the browser test needs Debian's chromium at {CHROMIUM} (apt-get install chromium; .ci/run "
                    "installs it); it is missing on this machine", pytrace=False)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the browser test needs the playwright package (pip install -e '.[dev]'); never run "
                    "`playwright install`: the test drives /usr/bin/chromium", pytrace=False)
    return sync_playwright


@pytest.mark.browser
def test_report_html_in_headless_chromium(tmp_path: Path) -> None:
    sync_playwright = _browser_or_fail()
    run = make_run(tmp_path / "run")
    ARTIFACTS.mkdir(exist_ok=True)
    problems: list[str] = []
    requests: list[str] = []
    dialogs: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
            page.on("console", lambda msg: problems.append(f"console {msg.type}: {msg.text}")
                    if msg.type in ("error", "warning") else None)
            page.on("request", lambda req: requests.append(req.url))
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
            page.goto((run / "report.html").as_uri())
            for section in SECTIONS:
                assert page.locator(f"section#{section} h2").is_visible(), section
            page.screenshot(path=str(ARTIFACTS / "report_html_top.png"))

            # the gate's decisions: one row per candidate, each with its decision and the numbers behind it
            decisions = read_jsonl(run / "candidates.jsonl")
            gate_rows = page.locator("#lineage table.gate tr")
            assert gate_rows.count() == 1 + len(decisions)
            for n, d in enumerate(decisions, start=1):
                row = gate_rows.nth(n)
                assert row.is_visible()
                cells = row.locator("td")
                assert cells.nth(3).inner_text() == d["gate_mode"]
                assert cells.nth(6).inner_text() == f"{d['statistic']:+.3f}"
                assert ("accepted" if d["accepted"] else "rejected") in cells.nth(9).inner_text()

            # a lesson's corpus sources, then one section's quoted text
            sources = page.locator("#lessons details.sources").first
            source_line = sources.locator(".src").first
            assert not source_line.is_visible()
            sources.locator("summary").first.click()
            assert source_line.is_visible()
            quote = source_line.locator("details.quote pre")
            assert not quote.is_visible()
            source_line.locator("details.quote summary").click()
            assert quote.is_visible() and len(quote.inner_text().strip()) > 20

            # a task's trajectory by clicking <summary>s: the batch, then the rollout
            batch = page.locator("#scores details.batch").first
            batch.locator("summary").first.click()
            trajectory = batch.locator("details.trajectory").first
            step = trajectory.locator(".step pre").first
            assert not step.is_visible()
            trajectory.locator("summary").first.click()
            assert step.is_visible() and step.inner_text().strip()
            reply = trajectory.locator(".step pre").nth(1)
            assert HOSTILE.split("<img")[0] in reply.inner_text()  # the planted script shown as text

            # a score in the per-task table opens its trajectory (the page's own script, allowed by its hash)
            link = page.locator("#scores table.scores a.score").last
            target = link.get_attribute("href").lstrip("#")
            link.click()
            assert page.locator(f"details#{target}").evaluate("d => d.open")
            assert page.locator(f"details#{target} .step pre").first.is_visible()
            page.screenshot(path=str(ARTIFACTS / "report_html_trajectory.png"))
            page.goto((run / "report.html").as_uri() + "#lessons")
            page.screenshot(path=str(ARTIFACTS / "report_html_full.png"), full_page=True)
        finally:
            browser.close()
    print(f"screenshots: {ARTIFACTS}")
    assert dialogs == []  # no planted alert() ran
    assert problems == []  # no script error, no refused script (the CSP hash matches the page's script)
    assert all(url.startswith("file://") for url in requests), requests


@pytest.mark.browser
def test_gate_decisions_of_a_significant_gate_run_in_headless_chromium(tmp_path: Path) -> None:
    """The page of make_gate_run (a rejected and an accepted candidate): the gate table shows each decision's
    statistic, interval and p-value; the screenshot of the lineage and the table is docs/images/report_gate.png."""
    sync_playwright = _browser_or_fail()
    run = make_gate_run(tmp_path / "run")
    decisions = read_jsonl(run / "candidates.jsonl")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})  # the whole section in view
            page.goto((run / "report.html").as_uri() + "#lineage")
            rows = page.locator("#lineage table.gate tr")
            assert rows.count() == 1 + len(decisions) == 3
            for n, d in enumerate(decisions, start=1):
                cells = rows.nth(n).locator("td")
                low, high = d["interval"]
                assert rows.nth(n).is_visible()
                assert cells.nth(7).inner_text() == f"[{low:+.3f}, {high:+.3f}]"
                assert cells.nth(8).inner_text() == f"{d['p_value']:.3f}"
                assert cells.nth(9).locator(".badge").inner_text() == ("accepted" if d["accepted"] else "rejected")
            node = page.locator("#lineage .node.accepted .gate-stat")
            assert node.inner_text() == f"significant: Δ +1.000 [+1.000, +1.000], p={1 / 16:.3f}, 16 val rollouts"
            page.locator("section#lineage").screenshot(path=str(ARTIFACTS / "report_html_gate.png"))
        finally:
            browser.close()
    print(f"screenshot: {ARTIFACTS / 'report_html_gate.png'}")
