"""Runs one task inside an external agent program (a `RolloutRunner`): a fresh folder per rollout holding the
task's workspace and the program's home, the candidate skills installed where the program reads them, the program
run headless in the OS sandbox with only the loopback model endpoint reachable, then the harness's own scorer on
what the workspace holds and the program's transcript as the rollout's steps. Nothing of the rollout's folder is
kept afterwards.

Outcomes (raso.choices.Outcome): "ok" when the program ran, every model call it made was answered and it exited
cleanly; "agent_error" when it then crashed or hit a sandbox limit (its own doing: the harness still scores what it
left, and the rollout counts); the gateway's failure kind when a model call was refused ("budget", "unusable",
"infrastructure": such a rollout says nothing about the skill); "unusable" when the program could not be run at all
(not installed, no sandbox, a harness without workspace tasks, or it exited before its first model call).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from raso.choices import Outcome
from raso.harness.base import (
    Harness,
    Rollout,
    Score,
    Step,
    Task,
    WorkspaceEnd,
    WorkspaceTasks,
    check_error_fields,
    failure_fields,
)
from raso.harness.sandbox import MiB, Sandbox, SandboxLimits, SandboxResult
from raso.safe_files import remove_tree
from raso.skill import slugify

from ..endpoint import EndpointSession, ModelEndpoint
from .base import AgentProgram, AgentRun, Transcript
from .config import ProgramSection

if TYPE_CHECKING:
    from raso.agent.agent import AgentConfig
    from raso.skill import Skill

#: where rollout folders are made: $RASO_AGENT_ROOT, else the system temp folder (searchable by every uid, which
#: the sandbox needs when it runs programs as another user)
ROOT_ENV = "RASO_AGENT_ROOT"
MODEL_NAME = "raso-agent"  # the model name an agent is told when its program class names none


#: Seconds between the lines a still-running external program prints on stderr (what it has asked so far), so a
#: rollout that waits on a slow or refused model is visibly alive.
PROGRESS_EVERY_S = 30.0


class _ProgressLines:
    """While the block runs, every `every_s` seconds: one stderr line with the rollout's time and model calls."""

    def __init__(self, label: str, session: EndpointSession, every_s: float = PROGRESS_EVERY_S) -> None:
        self.label, self.session, self.every_s = label, session, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="raso-rollout-progress", daemon=True)

    def _loop(self) -> None:
        started = time.perf_counter()
        while not self._stop.wait(self.every_s):
            errors = list(self.session.errors)
            line = (f"raso: {self.label}: still running after {time.perf_counter() - started:.0f} s; "
                    f"{self.session.calls} model call(s) answered")
            if errors:
                line += f", {len(errors)} refused (last: {str(errors[-1]['message']).splitlines()[0][:120]})"
            print(line, file=sys.stderr, flush=True)

    def __enter__(self) -> "_ProgressLines":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)


class AgentSetupError(RuntimeError):
    """The program could not be run at all (not installed, no sandbox, a harness without workspace tasks)."""


def workspace_harnesses() -> list[str]:
    """The registered harnesses whose tasks can be done in a workspace (for error messages)."""
    from raso.harness.registry import available_harnesses, harness_class

    names = []
    for name in available_harnesses():
        try:
            cls = harness_class(name)
        except Exception:  # a harness that cannot be loaded here is not one to suggest
            continue
        if isinstance(cls, type) and issubclass(cls, WorkspaceTasks):
            names.append(name)
    return names


def check_workspace_harness(harness: Harness, program: str) -> WorkspaceTasks:
    """The workspace form of `harness`'s tasks, or AgentSetupError naming the harnesses that declare one."""
    workspace = harness.workspace_form()
    if workspace is not None:
        return workspace
    which = ", ".join(workspace_harnesses()) or "none is registered here"
    raise AgentSetupError(f"agent program {program!r} runs tasks in a workspace, and harness "
                          f"{getattr(harness, 'name', harness)!r} has no workspace form (WorkspaceTasks); "
                          f"harnesses that do: {which}")


def cut_middle(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit // 2
    return f"{text[:head]}\n... [{len(text) - limit} chars cut] ...\n{text[-(limit - head):]}"


def _write_skill(skill: Skill, folder: Path) -> list[str]:
    """Write `skill` as `folder/SKILL.md`, plus the files it carries beside SKILL.md (`Skill.files`: relative path
    -> text), executables kept executable (`Skill.executable`); returns the relative paths written besides
    SKILL.md. Each file is created anew (O_EXCL) and never through a link, so nothing outside `folder` is written."""
    folder.mkdir(parents=True, exist_ok=True)
    _create_file(folder / "SKILL.md", skill.to_markdown().encode("utf-8"), 0o644)
    written = []
    files = getattr(skill, "files", None)
    executable = set(getattr(skill, "executable", None) or ())
    if isinstance(files, Mapping):
        for rel, content in files.items():
            parts = PurePosixPath(str(rel)).parts
            if not parts or str(rel).startswith("/") or ".." in parts or str(rel).endswith("SKILL.md"):
                continue  # a path leaving the skill's folder, or a second SKILL.md: not written
            target = folder.joinpath(*parts)
            for parent in reversed(target.relative_to(folder).parents[:-1]):  # scripts, then scripts/lib, ...
                if (folder / parent).is_symlink():
                    raise OSError(f"{folder / parent}: a link where a skill's folder goes; not written through")
            target.parent.mkdir(parents=True, exist_ok=True)
            data = content if isinstance(content, bytes) else str(content).encode("utf-8")
            _create_file(target, data, 0o755 if rel in executable else 0o644)
            written.append(str(rel))
    return written


def _create_file(path: Path, data: bytes, mode: int) -> None:
    """A new file `path` holding `data` with permission bits `mode` (set explicitly: the umask must not drop a
    script's execute bit); refuses an existing file or link there."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb", closefd=False) as fh:
            fh.write(data)
    finally:
        os.close(fd)


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        content = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def steps_from_exchanges(exchanges: Sequence[tuple[Any, Any]]) -> list[Step]:
    """The model calls the endpoint answered, as steps: what the agent last sent (the observation), the model's
    reply, and its tool calls as the action (else the reply's text). For programs whose own transcript is
    unavailable; what each action led to is the next step's observation."""
    steps = []
    for request, reply in exchanges:
        last = request.messages[-1] if request.messages else {}
        calls = "; ".join(f"{c.name}({c.arguments})" for c in reply.tool_calls)
        steps.append(Step(observation=_message_text(last), reply=reply.text, action=calls or reply.text,
                          info={"source": "endpoint", "tool_calls": len(reply.tool_calls)}))
    return steps


def _folder_names(skills: Sequence[Skill]) -> list[str]:
    """Each skill's folder name: its name as a slug, made unique (-2, -3, ...) where two skills share one."""
    names: list[str] = []
    for skill in skills:
        base = slugify(skill.name)
        name, count = base, 1
        while name in names:
            count += 1
            name = f"{base}-{count}"
        names.append(name)
    return names


class ExternalAgentRunner:
    """Runs rollouts inside `program` with `gateway`'s `config.role` model behind the loopback endpoint, under the
    sandbox limits of `limits` (the config's `program` section; None = its defaults)."""

    def __init__(self, program: AgentProgram, gateway: Any, config: AgentConfig,
                 limits: ProgramSection | None = None) -> None:
        self.program = program
        self.gateway = gateway
        self.config = config
        self.limits_config = limits if limits is not None else ProgramSection()

    # ------------------------------------------------------------------ the RolloutRunner
    def run(self, harness: Harness, task: Task, skills: Sequence[Skill]) -> Rollout:
        """One rollout; never raises (a failure is a Rollout with its outcome and error)."""
        start = time.perf_counter()
        names = [getattr(s, "name", str(s)) for s in skills]
        try:
            return self._run(harness, task, skills, start)
        except AgentSetupError as exc:
            return Rollout(task_id=task.id, harness=harness.name, reward=0.0, error=str(exc), outcome="unusable",
                           wall_time_s=time.perf_counter() - start, skill_names=names,
                           metadata={"program": self.program.name})
        except Exception as exc:
            return Rollout(task_id=task.id, harness=harness.name, reward=0.0, **failure_fields(exc, trace_limit=5),
                           wall_time_s=time.perf_counter() - start, skill_names=names,
                           metadata={"program": self.program.name})

    def reply_token_cap(self) -> int | None:
        """What one model call may ask for: agent.max_tokens, lowered to the model profile's max_output_tokens (an
        agent asking 32,000 of a provider that allows 16,384 would otherwise fail every call)."""
        try:
            profile = self.gateway.profile(self.config.role)
        except Exception:  # a gateway stand-in without profiles: the configured cap alone
            return self.config.max_tokens
        return profile.cap_reply_tokens(self.config.max_tokens)

    def wall_seconds(self) -> float:
        return float(self.config.max_wall_s or self.limits_config.wall_s)

    def memory_mb(self) -> int:
        """The configured address-space limit, raised to what the program needs to run at all."""
        return max(self.limits_config.memory_mb, self.program.min_memory_mb)

    def limits(self) -> SandboxLimits:
        return SandboxLimits(cpu_seconds=self.limits_config.cpu_seconds, wall_seconds=self.wall_seconds(),
                             memory_bytes=self.memory_mb() * MiB, max_processes=512, max_open_files=4096,
                             file_size_bytes=512 * MiB, disk_bytes=self.limits_config.disk_mb * MiB, tmpfs_bytes=512 * MiB,
                             output_chars=400_000)

    def _run(self, harness: Harness, task: Task, skills: Sequence[Skill], start: float) -> Rollout:
        tasks = check_workspace_harness(harness, self.program.name)
        reason = self.program.unavailable_reason()
        if reason:
            raise AgentSetupError(f"agent program {self.program.name!r} cannot run: {reason}")
        try:
            sandbox = Sandbox(self.limits(), deny_read=tasks.hidden_paths())
        except Exception as exc:
            raise AgentSetupError(f"agent program {self.program.name!r} needs the OS sandbox: {exc}") from None
        if sandbox.isolation_level != "os":
            raise AgentSetupError(f"agent program {self.program.name!r} needs OS-level isolation (bubblewrap): "
                                  "a coding agent runs any command it likes")
        base = Path(os.environ.get(ROOT_ENV) or tempfile.gettempdir())
        base.mkdir(parents=True, exist_ok=True)
        root = Path(tempfile.mkdtemp(prefix="raso-agent-", dir=base))
        try:
            os.chmod(root, 0o755)
            workspace, home = root / "workspace", root / "home"
            workspace.mkdir()
            home.mkdir()
            (root / "tmp").mkdir()
            instruction = tasks.prepare_workspace(task, workspace)
            (root / "instruction.md").write_text(instruction, encoding="utf-8")
            cap = self.reply_token_cap()
            with ModelEndpoint(self.gateway, self.config.role, self.config.stage, max_tokens_cap=cap) as endpoint, \
                    endpoint.session(f"{harness.name}/{task.id}") as session:
                run = AgentRun(
                    instruction=instruction, workspace=workspace, home=home,
                    endpoint_url=session.base_url(self.program.wire_format), api_key=session.api_key,
                    model_name=str(getattr(self.program, "model_name", MODEL_NAME)),
                    max_steps=int(self.config.max_steps or harness.max_steps), wall_seconds=self.wall_seconds(),
                    skill_names=_folder_names(skills), max_tokens=cap)
                skills_dir = Path(self.program.skills_dir(run))
                if not str(skills_dir.resolve()).startswith(str(root.resolve()) + os.sep):
                    raise AgentSetupError(f"agent program {self.program.name!r} reads skills from {skills_dir}, "
                                          "outside the rollout's folder")
                skill_files = {name: _write_skill(skill, skills_dir / name) for name, skill in zip(run.skill_names, skills)}
                self.program.prepare_home(run)
                env = {"HOME": str(home), "TMPDIR": str(root / "tmp"), **self.program.environment(run)}
                # the sandbox's writable folder is the rollout root (home/ and workspace/); the program starts in
                # workspace/ (GNU env's --chdir, as Sandbox.run_command starts in its work dir), or where the task's
                # instruction says the files are (workspace_path: a Harbor task's /app), the workspace bound there
                seen_at = tasks.workspace_path(task)
                mounts = {seen_at: workspace} if seen_at else None
                argv = ["/usr/bin/env", f"--chdir={seen_at or workspace}", "--", *self.program.command(run)]
                try:
                    with _ProgressLines(f"{self.program.name} on {task.id}", session):
                        result = sandbox.run_command(argv, root, ro_binds=self.program.read_only_paths(), env=env,
                                                     loopback_ports=[endpoint.port], mounts=mounts)
                except ValueError as exc:  # a rollout folder or install the sandbox's user cannot reach
                    raise AgentSetupError(f"agent program {self.program.name!r}: {exc} (set {ROOT_ENV} to a folder "
                                          "every user can enter)") from None
            score = harness.score(task, WorkspaceEnd(workspace=workspace))  # the harness's one scorer
            transcript = self._transcript(run, result)
            if not transcript.steps and session.exchanges:
                transcript.steps = steps_from_exchanges(session.exchanges)
                transcript.notes.append("steps read from the model calls the endpoint answered")
            return self._rollout(harness, task, skills, session, result, score, transcript, skill_files, start)
        finally:
            remove_tree(root)  # iterative and link-safe: an agent's 10,000-deep tree cannot outlive the rollout

    def _transcript(self, run: AgentRun, result: SandboxResult) -> Transcript:
        try:
            return self.program.read_transcript(run, result.stdout, result.stderr)
        except Exception as exc:  # the contract says never; a reader bug must not lose the rollout
            return Transcript(notes=[f"the transcript could not be read: {type(exc).__name__}: {exc}"])

    def _rollout(self, harness: Harness, task: Task, skills: Sequence[Skill], session: EndpointSession,
                 result: SandboxResult, score: Score, transcript: Transcript,
                 skill_files: dict[str, list[str]], start: float) -> Rollout:
        limit = self.config.max_observation_chars
        steps = [step.model_copy(update={"observation": cut_middle(step.observation, limit),
                                         "result": cut_middle(step.result, limit)}) for step in transcript.steps]
        # The score step carries the reward alone: the check's output (a verifier's pytest log, its test names)
        # stays in metadata["score_info"], which no optimizer prompt renders, so it cannot leak into a skill.
        steps.append(Step(observation="", action="score workspace", kind="score", reward=score.reward,
                          result=f"reward {score.reward:g}", info={"soft_score": score.soft_score}))
        failure = session.failure()
        outcome: Outcome = "ok"
        error = None
        if failure in ("budget", "unusable", "infrastructure"):
            outcome = failure
            error = session.errors[-1]["message"]
        elif session.calls == 0 and result.exit_code not in (0, None):
            # the program ended before it ever asked the model: it could not run here, which says nothing of the skill
            outcome = "unusable"
            error = f"{self.program.name} exited {result.exit_code} before any model call: {result.error_summary() or ''}"
        elif result.limit_hit:
            outcome, error = "agent_error", f"{self.program.name} stopped by the sandbox's {result.limit_hit} limit" \
                                            f"{f' ({result.limit_detail})' if result.limit_detail else ''}"
        elif result.exit_code not in (0, None):
            outcome, error = "agent_error", f"{self.program.name} exited {result.exit_code}"
            if result.exit_code is not None and (result.exit_code < 0 or result.exit_code > 128):
                error += f" ({result.error_summary()})"  # a signal's death, and that it was not a sandbox limit
        if score.check_error and outcome in ("ok", "agent_error"):  # whatever the agent did, nothing was judged
            fields = check_error_fields(score.check_error)
            outcome, error = fields["outcome"], fields["error"] + (f" (and: {error})" if error else "")
        if error and any("max_tokens" in str(e["message"]) for e in session.errors):
            error += (" (the model refused the reply length the agent asked for: set agent.max_tokens, e.g. "
                      "--max-tokens 16384, or the model profile's max_output_tokens)")
        if error and result.stderr.strip():
            error += "\nstderr (tail):\n" + result.stderr.strip()[-1500:]
        metadata: dict[str, Any] = {
            "program": self.program.name, "package": self.program.package, "wire_format": self.program.wire_format,
            "tool_calls": transcript.tool_calls, "exit_code": result.exit_code, "limit_hit": result.limit_hit,
            "isolation": result.isolation, "isolation_level": result.isolation_level,
            "limits_mode": result.limits_mode, "sandbox_cpu_s": result.cpu_time_s,
            "sandbox_wall_s": result.wall_time_s, "transcript_notes": transcript.notes,
            "endpoint_errors": session.errors, "score_info": score.info, "skill_files": skill_files,
            "agent_reported_tokens": [transcript.prompt_tokens, transcript.completion_tokens],
        }
        return Rollout(
            task_id=task.id, harness=harness.name, reward=score.reward, soft_score=score.soft_score, trajectory=steps,
            final_output=transcript.final_message, error=error, outcome=outcome,
            prompt_tokens=session.prompt_tokens, completion_tokens=session.completion_tokens, cost_usd=session.cost_usd,
            wall_time_s=time.perf_counter() - start, skill_names=[s.name for s in skills], metadata=metadata,
            terminated=result.exit_code == 0, truncated=result.limit_hit is not None,
            env_steps=transcript.tool_calls, model_calls=session.calls,
        )


__all__ = ["AgentSetupError", "ExternalAgentRunner", "check_workspace_harness", "workspace_harnesses"]
