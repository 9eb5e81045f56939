"""Test support for the rollout executors (no tests here): toy harnesses a worker rebuilds by 'module:Class' name,
one that says which process ran each rollout and one whose worker process dies once."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from raso.harness import Rollout, Task
from raso.testing.toy import CountingEnv, CountingHarness


class PidCountingHarness(CountingHarness):
    """The toy counting game; each rollout's metadata names the process that ran it. Each task's instruction names
    the task, so no two rollouts send the same prompt (which of two concurrent identical calls is paid and which
    replays from the cache would depend on timing)."""

    def __init__(self, n_tasks: int = 4) -> None:
        super().__init__(n_tasks)
        self._tasks = [t.model_copy(update={"instruction": f"{t.instruction} (game {t.id})"}) for t in self._tasks]

    def rollout(self, task: Task, skills: Sequence[Any], agent: Any) -> Rollout:
        rollout = super().rollout(task, skills, agent)
        rollout.metadata["pid"] = os.getpid()
        return rollout


class DieOnceHarness(PidCountingHarness):
    """The toy counting game whose process exits (a worker that dies mid-rollout) the first time task `die_task`
    takes a step; `marker` (a file) remembers that it happened, so the re-run succeeds."""

    def __init__(self, n_tasks: int = 4, marker: str = "", die_task: str = "count-0") -> None:
        super().__init__(n_tasks)
        self.marker = Path(marker)
        self.die_task = die_task

    def make_env(self, task: Task) -> CountingEnv:
        env = super().make_env(task)
        if task.id == self.die_task and not self.marker.exists():
            marker = self.marker

            def die(action: str) -> Any:
                marker.write_text("died\n")
                os._exit(17)

            env.step = die  # type: ignore[method-assign]
        return env
