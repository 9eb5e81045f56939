"""The harness protocol: what every environment a skill is optimized for implements.

A harness fixes the tools, file access, observation format, interaction budget and scoring (DESIGN.md §1).
It is narrow on purpose (like GEPA's adapter): task splits, two description texts (T and H), a text
environment per task, and `rollout`, which never raises into the optimizer.

Harnesses are found by name through the entry-point group ``raso.harnesses``; a user can register their
own in their package's metadata, or pass ``"package.module:ClassName"`` directly.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import time
import traceback
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Sequence

import gymnasium as gym
from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from raso.skill import Skill

ENTRY_POINT_GROUP = "raso.harnesses"
SPLITS = ("train", "val", "test")
_ACTION_LINE = re.compile(r"^\s*Action\s*:\s*(.*)$", re.IGNORECASE | re.MULTILINE)


class Task(BaseModel):
    """One task instance: an id, the instruction the agent sees, and harness-specific data."""

    id: str
    instruction: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class Step(BaseModel):
    """One turn: what the agent saw, the raw model reply, the action taken and the reward it got."""

    observation: str
    action: str
    reply: str = ""
    reward: float = 0.0
    info: dict[str, Any] = Field(default_factory=dict)


class Rollout(BaseModel):
    """The record of running one task with a skill. `reward` is in [0, 1]."""

    task_id: str
    harness: str
    reward: float = Field(ge=0.0, le=1.0)
    soft_score: float | None = None
    trajectory: list[Step] = Field(default_factory=list)
    final_output: str | None = None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    wall_time_s: float = 0.0
    skill_names: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def success(self) -> bool:
        return self.reward >= 1.0


class TextEnv(gym.Env):
    """A gymnasium environment whose observations and actions are text.

    ``reset()`` returns the first observation (the task as the agent sees it); ``step(action)`` returns
    ``(observation, reward, terminated, truncated, info)``. ``info["soft_score"]`` may carry a partial score.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}
    observation_space = gym.spaces.Text(max_length=1_000_000)
    action_space = gym.spaces.Text(max_length=1_000_000)

    def close(self) -> None:  # environments holding processes or files release them here
        super().close()


class RolloutRunner(Protocol):
    """What a harness needs from an agent: run one task and report it (see raso.agent.ExecutionAgent)."""

    def run(self, harness: "Harness", task: Task, skills: Sequence["Skill"]) -> Rollout: ...


class Harness(ABC):
    """Base class of every harness. Subclasses set `name` and `resource_dir` and implement the abstract methods.

    `resource_dir` holds `task_description.md` (T: objective and output format), `harness_description.md`
    (H: tools, file access, observation format, interaction budget, scoring — RASO's adaptation checks claims
    against it, so it must be accurate) and `action_format.md` (how the agent writes an action).
    """

    name: ClassVar[str]
    resource_dir: ClassVar[Path]
    max_steps: int = 20

    @abstractmethod
    def splits(self) -> dict[str, list[Task]]:
        """Disjoint train / val / test task lists."""

    @abstractmethod
    def make_env(self, task: Task) -> TextEnv:
        """A fresh environment for one task."""

    def tasks(self, split: str) -> list[Task]:
        splits = self.splits()
        if split not in splits:
            raise ValueError(f"harness {self.name!r} has no split {split!r}; it has {sorted(splits)}")
        return splits[split]

    def _resource(self, filename: str) -> str:
        return (Path(self.resource_dir) / filename).read_text(encoding="utf-8").strip()

    @property
    def task_description(self) -> str:
        return self._resource("task_description.md")

    @property
    def harness_description(self) -> str:
        return self._resource("harness_description.md")

    @property
    def action_instructions(self) -> str:
        return self._resource("action_format.md")

    def parse_action(self, reply: str) -> str:
        """Extract the action from a model reply; default: the text after the last `Action:` line."""
        matches = _ACTION_LINE.findall(reply)
        return (matches[-1] if matches else reply).strip()

    def rollout(self, task: Task, skills: Sequence["Skill"], agent: RolloutRunner) -> Rollout:
        """Run one task. Never raises: any failure becomes reward 0 with the error recorded."""
        start = time.perf_counter()
        try:
            return agent.run(self, task, skills)
        except Exception as exc:  # a crashing rollout must not stop the optimizer
            return Rollout(
                task_id=task.id,
                harness=self.name,
                reward=0.0,
                error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}",
                wall_time_s=time.perf_counter() - start,
                skill_names=[s.name for s in skills],
            )


def available_harnesses() -> dict[str, str]:
    """Harness names registered in the entry-point group, mapped to their 'module:Class' target."""
    return {ep.name: ep.value for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def _load_target(target: str) -> type[Harness]:
    module_name, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not (isinstance(obj, type) and issubclass(obj, Harness)):
        raise TypeError(f"{target} is not a raso.harness.Harness subclass")
    return obj


def get_harness(name: str, **kwargs: Any) -> Harness:
    """Instantiate a harness by registered name, or by an explicit 'package.module:ClassName'."""
    registered = available_harnesses()
    if name in registered:
        return _load_target(registered[name])(**kwargs)
    if ":" in name:
        return _load_target(name)(**kwargs)
    known = ", ".join(sorted(registered)) or "none"
    raise ValueError(f"unknown harness {name!r}; registered harnesses: {known} (or pass 'module:Class')")
