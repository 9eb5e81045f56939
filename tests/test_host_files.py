"""What raso does on the host with paths and bytes an agent or a task folder controls (issue 34, points 2, 3, 4, 7
and 8): the scorer's copy of a workspace never follows a link and survives trees thousands of folders deep,
hostile task folders are refused when they load (one line per problem), skill names that are paths never name a
folder, and the shipped Harbor example's verifier does not trust a file the agent may rewrite.

Plain tests read and copy files; tests that run a check in bubblewrap are marked `sandbox_os` (they fail, never
skip, without it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from harnesses.tasks import TasksHarness
from harnesses.tasks.checks import copy_tree
from harnesses.tasks.folder import TasksFolderError, read_task
from harnesses.tasks.harness import EXAMPLE_DIR
from raso.engine import OptimizeConfig
from raso.errors import ConfigError
from raso.safe_files import TreeLimits, UnsafePathError, list_files, read_bytes, remove_tree, tree_problems

SECRET = "host-secret-7c1f"  # text of a file the agent must never get at


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


_DEEP_TREES: list[Path] = []


@pytest.fixture(autouse=True)
def _remove_deep_trees():
    """Each test's deep trees go when it ends: pytest's own cleanup of old temp folders recurses (RecursionError)."""
    yield
    while _DEEP_TREES:
        remove_tree(_DEEP_TREES.pop())


def deep_tree(top: Path, depth: int) -> Path:
    """`top` with a chain of `depth` folders below it and a file at the bottom (built through descriptors: the path
    of the bottom is longer than the system allows)."""
    _DEEP_TREES.append(top)
    top.mkdir(parents=True, exist_ok=True)
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        with os.fdopen(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as fh:
            fh.write("deep\n")
    finally:
        os.close(fd)
    return top


@pytest.fixture
def secret_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "host-secrets"
    write(folder / "id_key", SECRET).chmod(0o600)
    return folder


# ------------------------------------------------------------------------------ point 2: the scorer's copy
def test_a_workspace_replaced_by_a_link_is_refused_not_copied(tmp_path: Path, secret_dir: Path) -> None:
    """`cd ..; mv workspace w; ln -s HOSTDIR workspace`: the copy must not follow the linked top."""
    workspace = tmp_path / "workspace"
    workspace.symlink_to(secret_dir)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        copy_tree(workspace, tmp_path / "copy")
    assert not (tmp_path / "copy" / "id_key").exists()


def test_links_and_fifos_inside_a_workspace_are_left_out_without_blocking(tmp_path: Path, secret_dir: Path) -> None:
    workspace = tmp_path / "workspace"
    write(workspace / "answer.txt", "42\n")
    (workspace / "sub").mkdir()
    (workspace / "sub" / "key").symlink_to(secret_dir / "id_key")
    (workspace / "secrets").symlink_to(secret_dir)
    os.mkfifo(workspace / "pipe")  # opened for reading, it would block the scorer forever
    left_out = copy_tree(workspace, tmp_path / "copy")
    assert sorted(left_out) == ["pipe (FIFO)", "secrets (symbolic link)", "sub/key (symbolic link)"]
    copied = sorted(p.relative_to(tmp_path / "copy").as_posix() for p in (tmp_path / "copy").rglob("*"))
    assert copied == ["answer.txt", "sub"]


def test_a_workspace_copy_is_bounded_in_bytes_per_file_and_in_all(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    write(workspace / "a.txt", "x" * 600)
    write(workspace / "b.txt", "y" * 600)
    with pytest.raises(UnsafePathError, match="per file"):
        copy_tree(workspace, tmp_path / "one", TreeLimits(max_bytes=10_000, max_file_bytes=500))
    with pytest.raises(UnsafePathError, match="in all"):
        copy_tree(workspace, tmp_path / "all", TreeLimits(max_bytes=1000, max_file_bytes=1000))
    with pytest.raises(UnsafePathError, match="more than 1 files and folders"):
        copy_tree(workspace, tmp_path / "count", TreeLimits(max_entries=1))


def test_reads_refuse_links_and_special_files_and_stop_at_the_limit(tmp_path: Path, secret_dir: Path) -> None:
    (tmp_path / "link").symlink_to(secret_dir / "id_key")
    os.mkfifo(tmp_path / "pipe")
    write(tmp_path / "big", "z" * 101)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        read_bytes(tmp_path / "link", 1000)
    with pytest.raises(UnsafePathError, match="FIFO"):
        read_bytes(tmp_path / "pipe", 1000)
    with pytest.raises(UnsafePathError, match="over the limit of 100 bytes"):
        read_bytes(tmp_path / "big", 100)
    assert read_bytes(tmp_path / "big", 101) == b"z" * 101


# ------------------------------------------------------------------------------ point 7: deep trees
def test_a_tree_1500_folders_deep_is_copied_to_the_depth_limit_without_recursion(tmp_path: Path) -> None:
    workspace = deep_tree(tmp_path / "workspace", 1500)
    write(workspace / "answer.txt", "42\n")
    left_out = copy_tree(workspace, tmp_path / "copy")  # RecursionError on os.walk before
    assert (tmp_path / "copy" / "answer.txt").read_text() == "42\n"
    assert len(left_out) == 1 and left_out[0].endswith(f"(deeper than {TreeLimits().max_depth} folders)")
    assert tree_problems(workspace)[0].endswith(f"deeper than {TreeLimits().max_depth} folders")


def test_remove_tree_removes_a_tree_1500_folders_deep_and_never_follows_a_link(tmp_path: Path,
                                                                                 secret_dir: Path) -> None:
    root = deep_tree(tmp_path / "rollout", 1500)
    (root / "secrets").symlink_to(secret_dir)
    readonly = root / "ro"
    write(readonly / "f.txt", "x").parent.chmod(0o500)
    assert remove_tree(root) is True  # shutil.rmtree(ignore_errors=True) raised RecursionError here
    assert not root.exists()
    assert (secret_dir / "id_key").read_text() == SECRET


def test_chown_tree_changes_links_not_their_targets_and_survives_a_deep_tree(tmp_path: Path, secret_dir: Path) -> None:
    """What the sandbox does after a program ran as another uid (Sandbox's _chown_tree): os.walk recursed there."""
    from raso.safe_files import chown_tree

    uid, gid = (65534, 65534) if os.geteuid() == 0 else (os.getuid(), os.getgid())
    tree = deep_tree(tmp_path / "work", 1500)
    write(tree / "out.txt", "x")
    (tree / "key").symlink_to(secret_dir / "id_key")
    owner = os.stat(secret_dir / "id_key").st_uid
    chown_tree(tree, uid, gid)
    assert os.stat(tree / "out.txt").st_uid == uid and os.lstat(tree / "key").st_uid == uid
    assert os.stat(tree / "d" / "d").st_uid == uid
    assert os.stat(secret_dir / "id_key").st_uid == owner


def test_a_workspace_listing_is_bounded_and_lists_no_linked_files(tmp_path: Path, secret_dir: Path) -> None:
    workspace = deep_tree(tmp_path / "workspace", 1500)
    write(workspace / "a.txt", "a")
    (workspace / "b.txt").symlink_to(secret_dir / "id_key")
    assert list_files(workspace, 10) == (["a.txt"], False)
    for index in range(12):
        write(workspace / f"f{index:02d}.txt", "x")
    shown, more = list_files(workspace, 10)
    assert len(shown) == 10 and more


# ------------------------------------------------------------------------------ point 3: hostile task folders
def raso_task(root: Path, name: str = "t") -> Path:
    folder = root / name
    write(folder / "instruction.md", "Write 42 to answer.txt.\n")
    write(folder / "check.sh", '[ "$(cat answer.txt)" = "42" ]\n')
    write(folder / "workspace" / "in.txt", "input\n")
    return folder


def harbor_task(root: Path, dockerfile: str, toml: str = "", name: str = "h") -> Path:
    folder = root / name
    write(folder / "task.toml", toml or '[verifier]\ntimeout_sec = 60.0\n')
    write(folder / "instruction.md", "Count the words.\n")
    write(folder / "tests" / "test.sh", "echo 1 > /logs/verifier/reward.txt\n")
    write(folder / "environment" / "Dockerfile", dockerfile)
    write(folder / "environment" / "notes.txt", "a b c\n")
    return folder


def test_a_linked_workspace_folder_is_refused_when_the_task_loads(tmp_path: Path, secret_dir: Path) -> None:
    folder = raso_task(tmp_path)
    shutil.rmtree(folder / "workspace")
    (folder / "workspace").symlink_to(secret_dir)
    with pytest.raises(TasksFolderError, match=r"workspace: a symbolic link"):
        read_task(folder)


def test_a_linked_instruction_is_refused_not_sent(tmp_path: Path, secret_dir: Path) -> None:
    folder = raso_task(tmp_path)
    (folder / "instruction.md").unlink()
    (folder / "instruction.md").symlink_to(secret_dir / "id_key")
    with pytest.raises(TasksFolderError, match=r"instruction.md: a symbolic link"):
        read_task(folder)


def test_a_linked_harbor_environment_is_refused(tmp_path: Path, secret_dir: Path) -> None:
    folder = harbor_task(tmp_path, "FROM python:3.12-slim\nWORKDIR /app\n")
    shutil.rmtree(folder / "environment")
    (folder / "environment").symlink_to(secret_dir)
    with pytest.raises(TasksFolderError, match=r"environment: a symbolic link"):
        read_task(folder)


@pytest.mark.parametrize("copy", ["COPY notes.txt ../../x", "COPY notes.txt /app/../../x",
                                  "COPY ../../../etc/hostname /app/x", "COPY /etc/hostname /app/x"])
def test_a_dockerfile_copy_that_climbs_out_copies_nothing_of_the_host(tmp_path: Path, copy: str) -> None:
    # such a Dockerfile needs a build: a container task, whose copies only the runtime's build makes (confined to
    # environment/, its build context); nothing is copied from the host into a workspace
    folder = harbor_task(tmp_path, f"FROM python:3.12-slim\nWORKDIR /app\n{copy}\n")
    task = read_task(folder)
    assert task.container is not None and task.workspace_files == []
    assert task.container.context == folder / "environment"


def test_a_fifo_and_an_oversized_file_in_a_task_folder_are_refused_one_line_each(tmp_path: Path) -> None:
    folder = harbor_task(tmp_path, "FROM python:3.12-slim\nWORKDIR /app\nCOPY pipe /app/pipe\n")
    os.mkfifo(folder / "environment" / "pipe")  # copying it hung `raso eval` before
    with open(folder / "environment" / "huge.bin", "wb") as fh:  # sparse: 300 MB on paper, nothing on disk
        fh.truncate(300 * 1024 * 1024)
    with pytest.raises(TasksFolderError) as caught:
        read_task(folder)
    lines = str(caught.value).splitlines()
    assert lines[0] == "Harbor task h cannot be used as it is:"
    assert any(line.strip().endswith("environment/pipe: a FIFO (only regular files and folders are copied; links "
                                      "are not followed)") for line in lines)
    assert any("environment/huge.bin: 314,572,800 bytes, over the limit" in line for line in lines)


@pytest.mark.parametrize(("toml", "key"), [
    ("[verifier]\ntimeout_sec = inf\n", "verifier.timeout_sec = inf"),
    ("[verifier]\ntimeout_sec = nan\n", "verifier.timeout_sec = nan"),
    ("[verifier]\ntimeout_sec = -1\n", "verifier.timeout_sec = -1"),
    ("[agent]\ntimeout_sec = 0\n", "agent.timeout_sec = 0"),
    ("environment = 5\n", "environment = 5"),
    ("[environment]\nworkdir = 7\n", "environment.workdir = 7"),
])
def test_task_toml_values_are_range_checked_one_line_each(tmp_path: Path, toml: str, key: str) -> None:
    folder = harbor_task(tmp_path, "FROM python:3.12-slim\nWORKDIR /app\n", toml=toml)
    with pytest.raises(TasksFolderError) as caught:
        read_task(folder)
    lines = str(caught.value).splitlines()
    assert lines[0].endswith("task.toml has values that cannot be used:")
    assert len(lines) == 2 and lines[1].strip().startswith(key)


def test_a_harbor_tasks_workspace_copy_stays_in_the_workspace(tmp_path: Path) -> None:
    folder = harbor_task(tmp_path, "FROM python:3.12-slim\nWORKDIR /app\nCOPY notes.txt /app\nCOPY notes.txt "
                                   "/app/sub/n.txt\n")
    task = read_task(folder)
    assert [relative for _source, relative in task.workspace_files] == ["notes.txt", "sub/n.txt"]


# ------------------------------------------------------------------------------ points 4 and 7: skill names
@pytest.mark.parametrize("name", ["../../escaped", "ABSOLUTE", "nul\x00name", "x" * 5000, "Upper Case"])
def test_an_initial_skill_whose_name_is_not_a_folder_name_is_refused_and_nothing_outside_is_touched(
        tmp_path: Path, name: str) -> None:
    from test_cli_runs import algorithm_reply
    from test_engine_support import ToyHarness, named_scripted_model, toy_agent_reply

    from raso.api import optimize

    mine = tmp_path / "my-skill"  # a user's own skill folder, with notes beside it
    write(mine / "SKILL.md", "---\nname: my-skill\ndescription: Mine.\n---\nMine.\n")
    write(mine / "notes.md", "my notes\n")
    name = str(mine) if name == "ABSOLUTE" else name
    front = yaml.safe_dump({"name": name, "description": "How to answer toy tasks."}, width=10_000)
    start = write(tmp_path / "start.md", f"---\n{front}---\nLEVEL=1\n")
    config = OptimizeConfig(harness="test_engine_support:ToyHarness",
                            models={"target": named_scripted_model("names-agent", toy_agent_reply),
                                    "optimizer": named_scripted_model("names-optimizer", algorithm_reply)},
                            init={"method": str(start)}, update={"method": "rfsu"},
                            schedule={"epochs": 1, "minibatch": 3, "workers": 1, "test": False},
                            run_dir=tmp_path / "work" / "run")
    with pytest.raises(ConfigError, match=r"is not an Agent Skills name \(lowercase letters, digits and single "
                                          r"hyphens, at most 64 characters"):
        optimize(config=config, harness=ToyHarness())
    # refused before the run starts: no run directory, nothing written beside the user's files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my-skill", "start.md"]
    assert sorted(p.name for p in mine.iterdir()) == ["SKILL.md", "notes.md"]
    assert (mine / "notes.md").read_text() == "my notes\n"


def test_a_skill_folder_1500_folders_deep_is_refused_in_words(tmp_path: Path) -> None:
    from raso.skill import Skill, SkillParseError

    folder = tmp_path / "deep-skill"
    write(folder / "SKILL.md", "---\nname: deep-skill\ndescription: Deep.\n---\nBody.\n")
    deep_tree(folder / "references", 1500)
    with pytest.raises(SkillParseError, match=r"folders deeper than 16 levels in a skill folder"):
        Skill.load_folder(folder)  # RecursionError in os.walk before


# ------------------------------------------------------------------------------ bubblewrap: scoring for real
def workspace_for(harness: TasksHarness, task_id: str) -> tuple[object, Path]:
    task = next(t for tasks in harness.splits().values() for t in tasks if t.id == task_id)
    workspace = Path(tempfile.mkdtemp(prefix="raso-test-ws-"))
    harness.prepare_workspace(task, workspace)
    return task, workspace


@pytest.mark.sandbox_os
def test_the_scorer_does_not_follow_a_workspace_swapped_for_a_link(tmp_path: Path, secret_dir: Path) -> None:
    root = tmp_path / "tasks"
    raso_task(root, "a")
    write(root / "a" / "check.sh", 'cat * ; [ "$(cat answer.txt)" = "42" ]\n')
    raso_task(root, "b")
    harness = TasksHarness(root)
    secret_dir.chmod(0o755)  # readable by the sandbox's uid: only the link decides
    task, workspace = workspace_for(harness, "a")
    try:
        moved = workspace.with_name(workspace.name + "-moved")
        workspace.rename(moved)  # the agent's `cd ..; mv workspace w; ln -s HOSTDIR workspace`
        workspace.symlink_to(secret_dir)
        write(secret_dir / "answer.txt", "42\n")
        score = harness.score_workspace(task, workspace)
    finally:
        workspace.unlink()
        remove_tree(moved)
    assert score.reward == 0.0 and score.check_error is None  # the agent's doing: a counted 0, no check error
    assert "symbolic link" in score.info["error"]
    assert SECRET not in str(score.info)


@pytest.fixture
def own_tempdir(monkeypatch: pytest.MonkeyPatch):
    """A temp folder of this test's own (every uid can enter it, as the sandbox needs), so what is left in it is
    what this test left."""
    base = Path(tempfile.mkdtemp(prefix="raso-test-tmp-"))
    base.chmod(0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    yield base
    remove_tree(base)


@pytest.mark.sandbox_os
def test_scoring_a_workspace_1500_folders_deep_leaves_no_folder_behind(tmp_path: Path, own_tempdir: Path) -> None:
    root = tmp_path / "tasks"
    raso_task(root, "a")
    raso_task(root, "b")
    harness = TasksHarness(root)
    task, workspace = workspace_for(harness, "a")
    deep_tree(workspace / "junk", 1500)
    write(workspace / "answer.txt", "42\n")
    score = harness.score_workspace(task, workspace)  # RecursionError out of the scorer before
    assert score.reward == 1.0
    assert any("deeper than" in item for item in score.info["left_out"])
    assert [p.name for p in own_tempdir.iterdir()] == [workspace.name]  # the check's copy is gone


@pytest.mark.sandbox_os
def test_the_builtin_agents_environment_closes_a_workspace_1500_folders_deep(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    raso_task(root, "a")
    raso_task(root, "b")
    harness = TasksHarness(root)
    task = next(t for tasks in harness.splits().values() for t in tasks if t.id == "a")
    env = harness.make_env(task)
    env.reset()
    assert env.workspace is not None
    workspace = env.workspace
    deep_tree(workspace / "junk", 1500)
    env.close()
    assert not workspace.exists()


@pytest.mark.sandbox_os
def test_a_linked_task_description_is_refused_not_sent_to_the_model(tmp_path: Path, secret_dir: Path) -> None:
    root = tmp_path / "tasks"
    raso_task(root, "a")
    raso_task(root, "b")
    (root / "task_description.md").symlink_to(secret_dir / "id_key")
    harness = TasksHarness(root)
    with pytest.raises(TasksFolderError, match=r"task_description.md: a symbolic link"):
        _ = harness.task_description


# ------------------------------------------------------------------------------ point 8: the example's verifier
@pytest.mark.sandbox_os
def test_the_harbor_example_does_not_reward_rewriting_its_input() -> None:
    harness = TasksHarness(EXAMPLE_DIR)
    task, workspace = workspace_for(harness, "harbor-word-count")
    try:  # do not count: make the input agree with any answer
        subprocess.run(["bash", "-c", "echo one > notes.txt; echo 1 > count.txt"], cwd=workspace, check=True)
        cheated = harness.score_workspace(task, workspace)
        subprocess.run(["bash", "-c", "cp /dev/null notes.txt; wc -w < "
                        f"{EXAMPLE_DIR / 'harbor-word-count' / 'environment' / 'notes.txt'} > count.txt"],
                       cwd=workspace, check=True)
        honest = harness.score_workspace(task, workspace)
    finally:
        remove_tree(workspace)
    assert cheated.reward == 0.0
    assert honest.reward == 1.0


# ------------------------------------------------------------------------------ other harnesses' scorers
def test_the_spreadsheet_scorer_collects_nothing_through_a_workspace_swapped_for_a_link(tmp_path: Path,
                                                                                       secret_dir: Path) -> None:
    from harnesses.spreadsheet.workspace import _collected

    write(secret_dir / "1_output.xlsx", SECRET)
    workspace = tmp_path / "workspace"
    workspace.symlink_to(secret_dir)
    path, problem = _collected(workspace, "1_output.xlsx", tmp_path / "collected.xlsx")
    assert path is None and problem is not None and "symbolic link" in problem
    assert not (tmp_path / "collected.xlsx").exists()


def test_the_officeqa_scorer_reads_no_answer_through_a_workspace_swapped_for_a_link(tmp_path: Path,
                                                                                   secret_dir: Path) -> None:
    from harnesses.officeqa import OfficeQAHarness

    harness = OfficeQAHarness()
    task = harness.tasks("val")[0]
    write(secret_dir / "answer.txt", harness.question(task.id).answer)  # a host file that happens to hold it
    workspace = tmp_path / "workspace"
    workspace.symlink_to(secret_dir)
    score = harness.score_workspace(task, workspace)
    assert score.reward == 0.0 and "final_output" not in score.info



@pytest.mark.sandbox_os
def test_describe_never_follows_a_link_in_a_users_tasks_folder_into_the_prompt(tmp_path: Path,
                                                                               secret_dir: Path) -> None:
    from raso.optimizer.describe import collect_sources

    root = tmp_path / "tasks"
    raso_task(root, "a")
    raso_task(root, "b")
    write(root / "notes.md", "How these tasks are checked.\n")
    (root / "readme.md").symlink_to(secret_dir / "id_key")  # a downloaded folder's planted link
    sources = collect_sources(TasksHarness(root))
    assert any(f.path.endswith("notes.md") for f in sources.files)
    assert SECRET not in "".join(f.text for f in sources.files)
    assert any("readme.md (not read: a link" in name for name in sources.omitted)


# ------------------------------------------------------------------------------ a downloaded skill's SKILL.md
@pytest.mark.parametrize("given", ["folder", "skill_md"])
def test_a_skill_md_linked_to_a_host_file_is_refused_without_reading_it(tmp_path: Path, secret_dir: Path,
                                                                       given: str, capsys) -> None:
    from raso.api import resolve_config
    from raso.cli.main import main as raso_main
    from raso.engine.engine import load_initial_skill
    from raso.skill import Skill, SkillParseError

    write(secret_dir / "creds.md", f"---\nname: {SECRET}\ndescription: x\n---\n{SECRET}\n").chmod(0o600)
    folder = tmp_path / "downloaded" / "pdf"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").symlink_to(secret_dir / "creds.md")
    path = folder if given == "folder" else folder / "SKILL.md"
    with pytest.raises(SkillParseError) as caught:
        Skill.load_with_folder(path)
    assert SECRET not in str(caught.value) and "link" in str(caught.value)
    config = resolve_config("toy", overrides={"init": {"method": str(path)}})
    assert config.init.method.endswith(str(path.relative_to(tmp_path)))  # the link's own path, not its target
    with pytest.raises(SkillParseError) as caught:
        load_initial_skill(config)
    assert SECRET not in str(caught.value)
    assert raso_main(["eval", "--harness", "toy", "--skill", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "link" in err and SECRET not in err and not (tmp_path / "out").exists()
