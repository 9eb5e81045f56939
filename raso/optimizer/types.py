"""Records the RASO algorithm steps exchange and the engine writes into a run directory.

Every model here is pydantic v2 and round-trips through `to_dict()` / `from_dict()` (plain JSON types).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from raso.choices import InitMode, UpdateMode
from raso.skill import Skill

R = TypeVar("R", bound="Record")


class Record(BaseModel):
    """Base: JSON-ready dump and load."""

    model_config = ConfigDict(extra="forbid")

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls: type[R], data: dict[str, Any]) -> R:
        return cls.model_validate(data)


class Requirement(Record):
    """One thing the skill must teach (c_i) and a search query for it (q_i)."""

    requirement: str = Field(min_length=1, description="one capability or rule the agent needs, one sentence")
    query: str = Field(min_length=1, description="3 to 8 search keywords for that requirement, not a sentence")


class SectionRef(Record):
    """Where a corpus section came from: enough to find the exact text again."""

    repo: str
    path: str
    commit: str
    heading_path: str
    section_id: str


class RetrievedSection(Record):
    """A corpus section as retrieved for one query. Its `text` is untrusted third-party content."""

    ref: SectionRef
    skill_name: str = ""
    text: str
    score: float = 0.0
    license: str = ""


class Lesson(Record):
    """Knowledge for one requirement, with the corpus sections it came from.

    `adapted` is False for the adaptation-off ablation, where `text` is the raw sections themselves.
    """

    requirement: str
    text: str
    sources: list[SectionRef] = Field(default_factory=list)
    adapted: bool = True


class Gradient(Record):
    """A failure mode seen in rollouts, the evidence for it, and a search query for knowledge that fixes it."""

    failure_mode: str = Field(min_length=1, description="what went wrong and what the skill should change, one or two sentences")
    evidence: str = Field(default="", description="task ids or observations that show it")
    query: str = Field(default="", description="a few search keywords for knowledge that would fix it")


class InitResult(Record):
    """The outcome of RASI/RFSI: the initial skill s0 and how it was made."""

    mode: InitMode
    skill: Skill
    requirements: list[Requirement]
    lessons: list[Lesson] = Field(default_factory=list)
    retrieved: list[list[RetrievedSection]] = Field(
        default_factory=list, description="per requirement, the sections its query retrieved (empty for RFSI)"
    )
    errors: list[str] = Field(default_factory=list, description="steps that failed and were skipped (e.g. junk lesson)")
    unsupported: list[str] = Field(default_factory=list,
                                   description="requirements for which the adaptation agent found no supporting section")
    supported_share: float | None = Field(
        default=None, description="share of adapted requirements that got a supported lesson (None: none adapted)")
    assembled_fallback: bool = Field(
        default=False, description="skill-init's draft was unusable and s0 was assembled from requirements and lessons")


class UpdateProposal(Record):
    """The outcome of one RASU/RFSU step: candidate s_{t+1} (not yet validated) and how it was made.

    `unchanged` is True when no failure mode was found; then `candidate` is s_t itself and no update call
    was made (the engine can skip evaluating it: an equal skill can never pass the strict gate).
    """

    mode: UpdateMode
    candidate: Skill
    gradients: list[Gradient] = Field(default_factory=list, description="after the merge")
    chunk_gradients: list[list[Gradient]] = Field(default_factory=list, description="per chunk, before the merge")
    lessons: list[Lesson] = Field(default_factory=list)
    retrieved: list[list[RetrievedSection]] = Field(default_factory=list)
    unchanged: bool = False
    errors: list[str] = Field(default_factory=list)
    unsupported: list[str] = Field(default_factory=list,
                                   description="failure modes for which the adaptation agent found no supporting section")
    supported_share: float | None = Field(
        default=None, description="share of adapted failure modes that got a supported lesson (None: none adapted)")
