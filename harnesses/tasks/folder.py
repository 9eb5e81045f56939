"""Reading a folder of tasks: one sub-folder per task, in raso's own layout or as a Harbor task.

raso's layout (a folder `NAME/`):

    instruction.md      what the agent is asked to do (it names the file(s) the answer goes to)
    workspace/          optional: files copied into the agent's workspace
    check.sh | check.py the check: check.sh's exit code (0 = reward 1, else 0), or the last stdout line of
                        check.py, a score in [0, 1] (reward 1 only at 1.0; the score is the soft score)

Harbor / Terminal-Bench layout (a folder with `task.toml`): `instruction.md`, `tests/test.sh` (the verifier: it
writes /logs/verifier/reward.txt or reward.json), `environment/` (a Dockerfile and the files it copies),
`solution/` (never read). A task whose Dockerfile builds runs in a container (containers.py); one without a
Dockerfile, or whose Dockerfile only copies files into its WORKDIR, runs in the sandbox with those files in its
workspace. `harbor_problems` lists what neither gives.

Splits come from `splits.json` ({"train": [...], "val": [...], "test": [...]}, every task in exactly one) or,
without it, from a seeded rule (`seeded_splits`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import tomllib
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from raso.choices import Split, choices_of
from raso.errors import ConfigError
from raso.safe_files import MiB, TreeLimits, UnsafePathError, list_files, read_text, tree_problems

SPLITS_FILE = "splits.json"
DEFAULT_SALT = "raso-tasks"
DEFAULT_FRACTIONS = (0.5, 0.25, 0.25)
HARBOR_WORKDIR = "/app"
# A task folder is someone else's download: its files are copied into workspaces and checks, so links, FIFOs,
# devices, very deep trees and huge files are refused when it loads (raso.safe_files), one line per problem.
TASK_FOLDER_LIMITS = TreeLimits(max_bytes=256 * MiB, max_file_bytes=256 * MiB, max_entries=20_000, max_depth=32)
MAX_TEXT_BYTES = 1 * MiB  # instruction.md, task.toml, a Dockerfile, test.sh, splits.json, T and H
MAX_TIMEOUT_S = 24 * 3600.0  # a task.toml timeout above a day is a typo, not a task
# Dockerfile instructions that build nothing: the files a COPY/ADD takes from environment/ are copied into the
# workspace; FROM, WORKDIR, ENV, LABEL... only describe the image. Any other (RUN, COPY --from, ...) needs a build.
_NO_BUILD = {"FROM", "WORKDIR", "ENV", "LABEL", "ARG", "CMD", "ENTRYPOINT", "USER", "EXPOSE", "SHELL", "MAINTAINER",
             "STOPSIGNAL", "COPY", "ADD"}
# A verifier that installs or downloads at run time needs the network, which the sandbox does not give.
_NEEDS_NETWORK = re.compile(r"\b(apt-get|apt|apk|yum|dnf|curl|wget|pip3?\s+install|uv\s+(?:pip|add|sync|tool)|uvx|"
                            r"npm\s+(?:install|i|ci)|npx|git\s+clone)\b")


#: What becomes of a task's own bundled skills (`environment/skills/`, task.toml's `[environment] skills_dir`):
#: "exclude" keeps them out of the agent's workspace (a clean baseline: the skill under test is the only one),
#: "include" leaves them where the task puts them (the benchmark's with-skills condition).
TaskSkillsMode = Literal["exclude", "include"]
TASK_SKILLS_FOLDER = "skills"  # environment/skills/, SkillsBench's place for a task's curated skills


class TasksFolderError(ConfigError):
    """A tasks folder or task that cannot be used; the message names the path and what to do. A ConfigError, so
    the CLI reports it in one line wherever it surfaces (loading the harness, or T and H at the run's start)."""


class ContainerBuild(BaseModel):
    """How a Harbor task's image is built and run (containers.py): its Dockerfile, the build context
    (environment/) and task.toml's limits."""

    dockerfile: Path
    context: Path
    build_timeout_s: float
    cpus: float | None = None
    memory_mb: int | None = None


class UnsupportedTaskError(TasksFolderError):
    """A well-formed task this harness cannot run here (a Harbor task needing a container, the Terminal-Bench 1
    layout): a folder skips it with one line and loads the rest, unless its `strict` option refuses. `reasons`
    holds each reason without the task's particulars, for the folder's summary."""

    def __init__(self, message: str, reasons: list[str]) -> None:
        super().__init__(message)
        self.reasons = reasons


def reason_kind(problem: str) -> str:
    """A refusal's reason without its particulars (line numbers, names, paths), to count alike ones together."""
    head = re.split(r" \(|: ", problem, maxsplit=1)[0]
    return re.sub(r" '[^']*[A-Za-z0-9][^']*'", "", head).strip()  # a quoted name goes, a quoted '..' stays


# A folder holding one of these is a task (of some layout); any other folder is searched for tasks below it.
TASK_MARKERS = ("instruction.md", "task.toml", "task.yaml", "check.sh", "check.py", "run-tests.sh", "solution.sh",
                "workspace")


class FolderTask(BaseModel):
    """One task as read from its folder."""

    id: str
    folder: Path
    kind: Literal["raso", "harbor"]
    instruction: str
    check: Path  # check.sh, check.py, or a Harbor task's tests/test.sh
    workspace_files: list[tuple[Path, str]] = Field(default_factory=list)  # (source, path in the workspace)
    # the task's own bundled skills, kept apart from workspace_files (TasksHarness's `task_skills` decides)
    task_skill_files: list[tuple[Path, str]] = Field(default_factory=list)
    task_skill_names: list[str] = Field(default_factory=list)  # the folders among them holding a SKILL.md
    workdir: str = HARBOR_WORKDIR  # Harbor: where the workspace sits inside the verifier's sandbox
    check_timeout_s: float | None = None  # Harbor: [verifier] timeout_sec
    agent_timeout_s: float | None = None  # Harbor: [agent] timeout_sec (recorded, see the README)
    container: ContainerBuild | None = None  # Harbor: its Dockerfile builds, so it runs in a container


def read_folder_text(path: Path, what: str) -> str:
    """`path`'s text, bounded and without following a link (a linked instruction.md could be any file here)."""
    try:
        return read_text(path, MAX_TEXT_BYTES)
    except UnicodeDecodeError:
        raise TasksFolderError(f"{path}: {what} is not UTF-8 text") from None
    except UnsafePathError as exc:
        raise TasksFolderError(f"{exc} ({what})") from None


def _check_tree(folder: Path, what: str, skip: tuple[str, ...] = ()) -> None:
    """TasksFolderError listing every problem of `folder` (links, special files, depth, sizes), one per line."""
    problems = tree_problems(folder, TASK_FOLDER_LIMITS, skip=skip)
    if problems:
        raise TasksFolderError(f"{what} {folder.name} cannot be used as it is:\n  " + "\n  ".join(problems))


def _files_under(folder: Path, prefix: str = "") -> list[tuple[Path, str]]:
    """(source, path in the workspace) of every regular file under `folder`, which `_check_tree` has passed."""
    found, _more = list_files(folder, TASK_FOLDER_LIMITS.max_entries, TASK_FOLDER_LIMITS.max_depth)
    return [(folder / rel, str(PurePosixPath(prefix, rel)) if prefix else rel) for rel in found]


def _container_path(path: str, workdir: str) -> PurePosixPath | None:
    """`path` as an absolute path in the task's container (relative ones from `workdir`); None when it has a '..'
    part (refused rather than resolved: the workspace copy must never climb out of its folder)."""
    joined = PurePosixPath(path if path.startswith("/") else f"{workdir}/{path}")
    return None if ".." in joined.parts else joined


def read_raso_task(folder: Path) -> FolderTask:
    _check_tree(folder, "task")
    instruction_path = folder / "instruction.md"
    if not instruction_path.is_file():
        raise TasksFolderError(f"task {folder.name}: no instruction.md in {folder} (write what the agent must do, and "
                               "which file the answer goes to)")
    instruction = read_folder_text(instruction_path, "instruction.md").strip()
    if not instruction:
        raise TasksFolderError(f"task {folder.name}: {instruction_path} is empty")
    checks = [folder / name for name in ("check.sh", "check.py") if (folder / name).is_file()]
    if not checks:
        raise TasksFolderError(f"task {folder.name}: no check in {folder}: add check.sh (exit 0 = solved) or check.py "
                               "(prints a score in [0, 1] on its last line)")
    if len(checks) > 1:
        raise TasksFolderError(f"task {folder.name}: both check.sh and check.py in {folder}; keep one")
    workspace = folder / "workspace"
    files = _files_under(workspace) if workspace.is_dir() else []
    return FolderTask(id=folder.name, folder=folder, kind="raso", instruction=instruction, check=checks[0],
                      workspace_files=files)


def _dockerfile_copies(dockerfile: Path, environment: Path, workdir: str) -> tuple[list[tuple[Path, str]], str,
                                                                                   list[str]]:
    """The files a build-free Dockerfile copies from environment/ (source, path relative to WORKDIR), the final
    WORKDIR, and why the Dockerfile needs a container (empty when it does not)."""
    text = read_folder_text(dockerfile, "the Dockerfile")
    text = re.sub(r"\\\n", " ", text)  # continued lines
    files: list[tuple[Path, str]] = []
    problems: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword not in _NO_BUILD:
            problems.append(f"its Dockerfile builds the image (line {number}: {line[:80]})")
            continue
        if keyword == "WORKDIR":
            target = _container_path(rest.strip(), workdir)
            if target is None:
                problems.append(f"its Dockerfile's WORKDIR has a '..' part (line {number}: {line[:80]})")
                continue
            workdir = str(target)
        elif keyword in ("COPY", "ADD"):
            try:
                parts = shlex.split(rest)
            except ValueError:
                parts = []
            flags = [p for p in parts if p.startswith("--")]
            paths = [p for p in parts if not p.startswith("--")]
            if any(f.startswith("--from") for f in flags) or len(paths) < 2 or parts[:1] == ["["]:
                problems.append(f"its Dockerfile copies from another image or in a form not read here "
                                f"(line {number}: {line[:80]})")
                continue
            *sources, dest = paths
            dest_abs = _container_path(dest, workdir)
            if dest_abs is None or not (dest_abs == PurePosixPath(workdir) or PurePosixPath(workdir) in
                                        dest_abs.parents):
                problems.append(f"its Dockerfile copies outside the working directory {workdir}, or through a '..' "
                                f"(line {number}: {line[:80]})")
                continue
            inside = dest_abs.relative_to(workdir)
            for source in sources:
                if any(ch in source for ch in "*?[") or source.startswith(("http://", "https://")):
                    problems.append(f"its Dockerfile copies a pattern or URL (line {number}: {line[:80]})")
                    continue
                src = environment / source
                if source.startswith("/") or ".." in PurePosixPath(source).parts or not src.exists():
                    problems.append(f"its Dockerfile copies {source!r}, which is not a path inside environment/ "
                                    f"(line {number})")
                    continue
                if src.is_dir():
                    files += [(path, str(inside / rel)) for path, rel in _files_under(src)]
                else:
                    into_folder = dest.endswith("/") or len(sources) > 1 or inside == PurePosixPath(".")
                    placed = inside / src.name if into_folder else inside
                    files.append((src, str(placed)))
    return files, workdir, problems


class TomlTable(BaseModel):
    model_config = ConfigDict(extra="allow")  # Harbor's other keys are read where needed or ignored


class TimeoutTable(TomlTable):
    timeout_sec: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)


class EnvironmentTable(TomlTable):
    workdir: str | None = None
    skills_dir: str | None = None  # where the task's skills lie in its environment (Harbor copies them to the agent)
    docker_image: str | None = None
    os: str = "linux"
    build_timeout_sec: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)
    cpus: float | None = Field(default=None, gt=0, le=1024, allow_inf_nan=False)
    memory_mb: int | None = Field(default=None, gt=0, le=16 * 1024 * 1024)


class HarborTaskToml(TomlTable):
    """The task.toml values this harness uses, range-checked when the task loads."""

    verifier: TimeoutTable = Field(default_factory=TimeoutTable)
    agent: TimeoutTable = Field(default_factory=TimeoutTable)
    environment: EnvironmentTable = Field(default_factory=EnvironmentTable)


def read_task_toml(folder: Path) -> HarborTaskToml:
    """A Harbor task's task.toml, parsed and checked; TasksFolderError with one line per bad value."""
    path = folder / "task.toml"
    try:
        config = tomllib.loads(read_folder_text(path, "task.toml"))
    except tomllib.TOMLDecodeError as exc:
        raise TasksFolderError(f"task {folder.name}: {path} is not valid TOML: {exc}") from None
    try:
        return HarborTaskToml.model_validate(config)
    except ValidationError as exc:
        lines = [f"{'.'.join(map(str, e['loc'])) or 'the file'} = {e['input']!r:.60}: {e['msg']}" for e in exc.errors()]
        raise TasksFolderError(f"Harbor task {folder.name}: {path} has values that cannot be used:\n  "
                               + "\n  ".join(lines)) from None


def harbor_problems(folder: Path, config: dict) -> list[str]:
    """Why a Harbor task needs what this harness does not give (a container, services, the network)."""
    problems: list[str] = []
    environment_config = config.get("environment") or {}
    if environment_config.get("docker_image"):
        problems.append(f"it runs in the prebuilt image {environment_config['docker_image']!r}")
    for key in ("mcp_servers", "healthcheck", "gpus", "tpu"):
        if environment_config.get(key):
            problems.append(f"it needs [environment] {key}")
    if str(environment_config.get("os", "linux")).lower() != "linux":
        problems.append(f"it targets {environment_config['os']}")
    environment = folder / "environment"
    for name in ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml"):
        if (environment / name).is_file():
            problems.append(f"it starts services ({name})")
    if (folder / "tests" / "Dockerfile").is_file():
        problems.append("its verifier runs in its own image (tests/Dockerfile)")
    if (folder / "steps").is_dir() or config.get("steps"):
        problems.append("it has several steps")
    test = folder / "tests" / "test.sh"
    if test.is_file():
        for number, line in enumerate(read_folder_text(test, "tests/test.sh").splitlines(), start=1):
            code = line.split("#", 1)[0]
            match = _NEEDS_NETWORK.search(code)
            if match:
                problems.append(f"its verifier installs or downloads at run time (tests/test.sh line {number}: "
                                f"{match.group(0)}), which needs the network")
                break
    return problems


def read_harbor_task(folder: Path) -> FolderTask:
    _check_tree(folder, "Harbor task", skip=("solution",))  # solution/ is never read
    settings = read_task_toml(folder)
    config = settings.model_dump()
    instruction_path = folder / "instruction.md"
    if not instruction_path.is_file():
        raise TasksFolderError(f"Harbor task {folder.name}: no instruction.md in {folder}")
    test = folder / "tests" / "test.sh"
    if not test.is_file():
        raise TasksFolderError(f"Harbor task {folder.name}: no tests/test.sh in {folder} (only the shell verifier "
                               "of Linux tasks is supported)")
    problems = harbor_problems(folder, config)
    environment = folder / "environment"
    workdir = str((config.get("environment") or {}).get("workdir") or HARBOR_WORKDIR)
    files: list[tuple[Path, str]] = []
    dockerfile = environment / "Dockerfile"
    container: ContainerBuild | None = None
    if dockerfile.is_file():
        files, workdir, build_problems = _dockerfile_copies(dockerfile, environment, workdir)
        if build_problems:  # the image is built and the task runs in it (containers.py)
            files = []
            container = ContainerBuild(dockerfile=dockerfile, context=environment,
                                       build_timeout_s=settings.environment.build_timeout_sec or 600.0,
                                       cpus=settings.environment.cpus, memory_mb=settings.environment.memory_mb)
    elif environment.is_dir():
        files = _files_under(environment)
    # the sandbox binds the workspace at the working directory, so / and the verifier's folders cannot be it; a
    # container task's working directory is a folder of its own image
    unbindable = container is None and (workdir in ("/", "/tests", "/logs") or workdir.startswith(("/logs/", "/tests/")))
    if not workdir.startswith("/") or ".." in PurePosixPath(workdir).parts or unbindable:
        problems.append(f"its working directory {workdir} cannot be given here")
    skills_dir = settings.environment.skills_dir
    skills_at = _container_path(skills_dir, workdir) if skills_dir else None
    if skills_dir and skills_at is None:
        problems.append(f"its [environment] skills_dir {skills_dir!r} has a '..' part")
    if problems:
        raise UnsupportedTaskError(f"Harbor task {folder.name} is not supported here: {'; '.join(problems)} "
                                   "(see harnesses/tasks/README.md)",
                                   reasons=[reason_kind(problem) for problem in problems])
    files, skill_files = _split_task_skills(files, environment / TASK_SKILLS_FOLDER, skills_at, workdir)
    return FolderTask(id=folder.name, folder=folder, kind="harbor",
                      instruction=read_folder_text(instruction_path, "instruction.md").strip(), check=test,
                      workspace_files=files, task_skill_files=skill_files,
                      task_skill_names=_skill_names(skill_files), workdir=workdir,
                      check_timeout_s=settings.verifier.timeout_sec, agent_timeout_s=settings.agent.timeout_sec,
                      container=container)


def _split_task_skills(files: list[tuple[Path, str]], skills_source: Path, skills_at: PurePosixPath | None,
                       workdir: str) -> tuple[list[tuple[Path, str]], list[tuple[Path, str]]]:
    """`files` parted into the workspace's own and the task's bundled skills: those taken from environment/skills/
    and those placed under task.toml's `[environment] skills_dir`."""
    def is_skill(source: Path, relative: str) -> bool:
        if source == skills_source or skills_source in source.parents:
            return True
        placed = PurePosixPath(workdir, relative)
        return skills_at is not None and (placed == skills_at or skills_at in placed.parents)

    kept = [(source, relative) for source, relative in files if not is_skill(source, relative)]
    return kept, [(source, relative) for source, relative in files if is_skill(source, relative)]


def _skill_names(skill_files: list[tuple[Path, str]]) -> list[str]:
    """The skills among the task's bundled skill files: the folder name of each SKILL.md."""
    return sorted({PurePosixPath(relative).parent.name for _source, relative in skill_files
                   if PurePosixPath(relative).name == "SKILL.md"})


TB1_LAYOUT = "Terminal-Bench 1 layout (task.yaml) is not supported"


def read_task(folder: Path, task_id: str | None = None) -> FolderTask:
    """The task in `folder` (raso's layout, or Harbor's with task.toml), its id `task_id` (default: the folder's
    name). UnsupportedTaskError for a layout or task this harness cannot run, TasksFolderError for a broken one."""
    if (folder / "task.toml").is_file():
        task = read_harbor_task(folder)
    elif (folder / "task.yaml").is_file():
        raise UnsupportedTaskError(
            f"task {task_id or folder.name}: {TB1_LAYOUT}: convert it to Harbor's layout (instruction.md, task.toml, "
            "tests/test.sh writing /logs/verifier/reward.txt, environment/), which Terminal-Bench 2 uses",
            reasons=[TB1_LAYOUT])
    else:
        task = read_raso_task(folder)
    return task.model_copy(update={"id": task_id}) if task_id else task


def _is_task_folder(folder: Path) -> bool:
    return folder.is_symlink() or any(os.path.lexists(folder / marker) for marker in TASK_MARKERS)


def task_folders(root: Path) -> list[tuple[str, Path]]:
    """The task folders below `root` at any depth, with their ids (their paths relative to `root`, so `a/x` and
    `b/x` stay apart), sorted. A folder holding a task marker (instruction.md, task.toml, task.yaml, a check, a
    workspace/) is a task and is not searched further; any other is searched (hidden folders and those starting
    with `_`, such as `__pycache__`, are not); a linked folder is a task, which refuses the link."""
    if not root.is_dir():
        raise TasksFolderError(f"tasks folder {root} does not exist or is not a folder")
    found: list[tuple[str, Path]] = []
    pending = [(root, 0)]
    while pending:  # iterative: a download's deep tree must not reach the recursion limit
        folder, depth = pending.pop()
        for child in sorted(folder.iterdir()):
            if child.name.startswith((".", "_")) or not child.is_dir():
                continue
            if _is_task_folder(child):
                found.append((child.relative_to(root).as_posix(), child))
            elif depth + 1 < TASK_FOLDER_LIMITS.max_depth:
                pending.append((child, depth + 1))
    if not found:
        raise TasksFolderError(f"tasks folder {root} has no task sub-folders (one folder per task, at any depth, each "
                               "with instruction.md and check.sh or check.py, or a Harbor task.toml)")
    return sorted(found)


def read_splits_file(path: Path, ids: list[str]) -> dict[str, list[str]]:
    """The splits `path` names; every task in exactly one split, train and val not empty."""
    try:
        data = json.loads(read_folder_text(path, SPLITS_FILE))
    except json.JSONDecodeError as exc:
        raise TasksFolderError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or set(data) - set(choices_of(Split)) or not all(
            isinstance(v, list) and all(isinstance(i, str) for i in v) for v in data.values()):
        raise TasksFolderError(f"{path} must be an object {{\"train\": [...], \"val\": [...], \"test\": [...]}} "
                               "of task folder names")
    splits = {name: list(data.get(name, [])) for name in choices_of(Split)}
    known = set(ids)
    seen: dict[str, str] = {}
    for name, members in splits.items():
        for task_id in members:
            if task_id not in known:
                raise TasksFolderError(f"{path}: {name} lists {task_id!r}, which is not a task folder here")
            if task_id in seen:
                raise TasksFolderError(f"{path}: {task_id!r} is in both {seen[task_id]} and {name}")
            seen[task_id] = name
    missing = [i for i in ids if i not in seen]
    if missing:
        raise TasksFolderError(f"{path}: task(s) {', '.join(missing)} are in no split; add them or remove the folders")
    for name in ("train", "val"):
        if not splits[name]:
            raise TasksFolderError(f"{path}: the {name} split is empty")
    return splits


def seeded_splits(ids: list[str], salt: str = DEFAULT_SALT,
                  fractions: tuple[float, float, float] = DEFAULT_FRACTIONS) -> dict[str, list[str]]:
    """Without splits.json: the tasks ordered by sha256(salt + name), then cut by `fractions` (rounded; train and
    val get at least one task each when there are two or more, test what is left)."""
    if len(ids) < 2:
        raise TasksFolderError(f"{len(ids)} task(s): a tasks folder needs at least two (train and val)")
    ranked = sorted(ids, key=lambda i: hashlib.sha256(f"{salt}:{i}".encode()).hexdigest())
    n_train = max(1, round(len(ids) * fractions[0]))
    n_val = max(1, round(len(ids) * fractions[1]))
    n_train = min(n_train, len(ids) - n_val)
    return {"train": ranked[:n_train], "val": ranked[n_train:n_train + n_val], "test": ranked[n_train + n_val:]}


__all__ = ["ContainerBuild", "DEFAULT_FRACTIONS", "DEFAULT_SALT", "FolderTask", "SPLITS_FILE", "TaskSkillsMode",
           "TasksFolderError", "UnsupportedTaskError", "harbor_problems", "reason_kind", "read_splits_file", "read_task",
           "seeded_splits", "task_folders"]
