"""The harness protocol: what every environment a skill is optimized for implements.

A harness fixes the tools, file access, observation format, interaction budget and scoring (docs/design.md
§1 and §5). Its core is narrow on purpose (like GEPA's adapter): task splits, two description texts (T and H),
the one scorer every runner calls (`Harness.score(task, evidence)`) and `rollout`, which never raises into the
optimizer. The forms its tasks take are declared capabilities that a
runner asks for (`Harness.text_form()`, `Harness.workspace_form()`): the text form (`TextTasks`: an environment per
task, action parsing, the action space) for raso's own agent, the workspace form (`WorkspaceTasks`: a folder the
task's files are put in and the scorer reads back) for external agent programs.

Harnesses are found by name through raso.harness.registry.
"""

from __future__ import annotations

import json
import math
import re
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import gymnasium as gym
from pydantic import BaseModel, Field, model_validator

from raso.choices import Outcome
from raso.fileio import atomic_write_text
from raso.llm.errors import failure_kind

from .actions import ActionSpace, TaskNeeds

if TYPE_CHECKING:
    from raso.skill import Skill

_ACTION_LINE = re.compile(r"^[ \t]*Action[ \t]*:[ \t]*(.*?)[ \t]*$", re.IGNORECASE | re.MULTILINE)


class Task(BaseModel):
    """One task instance: an id, the instruction the agent sees, and harness-specific data."""

    id: str
    instruction: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class Step(BaseModel):
    """One turn: what the agent saw, the raw model reply, the action taken and the reward it got.

    `kind` is "env" for an environment step and "load_skill" for a progressive-disclosure load that the
    agent answered itself (it did not reach the environment). `result` is what came back: the env's next
    observation, or the loaded skill text.
    """

    observation: str
    action: str
    reply: str = ""
    reward: float = 0.0
    info: dict[str, Any] = Field(default_factory=dict)
    kind: str = "env"
    result: str = ""


class Rollout(BaseModel):
    """The record of running one task with a skill. `reward` is in [0, 1]."""

    task_id: str
    harness: str
    reward: float = Field(ge=0.0, le=1.0)
    soft_score: float | None = None
    trajectory: list[Step] = Field(default_factory=list)
    final_output: str | None = None
    error: str | None = None  # what went wrong, with its traceback (None when nothing did)
    # how it ended (raso.choices.Outcome): only "ok" and "agent_error" rollouts count; the others
    # (infrastructure, unusable, budget, check_error) say nothing about the skill and never enter a mean
    outcome: Outcome = "ok"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    wall_time_s: float = 0.0
    skill_names: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    terminated: bool = False  # the environment reached a terminal state (reward is the env's)
    truncated: bool = False  # stopped by the step budget, the turn cap, the wall-clock limit or the env
    env_steps: int = 0
    model_calls: int = 0
    skills_loaded: list[str] = Field(default_factory=list)  # progressive mode: names loaded, in order
    mode: str | None = None  # skill incorporation mode of the agent that ran it

    @model_validator(mode="before")
    @classmethod
    def _refuse_fields_before_outcome(cls, data: Any) -> Any:
        """A rollout saved before `outcome` existed (`failure_kind`, `model_unusable`) is refused, never read as
        "ok": `raso migrate` converts such files once."""
        if isinstance(data, dict) and "outcome" not in data and ("failure_kind" in data or "model_unusable" in data):
            raise ValueError("a rollout saved before `outcome` existed (failure_kind/model_unusable): convert its "
                             "folder once with `raso migrate PATH`")
        return data

    @property
    def success(self) -> bool:
        return self.reward >= 1.0

    @property
    def counts(self) -> bool:
        """Whether the rollout got the agent's own result, so its reward says something about the skill and
        enters a mean (a failure of the infrastructure, an unusable model or the budget does not)."""
        return self.outcome in ("ok", "agent_error")

    def save(self, path: str | Path) -> Path:
        """Write the rollout as JSON (atomically: temp file + rename)."""
        return atomic_write_text(path, self.model_dump_json(indent=1))

    @classmethod
    def load(cls, path: str | Path) -> "Rollout":
        return cls.model_validate_json(Path(path).read_text(encoding="utf-8"))


def clamp_reward(value: Any) -> float:
    """A reward as a float in [0, 1]; NaN and non-numbers count as 0."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    if math.isnan(number):
        return 0.0
    return min(1.0, max(0.0, number))


def json_safe(value: Any, *, max_chars: int = 20_000) -> Any:
    """`value` reduced to JSON-serialisable data (unknown objects become their repr, long text is cut)."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return value if len(value) <= max_chars else value[:max_chars] + f"... [{len(value) - max_chars} chars cut]"
    if isinstance(value, dict):
        return {str(k): json_safe(v, max_chars=max_chars) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v, max_chars=max_chars) for v in value]
    if isinstance(value, BaseModel):
        return json_safe(value.model_dump(mode="json"), max_chars=max_chars)
    if isinstance(value, Path):
        return str(value)
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return json_safe(repr(value), max_chars=max_chars)


class Score(BaseModel):
    """The harness's verdict on one rollout (`Harness.score`): what its reward and soft score become."""

    reward: float = Field(ge=0.0, le=1.0)
    soft_score: float | None = None
    info: dict[str, Any] = Field(default_factory=dict)  # the scorer's details (kept in the trajectory, never secret)
    # Why the scorer could not judge (its check wrote no reward, crashed, could not import what it needs): the
    # rollout's outcome becomes "check_error" and its reward means nothing (None when the check judged).
    check_error: str | None = None


class EnvEnd(BaseModel):
    """The evidence of a text-form rollout: how the harness's own environment ended. `reward` is the (clamped)
    reward of the step that terminated it (0 when it never did), `soft_score` the latest partial score its steps
    reported, `info` the last step's info."""

    terminated: bool
    reward: float = Field(default=0.0, ge=0.0, le=1.0)
    soft_score: float | None = None
    info: dict[str, Any] = Field(default_factory=dict)


class WorkspaceEnd(BaseModel):
    """The evidence of a workspace-form rollout: the folder the agent program left (read by the harness's scorer,
    only while the rollout's folder still exists)."""

    workspace: Path


#: What a runner hands `Harness.score`: the evidence its form of the tasks produced.
Evidence = EnvEnd | WorkspaceEnd


class TextEnv(gym.Env):
    """A gymnasium environment whose observations and actions are text.

    ``reset()`` returns the first observation (the task as the agent sees it); ``step(action)`` returns
    ``(observation, reward, terminated, truncated, info)``. ``info["soft_score"]`` may carry a partial score.
    """

    metadata: dict[str, Any] = {"render_modes": []}
    observation_space = gym.spaces.Text(max_length=1_000_000)
    action_space = gym.spaces.Text(max_length=1_000_000)

    def close(self) -> None:  # environments holding processes or files release them here
        super().close()


class RolloutRunner(Protocol):
    """What a harness needs from an agent: run one task and report it (see raso.agent.ExecutionAgent)."""

    def run(self, harness: "Harness", task: Task, skills: Sequence["Skill"]) -> Rollout: ...


class Harness(ABC):
    """Base class of every harness: its core, what every agent runner and the optimizer read. Subclasses set
    `name` and `resource_dir`, implement `splits` and declare the forms their tasks take by subclassing them:
    `TextTasks` (a text environment per task: what raso's own agent runs) and `WorkspaceTasks` (a folder an
    external agent program works in, scored by the harness's own scorer). A runner asks for the form it needs
    (`text_form()`, `workspace_form()`) and never looks at the rest.

    `resource_dir` holds `task_description.md` (T: objective and output format) and `harness_description.md`
    (H: tools, file access, observation format, interaction budget, scoring — RASO's adaptation checks claims
    against it, so it must be accurate); the text form adds its own files there (TextTasks).
    """

    name: ClassVar[str]
    resource_dir: ClassVar[Path]
    max_steps: int = 20  # the interaction budget per task (H states it): environment actions, or an agent's turns
    #: what one task needs (agent steps, reply tokens): a quick schedule gives the agent these (TaskNeeds)
    task_needs: ClassVar[TaskNeeds] = TaskNeeds()

    @abstractmethod
    def splits(self) -> dict[str, list[Task]]:
        """Disjoint train / val / test task lists."""

    def data_label(self) -> str:
        """What data the splits come from, as a table row or `result.json` names it ("paper split of <dir>",
        "demo data ..."); harnesses with a data folder say which. Default: the harness's own tasks."""
        return f"{self.name} tasks"

    def check_runnable(self) -> None:
        """Raise (one line: what is missing and how to install it) where this machine cannot run the harness's
        tasks. Loading for a run calls it; reading the descriptions or splits does not. Default: nothing needed."""
        return None

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

    def text_form(self) -> "TextTasks | None":
        """The text form of this harness's tasks (what raso's own agent runs), or None when it declares none.
        Declared by subclassing TextTasks; a harness that keeps the form in another object returns that."""
        return self if isinstance(self, TextTasks) else None

    def workspace_form(self) -> "WorkspaceTasks | None":
        """The workspace form of this harness's tasks (what an external agent program works in), or None when it
        declares none. Declared by subclassing WorkspaceTasks; a harness may return another object instead."""
        return self if isinstance(self, WorkspaceTasks) else None

    def score(self, task: Task, evidence: Evidence) -> Score:
        """The harness's one scorer: every runner turns what its rollout produced into a reward here and nowhere
        else. By default a text-form rollout gets its environment's verdict (the terminal step's reward, 0 when the
        environment never terminated; the latest soft score it reported) and a workspace-form rollout the workspace
        form's `score_workspace`. A harness overrides this to judge both forms its own way (say, re-checking the
        final answer). Never raises for a wrong or missing answer: that is reward 0 with the reason in `info`."""
        if isinstance(evidence, WorkspaceEnd):
            form = self.workspace_form()
            if form is None:
                raise ValueError(f"harness {self.name!r} has no workspace form to score a workspace with")
            return form.score_workspace(task, evidence.workspace)
        return Score(reward=evidence.reward if evidence.terminated else 0.0, soft_score=evidence.soft_score)

    def rollout(self, task: Task, skills: Sequence["Skill"], agent: RolloutRunner) -> Rollout:
        """Run one task. Never raises: any failure becomes reward 0 with the error recorded."""
        start = time.perf_counter()
        try:
            return agent.run(self, task, skills)
        except Exception as exc:  # a crashing rollout must not stop the optimizer
            return failed_rollout(self.name, task, skills, exc, wall_time_s=time.perf_counter() - start)


class TextTasks(ABC):
    """The text form of a harness's tasks (a capability: mix into a Harness subclass), what raso's own agent
    (`program.name` builtin) runs: a text environment per task, how an action is read out of a model reply and,
    optionally, the valid actions in a state.

    `resource_dir` also holds `action_format.md` (how the agent writes an action) and, optionally,
    `turn_reminder.md`, the one line that ends each agent turn's message (default: the agent's generic one).
    """

    resource_dir: ClassVar[Path]
    max_reply_tokens: int = 512  # reply length the agent allows per turn unless AgentConfig.max_tokens says otherwise

    @abstractmethod
    def make_env(self, task: Task) -> TextEnv:
        """A fresh environment for one task."""

    def _resource(self, filename: str) -> str:  # the same as Harness._resource, which a harness may override
        return (Path(self.resource_dir) / filename).read_text(encoding="utf-8").strip()

    @property
    def action_instructions(self) -> str:
        return self._resource("action_format.md")

    @property
    def turn_reminder(self) -> str | None:
        """This harness's reply-format reminder for the agent's turns, or None for the agent's generic one."""
        path = Path(self.resource_dir) / "turn_reminder.md"
        return path.read_text(encoding="utf-8").strip() if path.is_file() else None

    def parse_action(self, reply: str) -> str:
        """Extract the action from a model reply; default: the text of the last non-empty `Action:` line (a
        reply cut off by the token limit often ends in a bare "Action:"), else the whole reply."""
        actions = [a for a in _ACTION_LINE.findall(reply) if a]
        return actions[-1] if actions else reply.strip()

    def action_space(self, info: Mapping[str, Any]) -> ActionSpace | None:
        """The valid actions in the state that the environment's latest `info` (from reset or step) describes,
        or None for free text (the default). The agent has it compiled for models that can be constrained
        (raso.harness.action_grammar), so each of their turns is a valid action; raso.harness.actions has the
        building blocks. The agent rules out of it the choices that looped (ActionSpace.without)."""
        return None

    def action_is_valid(self, action: str, info: Mapping[str, Any]) -> bool | None:
        """Whether the parsed `action` is valid in the state `info` describes; None when the harness cannot
        tell (the default). The agent counts valid actions and reacts to a repeated invalid reply."""
        return None


class WorkspaceTasks(ABC):
    """The workspace form of a harness's tasks (a capability: mix into a Harness subclass), what every agent
    backend other than the builtin one runs: the harness puts the task's files in a workspace, the agent program
    (Claude Code, Codex, mini-swe-agent, a user's command) works there, and the harness scores what it holds.

    `prepare_workspace` must copy only what the agent may see (inputs, never answers): the workspace is the one
    folder the agent's sandbox can write, and everything in it is visible to the agent.
    """

    @abstractmethod
    def prepare_workspace(self, task: Task, workspace: Path) -> str:
        """Put the task's input files into the empty folder `workspace`; return the instruction the agent gets
        (what to do, which files to read, which file to write the answer to, relative to the workspace)."""

    @abstractmethod
    def score_workspace(self, task: Task, workspace: Path) -> Score:
        """Score what the agent left in `workspace` with the harness's own scorer (what the default `Harness.score`
        calls for a workspace; runners call `Harness.score`, never this). Never raises for a missing or malformed
        answer (that is reward 0 with the reason in `info`)."""

    def workspace_path(self, task: Task) -> str | None:
        """Where the agent sees its workspace, when the task's instruction names one (a Harbor task's WORKDIR, e.g.
        /app): the sandbox binds the workspace there and the agent starts in it. None: the workspace folder itself."""
        return None

    def hidden_paths(self) -> list[Path]:
        """Folders the agent's sandbox must never show, wherever they lie (the harness's answers, checks and data
        folders when they are given from outside the project; the project's own packages are hidden in every run)."""
        return []

    @property
    @abstractmethod
    def workspace_description(self) -> str:
        """H for external agents, without the agent's tools: the workspace's files, where the answer goes, the
        limits and the scoring (an agent program adds its own tools' description)."""


def failed_rollout(
    harness_name: str, task: Task, skills: Sequence["Skill"], exc: BaseException, *, wall_time_s: float = 0.0
) -> Rollout:
    """The record of a rollout that crashed before producing its own: reward 0, the error and traceback."""
    return Rollout(
        task_id=task.id,
        harness=harness_name,
        reward=0.0,
        **failure_fields(exc, trace_limit=5),
        wall_time_s=wall_time_s,
        skill_names=[getattr(s, "name", str(s)) for s in skills],
    )


def check_error_fields(reason: str) -> dict[str, Any]:
    """The `error` and `outcome` of a rollout whose check could not score it (Score.check_error): the one wording
    every runner, the console and the reports share."""
    return {"error": f"check error: {reason}", "outcome": "check_error"}


def failure_fields(exc: BaseException, *, trace_limit: int) -> dict[str, Any]:
    """A failed rollout's `error` (the exception and its traceback) and `outcome`: the one place a rollout's
    failure is classified (raso.llm.errors.failure_kind)."""
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=trace_limit))
    return {"error": f"{type(exc).__name__}: {exc}\n{trace}", "outcome": failure_kind(exc)}
