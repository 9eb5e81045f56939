"""Running a task's check on what an agent left in its workspace, inside the OS sandbox.

The check is the task author's code, but it reads files an agent wrote, so it runs behind bubblewrap
(`Sandbox.run_command`) on a copy: the run's one writable folder holds a copy of the workspace and a copy of the
task's own folder, nothing of the other tasks. raso's checks run with the workspace copy as the current folder
and `$WORKSPACE`, `$TASK_DIR` (the task folder copy) and `$PYTHON` (raso's interpreter, also first on PATH as
`python`) set. A Harbor verifier finds the workspace at its WORKDIR (default /app), its tests at /tests and
writes /logs/verifier/reward.txt or reward.json, as in Harbor's container.

A check's own failure is no score at all: check.py crashing or printing no score, a check that does not finish,
a Harbor verifier writing no reward (Harbor itself fails such a trial: its verifier raises RewardFileNotFoundError
and never reads pytest's exit code), or one whose tests could not import a module this machine lacks (what the
task's image would install: `No module named 'torch'`) give `Score.check_error` with the reason; the rollout's
outcome is then "check_error", never a reward of 0. A workspace the agent made uncheckable (a link, over the
limits) is the agent's counted 0. The scorer never raises for what an agent left.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import tempfile
from pathlib import Path

from raso.harness import Score
from raso.harness.sandbox import Sandbox, SandboxLimits, SandboxResult
from raso.safe_files import MiB, TreeLimits, UnsafePathError, read_bytes, remove_tree
from raso.safe_files import copy_tree as safe_copy_tree

from .folder import TASK_FOLDER_LIMITS, FolderTask

log = logging.getLogger(__name__)

MAX_WORKSPACE_BYTES = 256 * MiB  # what the scorer copies of a workspace at most
MAX_REWARD_BYTES = 64 * 1024  # a reward file holds one number
# An agent controls every byte and link of its workspace: safe_files never follows a link, skips FIFOs and devices
# unopened and leaves out folders deeper than max_depth.
WORKSPACE_LIMITS = TreeLimits(max_bytes=MAX_WORKSPACE_BYTES, max_file_bytes=MAX_WORKSPACE_BYTES)


def copy_tree(source: Path, dest: Path, limits: TreeLimits = WORKSPACE_LIMITS) -> list[str]:
    """Copy the regular files and folders of `source` into `dest` (created) without following links; returns
    what was left out, each with why (raso.safe_files.copy_tree). UnsafePathError (a ValueError) when `source`
    is itself a link or the tree is over the limits."""
    return safe_copy_tree(source, dest, limits)


def _parse_score(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and 0.0 <= value <= 1.0 else None


def _score(value: float, info: dict) -> Score:
    """Reward 1 only for a full score; the score itself is the soft score."""
    return Score(reward=1.0 if value >= 1.0 else 0.0, soft_score=value, info=info)


def _unusable_workspace(reason: str, info: dict) -> Score:
    """What the agent left cannot be checked (its workspace swapped for a link, over the size limits): that is the
    agent's doing, so a counted 0 with the reason, never a check error an agent could hide a failure behind."""
    return Score(reward=0.0, soft_score=0.0, info={**info, "error": reason})


def _failed(reason: str, info: dict) -> Score:
    """The check could not judge: no reward (Score.check_error), never a 0 that counts."""
    return Score(reward=0.0, soft_score=None, info=info, check_error=reason)


# What Python prints when an import fails: the module named is what the check needed.
_MISSING_MODULE = re.compile(r"\b(?:ModuleNotFoundError|ImportError): No module named '([A-Za-z0-9_.]+)'")
# The frames of a traceback, as Python (`File "x.py", line 3`) and pytest (`x.py:3: in <module>`) print them.
_FRAME = re.compile(r'File "([^"]+)", line \d+|^\s*(\S+?\.py):\d+: in ', re.MULTILINE)


def missing_module(output: str, instruction: str, workspace: Path, workdir: str, *folders: Path) -> str | None:
    """The module a check's output says it could not import, when that import is not the agent's doing: no frame
    of its traceback is a file of the agent's workspace (`workspace`, the copy the check ran on, seen in the check
    as `workdir`: its `solve.py` importing an uninstalled package is the agent's failure), and the module's name
    is neither in the task's instruction nor a file or folder the workspace or `folders` hold (the agent's missing
    `solution.py` is a failed task, a missing `torch` is a machine without the task's image). None otherwise."""
    start = 0
    for match in _MISSING_MODULE.finditer(output):
        frames = [a or b for a, b in _FRAME.findall(output[start:match.start()])]
        start = match.end()
        if any(_in_workspace(frame, workspace, workdir) for frame in frames):
            continue
        top = match.group(1).split(".")[0]
        if re.search(rf"\b{re.escape(top)}\b", instruction):
            continue
        if any(os.path.lexists(folder / top) or os.path.lexists(folder / f"{top}.py") for folder in (workspace, *folders)):
            continue
        return match.group(1)
    return None


def _in_workspace(frame: str, workspace: Path, workdir: str) -> bool:
    """Whether a traceback's file is one of the agent's: under the workspace (as the check saw it), or a path
    relative to the check's folder (the workspace) that the workspace holds."""
    if frame.startswith("/"):
        return any(frame.startswith(root.rstrip("/") + "/") for root in (workdir, str(workspace)))
    parts = Path(frame).parts
    return ".." not in parts and os.path.lexists(workspace.joinpath(*parts))


def _missing_module_error(name: str) -> str:
    return (f"the check could not import {name!r} (No module named {name!r}): this machine's Python lacks what the "
            "task's image would install; run the task where it is installed")


def _result_info(result: SandboxResult) -> dict:
    return {"exit_code": result.exit_code, "limit_hit": result.limit_hit, "stdout": result.stdout[-2000:],
            "stderr": result.stderr[-2000:], "wall_time_s": result.wall_time_s, "isolation": result.isolation}


def harbor_reward(verifier_dir: Path) -> tuple[float | None, str | None]:
    """The reward a Harbor verifier wrote (reward.json first, then reward.txt, as Harbor reads them) and why
    there is none. reward.json must hold one number or an object whose "reward" (or only) entry is one."""
    json_path, text_path = verifier_dir / "reward.json", verifier_dir / "reward.txt"
    if os.path.lexists(json_path):
        try:
            data = json.loads(read_bytes(json_path, MAX_REWARD_BYTES).decode("utf-8", errors="replace"))
        except UnsafePathError as exc:
            return None, f"reward.json is not usable: {exc}"
        except ValueError:
            return None, "reward.json is not valid JSON"
        if isinstance(data, dict):
            data = data.get("reward", next(iter(data.values())) if len(data) == 1 else None)
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            return None, "reward.json holds no single numeric reward (a number, or an object with \"reward\")"
        value = _parse_score(str(data))
        return (value, None) if value is not None else (None, f"reward {data!r} is not in [0, 1]")
    if os.path.lexists(text_path):
        try:
            text = read_bytes(text_path, MAX_REWARD_BYTES).decode("utf-8", errors="replace")[:200]
        except UnsafePathError as exc:
            return None, f"reward.txt is not usable: {exc}"
        value = _parse_score(text)
        return (value, None) if value is not None else (None, f"reward.txt holds {text.strip()[:60]!r}, not a "
                                                              "number in [0, 1]")
    return None, "the verifier wrote no /logs/verifier/reward.txt or reward.json"


class CheckRunner:
    """Runs checks in the sandbox with fixed limits (a Harbor task's verifier timeout replaces the wall clock)."""

    def __init__(self, limits: SandboxLimits) -> None:
        self.limits = limits
        # Checks and shell commands are programs, not Python code the audit hook could guard: without the OS layer
        # (bubblewrap) the harness does not load (IsolationRequiredError names the install command).
        self.sandbox = Sandbox(limits, require_isolation=True)

    def environment(self, extra: dict[str, str]) -> dict[str, str]:
        bin_dir = str(Path(self.sandbox.python).parent)
        return {"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", "PYTHON": self.sandbox.python, **extra}

    def score(self, task: FolderTask, workspace: Path) -> Score:
        """Score `workspace` with the task's check. Never raises for what the workspace holds."""
        root = Path(tempfile.mkdtemp(prefix="raso-check-"))
        os.chmod(root, 0o755)  # the sandbox's uid must reach the run folder inside it
        try:
            run = root / "run"
            run.mkdir()
            if task.kind == "harbor":
                return self._harbor(task, workspace, run)
            return self._raso(task, workspace, run)
        finally:
            remove_tree(root)  # iterative: an agent's 10,000-deep tree goes too

    def _copy_workspace(self, workspace: Path, dest: Path) -> tuple[list[str], str | None]:
        try:
            return copy_tree(workspace, dest), None
        except (OSError, ValueError) as exc:
            return [], f"the workspace could not be copied for the check: {exc}"

    def _raso(self, task: FolderTask, workspace: Path, run: Path) -> Score:
        left_out, problem = self._copy_workspace(workspace, run / "workspace")
        info: dict = {"check": task.check.name, "left_out": left_out}
        if problem:
            return _unusable_workspace(problem, info)
        copy_tree(task.folder, run / "task", TASK_FOLDER_LIMITS)
        env = self.environment({"WORKSPACE": str(run / "workspace"), "TASK_DIR": str(run / "task")})
        runner = 'exec bash "$TASK_DIR/check.sh"' if task.check.name == "check.sh" else \
            'exec "$PYTHON" "$TASK_DIR/check.py"'
        result = self.sandbox.run_command(["bash", "-c", f'cd "$WORKSPACE" && {runner}'], run,
                                          ro_binds=[Path(r) for r in self.sandbox.python_roots], env=env)
        info.update(_result_info(result))
        if result.limit_hit is not None:
            return _failed(f"{task.check.name} did not finish: {result.error_summary()}", info)
        if task.check.name == "check.sh":
            if result.ok:
                return Score(reward=1.0, soft_score=1.0, info=info)
            missing = missing_module(result.stdout + "\n" + result.stderr, task.instruction, run / "workspace",
                                     str(run / "workspace"), run / "task")
            if missing:
                return _failed(_missing_module_error(missing), info)
            return Score(reward=0.0, soft_score=0.0, info={**info, "error": result.error_summary()})
        if not result.ok:
            return _failed(f"check.py failed: {result.error_summary()}", info)
        lines = [line for line in result.stdout.splitlines() if line.strip()]
        value = _parse_score(lines[-1]) if lines else None
        if value is None:
            shown = repr(lines[-1][:80]) if lines else "nothing"
            log.warning("tasks: %s printed %s as its last line, not a score in [0, 1]", task.check, shown)
            return _failed(f"check.py printed {shown} as its last line, not a score in [0, 1]", info)
        return _score(value, info)

    def _harbor(self, task: FolderTask, workspace: Path, run: Path) -> Score:
        left_out, problem = self._copy_workspace(workspace, run / "app")
        info: dict = {"check": "tests/test.sh", "left_out": left_out}
        if problem:
            return _unusable_workspace(problem, info)
        copy_tree(task.folder / "tests", run / "tests", TASK_FOLDER_LIMITS)
        (run / "logs" / "verifier").mkdir(parents=True)
        runner = self
        if task.check_timeout_s is not None:  # the task's own verifier timeout
            limits = self.limits.model_copy(update={"wall_seconds": task.check_timeout_s,
                                                    "cpu_seconds": max(1, math.ceil(task.check_timeout_s))})
            runner = CheckRunner(limits)
        result = runner.sandbox.run_command(
            ["bash", "-c", f'cd "{task.workdir}" && exec bash /tests/test.sh'], run,
            ro_binds=[Path(r) for r in self.sandbox.python_roots], env=self.environment({}),
            mounts={task.workdir: run / "app", "/tests": run / "tests", "/logs": run / "logs"})
        info.update(_result_info(result))
        if result.limit_hit is not None:
            return _failed(f"the verifier did not finish: {result.error_summary()}", info)
        value, problem = harbor_reward(run / "logs" / "verifier")
        if value is None:
            return _failed(problem or "no reward", info)
        if value < 1.0:  # a verifier that writes 0 whenever pytest fails: a failed import is the machine's, not the agent's
            missing = missing_module(result.stdout + "\n" + result.stderr, task.instruction, run / "app",
                                     task.workdir, run / "tests")
            if missing:
                return _failed(_missing_module_error(missing), info)
        return _score(value, info)


__all__ = ["CheckRunner", "MAX_WORKSPACE_BYTES", "copy_tree", "harbor_reward", "missing_module"]
