"""Support for the experiment tests (no tests here): scripted models that play the toy counting harness and
answer every optimizer prompt (RASO roles, TextGrad, GEPA), and the overrides that point a table's config at them.

The scripted agent counts correctly only when the skill it was given contains the marker COUNT-UP; otherwise it
stops at once (reward 0). The scripted optimizer puts the marker into a skill only when its prompt shows evidence
for it: a corpus lesson (RASI), or a failure report / critique / reflection on failed rollouts (every update
method). So no skill scores 0, RFSI's s0 scores 0, RASI's s0 scores 1, and an update from RFSI can only score 1 by
really going through its method's proposal step.
"""

from __future__ import annotations

import json
import re
from typing import Any

from raso.llm.scripted import ScriptedModel
from raso.testing import CountingHarness, count_script

MARKER = "COUNT-UP"
FAILURE = "The agent stops instead of counting up."
#: A small schedule for the toy harness (flat option names, as the older tests spell them).
SMALL_OPTIONS = {"schedule.epochs": 1, "schedule.minibatch": 3, "schedule.workers": 2, "init.num_requirements": 2, "retrieval.k": 2}
TOY_HARNESS = {"name": "raso.testing.toy:CountingHarness", "options": {"n_tasks": 6}}
FIXED_SKILL = {"name": "counting", "description": "Count to the target, one number per action.",
               "body": f"# Steps\n{MARKER}: say 1, then 2, and so on, one number per action."}
PLAIN_SKILL = {"name": "counting", "description": "Count to the target.",
               "body": "# Steps\n1. Read the task.\n2. Answer."}


def _text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


def agent_reply(messages: list[dict[str, Any]]) -> str:
    if MARKER in _text(messages):
        return count_script(messages)
    return "Thought: I am not sure what to do.\nAction: stop"


def _skill_markdown(fixed: bool) -> str:
    skill = FIXED_SKILL if fixed else PLAIN_SKILL
    return f"---\nname: {skill['name']}\ndescription: {skill['description']}\n---\n\n{skill['body']}\n"


def optimizer_reply(messages: list[dict[str, Any]]) -> str:
    text = _text(messages)
    system = str(messages[0].get("content") or "") if messages and messages[0].get("role") == "system" else ""
    failed = FAILURE in text or "reward 0 (failed)" in text or "Add an instruction to the skill" in text
    # TextGrad (textgrad package): TGD update, loss critique, backward gradients
    if "<IMPROVED_VARIABLE>" in system or "Send the improved variable" in text:
        return f"<IMPROVED_VARIABLE>{_skill_markdown(fixed=failed)}</IMPROVED_VARIABLE>"
    if "You evaluate one trajectory" in system:
        return f"The rollout failed: {FAILURE} A skill should say {MARKER}." if failed else "The rollout solved it."
    if "give feedback" in text.lower() and "<ROLE>" in text:
        return f"Add an instruction to the skill: {MARKER} (count up one number per action)."
    # GEPA's reflective proposer (gepa package)
    if "Provide the new instructions within ``` blocks" in text:
        return f"```\n{_skill_markdown(fixed=failed)}```"
    # RASO's structured roles, told apart by the JSON schema the gateway appends
    if '"requirements": {' in text:
        return json.dumps({"requirements": [
            {"requirement": "Say the numbers in order, one per action.", "query": "count numbers in order"},
            {"requirement": "Never stop before the target.", "query": "stop early target"}]})
    if '"lesson": {' in text:
        return json.dumps({"lesson": f"{MARKER}: answer each turn with the next number."})
    if '"gradients": {' in text:
        return json.dumps({"gradients": [{"failure_mode": FAILURE, "evidence": "count-0", "query": "count up"}]})
    if '"body": {' in text:
        return json.dumps(FIXED_SKILL if (MARKER in text or FAILURE in text) else PLAIN_SKILL)
    raise AssertionError(f"unrecognised optimizer prompt: {text[:300]!r}")


def scripted_models() -> tuple[ScriptedModel, ScriptedModel]:
    return ScriptedModel(agent_reply, name="exp-agent"), ScriptedModel(optimizer_reply, name="exp-optimizer")


def overrides(tmp_path: Any, agent: ScriptedModel, optimizer: ScriptedModel, **extra: Any) -> dict[str, Any]:
    """Point any table's config at the toy harness and the scripted models, small and in one process."""
    values: dict[str, Any] = {
        "harnesses": [TOY_HARNESS], "model": agent.model, "optimizer_model": optimizer.model,
        "results_dir": str(tmp_path / "results"), "backend": "threading", "jobs": 2, "test_limit": None,
    }
    values.update(extra)
    return values


def calls_matching(model: ScriptedModel, pattern: str) -> int:
    regex = re.compile(pattern)
    return sum(1 for call in model.calls if regex.search(_text(call)))



class Interrupted(BaseException):
    """A stand-in for a kill: not an Exception, so nothing on the way treats it as a failed rollout."""


class InterruptOnceHarness(CountingHarness):
    """The toy harness; while `armed`, the first train environment it makes after `let_through` others raises
    Interrupted (then disarms)."""

    armed = False
    let_through = 0

    def make_env(self, task: Any) -> Any:
        if InterruptOnceHarness.armed and task.id in {t.id for t in self.tasks("train")}:
            if InterruptOnceHarness.let_through > 0:
                InterruptOnceHarness.let_through -= 1
            else:
                InterruptOnceHarness.armed = False
                raise Interrupted("killed during a train minibatch")
        return super().make_env(task)


class SizedHarness(CountingHarness):
    """The toy game with given train / val / test sizes (e.g. the paper's), on data it calls demo data or a
    benchmark's paper split: for dry runs and data labels without the benchmarks' data."""

    def __init__(self, train: int = 3, val: int = 2, test: int = 2, demo: bool = True) -> None:
        super().__init__(n_tasks=train + val + test)
        self.sizes, self.demo = (train, val, test), demo

    def splits(self) -> dict[str, list[Any]]:
        train, val, _ = self.sizes
        return {"train": self._tasks[:train], "val": self._tasks[train:train + val],
                "test": self._tasks[train + val:]}

    def data_label(self) -> str:
        return "demo data (toy counting games)" if self.demo else "paper split of /data/toy"


class TopicHarness(CountingHarness):
    """The toy game whose tasks differ in topic: even tasks count apples in an orchard, odd ones stars in the night
    sky, so a router that reads each task's own instruction finds each a different corpus skill."""

    TOPICS = ("apples in the orchard basket", "stars of the night sky through the telescope")

    def __init__(self, n_tasks: int = 4) -> None:
        super().__init__(n_tasks=n_tasks)
        self._tasks = [task.model_copy(update={"instruction": f"Count the {self.TOPICS[i % 2]} from 1 to "
                                               f"{task.metadata['target']}, one number per action."})
                       for i, task in enumerate(self._tasks)]


class ShopNamedTopicHarness(TopicHarness):
    """TopicHarness under the name the WebShop leakage guard keys on (raso.api.check_index_blocklist), on toy data."""

    name = "webshop"

    def data_label(self) -> str:
        return "demo data (toy topic games)"


def corpus_section(repo: str, name: str, text: str) -> Any:
    """One section of a corpus skill `repo/name` (its SKILL.md's only section)."""
    from corpus_tools.sections import Section

    return Section(id=f"{repo}/{name}/SKILL.md#0", skill_id=f"{repo}/{name}/SKILL.md", skill_name=name,
                   heading_path=name, text=text, repo=repo, path=f"{name}/SKILL.md", commit="c0", license="MIT")
