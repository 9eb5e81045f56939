"""Harbor tasks whose Dockerfile builds: loaded as container tasks, built once per content, run and scored in their
container (harnesses/tasks/containers.py).

The tests marked `containers` build real images with the installed runtime (podman or docker) from the offline
base image (`python -m harnesses.tasks.base_image`, built here when absent); the others need no runtime.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from harnesses.tasks import TasksHarness
from harnesses.tasks.base_image import build_base_image, from_images
from harnesses.tasks.containers import (
    SHIPPED_CONTAINERS_CONF,
    ContainerError,
    TaskContainer,
    find_runtime,
    image_tag,
    run_bounded,
)
from raso.errors import ConfigError

BASE = "ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624"  # the FROM of every TermiGen task
DOCKERFILE = f"FROM {BASE}\nRUN mkdir -p /app && echo 3 > /app/n.txt\nWORKDIR /app\n"
# passes when the agent left n.txt doubled in answer.txt
TEST_SH = ('if [ "$(cat /app/answer.txt 2>/dev/null)" = "$(( $(cat /app/n.txt) * 2 ))" ]; then '
           "echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def container_task(root: Path, name: str, dockerfile: str = DOCKERFILE, test: str = TEST_SH,
                   toml: str = "[verifier]\ntimeout_sec = 60.0\n[environment]\ncpus = 1\nmemory_mb = 512\n") -> Path:
    folder = root / name
    write(folder / "instruction.md", "Write twice the number in /app/n.txt to /app/answer.txt.\n")
    write(folder / "task.toml", toml)
    write(folder / "tests" / "test.sh", test)
    write(folder / "environment" / "Dockerfile", dockerfile)
    return folder


@pytest.fixture
def folder(tmp_path) -> Path:
    root = tmp_path / "tasks"
    container_task(root, "double")
    container_task(root, "silent", test="echo the verifier forgot its reward\n")
    write(root / "task_description.md", "Numeric file tasks.\n")  # T and H: what a rollout's prompt holds
    write(root / "harness_description.md", "One shell command per action in the task's container; submit.\n")
    return root


# ------------------------------------------------------------------------------------------- no runtime needed
@pytest.mark.parametrize("dockerfile", [DOCKERFILE, f"FROM {BASE}\nCOPY --from=builder /x /app/x\nWORKDIR /srv\n"])
def test_a_dockerfile_that_builds_makes_a_container_task_at_its_workdir(tmp_path, dockerfile):
    root = tmp_path / "t"
    container_task(root, "a", dockerfile=dockerfile)
    container_task(root, "b")
    harness = TasksHarness(root)
    task = harness.folder_task("a")
    assert task.container is not None and task.workspace_files == []
    assert task.workdir == ("/app" if "WORKDIR /app" in dockerfile else "/srv")
    assert (task.container.cpus, task.container.memory_mb) == (1, 512)
    assert harness.describe()["container_tasks"] == 2


def test_the_image_tag_follows_the_build_context_bytes_and_modes(tmp_path):
    root = tmp_path / "t"
    folder = container_task(root, "a")
    container_task(root, "b")
    first = image_tag(TasksHarness(root).folder_task("a"))
    assert first == image_tag(TasksHarness(root).folder_task("a"))  # stable: a second run reuses the image
    write(folder / "environment" / "data.txt", "x\n")
    second = image_tag(TasksHarness(root).folder_task("a"))
    (folder / "environment" / "data.txt").chmod(0o755)
    third = image_tag(TasksHarness(root).folder_task("a"))
    assert len({first, second, third}) == 3 and first.startswith("localhost/raso-task-a:")
    assert image_tag(TasksHarness(root).folder_task("b")) != first  # same bytes, another task: its own name


def test_without_a_runtime_a_run_is_refused_in_one_line_and_reading_still_works(folder, tmp_path, monkeypatch):
    empty = tmp_path / "no-programs"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    harness = TasksHarness(folder)  # splits and descriptions need no runtime
    assert {t.id for s in harness.splits().values() for t in s} == {"double", "silent"}
    with pytest.raises(ConfigError) as caught:
        harness.check_runnable()
    message = str(caught.value)
    assert "\n" not in message and "podman or docker" in message and "apt-get install podman" in message


def test_external_agents_are_refused_a_container_task_in_one_line(folder, tmp_path):
    harness = TasksHarness(folder)
    task = next(t for s in harness.splits().values() for t in s if t.id == "double")
    with pytest.raises(ConfigError, match=r"runs in a container, where only raso's builtin agent works"):
        harness.prepare_workspace(task, tmp_path / "ws")


def test_from_images_names_the_base_images_but_not_build_stages(tmp_path):
    container_task(tmp_path, "a", dockerfile=f"FROM {BASE} AS build\nRUN true\nFROM build\nRUN true\n")
    container_task(tmp_path, "b", dockerfile="FROM --platform=linux/amd64 python:3.12-slim\nRUN true\n")
    container_task(tmp_path, "c", dockerfile="FROM scratch\nCOPY x /x\n")
    assert from_images(tmp_path) == [BASE, "python:3.12-slim"]


def test_a_command_that_prints_without_end_keeps_only_its_tail():
    result = run_bounded(["bash", "-c", "head -c 300000 /dev/zero | tr '\\0' a; echo END"], 30, max_output=1000)
    assert result.exit_code == 0 and result.truncated and len(result.output) == 1000
    assert result.output.endswith("END\n")


def test_a_command_past_its_limit_is_killed_and_said_so():
    result = run_bounded(["sleep", "30"], 0.5)
    assert result.timed_out and result.exit_code is None


def test_the_shipped_containers_conf_sets_runc_and_ulimits_within_the_hard_limits():
    text = SHIPPED_CONTAINERS_CONF.read_text(encoding="utf-8")
    assert 'runtime = "runc"' in text and "nofile=4096:4096" in text


# ------------------------------------------------------------------------------------------- with a runtime
@pytest.fixture(scope="module")
def runtime():
    found = find_runtime()  # fails (never skips) without podman or docker: the marker says what is needed
    build_base_image([BASE], found)  # no-op when the base image exists
    return found


def run_task(harness: TasksHarness, task_id: str, commands: list[str]):
    task = next(t for s in harness.splits().values() for t in s if t.id == task_id)
    env = harness.make_env(task)
    try:
        observation, _ = env.reset()
        steps = [env.step(c) for c in commands]
    finally:
        env.close()
    return observation, steps, env


@pytest.mark.containers
def test_a_container_task_scores_one_when_solved_and_zero_untouched(folder, runtime):
    harness = TasksHarness(folder)
    observation, steps, _ = run_task(harness, "double", ["pwd && cat n.txt", "echo $(( $(cat n.txt) * 2 )) > answer.txt",
                                                         "submit"])
    assert "n.txt" in observation and "/app" in observation
    assert steps[0][0].startswith("exit code 0") and "/app\n3" in steps[0][0]
    assert steps[-1][1] == 1.0 and steps[-1][2] is True
    _, untouched, _ = run_task(harness, "double", ["submit"])
    assert untouched[-1][1] == 0.0 and "check_error" not in untouched[-1][4]


@pytest.mark.containers
def test_a_verifier_that_writes_no_reward_is_a_check_error_with_its_reason(folder, runtime):
    harness = TasksHarness(folder)
    _, steps, _ = run_task(harness, "silent", ["submit"])
    info = steps[-1][4]
    assert steps[-1][0] == "Submitted: the check could not score the files." and "forgot" not in steps[-1][0]
    assert "wrote no /logs/verifier/reward.txt" in info["check_error"] and "forgot its reward" in info["check"]["output"]
    from raso.agent import AgentConfig, ExecutionAgent
    from raso.testing import scripted_gateway

    gw, _ = scripted_gateway(["Action: submit"])
    task = next(t for s in harness.splits().values() for t in s if t.id == "silent")
    rollout = harness.rollout(task, [], ExecutionAgent(gw, AgentConfig(mode="none")))
    assert rollout.outcome == "check_error" and "wrote no /logs/verifier/reward" in (rollout.error or "")


@pytest.mark.containers
def test_the_image_is_built_once_and_the_container_has_no_network_and_is_removed(folder, runtime, monkeypatch):
    harness = TasksHarness(folder, wall_seconds=3)
    run_task(harness, "double", ["true"])  # builds when absent
    calls: list[tuple[str, ...]] = []
    original = type(runtime).run

    def recording(self, *args, **kwargs):
        calls.append(args)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(runtime), "run", recording)
    _, steps, env = run_task(harness, "double", ["ls /sys/class/net", "sleep 30", "submit"])
    assert not [c for c in calls if c[0] == "build"]  # reused by its content tag
    assert steps[0][0].split("\n")[1:] == ["lo"]  # no interface but loopback
    started = next(c for c in calls if c[0] == "run")
    assert started[started.index("--pids-limit") + 1] == "4096" and started[-1].startswith("sleep ")
    assert "killed (time limit)" in steps[1][0]
    assert steps[2][1] == 0.0
    name = started[started.index("--name") + 1]
    left = original(runtime, "ps", "--all", "--filter", f"name={name}", "--format", "{{.Names}}")
    assert left.exit_code == 0 and name not in left.output


@pytest.mark.containers
def test_a_build_that_fails_names_the_task_and_the_failing_step(tmp_path, runtime):
    root = tmp_path / "t"
    container_task(root, "broken", dockerfile=f"FROM {BASE}\nRUN echo about to fail && exit 3\n")
    container_task(root, "ok")
    harness = TasksHarness(root)
    with pytest.raises(ContainerError, match=r"task broken: building its image failed \(exit \d+"):
        TaskContainer(runtime, harness.folder_task("broken"), 10)


@pytest.mark.containers
def test_the_task_files_a_build_copies_keep_their_executable_bit(tmp_path, runtime):
    root = tmp_path / "t"
    folder = container_task(root, "tool", dockerfile=f"FROM {BASE}\nRUN mkdir -p /app\nCOPY run.sh /app/run.sh\n"
                                                     "WORKDIR /app\n")
    script = write(folder / "environment" / "run.sh", "#!/bin/sh\necho ran\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    container_task(root, "ok")
    _, steps, _ = run_task(TasksHarness(root), "tool", ["./run.sh"])
    assert steps[0][0] == "exit code 0\nran", steps[0][0]
    assert os.access(script, os.X_OK)


@pytest.mark.containers
def test_the_builtin_agent_solves_a_container_task_through_a_rollout(folder, runtime):
    from raso.agent import AgentConfig, ExecutionAgent
    from raso.testing import scripted_gateway

    harness = TasksHarness(folder)
    task = next(t for s in harness.splits().values() for t in s if t.id == "double")
    gw, model = scripted_gateway([
        "Thought: read the number.\nAction: cat n.txt",
        "Thought: double it.\n```bash\necho $(( $(cat n.txt) * 2 )) > answer.txt\n```\nAction: run",
        "Thought: done.\nAction: submit",
    ])
    rollout = harness.rollout(task, [], ExecutionAgent(gw, AgentConfig(mode="none")))
    assert rollout.error is None and rollout.reward == 1.0 and rollout.terminated, rollout.error
    assert rollout.trajectory[0].result.splitlines()[-1] == "3"  # the command ran in the image's /app
    assert "n.txt" in model.calls[0][-1]["content"]  # the first observation listed the WORKDIR
