"""Test support for the engine tests (no tests here): a toy harness, scripted models and stand-in algorithm steps.

The toy harness is a real `raso.harness.Harness` driven by the real `raso.agent.ExecutionAgent`; only the
model is scripted. A skill's body carries `LEVEL=n`; the scripted agent model answers a task of difficulty d
correctly iff n >= d, so a skill's val score is a known function of its level: the gate's decisions are
predictable. The stand-in initializer/proposer make one real gateway call each (so the ledger, the cache and
the kill/resume replay are exercised) and turn the scripted reply into a skill.

Run as a script it is the subprocess of the kill -9 test:
    python tests/test_engine_support.py run RUN_DIR     (RASO_TEST_KILL_AT=<role>:<n> kills itself at that call)
    python tests/test_engine_support.py resume RUN_DIR
    (RASO_TEST_KILL_IN_WRITE=<n> kills it inside its n-th atomic file write: tests/test_faults_soak.py)
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script: make the repo and this folder importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from raso.harness import Harness, Task, TextEnv, TextTasks
from raso.llm import scripted
from raso.llm.scripted import ScriptedModel
from raso.optimizer.types import Gradient, InitResult, Lesson, Requirement, SectionRef, UpdateProposal
from raso.skill import Skill

_LEVEL = re.compile(r"LEVEL=(\d+)")
_DIFFICULTY = re.compile(r"difficulty (\d+)")
_TASK_ID = re.compile(r"task id: (\S+)")

TOY_RESOURCE = Path(__file__).resolve().parent  # unused: the toy overrides the description properties


class ToyEnv(TextEnv):
    def __init__(self, task: Task) -> None:
        self.task = task

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        return self.task.instruction, {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self.task.metadata.get("crash"):
            raise RuntimeError("toy tool crashed")
        reward = 1.0 if action.strip() == self.task.metadata["answer"] else 0.0
        return ("correct" if reward else "wrong"), reward, True, False, {}


def _task(task_id: str, difficulty: int, crash: bool = False) -> Task:
    return Task(id=task_id, instruction=f"Toy task id: {task_id} with difficulty {difficulty}. Reply with the answer.",
                metadata={"answer": f"ok-{task_id}", "difficulty": difficulty, "crash": crash})


class ToyHarness(Harness, TextTasks):
    """6 train tasks (difficulty 1-3), 4 val tasks (difficulty 1-4); `crash_val=True` makes val task v4 crash."""

    name = "toy"
    resource_dir = TOY_RESOURCE
    max_steps = 2

    def __init__(self, crash_val: bool = False, n_train: int = 6) -> None:
        self.crash_val = crash_val
        self.n_train = n_train

    def splits(self) -> dict[str, list[Task]]:
        train = [_task(f"t{i}", 1 + i % 3) for i in range(1, self.n_train + 1)]
        val = [_task(f"v{d}", d, crash=self.crash_val and d == 4) for d in (1, 2, 3, 4)]
        return {"train": train, "val": val, "test": [_task("x1", 1)]}

    def make_env(self, task: Task) -> TextEnv:
        return ToyEnv(task)

    @property
    def task_description(self) -> str:
        return "Answer each toy task with ok-<task id>."

    @property
    def harness_description(self) -> str:
        return "One action per task: the answer string. Reward 1 if it is exactly right, else 0."

    @property
    def action_instructions(self) -> str:
        return "Write `Action: <answer>` on the last line."


def toy_agent_reply(messages: list[dict[str, Any]]) -> str:
    """The scripted execution model: right iff the skill's LEVEL covers the task's difficulty."""
    text = "\n".join(str(m.get("content") or "") for m in messages)
    level = max((int(x) for x in _LEVEL.findall(text)), default=0)
    difficulty = int(_DIFFICULTY.search(text).group(1)) if _DIFFICULTY.search(text) else 99
    task_id = _TASK_ID.search(text).group(1) if _TASK_ID.search(text) else "?"
    return f"Thought: level {level} vs difficulty {difficulty}\nAction: {'ok-' + task_id if level >= difficulty else 'no'}"


def level_skill(level_text: str) -> Skill:
    return Skill(name="toy-skill", description="How to answer toy tasks.", body=f"Answer carefully.\n{level_text}\n")


def _ref(n: int) -> SectionRef:
    return SectionRef(repo=f"owner/repo{n}", path=f"skills/s{n}/SKILL.md", commit=f"{n:040d}",
                      heading_path=f"Usage > Step {n}", section_id=f"sec-{n}")


def toy_initialize(ctx: Any) -> InitResult:
    reply = ctx.gateway.complete("optimizer", [{"role": "user", "content": f"init skill for: {ctx.task_description}"}],
                                 stage="rasi.skill_init").text
    lessons = [Lesson(requirement="answer format", text="Reply with ok-<id>.", sources=[_ref(1), _ref(2)])]
    return InitResult(mode="rfsi", skill=level_skill(reply.strip()),
                      requirements=[Requirement(requirement="answer format", query="answer format")], lessons=lessons)


def toy_propose(ctx: Any, skill: Skill, rollouts: Sequence[Any]) -> UpdateProposal:
    summary = ", ".join(f"{r.task_id}={r.reward:g}" for r in rollouts)
    reply = ctx.gateway.complete("optimizer", [{"role": "user", "content": f"update skill:\n{skill.body}\n"
                                                f"rollouts: {summary}"}], stage="rasu.update").text
    return UpdateProposal(mode="rfsu", candidate=level_skill(reply.strip()),
                          gradients=[Gradient(failure_mode=f"failed: {summary}")],
                          lessons=[Lesson(requirement="harder tasks", text="Raise the level.", sources=[_ref(3)])])


@dataclass(frozen=True)
class FunctionInitializer:
    """An Initializer whose `init(ctx)` is the function `fn`."""

    fn: Callable[[Any], InitResult]

    def init(self, ctx: Any) -> InitResult:
        return self.fn(ctx)


@dataclass(frozen=True)
class FunctionProposer:
    """A Proposer whose `propose(ctx, skill, rollouts)` is the function `fn`."""

    fn: Callable[[Any, Skill, Sequence[Any]], Any]

    def propose(self, ctx: Any, skill: Skill, rollouts: Sequence[Any]) -> Any:
        return self.fn(ctx, skill, rollouts)


#: The stand-in steps: one real gateway call each, the scripted reply becomes the skill.
toy_initializer = FunctionInitializer(toy_initialize)
toy_proposer = FunctionProposer(toy_propose)


def deterministic_optimizer_reply(messages: list[dict[str, Any]]) -> str:
    """A pure function of the prompt (so a resumed process answers exactly like the first): init -> LEVEL=1;
    each update raises the level by one while train failures remain, up to LEVEL=3."""
    text = "\n".join(str(m.get("content") or "") for m in messages)
    if text.startswith("init skill"):
        return "LEVEL=1"
    level = max((int(x) for x in _LEVEL.findall(text)), default=0)
    failures = "=0" in text.split("rollouts:")[-1]
    return f"LEVEL={min(level + 1, 3) if failures else level}\nRevised."


def named_scripted_model(name: str, script: Any) -> str:
    """A ScriptedModel reachable under a fixed name (`scripted/<name>`), the same in every process — so a
    resumed run's config and cache keys match the first process's."""
    model = ScriptedModel(script, name=name)
    with scripted._registry_lock:
        scripted._registry[name] = model
    return f"scripted/{name}"


class KillSwitch:
    """Wraps a reply function; SIGKILLs this process at the n-th call (RASO_TEST_KILL_AT=<role>:<n>)."""

    def __init__(self, role: str, fn: Any) -> None:
        self.fn = fn
        self.count = 0
        self.lock = threading.Lock()
        spec = os.environ.get("RASO_TEST_KILL_AT", "")
        kill_role, _, n = spec.partition(":")
        self.kill_at = int(n) if kill_role == role and n else None

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        with self.lock:
            self.count += 1
            if self.kill_at is not None and self.count >= self.kill_at:
                # let calls already in flight on other threads finish their bookkeeping (holding the lock
                # keeps new calls out), so the kill lands at a call boundary and the test is deterministic
                time.sleep(0.3)
                os.kill(os.getpid(), signal.SIGKILL)
        return self.fn(messages)


class PauseSwitch:
    """Wraps a reply function; at the n-th call (RASO_TEST_PAUSE_AT=<role>:<n>) prints 'paused' on stdout and
    waits for a line on stdin, so a test can act while this process is inside a model call."""

    def __init__(self, role: str, fn: Any) -> None:
        self.fn = fn
        self.count = 0
        self.lock = threading.Lock()
        pause_role, _, n = os.environ.get("RASO_TEST_PAUSE_AT", "").partition(":")
        self.pause_at = int(n) if pause_role == role and n else None

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        with self.lock:
            self.count += 1
            if self.count == self.pause_at:
                print("paused", flush=True)
                sys.stdin.readline()
        return self.fn(messages)


def subprocess_config(run_dir: Path) -> Any:
    from raso.engine import OptimizeConfig

    return OptimizeConfig(harness="test_engine_support:ToyHarness",
                          models={"target": "scripted/engine-kill-agent", "optimizer": "scripted/engine-kill-optimizer"},
                          init={"method": "rfsi"}, update={"method": "rfsu"},
                          schedule={"epochs": 2, "minibatch": 2, "workers": 2, "seed": 7, "test": False}, run_dir=run_dir)


def kill_inside_the_nth_atomic_write(n: int) -> None:
    """SIGKILL this process inside its n-th atomic file write (checkpoint, views, ledger, skills, report): the
    temp file is complete, the rename not done (RASO_TEST_KILL_IN_WRITE=<n>)."""
    import raso.fileio

    real_replace = os.replace
    count = {"n": 0}

    def replace(src: Any, dst: Any) -> None:
        count["n"] += 1
        if count["n"] >= n:
            os.kill(os.getpid(), signal.SIGKILL)
        real_replace(src, dst)

    raso.fileio.os = type(sys)("os_with_kill")  # a view of os whose replace kills; the rest is os itself
    raso.fileio.os.__dict__.update({k: getattr(os, k) for k in dir(os) if not k.startswith("__")})
    raso.fileio.os.replace = replace


def main(argv: list[str]) -> int:
    import raso.api as api

    command, run_dir = argv[0], Path(argv[1])
    if os.environ.get("RASO_TEST_KILL_IN_WRITE"):
        kill_inside_the_nth_atomic_write(int(os.environ["RASO_TEST_KILL_IN_WRITE"]))
    named_scripted_model("engine-kill-agent", PauseSwitch("agent", KillSwitch("agent", toy_agent_reply)))
    named_scripted_model("engine-kill-optimizer", KillSwitch("optimizer", deterministic_optimizer_reply))
    steps = {"initializer": toy_initializer, "proposer": toy_proposer}
    if command == "run":
        result = api.optimize(config=subprocess_config(run_dir), **steps)
    else:
        result = api.resume(run_dir, **steps)
    print(result.model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
