"""The `command` program: any agent program, run by a user's command line template (`program.command.template`,
flag `--agent-command`).

Placeholders (each argument is filled separately, so a value with spaces stays one argument; `{{`/`}}` are literal
braces): {instruction_file} (the instruction as a file, outside the workspace), {instruction} (its text),
{workspace}, {home}, {skills_dir}, {endpoint_url} (an OpenAI-compatible base URL ending in /v1), {api_key},
{model}, {max_steps}. The same values are in the environment as RASO_INSTRUCTION_FILE, RASO_WORKSPACE,
RASO_SKILLS_DIR, OPENAI_BASE_URL, OPENAI_API_KEY, RASO_MODEL and RASO_MAX_STEPS.

An absolute path in the template that exists here (the program, its script) is shown read-only in the sandbox; the
system folders and raso's Python are there anyway. The program's stdout is its final message; its steps are the
model calls the endpoint answered (the runner reads them from the session when a program reports none).
"""

from __future__ import annotations

import shlex
import string
from pathlib import Path
from typing import ClassVar

from pydantic import Field, field_validator

from raso.choices import WireFormatName
from raso.harness.sandbox import interpreter_layout

from .base import AgentProgram, AgentRun, ProgramOptions, Transcript

PLACEHOLDERS = ("instruction_file", "instruction", "workspace", "home", "skills_dir", "endpoint_url", "api_key",
                "model", "max_steps")
DEFAULT_SKILLS_DIR = "skills"


def check_template(template: str) -> list[str]:
    """`template` split into arguments; ValueError naming an unknown placeholder, a stray brace or an open quote."""
    known = ", ".join("{" + p + "}" for p in PLACEHOLDERS)
    try:
        argv = shlex.split(template) if template.strip() else []
    except ValueError as exc:
        raise ValueError(f"{exc} in {template!r}") from None
    for arg in argv:
        try:
            fields = [field for _, field, _, _ in string.Formatter().parse(arg)]
        except ValueError as exc:  # "Single '}' encountered" and the like
            raise ValueError(f"{exc} in {arg!r} (write a literal brace as {{{{ or }}}}; "
                             f"placeholders: {known})") from None
        for field in fields:
            if field is not None and field not in PLACEHOLDERS:
                raise ValueError(f"unknown placeholder {{{field}}} (known: {known})")
    return argv


class CommandOptions(ProgramOptions):
    """The `command` program's options (`program.command`)."""

    template: str | None = Field(
        default=None, description="the command line template, with placeholders {instruction_file} {instruction} "
        "{workspace} {home} {skills_dir} {endpoint_url} {api_key} {model} {max_steps}",
        json_schema_extra={"cli": {"flags": ["--agent-command"]}})  # raso.engine.config.cli's form
    skills_dir: str = Field(default=DEFAULT_SKILLS_DIR, description="the skills folder, relative to the rollout's "
                            "home folder")

    @field_validator("template")
    @classmethod
    def _known_placeholders(cls, value: str | None) -> str | None:
        """A template with an unknown placeholder or a stray brace is refused with the configuration, before a
        run writes anything (not when the first rollout starts)."""
        if value is not None:
            check_template(value)
        return value

    @field_validator("skills_dir")
    @classmethod
    def _inside_home(cls, value: str) -> str:
        if Path(value).is_absolute() or ".." in Path(value).parts:
            raise ValueError(f"{value!r} must be a folder inside the rollout's home (a relative path without '..')")
        return value


class CommandProgram(AgentProgram):
    name: ClassVar[str] = "command"
    wire_format: ClassVar[WireFormatName] = "openai-chat"
    package: ClassVar[str] = "none: the user's own program (program.command.template)"
    options_model: ClassVar[type[ProgramOptions]] = CommandOptions

    def __init__(self, options: ProgramOptions | None = None) -> None:
        super().__init__(options)
        assert isinstance(self.options, CommandOptions)  # the base checked it against options_model
        self.template = self.options.template or ""
        self.skills_subdir = self.options.skills_dir
        self.argv = check_template(self.template)

    def unavailable_reason(self) -> str | None:
        if not self.argv:
            return "no command given: set program.command.template (--agent-command 'PROGRAM {instruction_file} ...')"
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
                          notes=["the command program reads no transcript of its own: the steps are the model calls "
                                 "the endpoint answered"])

    @property
    def tools_description(self) -> str:
        return ("The agent is a program given by a command line (raso's `command` program). It starts in the "
                "workspace folder, which it may read and write, and gets the task's instruction; what it can do "
                f"there is up to the program. Skills are installed as <home>/{self.skills_subdir}/<name>/SKILL.md; "
                "the program decides whether and how it reads them. It has no network except its model endpoint.")


__all__ = ["PLACEHOLDERS", "CommandOptions", "CommandProgram", "check_template"]
