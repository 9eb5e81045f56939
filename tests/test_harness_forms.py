"""A narrow Harness (issue 38, finding 6): the core is tasks, descriptions and `rollout`; the text form (TextTasks:
environment, action parsing, action space) and the workspace form (WorkspaceTasks) are declared capabilities that
a runner asks for (`Harness.text_form()`, `workspace_form()`), never by testing the harness's class."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from agent_program_support import AnswerFileTestHarness

from raso.agent.agent import AgentConfig, ExecutionAgent
from raso.agent.programs.runner import AgentSetupError, check_workspace_harness
from raso.api import check_agent_program
from raso.engine.config import build_config
from raso.errors import ConfigError
from raso.harness import EnvEnd, Evidence, Harness, Score, Task, TextTasks, WorkspaceEnd, WorkspaceTasks
from raso.testing import CountingHarness, scripted_gateway

REPO_ROOT = Path(__file__).resolve().parent.parent
TEXT_FORM = {"make_env", "parse_action", "action_space", "action_is_valid", "action_instructions", "turn_reminder",
             "max_reply_tokens"}


def test_the_core_harness_has_no_text_form_and_only_splits_to_implement() -> None:
    assert Harness.__abstractmethods__ == frozenset({"splits"})
    assert sorted(name for name in TEXT_FORM if hasattr(Harness, name)) == []
    assert TEXT_FORM <= set(dir(TextTasks)) and TextTasks.__abstractmethods__ == frozenset({"make_env"})


def test_each_harness_declares_its_forms() -> None:
    toy, workspace_only = CountingHarness(), AnswerFileTestHarness()
    assert toy.text_form() is toy and toy.workspace_form() is None
    assert workspace_only.workspace_form() is workspace_only and workspace_only.text_form() is None


def test_a_workspace_only_harness_is_refused_by_the_builtin_agent_in_one_line() -> None:
    config = build_config(overrides={"harness": "toy", "program": {"name": "builtin"}})
    with pytest.raises(ConfigError, match="has no text form") as info:
        check_agent_program(config, AnswerFileTestHarness())
    assert "\n" not in str(info.value)
    check_agent_program(config, CountingHarness())  # the toy harness has one: no error


def test_the_builtin_agent_scores_a_harness_without_a_text_form_zero_and_says_why() -> None:
    gateway, _ = scripted_gateway(["Action: 1"])
    harness = AnswerFileTestHarness()
    rollout = harness.rollout(harness.tasks("train")[0], [], ExecutionAgent(gateway, AgentConfig(mode="none")))
    assert rollout.reward == 0.0 and rollout.model_calls == 0
    assert rollout.error is not None and "has no text form" in rollout.error


class DelegatedWorkspace(WorkspaceTasks):
    """A workspace form kept in its own object (composition), not mixed into the harness class."""

    def prepare_workspace(self, task: Task, workspace: Path) -> str:
        return "write answer.txt"

    def score_workspace(self, task: Task, workspace: Path) -> Score:
        return Score(reward=1.0)

    @property
    def workspace_description(self) -> str:
        return "a delegated workspace"


class CountingWithDelegatedWorkspace(CountingHarness):
    def __init__(self) -> None:
        super().__init__()
        self.workspace = DelegatedWorkspace()

    def workspace_form(self) -> WorkspaceTasks:
        return self.workspace


def test_the_external_runner_asks_for_the_workspace_form_instead_of_testing_the_class() -> None:
    harness = CountingWithDelegatedWorkspace()
    assert check_workspace_harness(harness, "command") is harness.workspace
    with pytest.raises(AgentSetupError, match="has no workspace form"):
        check_workspace_harness(CountingHarness(), "command")


def test_no_runner_tests_a_harness_class_for_a_form() -> None:
    """The checks of api.py and backends/runner.py that asked `isinstance(harness, WorkspaceTasks)` ask
    `harness.workspace_form()` now; the Harness core (raso/harness/base.py) is the one place that may look at
    the class."""
    found = []
    for path in sorted((REPO_ROOT / "raso").rglob("*.py")):
        if path == REPO_ROOT / "raso" / "harness" / "base.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
                    and len(node.args) == 2 and ast.unparse(node.args[1]) in ("WorkspaceTasks", "TextTasks")):
                found.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
    assert found == []


def test_the_text_form_reads_its_files_through_the_harnesses_own_resource_lookup() -> None:
    """webshop's text mode, alfworld's ReAct mode and spreadsheet's upstream mode pick their action format by
    overriding `_resource`; the text form must read action_format.md through it."""

    class OtherFormat(CountingHarness):
        def _resource(self, filename: str) -> str:
            return "the other action format" if filename == "action_format.md" else super()._resource(filename)

    assert OtherFormat().action_instructions == "the other action format"
    assert CountingHarness().action_instructions != "the other action format"


# ---------------------------------------------------------------- the scorer at the core (Harness.score)

class RecordingJudgeHarness(CountingHarness):
    """The toy harness with its own scorer: it records the evidence and gives the opposite of the environment's
    verdict, so a reward that bypassed `Harness.score` shows."""

    def __init__(self) -> None:
        super().__init__()
        self.evidence: list[Evidence] = []

    def score(self, task: Task, evidence: Evidence) -> Score:
        self.evidence.append(evidence)
        assert isinstance(evidence, EnvEnd)
        return Score(reward=1.0 - evidence.reward if evidence.terminated else 0.5, soft_score=0.25)


def test_the_builtin_agent_takes_the_reward_from_the_harness_scorer() -> None:
    harness = RecordingJudgeHarness()
    gateway, _ = scripted_gateway(["Action: 1", "Action: 2"])
    task = harness.tasks("train")[0]  # count to 2
    rollout = harness.rollout(task, [], ExecutionAgent(gateway, AgentConfig(mode="none")))
    assert rollout.error is None and rollout.terminated
    [evidence] = harness.evidence
    assert isinstance(evidence, EnvEnd) and evidence.terminated and evidence.reward == 1.0
    assert evidence.soft_score == 1.0
    assert (rollout.reward, rollout.soft_score) == (0.0, 0.25)  # the scorer's verdict, not the environment's


def test_the_builtin_agent_hands_the_scorer_an_unfinished_environment_too() -> None:
    harness = RecordingJudgeHarness()
    gateway, _ = scripted_gateway(["Action: 1"] + ["Action: 9"] * 10)  # never reaches 2
    rollout = harness.rollout(harness.tasks("train")[0], [], ExecutionAgent(gateway, AgentConfig(mode="none")))
    [evidence] = harness.evidence
    assert not evidence.terminated and evidence.reward == 0.0 and evidence.soft_score == 0.5
    assert rollout.truncated and rollout.reward == 0.5


def test_the_default_scorer_keeps_each_forms_verdict() -> None:
    toy = CountingHarness()
    task = toy.tasks("train")[0]
    assert toy.score(task, EnvEnd(terminated=True, reward=1.0, soft_score=1.0)) == Score(reward=1.0, soft_score=1.0)
    # an environment that never terminated scores 0 whatever its last step said; its partial score stays
    assert toy.score(task, EnvEnd(terminated=False, reward=1.0, soft_score=0.5)) == Score(reward=0.0, soft_score=0.5)
    with pytest.raises(ValueError, match="has no workspace form"):
        toy.score(task, WorkspaceEnd(workspace=Path("/nonexistent")))


def test_the_default_scorer_reads_a_workspace_with_the_workspace_form(tmp_path: Path) -> None:
    harness = AnswerFileTestHarness()
    task = harness.tasks("train")[0]  # expects "blue"
    assert harness.score(task, WorkspaceEnd(workspace=tmp_path)).reward == 0.0
    (tmp_path / "answer.txt").write_text("blue\n", encoding="utf-8")
    assert harness.score(task, WorkspaceEnd(workspace=tmp_path)) == harness.score_workspace(task, tmp_path)
    assert harness.score(task, WorkspaceEnd(workspace=tmp_path)).reward == 1.0


def _calls_named(path: Path, method: str) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [ast.unparse(node.func) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == method]


def test_runners_score_only_through_the_harness_core() -> None:
    """Both runners (raso's own agent for the text form, the external runner for the workspace form) call
    `harness.score`; no raso module but the core's default scorer calls a form's scorer directly."""
    for runner in ("raso/agent/agent.py", "raso/agent/programs/runner.py"):
        assert _calls_named(REPO_ROOT / runner, "score") == ["harness.score"], runner
    direct = [f"{path.relative_to(REPO_ROOT)}: {call}" for path in sorted((REPO_ROOT / "raso").rglob("*.py"))
              if path != REPO_ROOT / "raso" / "harness" / "base.py" for call in _calls_named(path, "score_workspace")]
    assert direct == []
