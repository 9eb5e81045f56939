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
from raso.harness import Harness, Task, TextTasks, WorkspaceScore, WorkspaceTasks
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

    def score_workspace(self, task: Task, workspace: Path) -> WorkspaceScore:
        return WorkspaceScore(reward=1.0)

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
