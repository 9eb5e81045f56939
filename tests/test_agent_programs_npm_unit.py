"""The npm agent backends without their programs: transcripts (in the shapes Claude Code / Qwen Code stream-json and
`codex exec --json` print) as steps, the config each writes into the rollout's home, the commands and environment,
and what they say when the program is missing."""

from __future__ import annotations

import json
import tomllib

import pytest

from raso.agent.programs.base import AgentRun
from raso.agent.programs.claude_code import ClaudeCodeProgram
from raso.agent.programs.codex import CodexProgram, read_codex_json
from raso.agent.programs.npm import conform_skill_names, read_stream_json
from raso.agent.programs.qwen_code import QwenCodeProgram
from raso.agent.programs.registry import program_class


def _lines(*events) -> str:
    return "\n".join(json.dumps(e) for e in events) + "\n"


STREAM_JSON = _lines(
    {"type": "system", "subtype": "init", "tools": ["Bash"], "skills": ["answer-files"]},
    {"type": "assistant", "message": {"content": [{"type": "text", "text": "Looking first."},
                                                  {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]},
     "parent_tool_use_id": None},
    {"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "s1", "name": "Bash", "input": {"command": "x"}}]},
     "parent_tool_use_id": "t9"},  # a sub-agent's own turn
    {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": "input.txt",
                                             "is_error": False}]}},
    {"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "t2", "name": "Write",
                                                  "input": {"file_path": "answer.txt", "content": "blue"}}]}},
    {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t2",
                                             "content": [{"type": "text", "text": "denied"}], "is_error": True}]}},
    {"type": "assistant", "message": {"content": [{"type": "text", "text": "Done."}]}},
    {"type": "result", "subtype": "success", "result": "Done.", "num_turns": 3,
     "usage": {"input_tokens": 300, "cache_read_input_tokens": 20, "output_tokens": 40}},
) + "not json\n"


def test_stream_json_transcript_becomes_steps():
    transcript = read_stream_json(STREAM_JSON)
    assert transcript.tool_calls == 2
    first, second, final = transcript.steps
    assert (first.action, first.reply, first.result, first.kind) == ("Bash: ls", "Looking first.", "input.txt", "tool")
    assert second.action == 'Write {"file_path": "answer.txt", "content": "blue"}'
    assert second.result == "denied" and second.info["is_error"] is True
    assert (final.kind, final.reply) == ("message", "Done.") and transcript.final_message == "Done."
    assert (transcript.prompt_tokens, transcript.completion_tokens) == (320, 40)
    assert transcript.notes == ["1 output line(s) were not JSON events"]


def test_stream_json_without_a_result_line_keeps_the_last_text_and_says_so():
    cut = STREAM_JSON.split('{"type": "result"')[0]
    transcript = read_stream_json(cut)
    assert transcript.final_message == "Done." and transcript.prompt_tokens is None
    assert any("no result line" in note for note in transcript.notes)
    empty = read_stream_json("Segmentation fault\n")
    assert empty.steps == [] and empty.final_message is None
    assert "the program printed no JSON events" in empty.notes


def test_stream_json_error_result_is_noted():
    transcript = read_stream_json(_lines({"type": "result", "subtype": "error_during_execution", "is_error": True,
                                          "error": {"message": "[API Error: Connection error.]"}}))
    assert transcript.final_message is None
    assert "the agent ended with an error: [API Error: Connection error.]" in transcript.notes
    assert "the agent's run ended with error_during_execution" in transcript.notes


CODEX_JSON = _lines(
    {"type": "thread.started", "thread_id": "x"},
    {"type": "item.completed", "item": {"id": "item_0", "type": "error", "message": "Model metadata not found"}},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "item_1", "type": "agent_message", "text": "Copying."}},
    {"type": "item.started", "item": {"id": "item_2", "type": "command_execution", "command": "bash -lc 'cat input.txt'",
                                      "status": "in_progress"}},
    {"type": "item.completed", "item": {"id": "item_2", "type": "command_execution", "command": "bash -lc 'cat input.txt'",
                                        "aggregated_output": "blue\n", "exit_code": 0, "status": "completed"}},
    {"type": "item.completed", "item": {"id": "item_3", "type": "file_change", "status": "completed",
                                        "changes": [{"path": "answer.txt", "kind": "add"}]}},
    {"type": "item.completed", "item": {"id": "item_4", "type": "reasoning", "text": "hm"}},
    {"type": "item.completed", "item": {"id": "item_5", "type": "agent_message", "text": "Wrote answer.txt."}},
    {"type": "turn.completed", "usage": {"input_tokens": 500, "cached_input_tokens": 0, "output_tokens": 25}},
)


def test_codex_transcript_becomes_steps():
    transcript = read_codex_json(CODEX_JSON)
    assert transcript.tool_calls == 2
    shell, patch, final = transcript.steps
    assert shell.action == "shell: bash -lc 'cat input.txt'" and shell.result == "blue\n" and shell.reply == "Copying."
    assert shell.info["exit_code"] == 0
    assert patch.action == "apply_patch: add answer.txt" and patch.reply == ""
    assert final.reply == "Wrote answer.txt." and transcript.final_message == "Wrote answer.txt."
    assert (transcript.prompt_tokens, transcript.completion_tokens) == (500, 25)
    assert transcript.notes == ["codex: Model metadata not found"]
    failed = read_codex_json(_lines({"type": "turn.failed", "error": {"message": "402 budget"}}))
    assert failed.final_message is None and failed.notes == ["codex turn.failed: 402 budget"]


def test_skill_names_are_made_their_folder_names(tmp_path):
    folder = tmp_path / "answer-files"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: Answer Files\ndescription: How\n---\n\n# Answer Files\nname: body line\n")
    good = tmp_path / "ok-skill"
    good.mkdir()
    (good / "SKILL.md").write_text("---\nname: ok-skill\ndescription: Fine\n---\nbody\n")
    assert conform_skill_names(tmp_path) == ["answer-files"]
    assert (folder / "SKILL.md").read_text() == "---\nname: answer-files\ndescription: How\n---\n\n# Answer Files\nname: body line\n"
    assert (good / "SKILL.md").read_text() == "---\nname: ok-skill\ndescription: Fine\n---\nbody\n"


@pytest.fixture
def run(tmp_path):
    home, workspace = tmp_path / "home", tmp_path / "workspace"
    home.mkdir()
    workspace.mkdir()
    return AgentRun(instruction="-read input.txt", workspace=workspace, home=home, endpoint_url="http://127.0.0.1:4000/s/tok/v1",
                    api_key="raso-key", model_name="raso-agent", max_steps=7, wall_seconds=100.0)


def test_each_backend_is_registered_and_pinned():
    for cls, package in ((ClaudeCodeProgram, "npm:@anthropic-ai/claude-code@2.1.332"), (CodexProgram, "npm:@openai/codex@0.169.0"),
                         (QwenCodeProgram, "npm:@qwen-code/qwen-code@0.24.4")):
        assert program_class(cls.name) is cls and cls.package == package
    assert {c.wire_format for c in (ClaudeCodeProgram, CodexProgram, QwenCodeProgram)} == {
        "anthropic-messages", "openai-responses", "openai-chat"}


def test_missing_program_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("RASO_CACHE_DIR", str(tmp_path / "cache"))
    reason = CodexProgram().unavailable_reason()
    assert reason is not None and "raso agents install codex" in reason and "@openai/codex@0.169.0" in reason
    prefix = tmp_path / "cache" / "agents" / "qwen-code" / "node_modules"
    (prefix / ".bin").mkdir(parents=True)
    (prefix / ".bin" / "qwen").write_text("#!/usr/bin/env node\n")
    (prefix / "@qwen-code" / "qwen-code").mkdir(parents=True)
    (prefix / "@qwen-code" / "qwen-code" / "package.json").write_text('{"version": "0.1.0"}')
    reason = QwenCodeProgram().unavailable_reason()
    assert reason is not None and "0.1.0 is installed, raso pins 0.24.4" in reason


def test_claude_code_command_and_environment(run):
    backend = ClaudeCodeProgram()
    argv = backend.command(run)
    assert argv[-2:] == ["--", "-read input.txt"]  # an instruction that looks like an option stays the prompt
    assert argv[argv.index("--max-turns") + 1] == "7" and "--dangerously-skip-permissions" in argv
    env = backend.environment(run)
    assert env["ANTHROPIC_BASE_URL"] == run.endpoint_url and env["ANTHROPIC_API_KEY"] == "raso-key"
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1" and env["DISABLE_AUTOUPDATER"] == "1"
    assert env["CLAUDE_CODE_DISABLE_BUNDLED_SKILLS"] == "1"
    assert backend.skills_dir(run) == run.home / ".claude" / "skills"


def test_codex_config_points_at_the_endpoint(run):
    backend = CodexProgram()
    backend.prepare_home(run)
    config = tomllib.loads((run.home / ".codex" / "config.toml").read_text())
    assert config["model_provider"] == "raso" and config["model"] == "raso-agent"
    provider = config["model_providers"]["raso"]
    assert provider["base_url"] == run.endpoint_url and provider["wire_api"] == "responses"
    env = backend.environment(run)
    assert env[provider["env_key"]] == "raso-key" and env["CODEX_HOME"] == str(run.home / ".codex")
    assert config["analytics"]["enabled"] is False and config["check_for_update_on_startup"] is False
    assert backend.skills_dir(run) == run.home / ".codex" / "skills"
    argv = backend.command(run)
    assert argv[argv.index("--cd") + 1] == str(run.workspace) and argv[-2:] == ["--", "-read input.txt"]


def test_codex_is_told_the_truth_about_its_network(run):
    """Codex writes its permissions into its prompt: with --dangerously-bypass-approvals-and-sandbox it said "Network
    access is enabled" inside a box without network (issue 37). Its permission profile now has network off and no
    filesystem sandbox of its own (the OS box is the boundary), and nothing on the command line overrides it."""
    program = CodexProgram()
    program.prepare_home(run)
    config = tomllib.loads((run.home / ".codex" / "config.toml").read_text())
    profile = config["permissions"][config["default_permissions"]]
    assert profile["network"]["enabled"] is False
    assert profile["filesystem"] == {":root": "write"}
    assert config["approval_policy"] == "never" and "sandbox_mode" not in config
    argv = program.command(run)
    # either would replace the profile: the bypass flag with danger-full-access (network enabled), --sandbox with
    # Codex's own bubblewrap, which cannot start inside the OS box
    assert not [arg for arg in argv if arg.startswith(("--dangerously", "--sandbox", "--full-auto", "--yolo"))]
    assert "-c" not in argv


def test_qwen_code_settings_and_command(run):
    backend = QwenCodeProgram()
    backend.prepare_home(run)
    settings = json.loads((run.home / ".qwen" / "settings.json").read_text())
    assert settings["telemetry"]["enabled"] is False and settings["privacy"]["usageStatisticsEnabled"] is False
    assert settings["skills"]["disabledLevels"] == ["bundled"]
    argv = backend.command(run)
    assert argv[-1] == "--prompt=-read input.txt" and argv[argv.index("--max-session-turns") + 1] == "7"
    assert argv[argv.index("--max-wall-time") + 1] == "90s"
    env = backend.environment(run)
    assert (env["OPENAI_BASE_URL"], env["OPENAI_API_KEY"], env["OPENAI_MODEL"]) == (run.endpoint_url, "raso-key", "raso-agent")
    assert env["NODE_OPTIONS"] == "--disable-wasm-trap-handler"  # else Node's requests fail under the address-space limit
    assert backend.skills_dir(run) == run.home / ".qwen" / "skills"


def test_the_runner_never_sets_less_memory_than_the_program_needs():
    from raso.agent.agent import AgentConfig
    from raso.agent.programs.config import ProgramSection
    from raso.agent.programs.runner import ExternalAgentRunner

    qwen = ExternalAgentRunner(QwenCodeProgram(), None, AgentConfig(), ProgramSection(memory_mb=2048))
    assert qwen.limits().memory_bytes == QwenCodeProgram.min_memory_mb * 1024 * 1024 > 2048 * 1024 * 1024
    high = ProgramSection(memory_mb=20_000)
    assert ExternalAgentRunner(CodexProgram(), None, AgentConfig(), high).limits().memory_bytes == 20_000 * 1024 * 1024
