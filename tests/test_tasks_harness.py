"""The `tasks` harness over a folder: the shipped example, bad folders, Harbor task folders, checks in the sandbox,
the builtin agent through shell commands (a scripted model), and `NAME:ARG` harness names.

Tests that run a check or a command need bubblewrap (marker `sandbox_os`: they fail, never skip, without it);
reading and refusing folders does not.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from harnesses.tasks import TasksHarness
from harnesses.tasks.folder import TasksFolderError, seeded_splits
from harnesses.tasks.harness import EXAMPLE_DIR
from raso.harness import registry
from raso.harness.sandbox import Sandbox

# Shell commands that solve some example tasks (what a capable agent would run).
SOLUTIONS = {
    "error-count": "awk '$3==\"ERROR\"' server.log | wc -l > answer.txt",
    "sort-numbers": "sort -n numbers.txt > sorted.txt",
    "north-rows": "awk -F, 'NR==1 || $1==\"North\"' sales.csv > north.csv",
    "harbor-word-count": "wc -w < notes.txt > count.txt",
}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def make_task(root: Path, name: str, check_name: str = "check.sh", check: str = "exit 0\n",
              files: dict[str, str] | None = None) -> Path:
    folder = root / name
    write(folder / "instruction.md", f"Do task {name}; write answer.txt.\n")
    write(folder / check_name, check)
    for rel, text in (files or {}).items():
        write(folder / "workspace" / rel, text)
    return folder


@pytest.fixture
def tasks_root(tmp_path) -> Path:
    root = tmp_path / "my-tasks"
    make_task(root, "a", check='[ "$(cat answer.txt)" = "42" ]\n', files={"in.txt": "x\n"})
    make_task(root, "b", "check.py", "print(0.5)\n")
    make_task(root, "c")
    return root


def run_in_workspace(harness: TasksHarness, task_id: str, command: str | None):
    """Prepare a fresh workspace (reachable by the sandbox's uid), optionally run `command` in it with bash on the
    host (the test's own trusted code), and score it."""
    task = next(t for tasks in harness.splits().values() for t in tasks if t.id == task_id)
    workspace = Path(tempfile.mkdtemp(prefix="raso-test-ws-"))
    try:
        instruction = harness.prepare_workspace(task, workspace)
        if command is not None:
            import subprocess
            subprocess.run(["bash", "-c", command], cwd=workspace, check=True)
        return instruction, harness.score_workspace(task, workspace)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


# ---------------------------------------------------------------------------------------------- bad folders
def test_a_task_without_instruction_is_refused_with_its_name(tmp_path):
    root = tmp_path / "t"
    make_task(root, "good")
    (root / "broken").mkdir(parents=True)
    write(root / "broken" / "check.sh", "exit 0\n")
    with pytest.raises(TasksFolderError, match=r"task broken: no instruction.md in .*broken"):
        TasksHarness(root)


def test_a_task_without_a_check_is_refused_saying_what_to_add(tmp_path):
    root = tmp_path / "t"
    make_task(root, "good")
    write(root / "nocheck" / "instruction.md", "Do it.\n")
    with pytest.raises(TasksFolderError, match=r"task nocheck: no check .*check.sh \(exit 0 = solved\) or check.py"):
        TasksHarness(root)


def test_two_checks_and_an_empty_folder_are_refused(tmp_path):
    root = tmp_path / "t"
    make_task(root, "good")
    make_task(root, "twice")
    write(root / "twice" / "check.py", "print(1)\n")
    with pytest.raises(TasksFolderError, match="both check.sh and check.py"):
        TasksHarness(root)
    (tmp_path / "empty").mkdir()
    with pytest.raises(TasksFolderError, match="has no task sub-folders"):
        TasksHarness(tmp_path / "empty")
    with pytest.raises(TasksFolderError, match="does not exist"):
        TasksHarness(tmp_path / "nowhere")


@pytest.mark.parametrize("splits, message", [
    ("{not json", "is not valid JSON"),
    (json.dumps(["a", "b"]), "must be an object"),
    (json.dumps({"train": ["a"], "val": ["b"], "tests": ["c"]}), "must be an object"),
    (json.dumps({"train": ["a", "zzz"], "val": ["b"], "test": ["c"]}), "lists 'zzz', which is not a task folder"),
    (json.dumps({"train": ["a", "b"], "val": ["b"], "test": ["c"]}), "'b' is in both train and val"),
    (json.dumps({"train": ["a"], "val": ["b"]}), r"task\(s\) c are in no split"),
    (json.dumps({"train": ["a", "b", "c"], "val": []}), "the val split is empty"),
])
def test_a_bad_splits_file_is_refused_with_the_reason(tasks_root, splits, message):
    write(tasks_root / "splits.json", splits)
    with pytest.raises(TasksFolderError, match=message):
        TasksHarness(tasks_root)


def test_without_splits_json_the_seeded_rule_is_stable_and_covers_every_task():
    ids = [f"task{i}" for i in range(8)]
    first, again = seeded_splits(ids), seeded_splits(list(reversed(ids)))
    assert first == again
    assert {k: len(v) for k, v in first.items()} == {"train": 4, "val": 2, "test": 2}
    assert sorted(sum(first.values(), [])) == sorted(ids)
    assert seeded_splits(ids, salt="other") != first
    with pytest.raises(TasksFolderError, match="at least two"):
        seeded_splits(["only"])


def test_missing_descriptions_say_to_write_them_or_run_describe(tasks_root):
    harness = TasksHarness(tasks_root)
    with pytest.raises(TasksFolderError, match=r"no task_description.md .*raso harness describe tasks:"):
        _ = harness.task_description
    with pytest.raises(TasksFolderError, match=r"no harness_description.md"):
        _ = harness.harness_description
    write(tasks_root / "task_description.md", "T text\n")
    write(tasks_root / "harness_description.md", "H text\n")
    assert (harness.task_description, harness.harness_description, harness.workspace_description) == \
        ("T text", "H text", "H text")  # the workspace form falls back to H without workspace_description.md
    assert harness.resource_dir == tasks_root.resolve()  # where `raso harness describe` writes its drafts


def harbor_task(root: Path, name: str, dockerfile: str | None = "FROM python:3.12-slim\nWORKDIR /app\n",
                test: str = "echo 1 > /logs/verifier/reward.txt\n", toml: str = "[verifier]\ntimeout_sec = 30.0\n",
                files: dict[str, str] | None = None) -> Path:
    folder = root / name
    write(folder / "instruction.md", "Write /app/out.txt.\n")
    write(folder / "task.toml", toml)
    write(folder / "tests" / "test.sh", test)
    if dockerfile is not None:
        write(folder / "environment" / "Dockerfile", dockerfile)
    for rel, text in (files or {}).items():
        write(folder / "environment" / rel, text)
    return folder


@pytest.mark.parametrize("kwargs, message", [  # a Dockerfile that builds is a container task (test_tasks_containers)
    ({"toml": '[environment]\ndocker_image = "ghcr.io/x/y:1"\n'}, "runs in the prebuilt image"),
    ({"test": "curl -LsSf https://astral.sh/uv/install.sh | sh\necho 1 > /logs/verifier/reward.txt\n"},
     r"installs or downloads at run time \(tests/test.sh line 1: curl\)"),
    ({"files": {"docker-compose.yaml": "services: {}\n"}}, r"starts services \(docker-compose.yaml\)"),
])
def test_a_harbor_task_needing_a_container_is_refused_not_misscored(tmp_path, kwargs, message):
    root = tmp_path / "t"
    make_task(root, "plain")
    harbor_task(root, "harbor", **kwargs)
    with pytest.raises(TasksFolderError, match=r"Harbor task harbor is not supported here: .*" + message):
        TasksHarness(root, strict=True)


def test_a_harbor_task_without_tests_is_refused(tmp_path):
    root = tmp_path / "t"
    make_task(root, "plain")
    folder = harbor_task(root, "harbor")
    (folder / "tests" / "test.sh").unlink()
    with pytest.raises(TasksFolderError, match=r"no tests/test.sh"):
        TasksHarness(root)


# ---------------------------------------------------------------------------------------------- the example
@pytest.mark.sandbox_os
def test_the_example_loads_by_name_with_its_splits_and_descriptions(monkeypatch):
    # the entry point is in pyproject.toml; an install made before this harness existed lacks it
    from raso import api

    def registered() -> dict[str, str]:
        return {"tasks": "harnesses.tasks:TasksHarness", "toy": "raso.testing.toy:CountingHarness"}

    monkeypatch.setattr(registry, "available_harnesses", registered)
    monkeypatch.setattr(api, "available_harnesses", registered)
    harness = registry.get_harness("tasks:example")
    assert isinstance(harness, TasksHarness) and harness.folder == EXAMPLE_DIR
    assert api.harness_target(harness) == f"tasks:{EXAMPLE_DIR}"  # how a run directory records it, path included
    sizes = {k: len(v) for k, v in harness.splits().items()}
    assert sizes == {"train": 4, "val": 2, "test": 2}
    assert harness.describe()["harbor_tasks"] == 1
    assert "shell command" in harness.harness_description and "check" in harness.task_description
    same = registry.get_harness("tasks", path=str(EXAMPLE_DIR))  # --harness tasks --harness-arg path=...
    assert same.folder == EXAMPLE_DIR
    with pytest.raises(ValueError, match="conflicts"):
        registry.get_harness("tasks:example", path="/elsewhere")
    with pytest.raises(registry.HarnessNotFoundError, match="takes no ':ARG'"):
        registry.get_harness("toy:3")
    assert registry.harness_class("tasks:/any/path") is TasksHarness


@pytest.mark.sandbox_os
@pytest.mark.parametrize("task_id", sorted(SOLUTIONS))
def test_example_tasks_score_one_when_solved_and_zero_untouched(task_id):
    harness = TasksHarness("example")
    instruction, solved = run_in_workspace(harness, task_id, SOLUTIONS[task_id])
    assert solved.reward == 1.0 and solved.soft_score == 1.0, solved.info
    assert "Work in the current folder" in instruction
    _, untouched = run_in_workspace(harness, task_id, None)
    assert untouched.reward == 0.0, untouched.info


@pytest.mark.sandbox_os
def test_the_workspace_holds_only_the_inputs_never_the_check_or_expected_files():
    harness = TasksHarness("example")
    for task in (t for tasks in harness.splits().values() for t in tasks):
        workspace = Path(tempfile.mkdtemp(prefix="raso-test-ws-"))
        try:
            harness.prepare_workspace(task, workspace)
            names = {p.name for p in workspace.rglob("*")}
            assert names and not names & {"check.sh", "check.py", "expected.txt", "test.sh", "solve.sh", "task.toml",
                                          "Dockerfile", "instruction.md"}, (task.id, names)
        finally:
            shutil.rmtree(workspace)


@pytest.mark.sandbox_os
def test_a_partial_answer_gets_the_soft_score_of_check_py():
    harness = TasksHarness("example")
    header_only = "head -1 sales.csv > north.csv"  # the header right, no rows: half the score
    _, score = run_in_workspace(harness, "north-rows", header_only)
    assert score.reward == 0.0 and score.soft_score == 0.5, score.info


@pytest.mark.sandbox_os
@pytest.mark.parametrize("check, reason", [
    ("print('looks good to me')\n", "check.py printed 'looks good to me' as its last line, not a score in [0, 1]"),
    ("print(1.7)\n", "not a score in [0, 1]"),
    ("raise SystemExit('boom: the answer file is missing')\n", "check.py failed: program exited with code 1: boom"),
    ("import sys\nsys.exit(3)\n", "check.py failed: program exited with code 3"),
])
def test_a_broken_check_py_is_a_check_error_with_a_clear_reason(tmp_path, check, reason):
    root = tmp_path / "t"
    make_task(root, "ok")
    make_task(root, "bad", "check.py", check)
    harness = TasksHarness(root)
    _, score = run_in_workspace(harness, "bad", None)
    assert score.soft_score is None and score.check_error is not None
    assert reason in score.check_error


@pytest.mark.sandbox_os
def test_a_check_sees_its_own_folder_but_no_other_task_and_cannot_change_the_workspace(tmp_path):
    root = tmp_path / "t"
    write(root / "other" / "secret.txt", "other task's expected answer\n")
    make_task(root, "other")
    check = ('[ -f "$TASK_DIR/expected.txt" ] || exit 11\n'
             f'[ ! -e "{root / "other"}" ] || exit 12\n'
             f'! cat "{root}/other/secret.txt" 2>/dev/null || exit 13\n'
             'echo tampered > in.txt\n')
    folder = make_task(root, "probe", check=check, files={"in.txt": "original\n"})
    write(folder / "expected.txt", "x\n")
    harness = TasksHarness(root)
    task = next(t for tasks in harness.splits().values() for t in tasks if t.id == "probe")
    workspace = Path(tempfile.mkdtemp(prefix="raso-test-ws-"))
    try:
        harness.prepare_workspace(task, workspace)
        score = harness.score_workspace(task, workspace)
        assert score.reward == 1.0, score.info
        assert (workspace / "in.txt").read_text() == "original\n"  # the check ran on a copy
    finally:
        shutil.rmtree(workspace)


@pytest.mark.sandbox_os
def test_a_symlink_left_by_an_agent_is_not_followed_by_the_check(tmp_path):
    root = tmp_path / "t"
    make_task(root, "other")
    make_task(root, "a", check='[ "$(cat answer.txt)" = "secret" ]\n')
    outside = write(Path(tempfile.mkdtemp(prefix="raso-outside-")) / "s.txt", "secret")
    harness = TasksHarness(root)
    task = next(t for tasks in harness.splits().values() for t in tasks if t.id == "a")
    workspace = Path(tempfile.mkdtemp(prefix="raso-test-ws-"))
    try:
        os.symlink(outside, workspace / "answer.txt")
        score = harness.score_workspace(task, workspace)
        assert score.reward == 0.0 and score.info["left_out"] == ["answer.txt (symbolic link)"]
    finally:
        shutil.rmtree(workspace)
        shutil.rmtree(outside.parent)


@pytest.mark.sandbox_os
def test_a_harbor_verifier_reward_file_decides_and_a_missing_one_is_a_check_error(tmp_path):
    root = tmp_path / "t"
    make_task(root, "plain")
    harbor_task(root, "json", test='cd /app && [ -f out.txt ] && echo \'{"reward": 0.25}\' > /logs/verifier/reward.json\n')
    harbor_task(root, "none", test="exit 0\n")
    harbor_task(root, "copies", dockerfile="FROM python:3.12\nWORKDIR /app\nCOPY data /app/data\n",
                files={"data/in.txt": "hello\n"},
                test='[ "$(pwd)" = /app ] && [ -f /app/data/in.txt ] && [ -f /tests/test.sh ] '
                     '&& echo 1 > /logs/verifier/reward.txt\n')
    harness = TasksHarness(root)
    _, score = run_in_workspace(harness, "json", "echo x > out.txt")
    assert (score.reward, score.soft_score) == (0.0, 0.25)
    _, score = run_in_workspace(harness, "none", None)
    assert score.check_error is not None and "wrote no /logs/verifier/reward.txt" in score.check_error
    _, score = run_in_workspace(harness, "copies", None)
    assert score.reward == 1.0, score.info


@pytest.mark.sandbox_os
def test_run_command_mounts_folders_of_its_work_dir_at_given_paths(tmp_path):
    work = Path(tempfile.mkdtemp(prefix="raso-mounts-"))
    try:
        (work / "app").mkdir()
        (work / "logs").mkdir()
        write(work / "app" / "in.txt", "hi\n")
        box = Sandbox()
        result = box.run_command(["bash", "-c", "cd /app && cat in.txt && echo 1 > /logs/reward.txt"], work,
                                 mounts={"/app": work / "app", "/logs": work / "logs"})
        assert result.ok and result.stdout == "hi\n", result
        assert (work / "logs" / "reward.txt").read_text() == "1\n"
        with pytest.raises(ValueError, match="a folder under the work dir"):
            box.run_command(["true"], work, mounts={"/app": tmp_path})
    finally:
        shutil.rmtree(work)


# ---------------------------------------------------------------------------------------------- builtin agent
@pytest.mark.sandbox_os
def test_the_builtin_agent_solves_an_example_task_through_shell_commands():
    from raso.agent import AgentConfig, ExecutionAgent
    from raso.testing import scripted_gateway

    harness = TasksHarness("example")
    task = next(t for t in harness.tasks("test") if t.id == "sort-numbers")
    gw, model = scripted_gateway([
        "Thought: look at the input.\nAction: head -3 numbers.txt",
        "Thought: sort numerically.\n```bash\nsort -n numbers.txt > sorted.txt\n```\nAction: run",
        "Thought: done.\nAction: submit",
    ])
    rollout = harness.rollout(task, [], ExecutionAgent(gw, AgentConfig(mode="none")))
    assert rollout.error is None and rollout.reward == 1.0 and rollout.terminated, rollout.error
    assert [s.action for s in rollout.trajectory] == ["head -3 numbers.txt", "sort -n numbers.txt > sorted.txt",
                                                       "submit"]
    first_lines = (EXAMPLE_DIR / "sort-numbers" / "workspace" / "numbers.txt").read_text().splitlines()[:3]
    assert all(line in rollout.trajectory[0].result for line in first_lines)  # the command's output came back
    assert "numbers.txt" in model.calls[0][-1]["content"]  # the first observation listed the workspace


@pytest.mark.sandbox_os
def test_the_builtin_agent_submitting_a_wrong_file_scores_zero():
    from raso.agent import AgentConfig, ExecutionAgent
    from raso.testing import scripted_gateway

    harness = TasksHarness("example")
    task = next(t for t in harness.tasks("test") if t.id == "sort-numbers")
    gw, _ = scripted_gateway(["Action: sort numbers.txt > sorted.txt", "Action: submit"])  # text order, not numeric
    rollout = harness.rollout(task, [], ExecutionAgent(gw, AgentConfig(mode="none")))
    assert rollout.reward == 0.0 and rollout.terminated
    assert "did not pass" in rollout.trajectory[-1].result


@pytest.mark.sandbox_os
def test_describe_reads_the_users_instructions_but_never_their_checks_or_the_example(tasks_root):
    from raso.optimizer.describe import DescribeLimits, collect_sources, describe_messages

    write(tasks_root / "a" / "check.sh", '[ "$(cat answer.txt)" = "SECRET-42" ]\n')
    harness = TasksHarness(tasks_root)  # loads without T and H: `raso harness describe` drafts them
    sources = collect_sources(harness)
    paths = [f.path for f in sources.files]
    assert str(tasks_root.resolve() / "a" / "instruction.md") in paths and "harness.py" in paths
    assert not any("example" in p or p.endswith(("check.sh", "check.py")) for p in paths), paths
    content = describe_messages(harness, sources, DescribeLimits())[0]["content"]
    assert "Do task a; write answer.txt." in content and "SECRET-42" not in content


@pytest.mark.sandbox_os
def test_the_builtin_agent_runs_a_harbor_tasks_commands_in_its_working_directory():
    from raso.agent import AgentConfig, ExecutionAgent
    from raso.testing import scripted_gateway

    harness = TasksHarness("example")
    task = next(t for t in harness.tasks("train") if t.id == "harbor-word-count")
    assert "/app/notes.txt" in task.instruction  # the task names absolute paths, as Harbor tasks do
    gw, _ = scripted_gateway(["Action: pwd && wc -w < /app/notes.txt > /app/count.txt", "Action: submit"])
    rollout = harness.rollout(task, [], ExecutionAgent(gw, AgentConfig(mode="none")))
    assert rollout.reward == 1.0, rollout.trajectory[-1].info
    assert "stdout:\n/app" in rollout.trajectory[0].result  # pwd


@pytest.mark.parametrize("reply, action", [
    ("Thought: count.\nAction: wc -l data.txt", "wc -l data.txt"),
    ("Action: `wc -l data.txt`", "wc -l data.txt"),
    ("Thought: a script.\n```bash\nsort -n a > b\nwc -l b\n```\nAction: run", "sort -n a > b\nwc -l b"),
    ("```sh\nls\n```", "ls"),  # a block without an Action line is run
    ("Thought: use grep. The `Action: grep -c x f` command counts.", "grep -c x f"),  # inline, quoted
    ("Thought: grep is not found here.", ""),  # no action: never the reply itself
    ("Action: submit", "submit"),
])
def test_parse_action_never_runs_a_whole_reply(tasks_root, reply, action, monkeypatch):
    monkeypatch.setattr("harnesses.tasks.checks.Sandbox", lambda *a, **k: None)  # parsing needs no sandbox
    harness = TasksHarness(tasks_root)
    assert harness.parse_action(reply) == action
    assert harness.action_is_valid(action, {}) is bool(action)


def test_without_bubblewrap_the_folder_loads_for_reading_and_a_run_is_refused_in_one_line(tasks_root, monkeypatch):
    # a fresh machine without bwrap: splits and descriptions are read, a run is refused before it starts
    from raso import api
    from raso.errors import ConfigError
    from raso.harness import sandbox as sandbox_module
    from raso.harness.sandbox import IsolationSupport
    monkeypatch.setattr(sandbox_module, "isolation_support",
                        lambda: IsolationSupport(notes=["bubblewrap (bwrap) is not installed"]))
    monkeypatch.delenv("RASO_REQUIRE_ISOLATION", raising=False)
    harness = TasksHarness(tasks_root)
    assert sorted(t.id for split in harness.splits().values() for t in split) == ["a", "b", "c"]
    spec = f"tasks:{tasks_root}"
    assert isinstance(api.load_harness(spec, for_runs=False), TasksHarness)
    with pytest.raises(ConfigError, match=r"cannot run harness .*its commands run only behind bubblewrap.*"
                                          r"bwrap\) is not installed.*apt-get install bubblewrap") as refused:
        api.load_harness(spec)
    assert "RASO_REQUIRE_ISOLATION" not in str(refused.value)
    with pytest.raises(ConfigError, match="cannot run harness"):
        api.load_harness(harness)  # a script's own instance is refused the same way
    (row,) = registry.describe_harnesses([spec])
    assert not row.loaded and "apt-get install bubblewrap" in row.error  # `raso harnesses` says it cannot run
    from raso.engine.plan import format_plan
    made = api.plan(spec)  # `raso optimize --plan` needs the tasks, not the sandbox: it plans and says so
    assert made.rollouts and "apt-get install bubblewrap" in (made.cannot_run_here or "")
    assert "note: the run itself would be refused on this machine" in format_plan(made)


# ---------------------------------------------------------------------------------------------- honest scores
class ScriptedCheckSandbox:
    """A stand-in for the check's sandbox (bubblewrap is not needed to test how a check's result is read): each
    `run_command` plays a scripted check, writing `files` (path under the run folder -> text, e.g.
    `logs/verifier/reward.txt`) and returning `output` and `exit_code` as the check's own."""

    def __init__(self, files: dict[str, str] | None = None, output: str = "", exit_code: int = 0,
                 limit_hit: str | None = None) -> None:
        import sys
        self.files, self.output, self.exit_code, self.limit_hit = files or {}, output, exit_code, limit_hit
        self.python, self.python_roots = sys.executable, []

    def __call__(self, *args, **kwargs) -> ScriptedCheckSandbox:  # stands in for the Sandbox class
        return self

    def run_command(self, argv, work_dir: Path, **kwargs):
        from raso.harness.sandbox import SandboxResult
        for rel, text in self.files.items():
            write(work_dir / rel, text)
        return SandboxResult(exit_code=self.exit_code, stdout=self.output, limit_hit=self.limit_hit,
                             timed_out=self.limit_hit == "wall_time")


def scripted_check(monkeypatch, **script) -> ScriptedCheckSandbox:
    sandbox = ScriptedCheckSandbox(**script)
    monkeypatch.setattr("harnesses.tasks.checks.Sandbox", sandbox)
    return sandbox


PYTEST_PASSED = "============================= test session starts ==============================\n" \
                "collected 1 item\n\n../tests/test_outputs.py .   [100%]\n\n============ 1 passed in 0.02s ============\n"
PYTEST_NO_TORCH = ("==================================== ERRORS ====================================\n"
                   "___________________ ERROR collecting tests/test_outputs.py ___________________\n"
                   "ImportError while importing test module '/tests/test_outputs.py'.\n"
                   "E   ModuleNotFoundError: No module named 'torch'\n"
                   "!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!\n")


@pytest.fixture
def harbor_root(tmp_path) -> Path:
    root = tmp_path / "t"
    make_task(root, "plain")
    harbor_task(root, "harbor", test="pytest /tests/test_outputs.py\n")
    write(root / "task_description.md", "T text\n")  # the builtin agent's system prompt reads T and H
    write(root / "harness_description.md", "H text\n")
    return root


def test_a_verifier_that_writes_no_reward_is_a_check_error_even_when_pytest_passed(harbor_root, monkeypatch):
    # as Harbor reads it: no reward file is the trial's error (its RewardFileNotFoundError), pytest's exit code
    # is never read
    scripted_check(monkeypatch, output=PYTEST_PASSED)
    _, score = run_in_workspace(TasksHarness(harbor_root), "harbor", None)
    assert score.check_error == "the verifier wrote no /logs/verifier/reward.txt or reward.json"
    assert score.soft_score is None


@pytest.mark.parametrize("reward_file, text, reason", [
    ("reward.txt", "", "reward.txt holds '', not a number in [0, 1]"),
    ("reward.txt", "passed\n", "reward.txt holds 'passed', not a number in [0, 1]"),
    ("reward.json", "{not json", "reward.json is not valid JSON"),
    ("reward.json", "1.5", "reward 1.5 is not in [0, 1]"),
])
def test_an_unreadable_reward_is_a_check_error(harbor_root, monkeypatch, reward_file, text, reason):
    scripted_check(monkeypatch, files={f"logs/verifier/{reward_file}": text})
    _, score = run_in_workspace(TasksHarness(harbor_root), "harbor", None)
    assert score.check_error == reason


def test_a_verifier_that_cannot_import_what_the_image_installs_is_a_check_error(harbor_root, monkeypatch):
    scripted_check(monkeypatch, files={"logs/verifier/reward.txt": "0\n"}, output=PYTEST_NO_TORCH, exit_code=0)
    _, score = run_in_workspace(TasksHarness(harbor_root), "harbor", None)
    assert score.check_error is not None and "could not import 'torch'" in score.check_error


def test_an_import_failing_inside_the_agents_own_file_is_the_agents_zero(harbor_root, monkeypatch):
    agents_file = ("../tests/test_outputs.py:3: in <module>\n    import solve\nsolve.py:1: in <module>\n"
                   "    import leftpad\nE   ModuleNotFoundError: No module named 'leftpad'\n")
    scripted_check(monkeypatch, files={"logs/verifier/reward.txt": "0\n"}, output=agents_file)
    _, score = run_in_workspace(TasksHarness(harbor_root), "harbor", "echo 'import leftpad' > solve.py")
    assert (score.reward, score.check_error) == (0.0, None)
    scripted_check(monkeypatch, files={"logs/verifier/reward.txt": "0\n"},
                   output=agents_file.replace("solve.py:1", "/app/solve.py:1"))  # the absolute path, as /app
    _, score = run_in_workspace(TasksHarness(harbor_root), "harbor", None)
    assert (score.reward, score.check_error) == (0.0, None)


def test_a_missing_module_the_agent_was_to_write_is_the_agents_zero(tmp_path, monkeypatch):
    root = tmp_path / "t"
    make_task(root, "plain")
    folder = harbor_task(root, "harbor", test="pytest /tests/test_outputs.py\n")
    write(folder / "instruction.md", "Write the module /app/solver.py with a function solve().\n")
    no_solver = PYTEST_NO_TORCH.replace("'torch'", "'solver'")
    scripted_check(monkeypatch, files={"logs/verifier/reward.txt": "0\n"}, output=no_solver)
    _, score = run_in_workspace(TasksHarness(root), "harbor", None)
    assert (score.reward, score.soft_score, score.check_error) == (0.0, 0.0, None)


def test_check_sh_exit_code_is_the_verdict_but_a_check_that_does_not_finish_is_a_check_error(tmp_path, monkeypatch):
    root = tmp_path / "t"
    make_task(root, "a")
    make_task(root, "b")
    scripted_check(monkeypatch, exit_code=1)
    _, score = run_in_workspace(TasksHarness(root), "a", None)
    assert (score.reward, score.check_error) == (0.0, None)
    scripted_check(monkeypatch, exit_code=None, limit_hit="wall_time")
    _, score = run_in_workspace(TasksHarness(root), "a", None)  # a new harness builds its check runner anew
    assert score.check_error is not None and score.check_error.startswith("check.sh did not finish: sandbox: wall")


def builtin_submit(harness: TasksHarness, task_id: str):
    from raso.agent import AgentConfig, ExecutionAgent
    from raso.testing import scripted_gateway

    task = next(t for tasks in harness.splits().values() for t in tasks if t.id == task_id)
    gw, _ = scripted_gateway(["Action: submit"])
    return harness.rollout(task, [], ExecutionAgent(gw, AgentConfig(mode="none")))


def test_a_builtin_agent_rollout_whose_check_wrote_no_reward_is_a_check_error_not_a_zero(harbor_root, monkeypatch):
    from raso.agent.evaluate import EvalResult

    scripted_check(monkeypatch, output=PYTEST_PASSED)
    rollout = builtin_submit(TasksHarness(harbor_root), "harbor")
    assert rollout.outcome == "check_error" and not rollout.counts
    assert rollout.error == "check error: the verifier wrote no /logs/verifier/reward.txt or reward.json"
    scored = rollout.model_copy(update={"task_id": "other", "reward": 1.0, "outcome": "ok", "error": None})
    result = EvalResult(harness="tasks", rollouts=[rollout, scored])
    summary = result.summary()
    assert (summary["mean_reward"], summary["check_errors"], summary["errors"]) == (1.0, 1, 1)
    assert summary["per_task"][0]["reward"] is None and summary["per_task"][0]["outcome"] == "check_error"


# ------------------------------------------------------------------------------ nothing of the check reaches the optimizer
VERIFIER_MARKER = "VERIFIER-SECRET-7f3a: expected 'ans=42' at tests/test_outputs.py::test_answer"


def optimizer_prompts(rollouts) -> list[str]:
    """Every rendering of rollouts an optimizer prompt is made of: RASU's trajectories, GEPA's reflective records
    and TextGrad's loss input (both budgets)."""
    from experiments.baselines.common import rollout_feedback, score_feedback
    from experiments.baselines.textgrad_baseline import trajectory_text
    from raso.optimizer.render import PromptLimits, render_trajectories

    limits = PromptLimits()
    texts = [render_trajectories(rollouts, limits)]
    for rollout in rollouts:
        texts += [rollout_feedback(rollout, limits), score_feedback(rollout),
                  trajectory_text(rollout, limits, "equal"), trajectory_text(rollout, limits, "full")]
    return texts


@pytest.mark.parametrize("script", [
    {"files": {"logs/verifier/reward.txt": "0\n"}, "output": VERIFIER_MARKER},  # a scored 0
    {"output": VERIFIER_MARKER, "exit_code": 1},  # a check error whose reason quotes the output
    {"files": {"logs/verifier/reward.txt": "0\n"}, "output": PYTEST_NO_TORCH + VERIFIER_MARKER},
])
def test_no_optimizer_prompt_shows_the_verifiers_output_for_the_builtin_agent(harbor_root, monkeypatch, script):
    scripted_check(monkeypatch, **script)
    rollout = builtin_submit(TasksHarness(harbor_root), "harbor")
    assert VERIFIER_MARKER in rollout.model_dump_json()  # kept in the trajectory for the user...
    assert not any(VERIFIER_MARKER in text for text in optimizer_prompts([rollout]))  # ...never shown to the optimizer


@pytest.mark.parametrize("check_error", [None, f"the verifier failed: {VERIFIER_MARKER}"])
def test_no_optimizer_prompt_shows_the_verifiers_output_for_an_external_agent(check_error):
    from raso.agent import AgentConfig
    from raso.agent.endpoint import EndpointSession
    from raso.agent.programs.base import Transcript
    from raso.agent.programs.command import CommandProgram
    from raso.agent.programs.runner import ExternalAgentRunner
    from raso.harness import Score, Step, Task
    from raso.harness.sandbox import SandboxResult

    runner = ExternalAgentRunner(CommandProgram(), gateway=None, config=AgentConfig())
    session = EndpointSession(endpoint=None, tag="tasks/t")  # type: ignore[arg-type]  # its URL is never asked
    session.calls = 1
    score = Score(reward=0.0, soft_score=0.0, info={"stdout": VERIFIER_MARKER, "check": "tests/test.sh"},
                  check_error=check_error)
    transcript = Transcript(steps=[Step(observation="", action="cat out.txt", result="42")], final_message="done")
    rollout = runner._rollout(TasksHarness.__new__(TasksHarness), Task(id="t", instruction="Write out.txt."), [],
                              session, SandboxResult(exit_code=0), score, transcript, {}, 0.0)
    assert rollout.outcome == ("check_error" if check_error else "ok")
    assert VERIFIER_MARKER in json.dumps(rollout.metadata["score_info"])  # the user's record keeps it
    assert rollout.trajectory[-1].result == "reward 0"  # the score step: the reward alone
    assert not any(VERIFIER_MARKER in text for text in optimizer_prompts([rollout]))


def test_raso_eval_says_check_error_with_its_reason_never_reward_zero(harbor_root, monkeypatch, capsys, tmp_path):
    from raso.llm.scripted import ScriptedModel
    from tests.test_agent_cli import parse

    make_task(harbor_root, "other")
    write(harbor_root / "splits.json", json.dumps({"train": ["harbor", "plain"], "val": ["other"]}))
    scripted_check(monkeypatch, output=PYTEST_PASSED)  # check.sh exits 0; the verifier writes no reward
    model = ScriptedModel(lambda messages: "Action: submit")
    out = tmp_path / "o"
    args = parse("eval", "--harness", f"tasks:{harbor_root}", "--split", "train", "--model", model.model,
                 "--out", str(out))
    assert args.func(args) == 1  # a batch script must notice that a task was not scored
    err = capsys.readouterr().err
    line = next(line for line in err.splitlines() if "harbor:" in line)
    assert "check error: the verifier wrote no /logs/verifier/reward.txt or reward.json" in line
    assert "reward 0.00" not in line and "plain: reward 1.00" in err
    assert "the harness's check could not score 1 of 2 rollout(s)" in err
    summary = json.loads((out / "summary.json").read_text())
    row = next(r for r in summary["per_task"] if r["task_id"] == "harbor")
    assert row["outcome"] == "check_error" and row["reward"] is None and summary["check_errors"] == 1
    assert summary["mean_reward"] == 1.0  # over the scored rollout alone: the check error is no 0


# ---------------------------------------------------------------------------------------------- clean baselines
def skillsbench_task(root: Path, name: str = "pdf-report", **kwargs) -> Path:
    """A Harbor task bundling its own curated skill (SkillsBench's layout: environment/skills/<name>/SKILL.md)."""
    folder = harbor_task(root, name, dockerfile=None, files={
        "report.txt": "q3 numbers\n", "skills/pdf/SKILL.md": "---\nname: pdf\ndescription: PDFs.\n---\nUse pdftk.\n",
        "skills/pdf/scripts/fill.sh": "echo fill\n"}, **kwargs)
    write(root / "task_description.md", "T text\n")
    write(root / "harness_description.md", "H text\n")
    return folder


def workspace_files(harness: TasksHarness, task_id: str) -> list[str]:
    task = next(t for tasks in harness.splits().values() for t in tasks if t.id == task_id)
    workspace = Path(tempfile.mkdtemp(prefix="raso-test-ws-"))
    try:
        harness.prepare_workspace(task, workspace)
        return sorted(p.relative_to(workspace).as_posix() for p in workspace.rglob("*") if p.is_file())
    finally:
        shutil.rmtree(workspace)


def test_a_tasks_own_skills_are_kept_out_of_the_workspace_unless_the_run_asks(tmp_path, monkeypatch):
    root = tmp_path / "t"
    make_task(root, "plain")
    skillsbench_task(root)
    harness = TasksHarness(root)
    assert harness.folder_task("pdf-report").task_skill_names == ["pdf"]
    assert workspace_files(harness, "pdf-report") == ["report.txt"]  # the no-skill baseline sees no SKILL.md
    scripted_check(monkeypatch, files={"logs/verifier/reward.txt": "1\n"})
    rollout = builtin_submit(harness, "pdf-report")
    assert rollout.skill_names == [] and rollout.metadata["task_skills"] == {
        "mode": "exclude", "visible": [], "kept_out": ["pdf"]}
    assert "SKILL.md" not in rollout.trajectory[0].observation  # the listing the agent saw
    with_skills = TasksHarness(root, task_skills="include")
    assert workspace_files(with_skills, "pdf-report") == ["report.txt", "skills/pdf/SKILL.md",
                                                          "skills/pdf/scripts/fill.sh"]
    assert with_skills.visible_task_skills("pdf-report") == {"mode": "include", "visible": ["pdf"], "kept_out": []}


def test_task_toml_skills_dir_names_the_tasks_skills_too(tmp_path):
    root = tmp_path / "t"
    make_task(root, "plain")
    harbor_task(root, "h", dockerfile="FROM python:3.12\nWORKDIR /app\nCOPY tools /app/tools\n",
                toml='[environment]\nskills_dir = "/app/tools/skills"\n',
                files={"tools/run.py": "print(1)\n", "tools/skills/csv/SKILL.md": "---\nname: csv\n---\n"})
    harness = TasksHarness(root)
    assert harness.folder_task("h").task_skill_names == ["csv"]
    assert workspace_files(harness, "h") == ["tools/run.py"]


def test_task_skills_is_a_harness_option_of_the_config_and_refuses_other_values(tmp_path, monkeypatch, capsys):
    from raso import api
    from raso.errors import ConfigError
    from tests.test_agent_cli import parse

    root = tmp_path / "t"
    make_task(root, "plain")
    skillsbench_task(root)
    write(root / "splits.json", json.dumps({"train": ["pdf-report"], "val": ["plain"]}))
    with pytest.raises(ConfigError, match=r"task_skills='maybe': use one of exclude, include"):
        api.load_harness(f"tasks:{root}", {"task_skills": "maybe"}, for_runs=False)
    from raso.llm.scripted import ScriptedModel
    scripted_check(monkeypatch, files={"logs/verifier/reward.txt": "1\n"})
    model = ScriptedModel(lambda messages: "Action: submit")
    args = parse("eval", "--harness", f"tasks:{root}", "--split", "train", "--model", model.model,
                 "--set", "harness_options.task_skills=include", "--out", str(tmp_path / "o"))
    assert args.func(args) == 0, capsys.readouterr().err
    (rollout,) = [json.loads(p.read_text()) for p in sorted((tmp_path / "o" / "trajectories").glob("*.json"))]
    assert rollout["metadata"]["task_skills"] == {"mode": "include", "visible": ["pdf"], "kept_out": []}
    assert "skills/pdf/SKILL.md" in rollout["trajectory"][0]["observation"]


# ---------------------------------------------------------------------------------------------- layouts
def test_a_folder_loads_what_it_can_with_a_line_per_skipped_task_and_a_summary(tmp_path, caplog):
    root = tmp_path / "t"
    make_task(root, "a")
    make_task(root, "b")
    prebuilt = {"toml": '[environment]\ndocker_image = "ghcr.io/x/y:1"\n'}
    harbor_task(root, "prebuilt-1", **prebuilt)
    harbor_task(root, "prebuilt-2", **prebuilt)
    harbor_task(root, "compose", files={"docker-compose.yaml": "services: {}\n"})
    with caplog.at_level("WARNING", logger="harnesses.tasks.harness"):
        harness = TasksHarness(root)
    assert sorted(harness.tasks_by_id) == ["a", "b"] and sorted(harness.skipped) == ["compose", "prebuilt-1",
                                                                                      "prebuilt-2"]
    lines = [r.getMessage() for r in caplog.records]
    assert sum(line.startswith("tasks: skipped Harbor task prebuilt-") for line in lines) == 2
    assert lines[-1] == (f"tasks folder {root.resolve()}: 2 loaded, 3 skipped: it runs in the prebuilt image 2, it "
                         "starts services 1 (strict=true refuses instead)")
    assert "3 skipped" in harness.data_label() and harness.describe()["skipped_tasks"] == 3
    from raso import api
    from raso.errors import ConfigError
    with pytest.raises(ConfigError, match=r"2 loaded, 3 skipped: .*\(strict=true refuses a folder with a task "
                                               r"it cannot run; the first: Harbor task compose is not supported"):
        api.load_harness(f"tasks:{root}", {"strict": True}, for_runs=False)  # `--harness-arg strict=true`
    with pytest.raises(ValueError, match="strict='no-thanks': use true or false"):
        TasksHarness(root, strict="no-thanks")  # type: ignore[arg-type]


def test_a_folder_where_no_task_can_run_is_refused_with_the_summary(tmp_path):
    root = tmp_path / "t"
    harbor_task(root, "x", files={"compose.yaml": "services: {}\n"})
    with pytest.raises(TasksFolderError, match=r"0 loaded, 1 skipped: it starts services 1 \(no task can run here"):
        TasksHarness(root)


def test_task_folders_nested_at_any_depth_are_found_with_their_paths_as_ids(tmp_path):
    root = tmp_path / "skillsbench"
    write(root / "README.md", "Tasks live under tasks/<category>/<task>.\n")
    make_task(root / "tasks" / "easy", "count")
    make_task(root / "tasks" / "hard" / "csv", "count")  # the same name elsewhere stays its own task
    harbor_task(root / "tasks" / "hard", "words", dockerfile=None)
    write(root / "docs" / "notes.md", "no task here\n")  # a folder without a task is not one
    harness = TasksHarness(root)
    assert sorted(harness.tasks_by_id) == ["tasks/easy/count", "tasks/hard/csv/count", "tasks/hard/words"]
    assert harness.folder_task("tasks/hard/words").kind == "harbor"


def test_the_terminal_bench_1_layout_is_named_and_refused_in_one_line(tmp_path):
    root = tmp_path / "t"
    make_task(root, "a")
    make_task(root, "b")
    tb1 = root / "hello-world"
    write(tb1 / "task.yaml", "instruction: |\n  Write hello.txt.\n")
    write(tb1 / "run-tests.sh", "pytest tests\n")
    write(tb1 / "solution.sh", "echo hello > hello.txt\n")
    write(tb1 / "Dockerfile", "FROM python:3.12\n")
    harness = TasksHarness(root)  # the rest load
    assert harness.skipped["hello-world"].startswith(
        "task hello-world: Terminal-Bench 1 layout (task.yaml) is not supported: convert it to Harbor's layout")
    with pytest.raises(TasksFolderError, match=r"Terminal-Bench 1 layout \(task.yaml\) is not supported 1") as refused:
        TasksHarness(root, strict=True)
    assert "no instruction.md" not in str(refused.value) and "\n" not in str(refused.value)


TB2_TEST_SH = ('cd /app\npython -m pytest /tests/test_outputs.py -q -p no:cacheprovider\n'
               'if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n')


@pytest.mark.sandbox_os
def test_real_pytest_verifiers_in_the_sandbox_are_scored_as_harbor_reads_them(tmp_path):
    root = tmp_path / "t"
    make_task(root, "plain")
    checks_out = "def test_out():\n    assert open('/app/out.txt').read().strip() == 'ok'\n"
    for name, test, tests_py in [
        ("tb2", TB2_TEST_SH, checks_out),  # Terminal-Bench 2's pattern: pytest's exit code becomes reward.txt
        ("no-reward", "cd /app\npython -m pytest /tests/test_outputs.py -q -p no:cacheprovider\n", checks_out),
        ("needs-torch", TB2_TEST_SH, "import torch\n\ndef test_out():\n    assert torch\n"),
        ("imports-solver", TB2_TEST_SH, "import sys\nsys.path.insert(0, '/app')\nimport solver\n\n"
                                        "def test_solver():\n    assert solver\n"),
    ]:
        folder = harbor_task(root, name, dockerfile=None, test=test)
        write(folder / "tests" / "test_outputs.py", tests_py)
    harness = TasksHarness(root)
    _, solved = run_in_workspace(harness, "tb2", "echo ok > out.txt")
    _, unsolved = run_in_workspace(harness, "tb2", None)
    assert (solved.reward, solved.check_error, unsolved.reward, unsolved.check_error) == (1.0, None, 0.0, None)
    _, passed_without_reward = run_in_workspace(harness, "no-reward", "echo ok > out.txt")
    assert "1 passed" in passed_without_reward.info["stdout"]
    assert passed_without_reward.check_error == "the verifier wrote no /logs/verifier/reward.txt or reward.json"
    _, no_torch = run_in_workspace(harness, "needs-torch", "echo ok > out.txt")
    assert no_torch.check_error is not None and "could not import 'torch'" in no_torch.check_error
    # the agent's own solver.py importing a package that is not there is the agent's failure: a counted 0
    _, agents_import = run_in_workspace(harness, "imports-solver", "echo 'import leftpad_utils' > solver.py")
    assert "No module named 'leftpad_utils'" in agents_import.info["stdout"]
    assert (agents_import.reward, agents_import.check_error) == (0.0, None)
