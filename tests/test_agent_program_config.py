"""`program` and its options: the --agent flags, the dispatch in raso.api.make_agent, the checks before a run, H
for an external program (the harness's workspace description plus the agent's tools), and the registry: every
program is an entry point of the group `raso.agent_programs`, a third party's package adds one with its own options
section, and AgentConfig holds none of an external program's options."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_program_support import SKILL, AnswerFileTestHarness

from raso.agent import AgentConfig, ExecutionAgent
from raso.agent.programs.base import AgentProgram, ProgramOptions
from raso.agent.programs.command import CommandOptions
from raso.agent.programs.registry import ENTRY_POINT_GROUP, program_class, program_names, registered_programs
from raso.agent.programs.runner import ExternalAgentRunner
from raso.api import check_agent_program, evaluate, harness_description_for, make_agent
from raso.choices import WireFormatName, choices_of
from raso.cli.options import add_config_options, config_overrides
from raso.engine.config import OptimizeConfig, build_config, check_key
from raso.errors import ConfigError
from raso.harness.registry import get_harness
from raso.llm.config import GatewayConfig, RoleConfig
from raso.llm.gateway import LLMGateway
from raso.llm.scripted import ScriptedModel

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def test_agent_flags_set_the_program_and_its_command():
    parser = argparse.ArgumentParser()
    flags = add_config_options(parser)
    args = parser.parse_args(["--agent", "mini-swe-agent", "--agent-command", "prog {workspace}", "--agent-mode", "full"])
    overrides = config_overrides(args, flags)
    assert overrides["program.name"] == "mini-swe-agent" and overrides["program.command.template"] == "prog {workspace}"
    assert overrides["agent.mode"] == "full"
    config = build_config(overrides=overrides, quick_local_defaults=False)
    assert config.program.name == "mini-swe-agent" and type(config.program.options()) is ProgramOptions  # none
    assert isinstance(config.program.command, CommandOptions) and config.program.command.template == "prog {workspace}"


def test_make_agent_dispatches_on_the_program():
    gateway = LLMGateway(GatewayConfig(roles={"agent": RoleConfig(model=ScriptedModel([]).model)}))
    harness = AnswerFileTestHarness()
    builtin = make_agent(OptimizeConfig(), gateway, harness)
    external = make_agent(OptimizeConfig(program={"name": "command", "command": {"template": "/bin/true"},
                                                  "memory_mb": 2048}), gateway, harness)
    assert isinstance(builtin, ExecutionAgent)
    assert isinstance(external, ExternalAgentRunner) and external.program.name == "command"
    assert external.program.argv == ["/bin/true"] and external.limits().memory_bytes == 2048 * 1024 * 1024


def test_h_for_an_external_program_is_workspace_plus_tools():
    harness = AnswerFileTestHarness()
    config = OptimizeConfig(program={"name": "mini-swe-agent"})
    text = harness_description_for(config, harness)
    assert text.startswith(harness.workspace_description)
    assert "mini-swe-agent 2.4.6" in text and "appends each installed SKILL.md" in text
    alfworld = get_harness("alfworld")
    assert harness_description_for(OptimizeConfig(), alfworld) == alfworld.harness_description


def test_checks_before_a_run():
    harness = AnswerFileTestHarness()
    with pytest.raises(ConfigError, match="unknown agent program 'nope'"):
        build_config(overrides={"program.name": "nope"}, quick_local_defaults=False)
    with pytest.raises(ConfigError, match=r"unknown placeholder \{workdir\}"):  # refused with the configuration
        build_config(overrides={"program.command.template": "x {workdir}"}, quick_local_defaults=False)
    with pytest.raises(ConfigError, match=r"has no workspace form \(WorkspaceTasks\)"):
        check_agent_program(OptimizeConfig(program={"name": "command", "command": {"template": "x"}}),
                            get_harness("alfworld"))
    with pytest.raises(ConfigError, match="execution.executor 'processes' is for the builtin agent"):
        check_agent_program(OptimizeConfig(program={"name": "command", "command": {"template": "x"}},
                                           execution={"executor": "processes"}), harness)
    with pytest.raises(ConfigError, match="set program.command.template"):
        check_agent_program(OptimizeConfig(program={"name": "command"}), harness)
    check_agent_program(OptimizeConfig(), get_harness("alfworld"))  # builtin: nothing to check


def test_every_program_is_an_entry_point_with_its_own_options():
    declared = __import__("tomllib").loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert set(declared[ENTRY_POINT_GROUP]) <= set(registered_programs())  # the installed metadata is current
    assert program_names()[0] == "builtin" and set(program_names()[1:]) == set(registered_programs())
    for name in registered_programs():
        cls = program_class(name)
        assert issubclass(cls, AgentProgram) and cls.name == name and cls.wire_format in choices_of(WireFormatName)
        assert cls().options == cls.options_model()  # built from its own options model, defaults when none given
    # AgentConfig is the builtin loop's: no external program's option, no program choice
    assert not {"backend", "command", "skills_dir", "cpu_seconds", "memory_mb", "disk_mb", "external_wall_s"} \
        & set(AgentConfig.model_fields)


def test_the_wire_format_names_are_the_endpoints_formats():
    from raso.agent.wire import FORMATS

    assert set(choices_of(WireFormatName)) == set(FORMATS)


THIRD_PARTY = '''
from typing import ClassVar
from pathlib import Path
from pydantic import Field
from raso.agent.programs.base import AgentProgram, ProgramOptions, Transcript


class EchoOptions(ProgramOptions):
    greeting: str = Field(default="hello", description="what the echo agent says")


class EchoProgram(AgentProgram):
    name: ClassVar[str] = "echo-agent"
    wire_format = "openai-chat"
    package: ClassVar[str] = "none: a test's program"
    options_model = EchoOptions

    def unavailable_reason(self): return None
    def skills_dir(self, run): return run.home / "skills"
    def command(self, run): return ["/bin/echo", self.options.greeting]
    def read_transcript(self, run, stdout, stderr): return Transcript(final_message=stdout.strip())
    @property
    def tools_description(self): return "It says " + self.options.greeting + "."
'''


def test_a_third_party_package_adds_a_program_with_its_options(tmp_path):
    """A package's metadata alone registers it: its name is a program.name, its options a config section with
    dotted keys and validation, and make_agent builds it (in a fresh interpreter: the config reads the registry at
    import)."""
    (tmp_path / "echo_agent.py").write_text(THIRD_PARTY, encoding="utf-8")
    info = tmp_path / "echo_agent-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-agent\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\necho-agent = echo_agent:EchoProgram\n",
                                           encoding="utf-8")
    probe = """
import json
from raso.api import make_agent
from raso.engine.config import build_config, option_keys
from raso.errors import ConfigError
from raso.llm.gateway import LLMGateway
from raso.llm.config import GatewayConfig, RoleConfig
from raso.llm.scripted import ScriptedModel
config = build_config(overrides={"program.name": "echo-agent", "program.echo_agent.greeting": "hi"},
                      quick_local_defaults=False)
try:
    build_config(overrides={"program.echo_agent.greeting": 3}, quick_local_defaults=False)
    refused = ""
except ConfigError as exc:
    refused = str(exc)
agent = make_agent(config, LLMGateway(GatewayConfig(roles={"agent": RoleConfig(model=ScriptedModel([]).model)})), None)
print(json.dumps({"keys": [k for k in option_keys() if k.startswith("program.echo_agent")], "refused": refused,
                  "program": agent.program.name, "says": agent.program.tools_description}))
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["keys"] == ["program.echo_agent.greeting"]
    assert "program.echo_agent.greeting" in found["refused"]
    assert (found["program"], found["says"]) == ("echo-agent", "It says hi.")
    with pytest.raises(ConfigError, match="unknown option 'program.echo_agent.greeting'"):  # not installed here
        check_key("program.echo_agent.greeting")


@pytest.mark.sandbox_os
def test_evaluate_runs_the_command_program(open_tmp_path, monkeypatch):
    tmp_path = open_tmp_path
    monkeypatch.setenv("RASO_AGENT_ROOT", str(tmp_path))
    script = tmp_path / "agent.py"
    script.write_text("import pathlib; pathlib.Path('answer.txt').write_text(pathlib.Path('input.txt').read_text())\n")
    model = ScriptedModel([])
    gateway = LLMGateway(GatewayConfig(roles={"agent": RoleConfig(model=model.model)}))
    result = evaluate(AnswerFileTestHarness(), [SKILL], split="test", gateway=gateway,
                      **{"program.name": "command", "program.command.template": f"{sys.executable} {script}"})
    rewards = sorted(r.reward for r in result.rollouts)
    assert rewards == [1.0, 1.0] and {r.metadata["program"] for r in result.rollouts} == {"command"}


def test_backend_no_longer_names_three_things():
    """The model's server, the agent program and the rollout executor each have their own name (issue 38)."""
    import importlib.util
    import typing

    from raso.choices import ExecutorKind
    from raso.engine.config import option_keys
    from raso.execution.options import ExecutionOptions
    from raso.llm.profiles import ModelProfile

    assert [key for key in option_keys() if "backend" in key] == []
    assert {"program.name", "execution.executor"} <= set(option_keys())
    assert "backend" not in ModelProfile.model_fields and "served_by" in ModelProfile.model_fields
    assert typing.get_args(ExecutionOptions.model_fields["executor"].annotation) == typing.get_args(ExecutorKind)
    for moved in ("raso.agent.executors", "raso.agent.backends"):
        assert importlib.util.find_spec(moved) is None, moved
