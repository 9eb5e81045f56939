"""The contract every external agent program meets. The runner (raso.agent.programs.runner) does the shared work:
a fresh workspace per rollout, the candidate skill folders installed where the agent reads skills, the loopback model
endpoint, the OS sandbox, the harness's scorer and the Rollout. A program class only knows its program: how it is
installed, where it reads skills, how it runs headless against an endpoint, how its transcript reads back, and the
options it takes (its `options_model`, the `program.<name>` section of the run's config)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from raso.choices import WireFormatName
from raso.harness.base import Step


class ProgramOptions(BaseModel):
    """An agent program's own options: the `program.<name>` section of the run's config (a program's name with
    "-" as "_"). A program that takes none keeps this empty model; one that does subclasses it."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class AgentRun(BaseModel):
    """Everything one headless run of an agent program needs; paths are as the program sees them (inside the
    sandbox they are the same paths: the sandbox binds them at their host paths)."""

    instruction: str  # the task as the agent gets it (the harness's workspace instruction)
    workspace: Path  # the agent's working directory (the task's files; the answer goes here)
    home: Path  # the program's HOME: writable, fresh per rollout, holds its config and skills dir when user-level
    endpoint_url: str  # base URL of the loopback model endpoint for this program's wire format (no trailing slash)
    api_key: str  # the endpoint's per-run key
    model_name: str  # the name the program sends (the endpoint serves the agent role's model whatever it is called)
    max_steps: int  # step / turn limit the program is given, where it has one
    wall_seconds: float  # the rollout's wall-clock limit (the sandbox enforces it too)
    skill_names: list[str] = Field(default_factory=list)  # the installed skill folders' names
    max_tokens: int | None = None  # reply tokens per model call the endpoint allows (agent.max_tokens, capped by the
    # model profile's max_output_tokens); a program that asks for more is capped at the endpoint


class Transcript(BaseModel):
    """What the program did, read back from its own output files or stdout."""

    steps: list[Step] = Field(default_factory=list)  # tool calls and their outputs, then the final message
    final_message: str | None = None
    tool_calls: int = 0
    prompt_tokens: int | None = None  # as the program reports them (the endpoint's own count is authoritative)
    completion_tokens: int | None = None
    notes: list[str] = Field(default_factory=list)  # what could not be read, in words


class AgentProgram(ABC):
    """One agent program, registered under its `name` in the entry-point group `raso.agent_programs`
    (raso.agent.programs.registry) and built from its options."""

    name: ClassVar[str]  # the `program.name` value, e.g. "claude-code"
    wire_format: ClassVar[WireFormatName]  # the API it speaks to the loopback endpoint
    package: ClassVar[str]  # what is installed, pinned: "npm:@anthropic-ai/claude-code@2.1.332", "pypi:mini-swe-agent==2.4.6"
    #: the address-space limit (RLIMIT_AS) the program was measured to need at least; the runner never sets less
    min_memory_mb: ClassVar[int] = 0
    #: the program's options (its config section); the base model for a program that takes none
    options_model: ClassVar[type[ProgramOptions]] = ProgramOptions

    def __init__(self, options: ProgramOptions | None = None) -> None:
        options = options if options is not None else self.options_model()
        if not isinstance(options, self.options_model):
            raise TypeError(f"agent program {self.name!r} takes {self.options_model.__name__}, not "
                            f"{type(options).__name__}")
        self.options = options

    @abstractmethod
    def unavailable_reason(self) -> str | None:
        """None when the program is installed and runnable here; else one line saying why not and the command
        that installs it (`raso agents install NAME`)."""

    @abstractmethod
    def skills_dir(self, run: AgentRun) -> Path:
        """The folder the program discovers skills in (each skill is <dir>/<name>/SKILL.md)."""

    @abstractmethod
    def command(self, run: AgentRun) -> list[str]:
        """The headless command line (run in `run.workspace`)."""

    def environment(self, run: AgentRun) -> dict[str, str]:
        """Environment variables the program needs (endpoint URL, key, model, no telemetry). Default: none."""
        return {}

    def prepare_home(self, run: AgentRun) -> None:  # noqa: B027 - optional hook
        """Write the program's config files into `run.home` (or the workspace) before it starts."""

    def read_only_paths(self) -> list[Path]:
        """What the sandbox must show read-only for the program to run (its install folder, its interpreter)."""
        return []

    @abstractmethod
    def read_transcript(self, run: AgentRun, stdout: str, stderr: str) -> Transcript:
        """The program's transcript as steps. Never raises for junk output (notes say what was unreadable)."""

    @property
    @abstractmethod
    def tools_description(self) -> str:
        """The agent's tools and how it reads skills, in words, for H (true of this program)."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "package": self.package, "wire_format": self.wire_format,
                "unavailable": self.unavailable_reason()}


__all__ = ["AgentProgram", "AgentRun", "ProgramOptions", "Transcript"]
