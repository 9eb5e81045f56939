"""Harbor tasks whose environment/ builds an image: built once per content hash, run as their authors meant.

A task whose Dockerfile builds (RUN, a COPY outside its WORKDIR, ...) runs in a container runtime, podman or
docker, whichever is installed (the harness's `container_runtime` argument picks one). Its image is built from
environment/ once and tagged by a digest of the Dockerfile and every file it may copy, so a second run reuses it
and an edited task builds again. A rollout starts one container from that image without a network (the builtin
agent's loop stays on the host; its model calls never pass through the container), with the task.toml's cpus
and memory; each agent command runs in it with `exec` at the task's WORKDIR under a time limit; on submit the
task's tests are copied to /tests and its verifier runs in the same container, as Harbor runs it, and the reward
is read from /logs/verifier. Nothing is copied from a container to the host but the reward files, bounded.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from raso.harness import Score, Task
from raso.safe_files import list_files, read_bytes

from .checks import MAX_REWARD_BYTES, _failed, _score, harbor_reward
from .env import SUBMIT, CommandStepsEnv, StepResult, submitted_step
from .folder import TASK_FOLDER_LIMITS, FolderTask, TasksFolderError

log = logging.getLogger(__name__)

PACKAGE_DIR = Path(__file__).resolve().parent
# runc with ulimits within the hard limits: what podman needs where root lacks CAP_SYS_RESOURCE (CI runners, nested
# containers); used only when the user points CONTAINERS_CONF at it (the error below says so).
SHIPPED_CONTAINERS_CONF = PACKAGE_DIR / "containers.conf"
ContainerRuntimeName = Literal["auto", "podman", "docker"]
RUNTIME_PROGRAMS = ("podman", "docker")
MAX_COMMAND_OUTPUT = 64 * 1024  # what one agent command or the verifier shows at most (the tail is kept)
MAX_BUILD_OUTPUT = 256 * 1024
DEFAULT_BUILD_TIMEOUT_S = 600.0
DEFAULT_VERIFIER_TIMEOUT_S = 600.0
CONTROL_TIMEOUT_S = 120.0  # starting, copying into and removing a container
KILL_GRACE_S = 5
MAX_CONTAINER_LIFETIME_S = 3 * 3600  # a rollout's container outlives no rollout by more than this
MAX_CONTAINER_PROCESSES = 4096  # a fork bomb in an agent's command stops there
# Messages of a runtime whose defaults this machine refuses, and what to set instead.
_SETUP_FAILURES = re.compile(r"setrlimit|error setting rlimit|RLIMIT_NOFILE|cgroups in hybrid mode|"
                             r"cannot set up namespace|newuidmap", re.IGNORECASE)


class ContainerError(TasksFolderError):
    """A container task that cannot be built or run here; one line saying what to do."""


def setup_hint(output: str) -> str:
    if _SETUP_FAILURES.search(output):
        return (f" (this machine refuses the runtime's default limits: use runtime runc with ulimits within the hard "
                f"limits, e.g. `export CONTAINERS_CONF={SHIPPED_CONTAINERS_CONF}`; harnesses/tasks/README.md)")
    return ""


class CommandResult(BaseModel):
    exit_code: int | None
    output: str
    timed_out: bool = False
    truncated: bool = False


def run_bounded(argv: list[str], timeout_s: float, max_output: int = MAX_COMMAND_OUTPUT) -> CommandResult:
    """Run `argv` (stdout and stderr together), keeping the last `max_output` bytes: a command inside a container
    may print without end; the pipe is drained so it never blocks, and only the tail is held."""
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert process.stdout is not None
    kept = bytearray()
    truncated = False

    def drain() -> None:
        nonlocal truncated
        assert process.stdout is not None
        while chunk := process.stdout.read(65536):
            kept.extend(chunk)
            if len(kept) > max_output:
                del kept[:len(kept) - max_output]
                truncated = True

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    timed_out = False
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        process.kill()
        process.wait()
    reader.join(timeout=10)
    return CommandResult(exit_code=None if timed_out else process.returncode,
                         output=bytes(kept).decode("utf-8", errors="replace"), timed_out=timed_out,
                         truncated=truncated)


class ContainerRuntime(BaseModel):
    """The runtime program (podman or docker) and how to call it."""

    name: str
    program: str

    def run(self, *args: str, timeout_s: float = CONTROL_TIMEOUT_S,
            max_output: int = MAX_COMMAND_OUTPUT) -> CommandResult:
        return run_bounded([self.program, *args], timeout_s, max_output)

    def check(self, *args: str, what: str, timeout_s: float = CONTROL_TIMEOUT_S) -> CommandResult:
        """Run a control command; ContainerError naming `what` failed, with the runtime's last line and a hint."""
        result = self.run(*args, timeout_s=timeout_s)
        if result.exit_code != 0:
            raise ContainerError(f"{self.name}: {what} failed ({_ending(result)}){setup_hint(result.output)}")
        return result


def _ending(result: CommandResult) -> str:
    if result.timed_out:
        return "timed out"
    last = [line for line in result.output.splitlines() if line.strip()][-3:]
    return f"exit {result.exit_code}" + (f": {' | '.join(line.strip()[:200] for line in last)}" if last else "")


def find_runtime(choice: str = "auto") -> ContainerRuntime:
    """The installed runtime `choice` names (auto: podman, else docker); ContainerError naming what to install."""
    names = RUNTIME_PROGRAMS if choice == "auto" else (choice,)
    for name in names:
        program = shutil.which(name)
        if program:
            return ContainerRuntime(name=name, program=program)
    wanted = "podman or docker" if choice == "auto" else choice
    raise ContainerError(f"this folder has Harbor tasks that build a container image, and no {wanted} is installed "
                         f"here: install one (Debian: apt-get install podman runc), or run a folder whose tasks "
                         f"need no build")


def image_digest(task: FolderTask) -> str:
    """sha256 over the Dockerfile and every file of environment/ (path, executable bit, bytes): what the build
    reads. The tree passed the task folder's checks when it loaded (no links, bounded sizes)."""
    assert task.container is not None
    context = task.container.context
    digest = hashlib.sha256()
    files, _more = list_files(context, TASK_FOLDER_LIMITS.max_entries, TASK_FOLDER_LIMITS.max_depth)
    for relative in sorted(files):
        path = context / relative
        mode = os.lstat(path).st_mode
        digest.update(f"{relative}\0{mode & 0o111:o}\0".encode())
        digest.update(hashlib.sha256(read_bytes(path, TASK_FOLDER_LIMITS.max_file_bytes)).digest())
    return digest.hexdigest()


def image_tag(task: FolderTask) -> str:
    slug = re.sub(r"[^a-z0-9_.-]+", "-", task.id.lower()).strip("-.")[:80] or "task"
    return f"localhost/raso-task-{slug}:{image_digest(task)[:16]}"


def _lock_dir() -> Path:
    base = os.environ.get("RASO_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "raso")
    folder = Path(base) / "container-builds"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def ensure_image(runtime: ContainerRuntime, task: FolderTask) -> str:
    """The task's image tag, built unless the runtime already holds it. One build per tag at a time (a file lock:
    parallel rollouts of one task wait for the first build instead of building twice)."""
    assert task.container is not None
    tag = image_tag(task)
    lock_path = _lock_dir() / (re.sub(r"[^A-Za-z0-9_.-]", "_", tag) + ".lock")
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if runtime.run("image", "inspect", tag).exit_code == 0:  # built by an earlier run
            return tag
        log.info("tasks: building the image of %s as %s", task.id, tag)
        result = runtime.run("build", "--tag", tag, "--file", str(task.container.dockerfile),
                             str(task.container.context), timeout_s=task.container.build_timeout_s,
                             max_output=MAX_BUILD_OUTPUT)
        if result.exit_code != 0:
            raise ContainerError(f"task {task.id}: building its image failed ({_ending(result)})"
                                 f"{setup_hint(result.output)}")
    return tag


class TaskContainer:
    """One running container of a task's image: commands exec'd at its WORKDIR, then its verifier."""

    def __init__(self, runtime: ContainerRuntime, task: FolderTask, command_timeout_s: float) -> None:
        assert task.container is not None
        self.runtime = runtime
        self.task = task
        self.command_timeout_s = command_timeout_s
        self.name = f"raso-{uuid.uuid4().hex[:12]}"
        image = ensure_image(runtime, task)
        limits: list[str] = []
        if task.container.cpus:
            limits += ["--cpus", str(task.container.cpus)]
        if task.container.memory_mb:
            limits += ["--memory", f"{task.container.memory_mb}m"]
        # it sleeps for a bounded time, not forever: a raso killed mid-rollout leaves a container that ends itself
        lifetime = max(MAX_CONTAINER_LIFETIME_S, round((task.agent_timeout_s or 0) + (task.check_timeout_s or 0)))
        runtime.check("run", "--detach", "--rm", "--name", self.name, "--network", "none",
                      "--pids-limit", str(MAX_CONTAINER_PROCESSES), "--label", f"raso.task={task.id}", *limits,
                      "--entrypoint", "/bin/sh", image, "-c", f"sleep {lifetime}",
                      what=f"starting a container of task {task.id}")
        self.exec(f"mkdir -p {_quote(task.workdir)} /logs/verifier /logs/agent", timeout_s=CONTROL_TIMEOUT_S)

    def exec(self, command: str, *, timeout_s: float | None = None, workdir: str | None = None) -> CommandResult:
        """`bash -c command` in the container under `timeout` (which kills it inside: the runtime's client dying
        would leave it running), the host's own limit a little later as the backstop."""
        limit = timeout_s or self.command_timeout_s
        inner = ["timeout", f"--kill-after={KILL_GRACE_S}", str(max(1, round(limit))), "bash", "-c", command]
        result = self.runtime.run("exec", "--workdir", workdir or self.task.workdir, self.name, *inner,
                                  timeout_s=limit + 2 * KILL_GRACE_S + 10)
        if result.exit_code in (124, 137) and not result.timed_out:
            result = result.model_copy(update={"timed_out": True})
        return result

    def listing(self, limit: int = 30) -> str:
        result = self.exec(f"find . -maxdepth 3 -type f 2>/dev/null | sed 's|^\\./||' | sort | head -n {limit + 1}",
                           timeout_s=30)
        names = [line for line in result.output.splitlines() if line.strip()]
        if not names:
            return "(empty)"
        return "\n".join(f"- {n}" for n in names[:limit]) + ("\n... and more" if len(names) > limit else "")

    def verify(self) -> Score:
        """The task's tests copied to /tests, its verifier run at WORKDIR as Harbor runs it, the reward read from
        /logs/verifier. A verifier that times out or writes no reward is a check error (Score.check_error), never a
        0. A missing module is not second-guessed here: the image is the one the task's author meant."""
        task = self.task
        info: dict[str, Any] = {"check": "tests/test.sh", "isolation": f"container ({self.runtime.name})"}
        self.runtime.check("cp", str(task.folder / "tests") + "/.", f"{self.name}:/tests",
                           what=f"copying task {task.id}'s tests into its container")
        result = self.exec("bash /tests/test.sh", timeout_s=task.check_timeout_s or DEFAULT_VERIFIER_TIMEOUT_S)
        info.update({"exit_code": result.exit_code, "output": result.output[-2000:]})
        if result.timed_out:
            return _failed("the verifier did not finish within its timeout", info)
        with tempfile.TemporaryDirectory(prefix="raso-reward-") as folder:
            for name in ("reward.json", "reward.txt"):  # read inside the container, bounded: never copied out whole
                read = self.exec(f"test -f /logs/verifier/{name} && head -c {MAX_REWARD_BYTES} /logs/verifier/{name}",
                                 timeout_s=30, workdir="/")
                if read.exit_code == 0:
                    Path(folder, name).write_text(read.output, encoding="utf-8")
            value, problem = harbor_reward(Path(folder))
        if value is None:
            return _failed(problem or "no reward", info)
        return _score(value, info)

    def remove(self) -> None:
        result = self.runtime.run("rm", "--force", "--time", "0", self.name)
        if result.exit_code != 0:
            log.warning("tasks: container %s was not removed (%s)", self.name, _ending(result))


def _quote(path: str) -> str:
    return "'" + path.replace("'", "'\\''") + "'"


class ContainerTaskEnv(CommandStepsEnv):
    """The builtin agent's environment for a container task: each action a shell command in the task's container,
    `submit` runs the verifier there."""

    def __init__(self, runtime: ContainerRuntime, task: Task, folder_task: FolderTask,
                 command_timeout_s: float) -> None:
        super().__init__()
        self.runtime = runtime
        self.task = task
        self.folder_task = folder_task
        self.command_timeout_s = command_timeout_s
        self.submit = SUBMIT
        self.container: TaskContainer | None = None
        self.done = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._cleanup()
        self.container = TaskContainer(self.runtime, self.folder_task, self.command_timeout_s)
        self.done = False
        observation = (f"{self.folder_task.instruction}\n\nYou work in {self.folder_task.workdir} inside the task's "
                       f"container. Files there:\n{self.container.listing()}\n\n"
                       f"Run one shell command per action; `{self.submit}` when the work is ready to be checked.")
        return observation, {"task_id": self.task.id}

    def _ready(self) -> bool:
        return self.container is not None

    def _submit(self) -> StepResult:
        assert self.container is not None
        return submitted_step(self.container.verify(), {})

    def _run(self, command: str) -> StepResult:
        assert self.container is not None
        result = self.container.exec(command)
        head = f"exit code {'killed (time limit)' if result.timed_out else result.exit_code}"
        shown = result.output.rstrip()
        if result.truncated:
            shown = f"(output cut to its last {MAX_COMMAND_OUTPUT} bytes)\n{shown}"
        observation = f"{head}\n{shown}" if shown else f"{head} (no output)"
        return observation, 0.0, False, False, {"exit_code": result.exit_code,
                                                "limit_hit": "wall_seconds" if result.timed_out else None,
                                                "isolation": f"container ({self.runtime.name})"}

    def _cleanup(self) -> None:
        if self.container is not None:
            self.container.remove()
            self.container = None

    def close(self) -> None:
        self._cleanup()
        super().close()


__all__ = ["ContainerError", "ContainerRuntime", "ContainerTaskEnv", "SHIPPED_CONTAINERS_CONF", "TaskContainer",
           "ensure_image", "find_runtime", "image_tag", "run_bounded"]
