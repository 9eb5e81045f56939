"""The builtin agent's text environment for a folder task: shell commands in the task's workspace.

`reset()` makes a fresh workspace holding the task's files and shows the instruction and the files. Each
`step(action)` runs the action as a `bash -c` command line inside the OS sandbox (bubblewrap via
`Sandbox.run_command`: the workspace is the one writable folder, no network, the command's limits) and shows its
exit code and output; a Harbor task's commands run in its working directory (/app), where the workspace is
bound. `submit` ends the task: the task's check scores the workspace (the same scorer the workspace form uses
for external agents).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from raso.harness import Score, Task, TextEnv, WorkspaceTasks
from raso.safe_files import list_files, remove_tree

from .checks import CheckRunner
from .folder import FolderTask

SUBMIT = "submit"
MAX_LISTED_FILES = 30


def workspace_listing(workspace: Path) -> str:
    """The workspace's regular files (links not followed, the walk bounded: the agent shapes this tree)."""
    shown, more = list_files(workspace, MAX_LISTED_FILES)
    if not shown:
        return "(empty)"
    return "\n".join(f"- {name}" for name in shown) + ("\n... and more" if more else "")


StepResult = tuple[str, float, bool, bool, dict[str, Any]]


def no_action_step() -> StepResult:
    """A reply with no command: the format again, no step spent on the task."""
    return (f"No action found. End your reply with a line `Action: <one shell command>`, or a ```bash block and "
            f"`Action: run`, or `Action: {SUBMIT}` when the files are ready."), 0.0, False, False, {"error": "no action"}


def submitted_step(score: Score, extra: dict[str, Any]) -> StepResult:
    """The step that submits: the check's verdict (a check error is TasksHarness.score's to make the rollout's;
    the agent sees no reason), the score's details in the info."""
    info: dict[str, Any] = {"soft_score": score.soft_score, "check": score.info, **extra}
    if score.check_error:
        info["check_error"] = score.check_error
        return "Submitted: the check could not score the files.", 0.0, True, False, info
    verdict = "passed" if score.reward >= 1.0 else "did not pass"
    soft = f" (score {score.soft_score:.2f})" if score.soft_score is not None and score.reward < 1.0 else ""
    if score.reward < 1.0:
        info["error"] = "the check did not pass"
    return f"Submitted: the check {verdict}{soft}.", score.reward, True, False, info


class CommandStepsEnv(TextEnv):
    """The step protocol of the builtin agent's shell environments: a command per action, `submit` ends the task
    with the check's verdict. Subclasses say whether they are ready, how a command runs and how the check scores."""

    done = False

    def _ready(self) -> bool:
        raise NotImplementedError

    def _run(self, command: str) -> StepResult:
        raise NotImplementedError

    def _submit(self) -> StepResult:
        raise NotImplementedError

    def step(self, action: str) -> StepResult:
        if not self._ready():
            raise RuntimeError("call reset() before step()")
        if self.done:
            return "The task was already submitted.", 0.0, True, False, {"error": "step after submit"}
        command = action.strip()
        if not command:
            return no_action_step()
        if command.lower() == SUBMIT:
            self.done = True
            return self._submit()
        return self._run(command)


class ShellTaskEnv(CommandStepsEnv):
    """`workspace_form` prepares and scores the workspace (the harness's workspace form, the external agents'
    scorer too); `checks` holds the sandbox the commands run in and their environment."""

    def __init__(self, workspace_form: WorkspaceTasks, task: Task, folder_task: FolderTask,
                 checks: CheckRunner) -> None:
        super().__init__()
        self.workspace_form = workspace_form
        self.task = task
        self.folder_task = folder_task
        self.checks = checks
        self.sandbox = checks.sandbox
        self.workspace: Path | None = None
        self.done = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._cleanup()
        self.workspace = Path(tempfile.mkdtemp(prefix=f"raso-task-{self.task.id[:40].replace('/', '_')}-"))  # a nested id has /
        instruction = self.workspace_form.prepare_workspace(self.task, self.workspace)
        self.done = False
        observation = (f"{instruction}\n\nFiles in your working folder:\n{workspace_listing(self.workspace)}\n\n"
                       f"Run one shell command per action; `{SUBMIT}` when the files are ready to be checked.")
        return observation, {"task_id": self.task.id}

    def _ready(self) -> bool:
        return self.workspace is not None

    def _submit(self) -> StepResult:
        assert self.workspace is not None
        score = self.workspace_form.score_workspace(self.task, self.workspace)
        return submitted_step(score, {"final_output": workspace_listing(self.workspace)})

    def _run(self, command: str) -> StepResult:
        assert self.workspace is not None
        folder_task = self.folder_task
        if folder_task.kind == "harbor":  # the instruction names paths under the task's working directory (/app)
            result = self.sandbox.run_command(
                ["bash", "-c", 'cd "$RASO_WORKDIR" && eval "$RASO_COMMAND"'], self.workspace,
                ro_binds=[Path(r) for r in self.sandbox.python_roots], mounts={folder_task.workdir: self.workspace},
                env=self.checks.environment({"RASO_WORKDIR": folder_task.workdir, "RASO_COMMAND": command}))
        else:
            result = self.sandbox.run_command(["bash", "-c", command], self.workspace,
                                              ro_binds=[Path(r) for r in self.sandbox.python_roots],
                                              env=self.checks.environment({}))
        head = f"exit code {result.exit_code if not result.timed_out else 'killed (time limit)'}"
        lines = result.report_lines()
        observation = "\n".join([head, *lines]) if lines else f"{head} (no output)"
        return observation, 0.0, False, False, {"exit_code": result.exit_code, "limit_hit": result.limit_hit,
                                                "isolation": result.isolation}

    def _cleanup(self) -> None:
        if self.workspace is not None:
            remove_tree(self.workspace)  # iterative: a 10,000-deep tree the agent left goes too
            self.workspace = None

    def close(self) -> None:
        self._cleanup()
        super().close()


__all__ = ["SUBMIT", "CommandStepsEnv", "ShellTaskEnv", "StepResult", "no_action_step", "submitted_step", "workspace_listing"]
