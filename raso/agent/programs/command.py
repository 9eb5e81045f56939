"""The `command` backend: any agent program, run by a user's command line template (`agent.command`).

Placeholders (each argument is filled separately, so a value with spaces stays one argument; `{{`/`}}` are literal
braces): {instruction_file} (the instruction as a file, outside the workspace), {instruction} (its text),
{workspace}, {home}, {skills_dir}, {endpoint_url} (an OpenAI-compatible base URL ending in /v1), {api_key},
{model}, {max_steps}. The same values are in the environment as RASO_INSTRUCTION_FILE, RASO_WORKSPACE,
RASO_SKILLS_DIR, OPENAI_BASE_URL, OPENAI_API_KEY, RASO_MODEL and RASO_MAX_STEPS.

An absolute path in the template that exists here (the program, its script) is shown read-only in the sandbox; the
system folders and raso's Python are there anyway. The program's stdout is its final message; its steps are the
model calls the endpoint answered (the runner reads them from the session when a backend reports none).
"""

from __future__ import annotations

import shlex
import string
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from raso.harness.sandbox import interpreter_layout

from .base import AgentProgram, AgentRun, Transcript
from .registry import register

if TYPE_CHECKING:
    from raso.agent.agent import AgentConfig

PLACEHOLDERS = ("instruction_file", "instruction", "workspace", "home", "skills_dir", "endpoint_url", "api_key",
                "model", "max_steps")
DEFAULT_SKILLS_DIR = "skills"


def check_template(template: str) -> list[str]:
    """`template` split into arguments; ValueError naming an unknown placeholder, a stray brace or an open quote."""
    known = ", ".join("{" + p + "}" for p in PLACEHOLDERS)
    try:
        argv = shlex.split(template) if template.strip() else []
    except ValueError as exc:
        raise ValueError(f"agent.command: {exc} in {template!r}") from None
    for arg in argv:
        try:
            fields = [field for _, field, _, _ in string.Formatter().parse(arg)]
        except ValueError as exc:  # "Single '}' encountered" and the like
            raise ValueError(f"agent.command: {exc} in {arg!r} (write a literal brace as {{{{ or }}}}; "
                             f"placeholders: {known})") from None
        for field in fields:
            if field is not None and field not in PLACEHOLDERS:
                raise ValueError(f"agent.command: unknown placeholder {{{field}}} (known: {known})")
    return argv


@register
class CommandProgram(AgentProgram):
    name: ClassVar[str] = "command"
    wire_format: ClassVar[str] = "openai-chat"
    package: ClassVar[str] = "none: the user's own program (agent.command)"

    def __init__(self, template: str | None, skills_dir: str | None = None) -> None:
        self.template = template or ""
        self.skills_subdir = skills_dir or DEFAULT_SKILLS_DIR
        if Path(self.skills_subdir).is_absolute() or ".." in Path(self.skills_subdir).parts:
            raise ValueError(f"agent.skills_dir {self.skills_subdir!r} must be a folder inside the rollout's home "
                             "(a relative path without '..')")
        self.argv = check_template(self.template)

    @classmethod
    def from_config(cls, config: AgentConfig) -> CommandProgram:
        return cls(config.command, config.skills_dir)

    def unavailable_reason(self) -> str | None:
        if not self.argv:
            return "no command given: set agent.command (--agent-command 'PROGRAM {instruction_file} ...')"
        return None

    def skills_dir(self, run: AgentRun) -> Path:
        return run.home / self.skills_subdir

    def _values(self, run: AgentRun) -> dict[str, str]:
        return {"instruction_file": str(run.workspace.parent / "instruction.md"), "instruction": run.instruction,
                "workspace": str(run.workspace), "home": str(run.home), "skills_dir": str(self.skills_dir(run)),
                "endpoint_url": run.endpoint_url, "api_key": run.api_key, "model": run.model_name,
                "max_steps": str(run.max_steps)}

    def command(self, run: AgentRun) -> list[str]:
        values = self._values(run)
        return [arg.format(**values) for arg in self.argv]

    def environment(self, run: AgentRun) -> dict[str, str]:
        values = self._values(run)
        return {"RASO_INSTRUCTION_FILE": values["instruction_file"], "RASO_WORKSPACE": values["workspace"],
                "RASO_SKILLS_DIR": values["skills_dir"], "OPENAI_BASE_URL": run.endpoint_url,
                "OPENAI_API_KEY": run.api_key, "RASO_MODEL": run.model_name, "RASO_MAX_STEPS": values["max_steps"]}

    def read_only_paths(self) -> list[Path]:
        paths = []
        for arg in self.argv:
            if "{" in arg:
                continue
            path = Path(arg)
            if path.is_absolute() and path.exists():
                paths.append(path)
                if (path.parent.parent / "pyvenv.cfg").is_file():
                    # a virtual environment's interpreter needs the environment and its base Python (the project's
                    # own packages in there stay covered: the sandbox hides them in every run)
                    paths += [Path(p) for p in interpreter_layout(str(path))[0]]
        return paths

    def read_transcript(self, run: AgentRun, stdout: str, stderr: str) -> Transcript:
        return Transcript(final_message=stdout.strip() or None,
                          notes=["the command backend reads no transcript of its own: the steps are the model calls "
                                 "the endpoint answered"])

    @property
    def tools_description(self) -> str:
        return ("The agent is a program given by a command line (raso's `command` backend). It starts in the "
                "workspace folder, which it may read and write, and gets the task's instruction; what it can do "
                f"there is up to the program. Skills are installed as <home>/{self.skills_subdir}/<name>/SKILL.md; "
                "the program decides whether and how it reads them. It has no network except its model endpoint.")


__all__ = ["PLACEHOLDERS", "CommandProgram", "check_template"]
