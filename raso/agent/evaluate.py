"""Parallel evaluation: run a skill on a list of tasks and collect the rollouts in task order.

Rollouts run in a thread pool, or where a `RolloutExecutor` puts them (raso.execution.executors); the gateway's
`max_concurrency` bounds the model calls across all of them. A rollout that crashes (even in a harness that
overrides `rollout` carelessly) scores 0 with its error, so one bad task never stops an evaluation.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from raso.execution.executors import RolloutExecutor, TaskSkills, ThreadExecutor
from raso.harness import Harness, Rollout, RolloutRunner, Task
from raso.skill import Skill

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def trajectory_filename(index: int, task_id: str) -> str:
    """`0007_<task id>.json`: sortable by task order, safe on every filesystem."""
    safe = _UNSAFE.sub("_", task_id).strip("._")[:80] or "task"
    return f"{index:04d}_{safe}.json"


class EvalResult(BaseModel):
    """The rollouts of one evaluation, in task order, with aggregate numbers."""

    harness: str
    rollouts: list[Rollout] = Field(default_factory=list)
    skill_names: list[str] = Field(default_factory=list)
    wall_time_s: float = 0.0

    @property
    def scored(self) -> list[Rollout]:
        """The rollouts the harness's check judged: a check error has no reward, so it enters no mean."""
        return [r for r in self.rollouts if r.outcome != "check_error"]

    @property
    def check_errors(self) -> list[Rollout]:
        """Rollouts the harness's check could not score (no reward written, a crash, a missing import)."""
        return [r for r in self.rollouts if r.outcome == "check_error"]

    @property
    def mean_reward(self) -> float:
        """Over the scored rollouts (check errors left out; failures of the model count 0, reported apart)."""
        scored = self.scored
        return statistics.fmean(r.reward for r in scored) if scored else 0.0

    @property
    def mean_soft_score(self) -> float | None:
        scores = [r.soft_score for r in self.scored if r.soft_score is not None]
        return statistics.fmean(scores) if scores else None

    @property
    def success_rate(self) -> float:
        scored = self.scored
        return statistics.fmean(1.0 if r.success else 0.0 for r in scored) if scored else 0.0

    @property
    def errors(self) -> int:
        return sum(1 for r in self.rollouts if r.error)

    @property
    def without_agent_result(self) -> list[Rollout]:
        """Rollouts that got no agent result (model calls kept failing, the model is unusable, the USD budget
        ran out): their 0 says nothing about the skill, so they are counted apart (the engine refuses them)."""
        return [r for r in self.rollouts if not r.counts and r.outcome != "check_error"]

    @property
    def infrastructure_failures(self) -> int:
        return len(self.without_agent_result)

    @property
    def first_infrastructure_error(self) -> str:
        """The first line of the first such rollout's error ("" when there is none)."""
        errors = [r.error for r in self.without_agent_result if r.error]
        return errors[0].splitlines()[0][:200] if errors else ""

    @property
    def mean_reward_of_completed(self) -> float | None:
        """Mean reward over the rollouts that got an agent result (None when none did)."""
        completed = [r.reward for r in self.rollouts if r.counts]
        return statistics.fmean(completed) if completed else None

    def totals(self) -> dict[str, Any]:
        return {
            "prompt_tokens": sum(r.prompt_tokens for r in self.rollouts),
            "completion_tokens": sum(r.completion_tokens for r in self.rollouts),
            "cost_usd": sum(r.cost_usd for r in self.rollouts),
            "model_calls": sum(r.model_calls for r in self.rollouts),
            "env_steps": sum(r.env_steps for r in self.rollouts),
        }

    def summary(self) -> dict[str, Any]:
        """The numbers without the trajectories (what `raso eval` writes as summary.json)."""
        return {
            "harness": self.harness,
            "skill_names": self.skill_names,
            "tasks": len(self.rollouts),
            "mean_reward": self.mean_reward,
            "success_rate": self.success_rate,
            "mean_soft_score": self.mean_soft_score,
            "errors": self.errors,
            "infrastructure_failures": self.infrastructure_failures,
            "check_errors": len(self.check_errors),
            "mean_reward_of_completed": self.mean_reward_of_completed,
            "wall_time_s": self.wall_time_s,
            **self.totals(),
            "per_task": [
                {"task_id": r.task_id, "reward": None if r.outcome == "check_error" else r.reward,  # not judged
                 "soft_score": r.soft_score, "env_steps": r.env_steps,
                 "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
                 "cost_usd": r.cost_usd, "wall_time_s": r.wall_time_s,
                 "error": (r.error or "").splitlines()[0][:300] if r.error else None,
                 "outcome": r.outcome}
                for r in self.rollouts
            ],
        }

    def to_dict(self) -> dict[str, Any]:
        return {**self.summary(), "rollouts": [r.model_dump(mode="json") for r in self.rollouts]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EvalResult":
        return cls(harness=data["harness"], rollouts=[Rollout.model_validate(r) for r in data.get("rollouts", [])],
                   skill_names=data.get("skill_names", []), wall_time_s=data.get("wall_time_s", 0.0))


def evaluate(
    harness: Harness,
    agent: RolloutRunner,
    tasks: Sequence[Task],
    skills: Sequence[Skill] = (),
    *,
    max_workers: int = 2,
    trajectories_dir: str | Path | None = None,
    on_rollout: Callable[[Rollout], Any] | None = None,
    executor: RolloutExecutor | None = None,
    task_skills: Callable[[Task], Sequence[Skill]] | None = None,
) -> EvalResult:
    """Run every task with `skills` and return the rollouts in task order.

    `task_skills` gives each task its own skills instead (e.g. a router choosing a whole skill per task from the
    task's instruction); it is called once per task, in task order, before any rollout starts, and `skills` must
    then be empty.

    `executor` says where the rollouts run (raso.execution.executors; None = a pool of `max_workers` threads here);
    `agent` must be the one it built (`executor.agent(...)`). Each finished rollout is written to
    `trajectories_dir/<index>_<task id>.json` (if given) and passed to `on_rollout` in the calling thread; an
    exception from `on_rollout` cancels the tasks not yet started and propagates (how a caller stops an
    evaluation, e.g. when a budget runs out).
    """
    skills = list(skills)
    tasks = list(tasks)
    batch_skills: list[Skill] | TaskSkills = skills
    if task_skills is not None:
        if skills:
            raise ValueError("give either the skills every task shares or task_skills, not both")
        batch_skills = TaskSkills([task_skills(task) for task in tasks])
        skills = _distinct_by_name(skill for own in batch_skills.per_task for skill in own)
    out_dir = Path(trajectories_dir) if trajectories_dir is not None else None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results: list[Rollout | None] = [None] * len(tasks)
    runner = executor if executor is not None else ThreadExecutor(max_workers)
    batch = runner.run(harness, agent, tasks, batch_skills)
    try:
        for index, rollout in batch:
            results[index] = rollout
            if out_dir is not None:
                rollout.save(out_dir / trajectory_filename(index, tasks[index].id))
            if on_rollout is not None:
                on_rollout(rollout)
    finally:
        batch.close()  # cancels the rollouts not yet started when the loop stopped early
    return EvalResult(
        harness=getattr(harness, "name", type(harness).__name__),
        rollouts=[r for r in results if r is not None],
        skill_names=[s.name for s in skills],
        wall_time_s=time.perf_counter() - started,
    )


def _distinct_by_name(skills: Iterable[Skill]) -> list[Skill]:
    """The skills in order of first appearance, one per name."""
    seen: dict[str, Skill] = {}
    for skill in skills:
        seen.setdefault(skill.name, skill)
    return list(seen.values())


def load_trajectories(directory: str | Path) -> list[Rollout]:
    """Read back the rollouts `evaluate` wrote, in task order."""
    return [Rollout.load(path) for path in sorted(Path(directory).glob("[0-9][0-9][0-9][0-9]_*.json"))]


__all__ = ["EvalResult", "evaluate", "load_trajectories", "trajectory_filename"]
