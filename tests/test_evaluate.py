"""Parallel evaluation: order, concurrency, crash containment, trajectory files."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from raso.agent import AgentConfig, ExecutionAgent
from raso.agent.evaluate import EvalResult, evaluate, load_trajectories, trajectory_filename
from raso.harness import Rollout, Task
from raso.testing import CountingHarness, count_script, scripted_gateway


class SleepyAgent:
    """Finishes later tasks first, and the first two only once both run at the same time."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.barrier = threading.Barrier(2, timeout=10)

    def run(self, harness, task, skills):
        index = int(task.id.split("-")[1])
        if index < 2:
            self.barrier.wait()  # raises BrokenBarrierError unless two rollouts overlap
        time.sleep(0.02 * (self.n - index))
        return Rollout(task_id=task.id, harness=harness.name, reward=index / self.n)


def test_runs_in_parallel_and_preserves_task_order() -> None:
    harness = CountingHarness(n_tasks=6)
    tasks = harness.tasks("test")
    seen: list[str] = []
    result = evaluate(harness, SleepyAgent(6), tasks, max_workers=2, on_rollout=lambda r: seen.append(r.task_id))
    assert [r.task_id for r in result.rollouts] == [t.id for t in tasks]
    assert all(r.error is None for r in result.rollouts)  # the barrier was passed: two ran at once
    assert sorted(seen) == sorted(t.id for t in tasks)
    assert result.mean_reward == pytest.approx(sum(i / 6 for i in range(6)) / 6)


def test_real_agent_with_crashing_rollouts_scores_them_zero(tmp_path: Path) -> None:
    harness = CountingHarness()
    tasks = [
        Task(id="ok-2", instruction="Count from 1 to 2.", metadata={"target": 2}),
        Task(id="crash/tool", instruction="Count from 1 to 3.", metadata={"target": 3, "crash_at": 2}),
        Task(id="no-env", instruction="Count.", metadata={"target": 2, "crash_in_make_env": True}),
        Task(id="ok-3", instruction="Count from 1 to 3.", metadata={"target": 3}),
    ]
    gw, _ = scripted_gateway(count_script)
    agent = ExecutionAgent(gw, AgentConfig(mode="none"))
    result = evaluate(harness, agent, tasks, max_workers=3, trajectories_dir=tmp_path / "traj")

    assert [r.reward for r in result.rollouts] == [1.0, 0.0, 0.0, 1.0]
    assert result.mean_reward == 0.5 and result.errors == 2 and result.success_rate == 0.5
    assert "counting tool crashed" in result.rollouts[1].error

    files = sorted(p.name for p in (tmp_path / "traj").iterdir())
    assert files == ["0000_ok-2.json", "0001_crash_tool.json", "0002_no-env.json", "0003_ok-3.json"]
    assert load_trajectories(tmp_path / "traj") == result.rollouts

    totals = result.totals()
    assert totals["prompt_tokens"] == gw.ledger.totals()["prompt_tokens"] > 0
    summary = result.summary()
    assert summary["tasks"] == 4 and summary["per_task"][1]["error"].startswith("RuntimeError: counting tool crashed")
    assert EvalResult.from_dict(result.to_dict()).rollouts == result.rollouts


def test_a_harness_whose_rollout_raises_still_scores_zero() -> None:
    class RaisingHarness(CountingHarness):
        def rollout(self, task, skills, agent):
            raise MemoryError("harness bug") if task.id.endswith("1") else ValueError("other bug")

    harness = RaisingHarness(n_tasks=2)
    result = evaluate(harness, SleepyAgent(2), harness.tasks("test"), max_workers=2)
    assert [r.reward for r in result.rollouts] == [0.0, 0.0]
    assert result.rollouts[0].error.startswith("ValueError: other bug")
    assert result.rollouts[1].error.startswith("MemoryError: harness bug")


def test_an_exception_in_on_rollout_stops_the_evaluation() -> None:
    harness = CountingHarness(n_tasks=8)
    gw, model = scripted_gateway(count_script)

    def stop(rollout: Rollout) -> None:
        raise RuntimeError("budget exhausted")

    with pytest.raises(RuntimeError, match="budget exhausted"):
        evaluate(harness, ExecutionAgent(gw, AgentConfig(mode="none")), harness.tasks("test"), max_workers=1,
                 on_rollout=stop)
    assert len(model.calls) < 8 * 2  # not every task ran


def test_trajectory_filenames_are_safe_and_ordered() -> None:
    assert trajectory_filename(3, "a/b c:d") == "0003_a_b_c_d.json"
    assert trajectory_filename(12, "../..") == "0012_task.json"


class SkillEchoAgent:
    """Scores a rollout 1 when the skills it was handed are the ones named in its task's metadata."""

    def run(self, harness, task, skills):
        names = [s.name for s in skills]
        return Rollout(task_id=task.id, harness=harness.name, reward=float(names == task.metadata["wants"]),
                       skill_names=names)


def test_task_skills_gives_each_task_its_own_skills() -> None:
    from raso.execution.executors import TaskSkills, skills_per_task
    from raso.skill import Skill

    skills = {name: Skill(name=name, description=f"{name} skill", body="# Steps\n1. Do it.") for name in "abc"}
    tasks = [Task(id=f"t{i}", instruction=f"task {i}", metadata={"wants": [name]}) for i, name in enumerate("abca")]
    asked: list[str] = []

    def route(task: Task) -> list[Skill]:
        asked.append(task.id)
        return [skills[task.metadata["wants"][0]]]

    result = evaluate(CountingHarness(), SkillEchoAgent(), tasks, max_workers=2, task_skills=route)
    assert [r.reward for r in result.rollouts] == [1.0] * 4
    assert [r.skill_names for r in result.rollouts] == [["a"], ["b"], ["c"], ["a"]]
    assert asked == ["t0", "t1", "t2", "t3"] and result.skill_names == ["a", "b", "c"]
    # the whole-split form is unchanged: one list for every task
    shared = evaluate(CountingHarness(), SkillEchoAgent(), tasks, [skills["a"]], max_workers=2)
    assert [r.reward for r in shared.rollouts] == [1.0, 0.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="not both"):
        evaluate(CountingHarness(), SkillEchoAgent(), tasks, [skills["a"]], task_skills=route)
    with pytest.raises(ValueError, match="3 skill lists for a batch of 4"):
        skills_per_task(TaskSkills([[skills["a"]]] * 3), 4)
