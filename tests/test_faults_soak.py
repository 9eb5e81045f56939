"""Kill soak and upgrades (issue 15): a run SIGKILLed at random moments — on a timer, or inside one of its
atomic file writes (checkpoint, views, ledger, skills, report) — and resumed each time ends like an
uninterrupted run; a run directory carries a format version, and a run written by the previous release (a
committed fixture, killed mid-iteration) resumes after `raso migrate` and the upgrade."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_engine_resume import _outcome, uninterrupted  # noqa: F401  (a module-scoped fixture)
from test_engine_support import main

from raso.cli.migrate import migrate
from raso.errors import RunError

SUPPORT = Path(__file__).resolve().parent / "test_engine_support.py"
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "run_format1"
KILLS = 25


def _start(command: str, run_dir: Path, kill_in_write: int | None = None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RASO_TEST_KILL")}
    if kill_in_write is not None:
        env["RASO_TEST_KILL_IN_WRITE"] = str(kill_in_write)
    return subprocess.Popen([sys.executable, str(SUPPORT), command, str(run_dir)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_until_working(proc: subprocess.Popen, run_dir: Path, limit_s: float = 120.0) -> None:
    """Until the process has written to the run directory (its events log grows) or ended."""
    events = run_dir / "events.jsonl"
    before = events.stat().st_size if events.exists() else 0
    deadline = time.monotonic() + limit_s
    while proc.poll() is None and time.monotonic() < deadline:
        if events.exists() and events.stat().st_size > before:
            return
        time.sleep(0.05)


def _killed_until_finished(run_dir: Path, rng: random.Random, kills: list[str], budget: int) -> None:
    """Start (or resume) the run and SIGKILL it at random moments of its work until it finishes or `budget` kills
    were made, then let it finish."""
    finished = False
    while len(kills) < budget and not finished:
        if not (run_dir / "checkpoint.json").exists():
            shutil.rmtree(run_dir, ignore_errors=True)  # killed before its first checkpoint: start it again
        command = "resume" if (run_dir / "checkpoint.json").exists() else "run"
        if len(kills) % 2 == 0:  # inside a write; a full run makes ~150 (checkpoints, views, rollouts, report)
            nth = rng.randint(1, 120)
            proc = _start(command, run_dir, kill_in_write=nth)
            _, err = proc.communicate(timeout=300)
            how = f"{command}: inside atomic write #{nth}"
        else:  # on a timer
            proc = _start(command, run_dir)
            _wait_until_working(proc, run_dir)  # the interpreter's start-up is not what is being tested
            delay = rng.uniform(0.0, 3.0)
            try:
                _, err = proc.communicate(timeout=delay)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                _, err = proc.communicate()
            how = f"{command}: {delay:.1f} s into its work"
        if proc.returncode == 0:
            finished = True
        else:
            assert proc.returncode == -signal.SIGKILL, err
            kills.append(how)
    if not (run_dir / "checkpoint.json").exists():
        shutil.rmtree(run_dir, ignore_errors=True)
    final = _start("resume" if (run_dir / "checkpoint.json").exists() else "run", run_dir)
    _, err = final.communicate(timeout=300)
    assert final.returncode == 0, err


@pytest.mark.timeout(2400)  # ~30 interpreter starts; minutes on a busy 2-core box
def test_kill_soak_random_sigkills_then_resume_match_an_uninterrupted_run(tmp_path: Path, uninterrupted: dict
                                                                          ) -> None:
    rng = random.Random(15)
    kills: list[str] = []
    runs = 0
    while len(kills) < KILLS:  # a run that finishes before the soak is over is followed by a fresh one
        runs += 1
        run_dir = tmp_path / f"run{runs}"
        _killed_until_finished(run_dir, rng, kills, KILLS)
        outcome = _outcome(run_dir)
        print(f"\nkill soak run {runs}: {len(kills)} SIGKILLs so far; paid calls {outcome['paid']['calls']} vs "
              f"{uninterrupted['paid']['calls']} uninterrupted")
        for key in ("skill", "decisions", "rollouts", "curve", "skills"):
            assert outcome[key] == uninterrupted[key], key
        # every call is billed exactly once: a reply is cached before it is billed and carries its bill, so a
        # kill between the two is billed when the reply replays, and a kill before the cache write bills nothing
        assert outcome["paid"] == uninterrupted["paid"], kills
        state = json.loads((run_dir / "checkpoint.json").read_text())
        assert state["finished_at"] is not None
    assert len(kills) >= KILLS


def test_a_run_of_the_previous_format_resumes_after_the_upgrade(tmp_path: Path, uninterrupted: dict) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir)
    migrate(run_dir)  # its flat config.resolved.json; the checkpoint's format is upgraded on resume
    assert json.loads((run_dir / "checkpoint.json").read_text())["version"] == 1
    assert main(["resume", str(run_dir)]) == 0
    state = json.loads((run_dir / "checkpoint.json").read_text())
    assert state["version"] == 2 and state["upgraded_from"] == 1 and state["finished_at"] is not None
    outcome = _outcome(run_dir)
    for key in ("skill", "decisions", "rollouts", "curve", "skills"):
        assert outcome[key] == uninterrupted[key], key
    assert "upgraded from format 1 to 2" in (run_dir / "report.md").read_text()


def test_a_run_of_a_newer_format_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir)
    checkpoint = run_dir / "checkpoint.json"
    checkpoint.write_text(json.dumps({**json.loads(checkpoint.read_text()), "version": 99}))
    before = checkpoint.read_text()
    with pytest.raises(RunError, match=r"written by a newer RASO \(run-directory format 99; this one reads formats "
                                       r"1 to 2\): upgrade RASO"):
        main(["resume", str(run_dir)])
    assert checkpoint.read_text() == before  # refused without touching it
