"""`raso eval` and `raso harnesses`, called through their argparse parsers."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

import raso
from raso.agent.evaluate import load_trajectories
from raso.cli import eval as eval_cmd
from raso.cli import harnesses as harnesses_cmd
from raso.errors import ConfigError
from raso.llm.scripted import ScriptedModel
from raso.skill import Skill
from raso.testing import count_script
from tests.test_harness_protocol import toy_registered  # noqa: F401  (fixture)

TOY = "raso.testing.toy:CountingHarness"


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="raso")
    sub = parser.add_subparsers()
    eval_cmd.register(sub)
    harnesses_cmd.register(sub)
    return parser.parse_args(list(argv))


def test_eval_writes_trajectories_and_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = ScriptedModel(count_script)
    skill_path = Skill(name="count-tips", description="Counting.", body="Add one.").save(tmp_path / "SKILL.md")
    out = tmp_path / "out"
    args = parse("eval", "--harness", TOY, "--harness-arg", "n_tasks=5", "--skill", str(skill_path),
                 "--split", "test", "--model", model.model, "--limit", "3", "--workers", "2", "--out", str(out))
    assert args.func(args) == 0

    rollouts = load_trajectories(out / "trajectories")
    assert [r.task_id for r in rollouts] == ["count-0", "count-1", "count-2"]
    assert all(r.reward == 1.0 and r.mode == "full" and r.skill_names == ["count-tips"] for r in rollouts)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mean_reward"] == 1.0 and summary["tasks"] == 3 and summary["mode"] == "full"
    assert summary["prompt_tokens"] == sum(r.prompt_tokens for r in rollouts) > 0
    assert summary["ledger_totals"]["calls"] == len(model.calls) == 2 + 3 + 4
    assert "cost_usd" in summary and json.loads((out / "ledger.json").read_text())["totals"]["calls"] == 9
    config = json.loads((out / "config.json").read_text())
    assert config["model"] == model.model and config["skills"] == ["count-tips"]
    assert (out / "skills" / "count-tips.md").read_text().startswith("---")
    assert "Add one." in model.calls[0][0]["content"]
    printed = capsys.readouterr().out
    assert "1.000" in printed and f"written to {out}" in printed


def test_eval_progressive_with_a_skills_dir(tmp_path: Path) -> None:
    for name in ("a-skill", "b-skill"):
        Skill(name=name, description=f"about {name}", body=f"BODY {name}").save(tmp_path / "skills" / name / "SKILL.md")
    model = ScriptedModel(count_script)
    args = parse("eval", "--harness", TOY, "--skills-dir", str(tmp_path / "skills"), "--mode", "progressive",
                 "--model", model.model, "--limit", "1", "--out", str(tmp_path / "o"))
    assert args.func(args) == 0
    system = model.calls[0][0]["content"]
    assert "a-skill" in system and "about b-skill" in system and "BODY a-skill" not in system


def test_eval_reports_when_every_rollout_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from raso.llm._litellm import litellm

    def refuse(messages: list) -> str:  # a permanent failure (never retried), like a missing API key
        raise litellm.AuthenticationError(message="no key for this model", llm_provider="scripted", model="m")

    model = ScriptedModel(refuse)
    args = parse("eval", "--harness", TOY, "--model", model.model, "--limit", "2", "--out", str(tmp_path / "o"))
    assert args.func(args) == 1
    err = capsys.readouterr().err
    assert "every rollout failed" in err and "authentication failed" in err
    assert all(r.reward == 0.0 and r.error for r in load_trajectories(tmp_path / "o" / "trajectories"))


def test_eval_counts_rollouts_without_an_agent_result_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from raso.llm._litellm import litellm

    def fail_midway(messages: list) -> str:  # count-1 (target 3) loses its model half-way; count-0 finishes
        if "You are at 2." in messages[-1]["content"]:
            raise litellm.AuthenticationError(message="key revoked", llm_provider="scripted", model="m")
        return count_script(messages)

    model = ScriptedModel(fail_midway)
    out = tmp_path / "o"
    args = parse("eval", "--harness", TOY, "--model", model.model, "--limit", "2", "--workers", "1", "--out", str(out))
    assert args.func(args) == 1  # a batch script must notice that the mean is not the skill's
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mean_reward"] == 0.5 and summary["infrastructure_failures"] == 1
    assert summary["mean_reward_of_completed"] == 1.0
    assert [t["outcome"] for t in summary["per_task"]] == ["ok", "unusable"]
    err = capsys.readouterr().err
    assert "1 of 2 rollout(s) got no agent result" in err and "mean over the rest: 1.000" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--harness", "nope-harness"), "unknown harness 'nope-harness'"),
        (("--harness", TOY, "--split", "dev"), "no split 'dev'"),
        (("--harness", TOY, "--mode", "select"), "--agent-mode select needs at least one skill"),
        (("--harness", TOY, "--skill", "/no/such/SKILL.md"), "--skill /no/such/SKILL.md: no such file or folder"),
        (("--harness", TOY, "--harness-arg", "oops"), "expected KEY=VALUE"),
    ],
)
def test_eval_usage_errors_are_clear(argv: tuple[str, ...], message: str, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    args = parse("eval", *argv, "--model", "scripted/unused", "--out", str(tmp_path / "o"))
    assert args.func(args) == 2
    assert message in capsys.readouterr().err


def test_eval_rejects_a_malformed_skill(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "SKILL.md"
    bad.write_text("no front matter here")
    args = parse("eval", "--harness", TOY, "--skill", str(bad), "--model", "scripted/unused")
    assert args.func(args) == 2
    assert "missing YAML front matter" in capsys.readouterr().err


def test_eval_takes_a_skill_folder(tmp_path: Path) -> None:
    folder = tmp_path / "count-tips"
    Skill(name="count-tips", description="Counting.", body="Add one.").save_folder(folder)
    model = ScriptedModel(count_script)
    out = tmp_path / "out"
    args = parse("eval", "--harness", TOY, "--skill", str(folder), "--model", model.model, "--limit", "1",
                 "--out", str(out))
    assert args.func(args) == 0
    assert [r.skill_names for r in load_trajectories(out / "trajectories")] == [["count-tips"]]
    assert "Add one." in model.calls[0][0]["content"]


def test_eval_refuses_a_skill_over_the_initial_skill_limit_before_any_model_call(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from raso.optimizer.options import InitOptions

    limit = InitOptions().skill_max_chars  # the one limit `optimize --init` applies
    model = ScriptedModel(count_script)
    huge = Skill(name="huge", description="Too long.", body="Add one. " * (limit // 9 + 1)).save(tmp_path / "SKILL.md")
    out = tmp_path / "o"
    args = parse("eval", "--harness", TOY, "--skill", str(huge), "--model", model.model, "--out", str(out))
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert f"over the limit of {limit:,} for a skill" in err and len(err.strip().splitlines()) == 1
    assert model.calls == [] and not out.exists()
    with pytest.raises(ConfigError, match=f"over the limit of {limit:,}"):  # the Python door too
        raso.evaluate(TOY, huge, **{"models.target": model.model})
    assert model.calls == []


def test_harnesses_lists_split_sizes_and_reasons(toy_registered: None, capsys: pytest.CaptureFixture[str],  # noqa: F811
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # a wide console, so rich does not fold the reason
    args = parse("harnesses", "--json")
    assert args.func(args) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["toy"]["split_sizes"] == {"train": 2, "val": 2, "test": 4}
    assert rows["broken"]["loaded"] is False and "no_such_pkg_xyz" in rows["broken"]["error"]

    args = parse("harnesses")
    assert args.func(args) == 0
    table = capsys.readouterr().out
    assert "toy" in table and "unavailable" in table and "no_such_pkg_xyz" in table


def test_eval_of_an_unpriced_model_on_a_keyless_server_says_its_cost_is_unknown(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from loopback_model_server import loopback_model_server

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a local server that takes no key: none is needed
    out = tmp_path / "out"
    with loopback_model_server({"count-stand-in": count_script}) as server:
        args = parse("eval", "--harness", TOY, "--harness-arg", "n_tasks=5", "--model", "openai/count-stand-in",
                     "--api-base", server.api_base, "--limit", "2", "--workers", "1", "--out", str(out))
        assert args.func(args) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mean_reward"] == 1.0
    # nobody knows what the stand-in's calls cost: null, never 0.0, and each call is counted as unpriced
    assert summary["cost_usd"] is None and summary["unpriced_calls"] == summary["ledger_totals"]["calls"] > 0
    assert [row["cost_usd"] for row in summary["per_task"]] == [None, None]
    printed = capsys.readouterr().out
    assert "unknown" in printed and "0.0000" not in printed


def test_a_bad_agent_command_placeholder_fails_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    args = parse("eval", "--harness", TOY, "--agent", "command", "--agent-command", "my-agent {instructions}",
                 "--out", str(out))
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert "unknown placeholder {instructions}" in err and "raso eval: 4 task(s)" not in err
    assert not out.exists()


def real_skill_folder(root: Path, name: str = "systematic-debugging") -> Path:
    """A skill folder in the layout public skills ship (obra/superpowers' systematic-debugging: SKILL.md, a
    reference next to it and a script its text tells the agent to run), built here: the shared corpus holds
    markdown only, no scripts."""
    folder = root / name
    Skill(name=name, description="Find the root cause before fixing.",
          body="Run `./find-polluter.sh` to find the test that pollutes the state.\n").save(folder / "SKILL.md")
    (folder / "condition-based-waiting.md").write_text("# Condition-based waiting\n")
    script = folder / "find-polluter.sh"
    script.write_text("#!/usr/bin/env bash\necho polluter\n")
    script.chmod(0o755)
    return folder


@pytest.mark.parametrize("given", ["folder", "skill_md"])
def test_eval_skill_reads_a_folder_or_its_skill_md_with_every_file_and_mode(tmp_path: Path, given: str) -> None:
    folder = real_skill_folder(tmp_path)
    (skill,) = eval_cmd.load_skills([str(folder if given == "folder" else folder / "SKILL.md")], None)
    assert sorted(skill.files) == ["condition-based-waiting.md", "find-polluter.sh"]
    assert skill.executable == ["find-polluter.sh"]
    assert skill == Skill.load_with_folder(folder)  # the loader `optimize --init FOLDER` uses


def test_eval_skills_dir_takes_skill_folders_only(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    real_skill_folder(root / "skills")
    real_skill_folder(root / "more", "condition-waiting")
    (root / "AGENTS.md").write_text("# Agents\nNot a skill.\n")
    (root / "README.md").write_text("# A repository of skills\n")
    real_skill_folder(root / ".git" / "hidden")  # hidden folders are not searched
    nested = real_skill_folder(root / "skills" / "systematic-debugging" / "examples", "inner")  # a file of a skill
    skills = eval_cmd.load_skills([], root)
    assert [s.name for s in skills] == ["condition-waiting", "systematic-debugging"]
    outer = next(s for s in skills if s.name == "systematic-debugging")
    assert f"examples/{nested.name}/SKILL.md" in outer.files and outer.executable == [
        "examples/inner/find-polluter.sh", "find-polluter.sh"]


@pytest.mark.parametrize(("setup", "message"), [
    ("missing", "--skill {path}: no such file or folder"),
    ("skill_dir", "--skills-dir {path}: this folder is itself a skill (it holds SKILL.md); pass it as --skill"),
    ("loose_md", "--skills-dir {path}: no skill folders (sub-folders holding a SKILL.md) found"),
])
def test_eval_refuses_what_is_not_a_skill_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      setup: str, message: str) -> None:
    if setup == "missing":
        path, argv = tmp_path / "nope", ["--skill", str(tmp_path / "nope")]
    elif setup == "skill_dir":
        path = real_skill_folder(tmp_path)
        argv = ["--skills-dir", str(path)]
    else:
        path = tmp_path / "docs"
        path.mkdir()
        (path / "AGENTS.md").write_text("# not a skill\n")
        argv = ["--skills-dir", str(path)]
    args = parse("eval", "--harness", TOY, "--model", "scripted/none", *argv, "--out", str(tmp_path / "o"))
    assert args.func(args) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"raso eval: {message.format(path=path)}" or err.startswith(f"raso eval: {message.format(path=path)}")
    assert "\n" not in err and not (tmp_path / "o").exists()


def test_harnesses_prints_a_named_harnesss_reason_whole_below_a_narrow_table(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    (tmp_path / "t" / "x").mkdir(parents=True)
    (tmp_path / "t" / "x" / "instruction.md").write_text("Do x.\n")
    args = parse("harnesses", f"tasks:{tmp_path / 't'}")
    assert args.func(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith(f"tasks:{tmp_path / 't'}: TasksFolderError: task x: no check in ")
    assert lines[-1].endswith("on its last line)")  # whole, on one line
