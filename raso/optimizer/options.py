"""The options of the two algorithm steps, each declared once: `InitOptions` (the `init` section of a run's
configuration: RASI / RFSI / a SKILL.md file) and `UpdateOptions` (the `update` section: RASU / RFSU).

raso.api builds the initializer and the proposer from these (`raso.optimizer.rasi.initializer_for`,
`raso.optimizer.rasu.proposer_for`); the field descriptions are the command line's help. A new option of an
algorithm step is a field here plus the code that reads it (docs/design.md, "Strategies and the run context").
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from raso.choices import InitKind, UpdateKind, choices_of


class InitOptions(BaseModel):
    """How the initial skill s0 is made, with zero rollouts."""

    model_config = ConfigDict(extra="forbid")

    method: str = Field(default="rasi", description="'rasi' (retrieval-augmented), 'rfsi' (retrieval-free) or "
                        "the path of a SKILL.md or a skill folder to start from (a folder's files, and those of a SKILL.md in "
                        "a folder named after its skill, travel with every candidate)")
    num_requirements: int = Field(default=5, ge=1, description="M: requirement-query pairs the plan asks for")
    adapt: bool = Field(default=True, description="RASI: adapt the retrieved sections into lessons; off pastes "
                        "the raw sections (ablation)")
    skill_max_chars: int = Field(default=40_000, ge=200, description="longest SKILL.md accepted as the initial "
                                 "skill when `method` is a file, and as a skill `raso eval` scores (it is sent "
                                 "whole in every agent prompt)")

    @field_validator("method")
    @classmethod
    def _kind_or_file(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("must be 'rasi', 'rfsi' or the path of a SKILL.md or skill folder")
        return value.lower() if value.lower() in choices_of(InitKind) else value

    @property
    def kind(self) -> InitKind | Literal["file"]:
        """'rasi', 'rfsi', or 'file' when `method` is the path of a SKILL.md."""
        if self.method == "rasi":
            return "rasi"
        return "rfsi" if self.method == "rfsi" else "file"


class UpdateOptions(BaseModel):
    """How candidate s_{t+1} is proposed from the train rollouts of s_t."""

    model_config = ConfigDict(extra="forbid")

    method: UpdateKind = Field(default="rasu", description="'rasu' (retrieval-augmented) or 'rfsu' (retrieval-free)")
    chunk_size: int = Field(default=8, ge=1, description="trajectories per gradient call")
    adapt: bool = Field(default=True, description="RASU: adapt the retrieved sections into lessons; off pastes "
                        "the raw sections (ablation)")
    failures_only: bool = Field(default=True, description="show the gradient calls only the rollouts that lost "
                                "reward (as in the paper); off shows the solved ones too")


__all__ = ["InitOptions", "UpdateOptions"]
