"""A toy harness for tests (RASO's own and users'): a counting game, registered as harness `toy`.

The agent must say the numbers 1..target, one per action (`Action: 3`). Saying `stop` ends the game with
reward 0; a wrong number is answered with a hint and costs a step. Reaching the target ends it with reward 1.
`soft_score` is the fraction counted so far. A task whose metadata has `crash_at` raises inside `step` at
that count (a tool crash); `crash_in_make_env` makes `make_env` itself fail.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from raso.harness import Harness, Task, TextEnv, TextTasks
from raso.harness.actions import ActionSpace

RESOURCES = Path(__file__).resolve().parent / "toy_resources"


class CountingEnv(TextEnv):
    """One counting game: the next number advances it, `stop` ends it with reward 0."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.target = int(task.metadata["target"])
        self.count = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.count = 0
        return self.task.instruction, {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        action = action.strip()
        if self.task.metadata.get("crash_at") == self.count + 1:
            raise RuntimeError("counting tool crashed")
        if action.lower() == "stop":
            return "Game over: you stopped early.", 0.0, True, False, {"soft_score": self.count / self.target}
        if action == str(self.count + 1):
            self.count += 1
            if self.count == self.target:
                return "Done: you counted to the target.", 1.0, True, False, {"soft_score": 1.0}
            return f"Correct. You are at {self.count}.", 0.0, False, False, {"soft_score": self.count / self.target}
        return (f"Wrong: {action!r} is not the next number.", 0.0, False, False,
                {"soft_score": self.count / self.target})


class CountingHarness(Harness, TextTasks):
    """`n_tasks` counting games (targets 2, 3, 4, 2, ...): the first half is train, the rest val, all of them test."""

    name = "toy"
    resource_dir = RESOURCES
    max_steps = 6

    def __init__(self, n_tasks: int = 4) -> None:
        self._tasks = [
            Task(id=f"count-{i}", instruction=f"Count from 1 to {2 + i % 3}, one number per action.",
                 metadata={"target": 2 + i % 3})
            for i in range(n_tasks)
        ]

    def splits(self) -> dict[str, list[Task]]:
        half = len(self._tasks) // 2
        return {"train": self._tasks[:half], "val": self._tasks[half:], "test": list(self._tasks)}

    def make_env(self, task: Task) -> CountingEnv:
        if task.metadata.get("crash_in_make_env"):
            raise OSError("cannot start the counting environment")
        return CountingEnv(task)

    def action_space(self, info: Mapping[str, Any]) -> ActionSpace:
        """The numbers up to the largest target, and `stop`."""
        largest = max((int(t.metadata["target"]) for t in self._tasks), default=1)
        return ActionSpace.choices([*(str(n) for n in range(1, largest + 1)), "stop"])


def count_script(messages: list[dict[str, Any]]) -> str:
    """A scripted policy that plays the game correctly from what it reads in the conversation."""
    last = messages[-1]["content"]
    if "You are at " in last:
        current = int(last.split("You are at ")[1].split(".")[0])
    else:
        current = 0
    return f"Thought: the next number is {current + 1}.\nAction: {current + 1}"


def scripted_gateway(script: Any, **gateway_options: Any) -> tuple[Any, Any]:
    """A real gateway (built by raso.api.make_gateway) whose agent and optimizer roles are one ScriptedModel;
    no retries, so a scripted error surfaces at once.

    `script` is a list of replies or a function of the messages (see ScriptedModel); `gateway_options` go to
    make_gateway (cache_dir, ledger, max_concurrency, retry). Returns (gateway, model); `model.calls` holds
    every prompt the gateway sent.
    """
    from raso.api import make_gateway
    from raso.engine.config import OptimizeConfig
    from raso.llm import RetryConfig
    from raso.llm.scripted import ScriptedModel

    model = ScriptedModel(script)
    gateway_options.setdefault("retry", RetryConfig(max_attempts=1))
    return make_gateway(OptimizeConfig(models={"target": model.model}), **gateway_options), model
