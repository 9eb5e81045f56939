"""The `program` section of the run's config: which agent program runs the rollouts, the OS sandbox limits an
external one runs under, and one sub-section per registered program that takes options (`program.command.template`;
a program's name with "-" as "_"), each its own `options_model`.

The section's model is built once, when this module is imported, from the programs registered then (entry-point
group ``raso.agent_programs``): a third party's program gets its options section, its `--set program.NAME.KEY` keys
and `raso options program` listing without a change here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from .base import ProgramOptions
from .registry import BUILTIN, loadable_programs, program_class, program_names, registered_programs


def section_name(program: str) -> str:
    """The config key of `program`'s options section ("claude-code" -> "claude_code")."""
    return program.replace("-", "_")


class ProgramSection(BaseModel):
    """Which agent program runs the rollouts and the OS sandbox limits an external one runs under. The options
    shared with the builtin loop (max_steps, max_tokens, max_wall_s, max_observation_chars, role, stage) are the
    `agent` section's."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    name: str = Field(default=BUILTIN, description="the agent program: builtin (raso's own loop) or a registered "
                      "external program (`raso agents` lists them)")
    cpu_seconds: int = Field(default=600, ge=1, description="an external program's CPU-time limit per rollout, all "
                             "its processes together")
    memory_mb: int = Field(default=16_384, ge=256, description="an external program's memory limit per rollout in "
                           "MiB: each process's address space (node and Python reserve far more than they use) and "
                           "the resident memory of all its processes together")
    disk_mb: int = Field(default=4096, ge=16, description="what an external program's rollout folder (workspace and "
                         "home) may hold in MiB; the rollout is stopped past it")
    wall_s: float = Field(default=900.0, gt=0, description="an external program's wall-clock limit per rollout when "
                          "agent.max_wall_s is not set")

    @field_validator("name")
    @classmethod
    def _registered(cls, value: str) -> str:
        if value not in program_names():
            hint = "" if registered_programs() else (": no program is registered here; reinstall raso (pip install "
                                                      "-e .) so its entry points are in the environment's metadata")
            raise ValueError(f"unknown agent program {value!r} (known: {', '.join(program_names())}){hint}")
        return value

    @property
    def external(self) -> bool:
        return self.name != BUILTIN

    def options(self) -> ProgramOptions | None:
        """The chosen program's options: its section, or its options model's defaults when it has no section here
        (a program that takes none); None for the builtin loop."""
        if not self.external:
            return None
        section = getattr(self, section_name(self.name), None)
        return section if isinstance(section, ProgramOptions) else program_class(self.name).options_model()


def program_config_model() -> type[ProgramSection]:
    """ProgramSection plus one field per registered program with options of its own."""
    fields: dict[str, Any] = {}
    for name, cls in loadable_programs().items():
        key = section_name(name)
        if cls.options_model.model_fields and key not in ProgramSection.model_fields:
            fields[key] = (cls.options_model, Field(default_factory=cls.options_model,
                                                    description=f"the {name} program's options"))
    return create_model("ProgramConfig", __base__=ProgramSection, __module__=__name__,
                        __doc__=ProgramSection.__doc__, **fields)


if TYPE_CHECKING:
    ProgramConfig = ProgramSection
else:
    ProgramConfig = program_config_model()


__all__ = ["ProgramConfig", "ProgramSection", "program_config_model", "section_name"]
