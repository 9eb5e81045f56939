"""Tasks an external agent does in a folder: the harness puts the task's files in a workspace, the agent (Claude
Code, Codex, mini-swe-agent, a user's command) works there, and the harness scores what the workspace holds.

A harness whose tasks can be done this way also subclasses `WorkspaceTasks`; its text environment (`make_env`) is
what the builtin agent uses, the workspace form is what every other agent backend uses. Both are scored by the same
scorer.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from .base import Task


class WorkspaceScore(BaseModel):
    """What the harness's scorer made of a workspace after the agent finished."""

    reward: float = Field(ge=0.0, le=1.0)
    soft_score: float | None = None
    info: dict[str, Any] = Field(default_factory=dict)  # the scorer's details (shown in the trajectory, never secret)


class WorkspaceTasks(ABC):
    """The workspace form of a harness's tasks (mix into a Harness subclass).

    `prepare_workspace` must copy only what the agent may see (inputs, never answers): the workspace is the one
    folder the agent's sandbox can write, and everything in it is visible to the agent.
    """

    @abstractmethod
    def prepare_workspace(self, task: Task, workspace: Path) -> str:
        """Put the task's input files into the empty folder `workspace`; return the instruction the agent gets
        (what to do, which files to read, which file to write the answer to, relative to the workspace)."""

    @abstractmethod
    def score_workspace(self, task: Task, workspace: Path) -> WorkspaceScore:
        """Score what the agent left in `workspace` with the harness's own scorer. Never raises for a missing or
        malformed answer (that is reward 0 with the reason in `info`)."""

    def hidden_paths(self) -> list[Path]:
        """Folders the agent's sandbox must never show, wherever they lie (the harness's answers, checks and data
        folders when they are given from outside the project; the project's own packages are hidden in every run)."""
        return []

    @property
    @abstractmethod
    def workspace_description(self) -> str:
        """H for external agents, without the agent's tools: the workspace's files, where the answer goes, the
        limits and the scoring (an agent backend adds its own tools' description)."""


__all__ = ["WorkspaceScore", "WorkspaceTasks"]
