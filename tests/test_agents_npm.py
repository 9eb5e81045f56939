"""The real npm agent programs (Claude Code, Codex CLI, Qwen Code) as rollout backends: each runs headless in the OS
sandbox against the loopback endpoint, behind which a scripted model replies with one shell tool call (copy the word
into answer.txt, and try to read a file outside the workspace) and then a final message. Checks that the skill was
listed to the agent, that the workspace was its boundary, that its transcript became steps and that the harness's
scorer scored it. And that a call the budget refuses ends each program (it does not retry until the wall clock).

The programs are installed with `raso agents install NAME` (CI: .ci/run); these tests fail, never skip, without
them, and run only when selected (`-m agents`)."""

from __future__ import annotations

import json

import pytest
from agent_program_support import (
    SKILL,
    AnswerFileTestHarness,
    assert_refused_rollout_ends_fast,
)

from raso.agent.agent import AgentConfig
from raso.agent.programs.claude_code import ClaudeCodeProgram
from raso.agent.programs.codex import CodexProgram
from raso.agent.programs.config import ProgramSection
from raso.agent.programs.qwen_code import QwenCodeProgram
from raso.agent.programs.runner import ExternalAgentRunner
from raso.llm.config import GatewayConfig, ModelPrice, RoleConfig
from raso.llm.gateway import LLMGateway
from raso.llm.ledger import CallRecord
from raso.llm.scripted import ScriptedModel

pytestmark = [pytest.mark.agents, pytest.mark.sandbox_os]

#: each program's own shell tool: (its name, the argument holding the command)
SHELL_TOOLS = {"claude-code": ("Bash", "command"), "codex": ("exec_command", "cmd"), "qwen-code": ("run_shell_command", "command")}
SECRET = "SECRET-ANSWERS-7731"
#: a skill each program bundles, which raso turns off so that only the candidate skills are listed (Codex lists its
#: three system skills; it has no switch for them)
BUNDLED_SKILL = {"claude-code": "deep-research", "codex": None, "qwen-code": "dataviz"}


@pytest.fixture
def agent_root(open_tmp_path, monkeypatch):
    root = open_tmp_path / "rollouts"
    root.mkdir()
    monkeypatch.setenv("RASO_AGENT_ROOT", str(root))
    return root


@pytest.mark.parametrize("program_class", [ClaudeCodeProgram, CodexProgram, QwenCodeProgram], ids=lambda c: c.name)
def test_real_agent_does_a_task_through_the_endpoint(program_class, agent_root, tmp_path):
    backend = program_class()
    assert backend.unavailable_reason() is None, backend.unavailable_reason()
    secret = tmp_path / "secret" / "answers.txt"
    secret.parent.mkdir()
    secret.write_text(SECRET)
    tool, argument = SHELL_TOOLS[backend.name]
    # the probe's result is also left in the workspace, so isolation is checked even when a program drops a command's
    # output (Qwen Code 0.24.4 now and then reports "Output: (empty)" for a command that printed)
    command = f"cat input.txt > answer.txt; cat {secret} > probe.txt 2>&1; cat probe.txt; echo tool-ran"
    model = ScriptedModel([{"content": "Copying the word.", "tool_calls": [{"name": tool, "arguments": {argument: command}}]},
                           "Done: answer.txt holds the word."])
    gateway = LLMGateway(GatewayConfig(roles={"agent": RoleConfig(model=model.model)}, retry={"max_attempts": 1}))
    # the address-space limit each program is documented to need (README), not the default
    config = AgentConfig(max_steps=6, max_wall_s=240)
    limits = ProgramSection(cpu_seconds=240, memory_mb=max(backend.min_memory_mb, 1536))
    harness = AnswerFileTestHarness()
    task = harness.tasks("train")[0]

    rollout = harness.rollout(task, [SKILL], ExternalAgentRunner(backend, gateway, config, limits))

    assert rollout.outcome == "ok", rollout.error
    # the score is the harness's scorer's verdict on the file the agent's own shell tool wrote
    assert rollout.reward == 1.0 and rollout.metadata["score_info"]["answer"] == "blue"
    # isolation: the file beside the rollout folder was not there for the agent's shell
    probe = rollout.metadata["score_info"]["probe"]
    assert "No such file or directory" in probe and SECRET not in probe
    # both model calls went through the endpoint and the gateway's ledger
    assert len(model.calls) == 2 and rollout.model_calls == 2
    assert gateway.ledger.totals()["calls"] == 2
    first, second = (json.dumps(messages) for messages in model.calls)
    # the skill was listed to the agent: its description is in what the program sent, as is the instruction
    assert SKILL.description in first and "input.txt" in first
    if backend.name == "codex":  # its permissions text matches the box: no network (it said "enabled", issue 37)
        assert "Network access is restricted" in first and "Network access is enabled" not in first
    assert BUNDLED_SKILL[backend.name] is None or BUNDLED_SKILL[backend.name] not in first
    # the program offered its shell tool, and the tool's output came back in the second request (unless the program
    # dropped it, which only Qwen Code was seen to do); the secret never reached the model
    assert SECRET not in second
    output_dropped = backend.name == "qwen-code" and "Output: (empty)" in second
    assert output_dropped or "No such file or directory" in second
    # the transcript as steps: the tool call with its output, the final message, then the scorer's verdict
    tools = [step for step in rollout.trajectory if step.kind == "tool"]
    assert len(tools) == 1 and "cat input.txt > answer.txt" in tools[0].action
    # (Qwen Code's own transcript may show only part of a command's output; the model got all of it, above)
    assert (output_dropped or "No such file or directory" in tools[0].result) and SECRET not in tools[0].result
    assert rollout.trajectory[-2].kind == "message" and rollout.trajectory[-2].reply == "Done: answer.txt holds the word."
    assert rollout.final_output == "Done: answer.txt holds the word."
    assert rollout.trajectory[-1].kind == "score" and rollout.metadata["tool_calls"] == 1
    assert "loopback-ports-only" in rollout.metadata["isolation"]
    assert list(agent_root.iterdir()) == []  # nothing left behind


@pytest.mark.parametrize("program_class", [ClaudeCodeProgram, CodexProgram, QwenCodeProgram], ids=lambda c: c.name)
def test_real_agent_stops_when_the_budget_refuses_the_call(program_class, agent_root):
    backend = program_class()
    assert backend.unavailable_reason() is None, backend.unavailable_reason()
    model = ScriptedModel(["never sent"])
    gateway = LLMGateway(GatewayConfig(roles={"agent": RoleConfig(model=model.model)}, retry={"max_attempts": 1},
                                       budget_usd=1e-9, prices={model.model: ModelPrice(input=1.0, output=1.0)}))
    gateway.ledger.record(CallRecord(role="agent", stage="earlier", model=model.model, cost_usd=1.0))  # spent already
    config = AgentConfig(max_steps=6, max_wall_s=120)
    limits = ProgramSection(cpu_seconds=120, memory_mb=max(backend.min_memory_mb, 1536))
    harness = AnswerFileTestHarness()

    rollout = harness.rollout(harness.tasks("train")[0], [SKILL], ExternalAgentRunner(backend, gateway, config, limits))

    # the refusal (HTTP 402 in the program's own API) ends the program: no retrying until the wall clock
    assert rollout.outcome == "budget" and "USD budget reached" in rollout.error
    assert rollout.metadata["limit_hit"] is None and model.calls == []
    assert rollout.reward == 0.0 and rollout.metadata["score_info"] == {"reason": "no answer.txt"}


@pytest.mark.parametrize("refusal", ["budget", "unreachable"])
@pytest.mark.parametrize("program_class", [ClaudeCodeProgram, CodexProgram, QwenCodeProgram], ids=lambda c: c.name)
def test_a_refused_or_unreachable_model_ends_the_rollout_within_seconds(program_class, refusal, agent_root,
                                                                        monkeypatch):
    backend = program_class()
    assert backend.unavailable_reason() is None, backend.unavailable_reason()
    config = AgentConfig(max_steps=6, max_wall_s=120)
    limits = ProgramSection(cpu_seconds=120, memory_mb=max(backend.min_memory_mb, 1536))

    assert_refused_rollout_ends_fast(backend, config, refusal, monkeypatch, limits)
