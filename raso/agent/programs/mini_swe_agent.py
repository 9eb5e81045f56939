"""mini-swe-agent (PyPI `mini-swe-agent`, pinned) as an agent program, in its text-based mode: each turn the model
writes a thought and one bash command in a fenced block, so a small model that cannot call tools can drive it.

- Installed into its own virtual environment under the raso cache (`raso agents install mini-swe-agent`), never
  into raso's environment (it brings its own litellm).
- Model: its litellm text-based model class pointed at the loopback endpoint as an OpenAI-compatible server
  (`openai/<name>` with `api_base`), so every call goes through raso's gateway.
- Skills: mini-swe-agent has no skills folder. The runner installs each skill as `$HOME/skills/<name>/SKILL.md`
  and this program class appends those SKILL.md files, whole, to the task message (after the instruction); the agent can
  also read the files.
- Limits: its step limit is `agent.max_steps`, its wall-clock limit a little under the sandbox's, each command 60 s.
- Transcript: its trajectory JSON file (`$HOME/trajectory.json`) becomes the steps.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from raso.choices import WireFormatName
from raso.harness.base import Step
from raso.safe_files import MiB, read_text

from .base import AgentProgram, AgentRun, ProgramOptions, Transcript
from .install import base_python_prefix, install_dir

VERSION = "2.4.6"
COMMAND_TIMEOUT_S = 60
MAX_TRAJECTORY_BYTES = 64 * MiB  # the program's trajectory file, read on the host after the run
FINISH_COMMAND = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"

#: the first user message; `task` is the harness's instruction followed by the installed skills (a template
#: variable, so skill text is never interpreted as a template)
INSTANCE_TEMPLATE = """{{task}}

## How you work here

Your current directory is the task's workspace folder: the task's files are there and your answer goes there.
Each of your replies has a short THOUGHT, then exactly ONE bash code block fenced as ```mswea_bash_command that
holds one command (chain several with && if needed). Each command runs in a new shell started in the workspace, so
`cd` and variables do not carry over to the next command; its return code and output come back to you.
When the task is done, reply with a block whose only command is:

```mswea_bash_command
""" + FINISH_COMMAND + """
```
"""


def skills_text(skills_dir: Path, names: list[str]) -> str:
    """The installed skills as a section of the task message (empty when there are none)."""
    blocks = []
    for name in names:
        path = skills_dir / name / "SKILL.md"
        try:
            text = path.read_text(encoding="utf-8").strip()
        except OSError:
            continue
        blocks.append(f'<skill name="{name}" path="{path}">\n{text}\n</skill>')
    if not blocks:
        return ""
    return ("\n\n## Skills\n\nThese skills are installed for this task (each is also a file you can read). Follow "
            "them where they apply.\n\n" + "\n\n".join(blocks))


class MiniSweAgentProgram(AgentProgram):
    name: ClassVar[str] = "mini-swe-agent"
    wire_format: ClassVar[WireFormatName] = "openai-chat"
    package: ClassVar[str] = f"pypi:mini-swe-agent=={VERSION}"

    def __init__(self, options: ProgramOptions | None = None, *, home: Path | None = None) -> None:
        super().__init__(options)
        self.install = home or install_dir(self.name)

    @property
    def python(self) -> Path:
        return self.install / "bin" / "python"

    def unavailable_reason(self) -> str | None:
        if not self.python.exists():
            return f"not installed (run: raso agents install {self.name})"
        found = sorted(self.install.glob("lib/python*/site-packages/mini_swe_agent-*.dist-info"))
        if not found:
            return f"{self.install} holds no mini-swe-agent (run: raso agents install {self.name})"
        version = found[0].name.removeprefix("mini_swe_agent-").removesuffix(".dist-info")
        if version != VERSION:
            return f"mini-swe-agent {version} is installed, {VERSION} is pinned (run: raso agents install {self.name})"
        return None

    def skills_dir(self, run: AgentRun) -> Path:
        return run.home / "skills"

    def _config_file(self, run: AgentRun) -> Path:
        return run.home / "raso-mini.yaml"

    def trajectory_file(self, run: AgentRun) -> Path:
        return run.home / "trajectory.json"

    def prepare_home(self, run: AgentRun) -> None:
        config: dict[str, Any] = {
            "agent": {"instance_template": INSTANCE_TEMPLATE, "step_limit": run.max_steps, "cost_limit": 0,
                      "wall_time_limit_seconds": max(int(run.wall_seconds) - 15, 5),
                      "output_path": str(self.trajectory_file(run))},
            "environment": {"environment_class": "local", "cwd": str(run.workspace), "timeout": COMMAND_TIMEOUT_S},
            "model": {"model_class": "litellm_textbased", "model_name": f"openai/{run.model_name}",
                      "cost_tracking": "ignore_errors",
                      "model_kwargs": {"api_base": run.endpoint_url, "api_key": run.api_key, "drop_params": True,
                                       "num_retries": 0}},
        }
        # JSON is YAML: the file needs no YAML writer, and every value stays a plain string
        self._config_file(run).write_text(json.dumps(config, indent=1), encoding="utf-8")

    def command(self, run: AgentRun) -> list[str]:
        task = run.instruction.strip() + skills_text(self.skills_dir(run), run.skill_names)
        return [str(self.python), "-m", "minisweagent.run.mini", "-c", "mini_textbased.yaml",
                "-c", str(self._config_file(run)), "--agent-class", "default", "-y", "--exit-immediately",
                "-o", str(self.trajectory_file(run)), "-t", task]

    def environment(self, run: AgentRun) -> dict[str, str]:
        # One attempt per model call: the endpoint answers only final errors (the gateway has retried already), and
        # mini-swe-agent's own 10 attempts with backoff turned one refused call into minutes of waiting.
        # A plain traceback when a refused call ends it: Typer's rich one renders every frame's locals (litellm's
        # large objects), which took seconds after the refusal.
        return {"MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "1", "_TYPER_STANDARD_TRACEBACK": "1",
                "MSWEA_CONFIGURED": "true", "MSWEA_SILENT_STARTUP": "1", "MSWEA_COST_TRACKING": "ignore_errors",
                "MSWEA_GLOBAL_CONFIG_DIR": str(run.home / ".config" / "mini-swe-agent"),
                "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PAGER": "cat", "NO_COLOR": "1", "TERM": "dumb"}

    def read_only_paths(self) -> list[Path]:
        paths = [self.install]
        base = base_python_prefix(self.install)
        if base is not None:
            paths.append(base)
        return paths

    def read_transcript(self, run: AgentRun, stdout: str, stderr: str) -> Transcript:
        path = self.trajectory_file(run)
        try:
            # the trajectory file lies in the agent's home: never read through a link it left, never unbounded
            data = json.loads(read_text(path, MAX_TRAJECTORY_BYTES))
            messages = data["messages"]
            assert isinstance(messages, list)
        except (OSError, ValueError, KeyError, AssertionError, TypeError) as exc:
            tail = (stderr or stdout).strip()[-800:]
            return Transcript(notes=[f"no readable trajectory file ({type(exc).__name__}: {exc})"
                                     + (f"; the program's output ends: {tail}" if tail else "")])
        return transcript_of(messages, data.get("info") or {})

    @property
    def tools_description(self) -> str:
        return (
            f"The agent is mini-swe-agent {VERSION} in its text-based mode. Each turn the model writes a short "
            "THOUGHT and exactly one bash command in a ```mswea_bash_command fenced block; the command runs in a new "
            "shell in the workspace folder (cd and variables do not persist between commands), for at most "
            f"{COMMAND_TIMEOUT_S} s, and its return code and output come back as the next message (an output over "
            "10,000 characters is cut to its first and last 5,000). A reply without exactly one such block is "
            f"rejected with a format error (three in a row end the run). The agent finishes with `{FINISH_COMMAND}`. "
            "It has the workspace, the system's shell tools (and python3 where the system has it), no network, and a "
            "step limit (agent.max_steps model calls). mini-swe-agent has no skills folder: raso appends each "
            "installed SKILL.md, whole, to the task message after the instruction, and also places it at "
            "$HOME/skills/<name>/SKILL.md.")


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        content = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def transcript_of(messages: list[Any], info: dict[str, Any]) -> Transcript:
    """mini-swe-agent's trajectory messages as steps: each model reply with the command(s) it ran and what came
    back (the command's output, or the format error the agent got)."""
    steps: list[Step] = []
    tool_calls = 0
    final: str | None = None
    notes: list[str] = []
    observation = ""
    items = [m for m in messages if isinstance(m, dict)]
    for index, message in enumerate(items):
        role = message.get("role")
        extra = message.get("extra") or {}
        if role == "assistant":
            commands = [str(a.get("command", "")) for a in extra.get("actions") or [] if isinstance(a, dict)]
            tool_calls += len(commands)
            following = items[index + 1] if index + 1 < len(items) else {}
            follow_extra = following.get("extra") or {}
            if following.get("role") == "user" and "raw_output" in follow_extra:
                result = f"returncode {follow_extra.get('returncode')}\n{follow_extra.get('raw_output') or ''}"
            elif following.get("role") == "exit":
                result = f"({follow_extra.get('exit_status') or 'exit'})"
            else:
                result = _text(following)
            steps.append(Step(observation=observation, reply=_text(message),
                              action="\n".join(commands) or "(no command: format error)", result=result,
                              info={"source": "mini-swe-agent", "commands": len(commands)}))
        elif role == "user" and extra.get("interrupt_type") == "FormatError":
            # mini-swe-agent keeps a rejected reply only inside the format error it answered with
            steps.append(Step(observation=observation, reply=str(extra.get("model_response") or ""),
                              action="(no command: format error)", result=_text(message),
                              info={"source": "mini-swe-agent", "commands": 0}))
            observation = _text(message)
        elif role == "user":
            observation = _text(message)
        elif role == "exit":
            status = extra.get("exit_status") or ""
            final = _text(message).strip() or status or None
            notes.append(f"mini-swe-agent exit status: {status or 'unknown'}")
    if not any(m.get("role") == "exit" for m in items):
        notes.append("the trajectory has no exit message (the program was stopped)")
    stats = (info.get("model_stats") or {}) if isinstance(info, dict) else {}
    if stats:
        notes.append(f"mini-swe-agent counted {stats.get('api_calls')} model calls")
    return Transcript(steps=steps, final_message=final, tool_calls=tool_calls, notes=notes)


__all__ = ["FINISH_COMMAND", "MiniSweAgentProgram", "VERSION", "skills_text", "transcript_of"]
