"""`raso optimize`, `raso resume`, `raso report` and `raso init` through their argparse front ends, with the
real RFSI/RFSU algorithm steps, the real execution agent, the toy harness and scripted models."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest
from test_engine_support import named_scripted_model, toy_agent_reply

from raso.cli import init as init_command
from raso.cli import runs
from raso.engine.run_dir import read_jsonl
from raso.skill import Skill

TOY = "test_engine_support:ToyHarness"
_LEVEL = re.compile(r"LEVEL=(\d+)")


def algorithm_reply(messages: list[dict]) -> str:
    """One JSON object that satisfies every optimizer role's schema (extra keys are ignored). The skill body
    raises the level of the skill shown in the prompt by one (a prompt without a skill gets LEVEL=1)."""
    text = "\n".join(str(m.get("content") or "") for m in messages)
    levels = [int(x) for x in _LEVEL.findall(text)]
    body = f"Answer every toy task.\nLEVEL={max(levels) + 1 if levels else 1}"
    return json.dumps({
        "requirements": [{"requirement": f"answer rule {i}", "query": "answer format" if i == 1 else f"rule {i}"}
                         for i in range(1, 6)],
        "lesson": "Reply with the exact answer.",
        "gradients": [{"failure_mode": "some tasks answered 'no'", "evidence": "t2", "query": "harder tasks"}],
        "name": "toy-skill", "description": "Answers toy tasks.", "body": body,
    })


@pytest.fixture(scope="module")
def models() -> tuple[str, str]:
    return (named_scripted_model("cli-runs-agent", toy_agent_reply),
            named_scripted_model("cli-runs-optimizer", algorithm_reply))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="raso")
    sub = parser.add_subparsers(dest="command")
    runs.register(sub)
    init_command.register(sub)
    return parser


def _main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    return args.func(args)


def test_optimize_then_report_and_resume(tmp_path: Path, models: tuple[str, str], capsys) -> None:
    agent, optimizer = models
    run_dir = tmp_path / "run"
    code = _main(["optimize", "--harness", TOY, "--model", agent, "--optimizer-model", optimizer, "--init", "rfsi",
                  "--update", "rfsu", "--epochs", "1", "--minibatch", "3", "--workers", "2", "--run-dir",
                  str(run_dir), "--no-progress"])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0, captured.err
    assert "best skill:" in out and "rollouts: 18" in out  # s0 val 4 + 2 x (3 train + 4 val)
    decisions = read_jsonl(run_dir / "candidates.jsonl")
    # RFSI writes LEVEL=1 (1/4 on val); each RFSU update raises the level by one: both accepted
    assert [(d["candidate_val"], d["accepted"]) for d in decisions] == [(0.5, True), (0.75, True)]
    assert "LEVEL=3" in Skill.load(run_dir / "SKILL.md").body
    stages = json.loads((run_dir / "ledger.json").read_text())["by_stage"]
    assert {"rasi.query_init", "rasi.skill_init", "rasu.gradient", "rasu.update", "rollout"} <= set(stages)

    (run_dir / "report.md").unlink()
    assert _main(["report", str(run_dir)]) == 0
    assert "| best val score | 0.750 |" in capsys.readouterr().out
    assert (run_dir / "plots" / "val_vs_cost.png").exists()

    assert _main(["resume", str(run_dir), "--no-progress"]) == 0  # finished: nothing to do, same result
    assert "rollouts: 18" in capsys.readouterr().out


def test_optimize_from_a_skill_file_and_config_file(tmp_path: Path, models: tuple[str, str], capsys) -> None:
    agent, optimizer = models
    start = tmp_path / "start.md"
    Skill(name="start", description="A start.", body="LEVEL=2\n").save(start)
    config = tmp_path / "run.toml"
    config.write_text(f'harness = "{TOY}"\nrun_dir = "{tmp_path / "run"}"\nupdate = "rfsu"\n'
                      f'[models]\ntarget = "{agent}"\noptimizer = "{optimizer}"\n[budget]\nrollouts = 4\n')
    assert _main(["optimize", "--config", str(config), "--init", str(start), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "rollouts: 4" in out and "rollout budget reached" in out  # s0's val evaluation used it all
    assert Skill.load(tmp_path / "run" / "skills" / "skill_v000.md").body == "LEVEL=2\n"


def test_bad_config_and_bad_run_dirs_exit_2_with_a_message(tmp_path: Path, capsys) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("schedule: {minibatch: -3}\n")
    assert _main(["optimize", "--config", str(config), "--no-progress"]) == 2
    assert "schedule.minibatch: Input should be greater than or equal to 1 (got -3)" in capsys.readouterr().err
    config.write_text("minibatch: 3\n")  # a format-1 file: refused, naming the command that converts it
    assert _main(["optimize", "--config", str(config), "--no-progress"]) == 2
    assert "raso migrate" in capsys.readouterr().err
    assert _main(["optimize", "--harness", "no-such-harness", "--model", "openai/gpt-4o", "--run-dir",
                  str(tmp_path / "r"), "--no-progress"]) == 2
    assert "cannot load harness 'no-such-harness'" in capsys.readouterr().err
    assert _main(["resume", str(tmp_path / "nowhere"), "--no-progress"]) == 2
    assert "no checkpoint.json" in capsys.readouterr().err
    assert _main(["report", str(tmp_path)]) == 2
    assert "not a RASO run directory" in capsys.readouterr().err


def test_init_writes_a_skill_with_front_matter_and_lessons_file(tmp_path: Path, models: tuple[str, str],
                                                                capsys) -> None:
    agent, optimizer = models
    out = tmp_path / "SKILL.md"
    assert _main(["init", "--harness", TOY, "--model", agent, "--optimizer-model", optimizer, "--no-retrieval",
                  "--out", str(out)]) == 0
    skill = Skill.load(out)
    assert out.read_text().startswith("---\n") and "LEVEL=1" in skill.body
    lessons = json.loads((tmp_path / "SKILL.lessons.json").read_text())
    assert lessons["mode"] == "rfsi" and lessons["requirements"][0]["query"] == "answer format"
    assert len(lessons["requirements"]) == 5  # M defaults to 5
    assert "wrote" in capsys.readouterr().out


@pytest.mark.embedded
def test_embedded_raso_init_writes_a_skill_md_with_front_matter(tmp_path: Path, capsys) -> None:
    """The real thing, offline: the embedded model, the spreadsheet harness and the packaged starter corpus."""
    out = tmp_path / "SKILL.md"
    code = _main(["init", "--harness", "spreadsheet", "--num-requirements", "1", "-k", "2", "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert out.read_text(encoding="utf-8").startswith("---\nname: ")
    skill = Skill.load(out)
    assert skill.name and skill.description and len(skill.body.strip()) > 20
    lessons = json.loads((tmp_path / "SKILL.lessons.json").read_text())
    assert lessons["mode"] == "rasi" and len(lessons["requirements"]) == 1
    assert all(source["repo"] and source["commit"] for lesson in lessons["lessons"] for source in lesson["sources"])
    assert lessons["usage"]["completion_tokens"] > 0 and lessons["usage"]["cost_usd"] == 0.0


#: A skill body like the embedded model's WebShop s0 (issue 37): it runs into empty items and stops mid-item.
RUNAWAY_BODY = ("Answer every toy task.\nLEVEL=4\n9. Click the 'Buy Now' button to purchase the product. 10. 11. 12. "
                "... 22. Click the '")


def test_an_unusable_best_skill_is_said_first_and_a_round_without_failures_says_so(
        tmp_path: Path, models: tuple[str, str], capsys) -> None:
    agent, optimizer = models
    start = tmp_path / "start.md"
    Skill(name="start", description="A start.", body=RUNAWAY_BODY).save(start)
    run_dir = tmp_path / "run"
    code = _main(["optimize", "--harness", TOY, "--model", agent, "--optimizer-model", optimizer, "--init", str(start),
                  "--update", "rfsu", "--epochs", "1", "--minibatch", "3", "--max-iterations", "1",
                  "--run-dir", str(run_dir), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    # the run directory is named once, at the start
    assert (captured.out + captured.err).count(f"run directory: {run_dir}") == 1
    report = (run_dir / "report.md").read_text().splitlines()
    assert report[2] == ("**The best skill (s0) is not usable as written: it runs into 3 empty list item(s); it ends "
                         "mid-sentence (\"22. Click the '\").** The optimizer model `" + optimizer + "` could not "
                         "write a usable skill in this run; read `SKILL.md` before relying on it.")
    assert "warning: The best skill (s0) is not usable as written" in captured.err
    # every train rollout succeeded (s0's LEVEL=4 covers every task): no proposal was made, and the decision says so
    [decision] = read_jsonl(run_dir / "candidates.jsonl")
    assert decision["train_mean_reward"] == 1.0 and decision["reason"].startswith(
        "no new candidate: every train rollout succeeded")
    # the best skill is s0, so its test score is the best skill's too (not "-")
    html = (run_dir / "report.html").read_text()
    assert "1.000 → 1.000" in html and "not usable as written" in html


#: A child process that takes a run directory's lock, as `raso resume` does, says so, and sleeps until killed.
HOLD_THE_LOCK = ("import sys, time\nfrom raso.engine.run_dir import RunLock\n"
                 "RunLock(sys.argv[1], 'resume').acquire()\nprint('held', flush=True)\ntime.sleep(3600)\n")


class SwitchableOptimizer:
    """The scripted optimizer (algorithm_reply), or while `broken` a reply no schema accepts; counts its calls."""

    def __init__(self) -> None:
        self.broken = True
        self.calls = 0

    def __call__(self, messages: list[dict]) -> str:
        self.calls += 1
        return "not json at all" if self.broken else algorithm_reply(messages)


def test_a_run_directory_is_locked_while_a_command_works_in_it(tmp_path: Path, capsys) -> None:
    import os
    import signal
    import subprocess
    import sys

    agent = named_scripted_model("cli-lock-agent", toy_agent_reply)
    script = SwitchableOptimizer()
    optimizer = named_scripted_model("cli-lock-optimizer", script)
    run_dir = tmp_path / "run"
    optimize = ["optimize", "--harness", TOY, "--model", agent, "--optimizer-model", optimizer, "--init", "rfsi",
                "--update", "rfsu", "--epochs", "1", "--minibatch", "3", "--run-dir", str(run_dir), "--no-progress"]
    assert _main(optimize) == 1  # the optimizer's replies are refused: the run stops in init, unfinished
    capsys.readouterr()
    assert json.loads((run_dir / "checkpoint.json").read_text())["phase"] == "init"
    assert json.loads((run_dir / "run.lock").read_text() or "{}") == {}  # released: no holder named
    script.broken = False

    holder = subprocess.Popen([sys.executable, "-c", HOLD_THE_LOCK, str(run_dir)], stdout=subprocess.PIPE,
                              text=True, env=dict(os.environ))
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert json.loads((run_dir / "run.lock").read_text())["pid"] == holder.pid
        before = {name: (run_dir / name).read_bytes() for name in ("checkpoint.json", "ledger.calls.jsonl")}
        calls = script.calls
        for argv in (["resume", str(run_dir), "--no-progress"], optimize, ["report", str(run_dir)]):
            assert _main(argv) == 2
            err = capsys.readouterr().err
            assert f"{run_dir} is in use by pid {holder.pid} (" in err and "Traceback" not in err
            assert len(err.strip().splitlines()) == 1
        assert script.calls == calls  # refused before any model call
        assert {name: (run_dir / name).read_bytes() for name in before} == before
    finally:
        holder.kill()  # SIGKILL: the holder gets no chance to release; the kernel does
        holder.wait()
    assert holder.returncode == -signal.SIGKILL

    assert _main(["resume", str(run_dir), "--no-progress"]) == 0
    assert "stopped: schedule complete" in capsys.readouterr().out
    assert script.calls > calls and json.loads((run_dir / "checkpoint.json").read_text())["resumes"] == 1


def test_an_edited_resolved_config_is_refused_on_resume(tmp_path: Path, models: tuple[str, str], capsys) -> None:
    agent, optimizer = models
    start = tmp_path / "start.md"
    Skill(name="start", description="A start.", body="LEVEL=2\n").save(start)
    run_dir = tmp_path / "run"
    assert _main(["optimize", "--harness", TOY, "--model", agent, "--optimizer-model", optimizer, "--init", str(start),
                  "--budget-rollouts", "4", "--run-dir", str(run_dir), "--no-progress"]) == 0
    capsys.readouterr()
    as_json, as_yaml = run_dir / "config.resolved.json", run_dir / "config.resolved.yaml"
    original = {path: path.read_text() for path in (as_json, as_yaml)}
    assert '"rollouts": 4' in original[as_json] and "rollouts: 4" in original[as_yaml]
    for edited, twin in ((as_json, as_yaml), (as_yaml, as_json)):
        edit = original[edited].replace('"rollouts": 4', '"rollouts": 9').replace("rollouts: 4", "rollouts: 9")
        edited.write_text(edit)
        assert _main(["resume", str(run_dir), "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert f"{edited} no longer holds the options this run started with (it was edited): restore it; its " \
               f"twin {twin.name} still holds them" in err and "raso optimize" in err
        assert len(err.strip().splitlines()) == 1
        assert edited.read_text() == edit  # neither applied nor undone: the user's edit is theirs
        edited.write_text(original[edited])
    # a run recorded before the digest was: the twins are held to each other
    checkpoint = json.loads((run_dir / "checkpoint.json").read_text())
    assert checkpoint["config_digest"]
    (run_dir / "checkpoint.json").write_text(json.dumps({**checkpoint, "config_digest": None}))
    as_yaml.write_text(original[as_yaml].replace("rollouts: 4", "rollouts: 9"))
    assert _main(["resume", str(run_dir), "--no-progress"]) == 2
    assert f"{as_json} and {as_yaml} differ" in capsys.readouterr().err
    as_yaml.write_text(original[as_yaml])
    assert _main(["resume", str(run_dir), "--no-progress"]) == 0


def test_a_run_dir_that_is_a_file_is_refused_and_left_alone(tmp_path: Path, models: tuple[str, str],
                                                            capsys) -> None:
    agent, optimizer = models
    taken = tmp_path / "notes"
    taken.write_text("mine\n")
    assert _main(["optimize", "--harness", TOY, "--model", agent, "--optimizer-model", optimizer, "--init", "rfsi",
                  "--run-dir", str(taken), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{taken} is a file, not a folder; choose a new or empty folder" in err and "Traceback" not in err
    assert taken.read_text() == "mine\n"


def test_a_mistake_caught_before_the_run_starts_leaves_no_run_directory(tmp_path: Path, capsys) -> None:
    run_dir = tmp_path / "run"
    assert _main(["optimize", "--harness", "toi", "--model", "openai/gpt-4o", "--run-dir", str(run_dir),
                  "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert "unknown harness 'toi'; did you mean 'toy'?" in captured.err
    assert "run directory:" not in captured.err + captured.out and not run_dir.exists()


def test_ctrl_c_names_resume_only_for_a_run_that_started(tmp_path: Path, capsys) -> None:
    def interrupted(sinks: list) -> None:
        raise KeyboardInterrupt

    assert runs._execute(interrupted, True, "t", tmp_path / "never", "hint") == 130
    assert "interrupted before the run started (nothing to resume); run the command again" in capsys.readouterr().err
    (tmp_path / "checkpoint.json").write_text("{}")
    assert runs._execute(interrupted, True, "t", tmp_path, "hint") == 130
    assert f"interrupted; continue with `raso resume {tmp_path}`" in capsys.readouterr().err


def test_an_initial_skill_of_front_matter_alone_is_refused_before_any_model_call(tmp_path: Path, capsys) -> None:
    script = SwitchableOptimizer()
    script.broken = False
    agent = named_scripted_model("cli-empty-agent", lambda messages: script(messages))
    start = tmp_path / "start.md"
    start.write_text("---\nname: start\ndescription: A start.\n---\n\n")
    run_dir = tmp_path / "run"
    assert _main(["optimize", "--harness", TOY, "--model", agent, "--init", str(start), "--run-dir", str(run_dir),
                  "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"init skill {start}: {start}: front matter only, no body" in err
    assert script.calls == 0 and not run_dir.exists()


def test_init_refuses_to_replace_a_skill_without_force(tmp_path: Path, capsys) -> None:
    script = SwitchableOptimizer()
    script.broken = False
    optimizer = named_scripted_model("cli-init-force", script)
    init = ["init", "--harness", TOY, "--model", optimizer, "--no-retrieval"]
    mine = tmp_path / "mine.md"
    mine.write_text("my own skill\n")
    assert _main([*init, "--out", str(mine)]) == 2
    err = capsys.readouterr().err
    assert f"--out: {mine} already exists; pass --force to replace it" in err
    assert script.calls == 0 and mine.read_text() == "my own skill\n"  # refused before any model call
    assert _main([*init, "--out", str(mine), "--force"]) == 0
    assert "LEVEL=1" in Skill.load(mine).body and (tmp_path / "mine.lessons.json").is_file()

    # a path with any suffix is a file, never a folder; written through a temporary sibling, which is gone
    text_out = tmp_path / "SKILL.txt"
    assert _main([*init, "--out", str(text_out)]) == 0
    assert text_out.is_file() and "LEVEL=1" in Skill.load(text_out).body
    assert (tmp_path / "SKILL.lessons.json").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]

    # a path without one is a skills directory; the skill folder in it is not replaced without --force either
    skills = tmp_path / "skills"
    assert _main([*init, "--out", str(skills)]) == 0
    assert (skills / "toy-skill" / "SKILL.md").is_file()
    (skills / "toy-skill" / "SKILL.md").write_text("---\nname: toy-skill\ndescription: Mine.\n---\nmine\n")
    capsys.readouterr()
    assert _main([*init, "--out", str(skills)]) == 2
    assert f"{skills / 'toy-skill'} and {skills / 'toy-skill.lessons.json'} already exist" in capsys.readouterr().err
    assert Skill.load(skills / "toy-skill").body == "mine\n"
    assert _main([*init, "--out", str(skills), "--force"]) == 0
    assert "LEVEL=1" in Skill.load(skills / "toy-skill").body


def test_a_full_disk_mid_run_is_one_line_and_resume_finishes_the_run(tmp_path: Path, models: tuple[str, str],
                                                                   capsys, monkeypatch) -> None:
    import errno

    from raso.engine import engine

    agent, optimizer = models
    run_dir = tmp_path / "run"
    real = engine.atomic_write_json
    writes = {"n": 0}

    def filling_disk(path, data):
        writes["n"] += 1
        if path.name == "checkpoint.json" and writes["n"] > 6:  # the disk fills after the run has started
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, data)

    monkeypatch.setattr(engine, "atomic_write_json", filling_disk)
    argv = ["optimize", "--harness", TOY, "--model", agent, "--optimizer-model", optimizer, "--init", "rfsi",
            "--update", "rfsu", "--epochs", "1", "--minibatch", "3", "--workers", "2", "--run-dir", str(run_dir),
            "--no-progress"]
    assert _main(argv) == 1
    err = capsys.readouterr().err
    assert "the disk is full (writing " in err and f"raso resume {run_dir}" in err and "Traceback" not in err
    saved = json.loads((run_dir / "checkpoint.json").read_text())  # the last checkpoint written is whole
    assert saved["rollouts_used"] < 18
    monkeypatch.setattr(engine, "atomic_write_json", real)  # space freed
    assert _main(["resume", str(run_dir), "--no-progress"]) == 0
    assert "rollouts: 18" in capsys.readouterr().out  # as the uninterrupted run


@pytest.mark.parametrize("command", ["optimize", "eval"])
def test_a_model_string_litellm_cannot_route_is_refused_before_any_folder_is_made(command, tmp_path: Path,
                                                                                 capsys, monkeypatch) -> None:
    from raso.cli.main import main as raso_main

    monkeypatch.chdir(tmp_path)
    assert raso_main([command, "--harness", TOY, "--model", "foo/bar", "--no-progress"] if command == "optimize"
                     else [command, "--harness", TOY, "--model", "foo/bar"]) == 2
    err = capsys.readouterr().err
    assert "litellm knows no provider 'foo'; write it as PROVIDER/MODEL" in err and "raso resume" not in err
    assert list(tmp_path.iterdir()) == []  # no run directory, no eval output folder


def test_an_index_path_that_is_no_index_is_refused_before_a_run_directory_exists(tmp_path: Path, models, capsys,
                                                                               monkeypatch) -> None:
    from raso.cli.main import main as raso_main

    agent, optimizer = models
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("not an index\n")
    monkeypatch.chdir(tmp_path)
    for index in ("missing-index", "notes"):
        assert raso_main(["optimize", "--harness", TOY, "--model", agent, "--optimizer-model", optimizer,
                          "--index", index, "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert f"cannot read the index {index}: " in err and "is not a section index" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes"]  # no runs/ folder
