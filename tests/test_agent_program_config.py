"""`agent.backend` and its options: the --agent flags, the dispatch in raso.api.make_agent, the checks before a run,
and H for an external backend (the harness's workspace description plus the agent's tools)."""

from __future__ import annotations

import argparse
import sys

import pytest
from agent_program_support import SKILL, AnswerFileTestHarness

from raso.agent import ExecutionAgent
from raso.agent.programs.runner import ExternalAgentRunner
from raso.api import check_agent_backend, evaluate, harness_description_for, make_agent
from raso.cli.options import add_config_options, config_overrides
from raso.engine.config import ConfigError, OptimizeConfig
from raso.harness.registry import get_harness
from raso.llm.config import GatewayConfig, RoleConfig
from raso.llm.gateway import LLMGateway
from raso.llm.scripted import ScriptedModel


def test_agent_flags_set_the_backend_and_command():
    parser = argparse.ArgumentParser()
    flags = add_config_options(parser)
    args = parser.parse_args(["--agent", "mini-swe-agent", "--agent-command", "prog {workspace}", "--agent-mode", "full"])
    overrides = config_overrides(args, flags)
    assert overrides["agent.backend"] == "mini-swe-agent" and overrides["agent.command"] == "prog {workspace}"
    assert overrides["agent.mode"] == "full"


def test_make_agent_dispatches_on_the_backend():
    gateway = LLMGateway(GatewayConfig(roles={"agent": RoleConfig(model=ScriptedModel([]).model)}))
    harness = AnswerFileTestHarness()
    builtin = make_agent(OptimizeConfig(), gateway, harness)
    external = make_agent(OptimizeConfig(agent={"backend": "command", "command": "/bin/true"}), gateway, harness)
    assert isinstance(builtin, ExecutionAgent)
    assert isinstance(external, ExternalAgentRunner) and external.backend.name == "command"


def test_h_for_an_external_backend_is_workspace_plus_tools():
    harness = AnswerFileTestHarness()
    config = OptimizeConfig(agent={"backend": "mini-swe-agent"})
    text = harness_description_for(config, harness)
    assert text.startswith(harness.workspace_description)
    assert "mini-swe-agent 2.4.6" in text and "appends each installed SKILL.md" in text
    alfworld = get_harness("alfworld")
    assert harness_description_for(OptimizeConfig(), alfworld) == alfworld.harness_description


def test_checks_before_a_run():
    harness = AnswerFileTestHarness()
    with pytest.raises(ConfigError, match="unknown agent backend 'nope'"):
        check_agent_backend(OptimizeConfig(agent={"backend": "nope"}), harness)
    with pytest.raises(ConfigError, match=r"has no workspace form \(WorkspaceTasks\)"):
        check_agent_backend(OptimizeConfig(agent={"backend": "command", "command": "x"}), get_harness("alfworld"))
    with pytest.raises(ConfigError, match="execution.executor 'processes' is for the builtin agent"):
        check_agent_backend(OptimizeConfig(agent={"backend": "command", "command": "x"},
                                           execution={"executor": "processes"}), harness)
    with pytest.raises(ConfigError, match="set agent.command"):
        check_agent_backend(OptimizeConfig(agent={"backend": "command"}), harness)
    check_agent_backend(OptimizeConfig(), get_harness("alfworld"))  # builtin: nothing to check


@pytest.mark.sandbox_os
def test_evaluate_runs_the_command_backend(open_tmp_path, monkeypatch):
    tmp_path = open_tmp_path
    monkeypatch.setenv("RASO_AGENT_ROOT", str(tmp_path))
    script = tmp_path / "agent.py"
    script.write_text("import pathlib; pathlib.Path('answer.txt').write_text(pathlib.Path('input.txt').read_text())\n")
    model = ScriptedModel([])
    gateway = LLMGateway(GatewayConfig(roles={"agent": RoleConfig(model=model.model)}))
    result = evaluate(AnswerFileTestHarness(), [SKILL], split="test", gateway=gateway,
                      **{"agent.backend": "command", "agent.command": f"{sys.executable} {script}"})
    rewards = sorted(r.reward for r in result.rollouts)
    assert rewards == [1.0, 1.0] and {r.metadata["backend"] for r in result.rollouts} == {"command"}
