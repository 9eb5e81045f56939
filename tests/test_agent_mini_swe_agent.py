"""The real mini-swe-agent (its pinned release, installed by `raso agents install mini-swe-agent`) driven through
the loopback endpoint by a scripted model: a reply whose bash block writes the answer file, then the finish
command. Checks the skill reached the model's request, the workspace was isolated, the trajectory became steps and
the score came from the harness's scorer."""

from __future__ import annotations

import pytest
from agent_program_support import (
    SKILL,
    AnswerFileTestHarness,
    assert_refused_rollout_ends_fast,
)

from raso.agent.agent import AgentConfig
from raso.agent.programs.mini_swe_agent import FINISH_COMMAND, MiniSweAgentProgram, transcript_of
from raso.agent.programs.runner import ExternalAgentRunner
from raso.llm.config import GatewayConfig, RoleConfig
from raso.llm.gateway import LLMGateway
from raso.llm.scripted import ScriptedModel


def _reply(thought: str, command: str) -> str:
    return f"THOUGHT: {thought}\n\n```mswea_bash_command\n{command}\n```"


@pytest.mark.sandbox_os
@pytest.mark.agents
def test_real_mini_swe_agent_through_the_endpoint(open_tmp_path, monkeypatch):
    tmp_path = open_tmp_path
    backend = MiniSweAgentProgram()
    assert backend.unavailable_reason() is None, backend.unavailable_reason()  # .ci/run installs it
    monkeypatch.setenv("RASO_AGENT_ROOT", str(tmp_path / "rollouts"))
    secret = tmp_path / "answers.txt"
    secret.write_text("the answers")
    model = ScriptedModel([
        "I will start by thinking, without a command.",
        _reply("Try the answers file outside.", f"cat {secret} || echo NO-SECRET"),
        _reply("Copy the word.", "cp input.txt answer.txt && cat answer.txt"),
        _reply("Done.", FINISH_COMMAND),
    ])
    gateway = LLMGateway(GatewayConfig(roles={"agent": RoleConfig(model=model.model)}))
    config = AgentConfig(max_steps=6, max_wall_s=240)
    harness = AnswerFileTestHarness()
    rollout = harness.rollout(harness.tasks("train")[0], [SKILL], ExternalAgentRunner(backend, gateway, config))

    assert rollout.outcome == "ok", rollout.error
    assert rollout.reward == 1.0 and rollout.metadata["score_info"] == {"answer": "blue"}  # the harness's scorer
    first_request = model.calls[0]
    assert any("ALWAYS-UPPERCASE-MARKER" in str(m["content"]) for m in first_request)  # the skill reached the model
    assert any("input.txt" in str(m["content"]) for m in first_request)
    steps = [s for s in rollout.trajectory if s.kind != "score"]
    assert [s.action for s in steps] == ["(no command: format error)", f"cat {secret} || echo NO-SECRET",
                                         "cp input.txt answer.txt && cat answer.txt", FINISH_COMMAND]
    assert steps[0].reply == "I will start by thinking, without a command." and "format" in steps[0].result.lower()
    assert "NO-SECRET" in steps[1].result and "the answers" not in steps[1].result  # isolated
    assert "blue" in steps[2].result
    assert rollout.metadata["tool_calls"] == 3 and rollout.model_calls == 4 and len(model.calls) == 4
    assert gateway.ledger.totals()["calls"] == 4
    assert any("exit status: Submitted" in n for n in rollout.metadata["transcript_notes"])


def test_transcript_of_a_trajectory_with_a_format_error():
    messages = [
        {"role": "system", "content": "sys"}, {"role": "user", "content": "the task"},
        {"role": "user", "content": "Format error: found 0 actions",
         "extra": {"interrupt_type": "FormatError", "model_response": "no block"}},
        {"role": "assistant", "content": _reply("list", "ls"), "extra": {"actions": [{"command": "ls"}]}},
        {"role": "user", "content": "<returncode>0</returncode>", "extra": {"raw_output": "a.txt\n", "returncode": 0}},
    ]
    transcript = transcript_of(messages, {"model_stats": {"api_calls": 2}})
    assert [s.action for s in transcript.steps] == ["(no command: format error)", "ls"]
    assert transcript.steps[0].observation == "the task" and "Format error" in transcript.steps[0].result
    assert transcript.steps[0].reply == "no block" and transcript.steps[1].observation.startswith("Format error")
    assert transcript.steps[1].result == "returncode 0\na.txt\n" and transcript.tool_calls == 1
    assert any("no exit message" in n for n in transcript.notes) and transcript.final_message is None


@pytest.mark.sandbox_os
@pytest.mark.agents
@pytest.mark.parametrize("refusal", ["budget", "unreachable"])
def test_a_refused_or_unreachable_model_ends_the_rollout_within_seconds(refusal, tmp_path, monkeypatch):
    backend = MiniSweAgentProgram()
    assert backend.unavailable_reason() is None, backend.unavailable_reason()
    monkeypatch.setenv("RASO_AGENT_ROOT", str(tmp_path / "rollouts"))
    config = AgentConfig(max_steps=6, max_wall_s=240)

    assert_refused_rollout_ends_fast(backend, config, refusal, monkeypatch)
