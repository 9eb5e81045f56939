"""TasksHarness: a user's folder of tasks (raso's layout or Harbor task folders) as a harness.

`raso optimize --harness tasks:PATH` (or `--harness tasks --harness-arg path=PATH`); `tasks:example` is the small
folder shipped beside this module. The builtin agent works through shell commands in the sandbox (env.py);
external agents get the same workspace (`prepare_workspace`) and the same check scores both (checks.py).
"""

from __future__ import annotations

import collections
import functools
import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, ClassVar

from raso.choices import choices_of
from raso.harness import EnvEnd, Evidence, Harness, Rollout, RolloutRunner, Score, Task, TextTasks, WorkspaceTasks
from raso.harness.actions import TaskNeeds
from raso.harness.sandbox import SandboxLimits, isolation_support
from raso.safe_files import UnsafePathError, copy_file

from .checks import CheckRunner
from .containers import ContainerRuntime, ContainerRuntimeName, ContainerTaskEnv, find_runtime
from .env import ShellTaskEnv
from .folder import (
    DEFAULT_FRACTIONS,
    DEFAULT_SALT,
    SPLITS_FILE,
    TASK_FOLDER_LIMITS,
    FolderTask,
    TasksFolderError,
    TaskSkillsMode,
    UnsupportedTaskError,
    read_folder_text,
    read_splits_file,
    read_task,
    seeded_splits,
    task_folders,
)

if TYPE_CHECKING:
    from raso.skill import Skill

log = logging.getLogger(__name__)
PACKAGE_DIR = Path(__file__).resolve().parent
EXAMPLE_DIR = PACKAGE_DIR / "example"
EXAMPLE_NAME = "example"
TASK_DESCRIPTION = "task_description.md"
HARNESS_DESCRIPTION = "harness_description.md"
WORKSPACE_DESCRIPTION = "workspace_description.md"
_ACTION_LINE = re.compile(r"^[ \t]*Action[ \t]*:[ \t]*(.*?)[ \t]*$", re.IGNORECASE | re.MULTILINE)
_INLINE_ACTION = re.compile(r"Action\s*:\s*`?([^`\n]+?)`", re.IGNORECASE)  # quoted in the text
_CODE_BLOCK = re.compile(r"```(?:bash|sh|shell)?[ \t]*\n(.*?)```", re.DOTALL)


def resolve_folder(path: str | Path) -> Path:
    """The tasks folder `path` names; `example` is the shipped example unless a folder of that name exists here."""
    folder = Path(path).expanduser()
    if str(path) == EXAMPLE_NAME and not folder.is_dir():
        return EXAMPLE_DIR
    return folder.resolve()


class TasksHarness(Harness, TextTasks, WorkspaceTasks):
    """Tasks from a folder: one sub-folder per task (folder.py has the layout), T and H from the folder's
    task_description.md and harness_description.md.

    Arguments (also `--harness-arg KEY=VALUE`):
      path          the tasks folder (also as `tasks:PATH`; `example` = the shipped example)
      max_steps     shell commands per task for the builtin agent, `submit` included (default 10)
      split_salt    the seeded split rule's salt when the folder has no splits.json
      task_skills   a task's own bundled skills (environment/skills/, task.toml's skills_dir): "exclude" (default:
                    kept out of the workspace, so a run measures only the skill it gives) or "include"
      strict        refuse the whole folder when a task cannot run here (default: skip it, one line each, and
                    load the rest)
      cpu_seconds, wall_seconds, memory_mb   sandbox limits of one command and of one check (wall_seconds also
                    limits one command of a container task)
      container_runtime   auto (podman, else docker), podman or docker: what builds and runs the Harbor tasks
                    whose Dockerfile builds an image (containers.py)
    """

    name: ClassVar[str] = "tasks"
    name_argument: ClassVar[str] = "path"  # `tasks:PATH`
    resource_dir: ClassVar[Path] = PACKAGE_DIR  # the instance's is the tasks folder (T, H and drafts live there)
    describe_skip: ClassVar[tuple[str, ...]] = ("example",)  # `raso harness describe` reads the user's folder instead
    max_steps: int = 10
    max_reply_tokens: int = 512
    task_needs: ClassVar[TaskNeeds] = TaskNeeds(agent_steps=10, reply_tokens=384)  # a few commands, then submit

    def __init__(self, path: str | Path = EXAMPLE_NAME, max_steps: int | None = None, split_salt: str = DEFAULT_SALT,
                 cpu_seconds: int = 20, wall_seconds: float = 60.0, memory_mb: int = 2048,
                 container_runtime: ContainerRuntimeName = "auto", task_skills: TaskSkillsMode = "exclude",
                 strict: bool = False) -> None:
        if task_skills not in choices_of(TaskSkillsMode):
            raise ValueError(f"task_skills={task_skills!r}: use one of {', '.join(choices_of(TaskSkillsMode))} (a "
                             "task's own bundled skills kept out of the workspace, or left in it)")
        if not isinstance(strict, bool):
            raise ValueError(f"strict={strict!r}: use true or false")
        self.task_skills = task_skills
        self.folder = resolve_folder(path)
        self.path = str(self.folder)  # the `tasks:PATH` argument, as a run directory records the harness
        self.resource_dir = self.folder  # type: ignore[misc]  # T, H and `raso harness describe`'s drafts
        self.strict = strict
        self.tasks_by_id, self.skipped = load_tasks(self.folder, strict)
        self.split_salt = split_salt
        if max_steps is not None:
            self.max_steps = int(max_steps)
        self.limits = SandboxLimits(cpu_seconds=cpu_seconds, wall_seconds=wall_seconds,
                                    memory_bytes=memory_mb * 1024 * 1024)
        if container_runtime not in ("auto", "podman", "docker"):
            raise TasksFolderError(f"container_runtime={container_runtime!r}: use auto, podman or docker")
        self.container_runtime = container_runtime
        self._splits  # noqa: B018 - a bad splits.json is an error when the harness loads, not mid-run

    @functools.cached_property
    def checks(self) -> CheckRunner:
        """The check runner, built on first use: reading the folder, its splits and descriptions needs no sandbox,
        running a command or a check does (IsolationRequiredError, one line, where bubblewrap is missing)."""
        return CheckRunner(self.limits)

    @functools.cached_property
    def runtime(self) -> ContainerRuntime:
        """The container runtime of the tasks that build an image (ContainerError, one line, where none is)."""
        return find_runtime(self.container_runtime)

    def check_runnable(self) -> None:
        # a run is refused before it starts, not at its first rollout
        tasks = self.tasks_by_id.values()
        if any(t.container is None for t in tasks):
            self.checks  # noqa: B018
        if any(t.container is not None for t in tasks):
            self.runtime  # noqa: B018

    @functools.cached_property
    def _splits(self) -> dict[str, list[str]]:
        ids = sorted(self.tasks_by_id)
        splits_path = self.folder / SPLITS_FILE
        if os.path.lexists(splits_path):  # a linked splits.json is refused, not followed
            return read_splits_file(splits_path, ids)
        return seeded_splits(ids, self.split_salt, DEFAULT_FRACTIONS)

    def _task(self, folder_task: FolderTask) -> Task:
        return Task(id=folder_task.id, instruction=folder_task.instruction,
                    metadata={"kind": folder_task.kind, "agent_timeout_s": folder_task.agent_timeout_s})

    def splits(self) -> dict[str, list[Task]]:
        return {name: [self._task(self.tasks_by_id[i]) for i in ids] for name, ids in self._splits.items()}

    def data_label(self) -> str:
        rule = SPLITS_FILE if os.path.lexists(self.folder / SPLITS_FILE) else f"seeded split (salt {self.split_salt!r})"
        skipped = f", {len(self.skipped)} skipped as not runnable here" if self.skipped else ""
        return f"tasks folder {self.folder} ({len(self.tasks_by_id)} tasks{skipped}, {rule})"

    def folder_task(self, task_id: str) -> FolderTask:
        try:
            return self.tasks_by_id[task_id]
        except KeyError:
            raise ValueError(f"task {task_id!r} is not in {self.folder}") from None

    # ------------------------------------------------------------------ descriptions
    def _folder_text(self, filename: str, what: str) -> str:
        path = self.folder / filename
        if not os.path.lexists(path):
            raise TasksFolderError(
                f"tasks folder {self.folder} has no {filename} ({what}): write it, or draft it with "
                f"`raso harness describe tasks:{self.folder}` and review the draft")
        text = read_folder_text(path, filename).strip()  # never through a link: T and H are sent to the model
        if not text:
            raise TasksFolderError(f"{path} is empty; write {what}")
        return text

    @property
    def task_description(self) -> str:
        return self._folder_text(TASK_DESCRIPTION, "T: what the tasks ask and how answers are checked")

    @property
    def harness_description(self) -> str:
        return self._folder_text(HARNESS_DESCRIPTION, "H: the shell commands, the files, the budget and the scoring")

    @property
    def workspace_description(self) -> str:
        """The folder's workspace_description.md, else its harness_description.md (H for external agents)."""
        if os.path.lexists(self.folder / WORKSPACE_DESCRIPTION):
            return self._folder_text(WORKSPACE_DESCRIPTION, "H for external agents")
        return self.harness_description

    @property
    def action_instructions(self) -> str:
        return (PACKAGE_DIR / "action_format.md").read_text(encoding="utf-8").strip()

    @property
    def turn_reminder(self) -> str | None:
        return None

    def parse_action(self, reply: str) -> str:
        """The last `Action:` line's command; `Action: run` (or no Action line) takes the reply's last ```bash
        block; else an `Action: `command`` inside the text. Empty when the reply has none of these: a reply is
        never run as a command as a whole (the environment then explains the format)."""
        lines = [a for a in _ACTION_LINE.findall(reply) if a.strip()]
        action = lines[-1].strip() if lines else ""
        blocks = [b.strip() for b in _code_blocks(reply) if b.strip()]
        if action.lower() == "run" or (not action and blocks):
            return blocks[-1] if blocks else ""
        if not action:
            inline = _INLINE_ACTION.findall(reply)
            return inline[-1].strip() if inline else ""
        if len(action) > 1 and action[0] == action[-1] == "`" and action.count("`") == 2:
            return action[1:-1].strip()  # `Action: `wc -l x``: the quotes are not part of the command
        return action

    def action_is_valid(self, action: str, info: Mapping[str, Any]) -> bool | None:
        return bool(action.strip())

    # ------------------------------------------------------------------ builtin agent
    def make_env(self, task: Task) -> ShellTaskEnv | ContainerTaskEnv:
        folder_task = self.folder_task(task.id)
        if folder_task.container is not None:
            return ContainerTaskEnv(self.runtime, task, folder_task, self.limits.wall_seconds)
        return ShellTaskEnv(self, task, folder_task, self.checks)

    # ------------------------------------------------------------------ external agents
    def hidden_paths(self) -> list[Path]:
        return [self.folder]  # every task's check, expected files and tests

    def prepare_workspace(self, task: Task, workspace: Path) -> str:
        """Copy the task's input files (its workspace/ folder, or a Harbor task's environment files) into
        `workspace`; the instruction is the task's own (it names where the answer goes)."""
        folder_task = self.folder_task(task.id)
        if folder_task.container is not None:
            raise TasksFolderError(f"task {task.id} runs in a container, where only raso's builtin agent works so far "
                                   "(--agent builtin); external agents get a host folder (harnesses/tasks/README.md)")
        workspace = Path(workspace)
        files = folder_task.workspace_files + (folder_task.task_skill_files if self.task_skills == "include" else [])
        for source, relative in files:
            parts = PurePosixPath(relative).parts
            if not parts or relative.startswith("/") or ".." in parts:  # folder.py refuses these at load
                raise TasksFolderError(f"task {task.id}: {relative!r} is not a path inside the workspace")
            dest = workspace.joinpath(*parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:  # never through a link, never a FIFO, never more than the task folder's limit
                copy_file(source, dest, TASK_FOLDER_LIMITS.max_file_bytes)
            except UnsafePathError as exc:
                raise TasksFolderError(f"task {task.id}: {exc}") from None
        where = ("Work in the current folder: the check reads the files you leave there."
                 if folder_task.kind == "raso" else
                 f"Work in the current folder (the task's {folder_task.workdir}): its tests read the files you "
                 "leave there.")
        return f"{folder_task.instruction}\n\n{where}"

    def visible_task_skills(self, task_id: str) -> dict[str, Any]:
        """What a rollout records of the task's own skills: which the agent could see in its workspace, which
        were kept out, and the `task_skills` mode that decided."""
        names = self.folder_task(task_id).task_skill_names
        shown = self.task_skills == "include"
        return {"mode": self.task_skills, "visible": names if shown else [], "kept_out": [] if shown else names}

    def rollout(self, task: Task, skills: Sequence[Skill], agent: RolloutRunner) -> Rollout:
        """The base rollout, recording in its metadata which of the task's own skills the agent could see (beside
        `skill_names`, the skills the run gave)."""
        rollout = super().rollout(task, skills, agent)
        if task.id in self.tasks_by_id:
            rollout.metadata["task_skills"] = self.visible_task_skills(task.id)
        return rollout

    def score(self, task: Task, evidence: Evidence) -> Score:
        """The base scorer, and for the builtin agent the check error its environment's submit reported
        (ShellTaskEnv puts Score.check_error in the step's info): a check that could not judge is no 0."""
        score = super().score(task, evidence)
        if isinstance(evidence, EnvEnd) and evidence.terminated and isinstance(evidence.info.get("check_error"), str):
            return score.model_copy(update={"check_error": evidence.info["check_error"]})
        return score

    def workspace_path(self, task: Task) -> str | None:
        """A Harbor task's instruction names paths under its WORKDIR (/app): external agents see the workspace
        there, as the builtin agent's commands do."""
        folder_task = self.folder_task(task.id)
        return folder_task.workdir if folder_task.kind == "harbor" else None

    def score_workspace(self, task: Task, workspace: Path) -> Score:
        """The task's check on a copy of `workspace`, in the sandbox (checks.py). Never raises for its content."""
        return self.checks.score(self.folder_task(task.id), Path(workspace))

    def describe(self) -> dict[str, Any]:
        kinds = [t.kind for t in self.tasks_by_id.values()]
        return {"folder": str(self.folder), "tasks": len(kinds), "harbor_tasks": kinds.count("harbor"),
                "container_tasks": sum(t.container is not None for t in self.tasks_by_id.values()),
                "skipped_tasks": len(self.skipped),
                "tasks_with_own_skills": sum(1 for t in self.tasks_by_id.values() if t.task_skill_files),
                "task_skills": self.task_skills,
                "splits": {k: len(v) for k, v in self._splits.items()},
                "isolation": isolation_support().model_dump()}  # what runs here would get; needs no sandbox


def load_tasks(folder: Path, strict: bool = False) -> tuple[dict[str, FolderTask], dict[str, str]]:
    """The tasks of `folder` by id, and the skipped ones (id -> why): a task this harness cannot run here
    (UnsupportedTaskError) is skipped with one warning line and the rest load, with a summary line (`N loaded,
    M skipped: reasons with counts`); with `strict`, or when no task loads, that is one TasksFolderError instead.
    A broken task (no instruction.md, two checks, a link) refuses the folder either way: it is a mistake to fix."""
    tasks: dict[str, FolderTask] = {}
    skipped: dict[str, str] = {}
    reasons: collections.Counter[str] = collections.Counter()
    for task_id, path in task_folders(folder):
        try:
            tasks[task_id] = read_task(path, task_id)
        except UnsupportedTaskError as exc:
            skipped[task_id] = str(exc)
            reasons.update(exc.reasons)
    if not skipped:
        return tasks, skipped
    summary = (f"tasks folder {folder}: {len(tasks)} loaded, {len(skipped)} skipped: "
               + ", ".join(f"{reason} {count}" for reason, count in reasons.most_common()))
    if strict or not tasks:
        first = next(iter(skipped.values()))
        why = "strict=true refuses a folder with a task it cannot run" if tasks else "no task can run here"
        raise TasksFolderError(f"{summary} ({why}; the first: {first})")
    for reason in skipped.values():
        log.warning("tasks: skipped %s", reason)
    log.warning("%s (strict=true refuses instead)", summary)
    return tasks, skipped


def _code_blocks(text: str) -> list[str]:
    return _CODE_BLOCK.findall(text)


__all__ = ["EXAMPLE_DIR", "TasksHarness", "resolve_folder"]
