"""kill -9 during an iteration, then `resume`, ends exactly like an uninterrupted run: same final skill, same
decisions, same ledger totals (the calls the killed process completed are replayed from the run's cache)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_engine_support import main

from raso.engine.run_dir import read_jsonl

SUPPORT = Path(__file__).resolve().parent / "test_engine_support.py"


def _run(command: str, run_dir: Path, kill_at: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "RASO_TEST_KILL_AT"}
    if kill_at:
        env["RASO_TEST_KILL_AT"] = kill_at
    return subprocess.run([sys.executable, str(SUPPORT), command, str(run_dir)], env=env, capture_output=True,
                          text=True, timeout=300)


def _outcome(run_dir: Path) -> dict:
    ledger = json.loads((run_dir / "ledger.json").read_text())
    checkpoint = json.loads((run_dir / "checkpoint.json").read_text())
    return {
        "skill": (run_dir / "SKILL.md").read_text(),
        "decisions": [(d["version"], d["candidate_val"], d["current_val"], d["accepted"], d["train_task_ids"])
                      for d in read_jsonl(run_dir / "candidates.jsonl")],
        "paid": {k: ledger["totals"][k] for k in ("calls", "prompt_tokens", "completion_tokens", "cost_usd")},
        "paid_by_stage": {s: (v["calls"], v["prompt_tokens"], v["completion_tokens"])
                          for s, v in ledger["by_stage"].items()},
        "rollouts": checkpoint["rollouts_used"],
        "curve": [(p["rollouts_used"], p["best_val"]) for p in checkpoint["curve"]],
        # a kill inside an atomic write leaves its hidden temp file behind (never read): the skills are the rest
        "skills": sorted(p.name for p in (run_dir / "skills").iterdir() if not p.name.startswith(".")),
    }


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The same run, uninterrupted, in this process (the scripted models have the same names everywhere)."""
    run_dir = tmp_path_factory.mktemp("uninterrupted") / "run"
    assert main(["run", str(run_dir)]) == 0
    outcome = _outcome(run_dir)
    assert json.loads((run_dir / "ledger.json").read_text())["totals"]["cache_hits"] == 0
    # resuming a finished run changes nothing
    assert main(["resume", str(run_dir)]) == 0
    assert _outcome(run_dir) == outcome
    return outcome


# s0's val evaluation is agent calls 1-4, iteration 1 is train 5-6 + val 7-10: agent:9 dies in iteration 1's
# candidate evaluation with calls 7-8 done; optimizer:3 dies in iteration 2's proposal call.
@pytest.mark.parametrize("kill_at", ["agent:9", "optimizer:3"])
def test_kill_9_mid_iteration_then_resume_matches_an_uninterrupted_run(tmp_path: Path, uninterrupted: dict,
                                                                       kill_at: str) -> None:
    run_dir = tmp_path / "run"
    killed = _run("run", run_dir, kill_at=kill_at)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    checkpoint = json.loads((run_dir / "checkpoint.json").read_text())
    assert checkpoint["phase"] == "iterate" and checkpoint["finished_at"] is None  # died mid-run
    assert checkpoint["pending"] is not None or kill_at.startswith("agent")
    paid_before_kill = len(read_jsonl(run_dir / "ledger.calls.jsonl"))

    resumed = _run("resume", run_dir)
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert result["finished"] and result["stop_reason"].startswith("schedule complete")

    outcome = _outcome(run_dir)
    assert outcome == uninterrupted  # same final skill, decisions, rollouts and paid ledger totals
    state = json.loads((run_dir / "checkpoint.json").read_text())
    assert state["resumes"] == 1
    assert "resumed" in [e["kind"] for e in read_jsonl(run_dir / "events.jsonl")]
    ledger = json.loads((run_dir / "ledger.json").read_text())
    assert ledger["totals"]["calls"] > paid_before_kill
    if kill_at == "agent:9":  # the val rollouts finished before the kill came back from the cache, unpaid
        assert ledger["totals"]["cache_hits"] >= 1


def test_a_second_resume_while_one_works_is_refused_and_the_ledger_counts_every_call_once(
        tmp_path: Path, uninterrupted: dict) -> None:
    from raso.errors import RunError

    run_dir = tmp_path / "run"
    assert _run("run", run_dir, kill_at="agent:9").returncode == -signal.SIGKILL
    env = {k: v for k, v in os.environ.items() if k != "RASO_TEST_KILL_AT"}
    errors = (tmp_path / "first.stderr").open("w")  # a file, not a pipe: a full pipe would stall the child
    first = subprocess.Popen([sys.executable, str(SUPPORT), "resume", str(run_dir)], text=True,
                             env={**env, "RASO_TEST_PAUSE_AT": "agent:1"}, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=errors)
    try:
        assert first.stdout is not None and first.stdout.readline() == "paused\n"  # inside its first paid call
        paid = len(read_jsonl(run_dir / "ledger.calls.jsonl"))
        with pytest.raises(RunError, match=f"{run_dir} is in use by pid {first.pid} "):
            main(["resume", str(run_dir)])
        assert len(read_jsonl(run_dir / "ledger.calls.jsonl")) == paid  # the second one paid for nothing
        first.communicate("\n", timeout=300)
    finally:
        first.kill()
        first.wait()
        errors.close()
    assert first.returncode == 0, (tmp_path / "first.stderr").read_text()
    assert _outcome(run_dir) == uninterrupted  # every call paid once and counted once
    assert json.loads((run_dir / "checkpoint.json").read_text())["resumes"] == 1
