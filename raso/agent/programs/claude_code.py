"""Claude Code (@anthropic-ai/claude-code) as an agent program: `claude -p` headless with stream-json output,
talking Anthropic Messages to the loopback endpoint (ANTHROPIC_BASE_URL), skills from ~/.claude/skills."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from raso.choices import WireFormatName

from .base import AgentRun, Transcript
from .npm import NpmAgentProgram, read_stream_json


class ClaudeCodeProgram(NpmAgentProgram):
    name: ClassVar[str] = "claude-code"
    wire_format: ClassVar[WireFormatName] = "anthropic-messages"
    npm_package: ClassVar[str] = "@anthropic-ai/claude-code"
    version: ClassVar[str] = "2.1.332"
    package: ClassVar[str] = f"npm:{npm_package}@{version}"
    binary: ClassVar[str] = "claude"
    needs_node: ClassVar[bool] = False  # the package installs a native executable
    min_memory_mb: ClassVar[int] = 4096  # measured: aborts at 1.5 GiB of address space, runs at 4 GiB

    def skills_dir(self, run: AgentRun) -> Path:
        return run.home / ".claude" / "skills"

    def command(self, run: AgentRun) -> list[str]:
        # bypassPermissions: every edit and command runs without asking; the OS sandbox is the boundary
        return [str(self.program()), "--print", "--output-format", "stream-json", "--verbose",
                "--max-turns", str(max(1, run.max_steps)), "--dangerously-skip-permissions",
                "--model", run.model_name, "--", run.instruction]

    def environment(self, run: AgentRun) -> dict[str, str]:
        return {
            "ANTHROPIC_BASE_URL": run.endpoint_url,
            "ANTHROPIC_API_KEY": run.api_key,
            # background and sub-agent calls go to the same endpoint under the same name
            "ANTHROPIC_SMALL_FAST_MODEL": run.model_name,
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": run.model_name,
            "ANTHROPIC_DEFAULT_SONNET_MODEL": run.model_name,
            "ANTHROPIC_DEFAULT_OPUS_MODEL": run.model_name,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            # only the candidate skills: its bundled ones (deep-research, dataviz, ...) would be listed beside them
            "CLAUDE_CODE_DISABLE_BUNDLED_SKILLS": "1",
            "IS_SANDBOX": "1",  # it is one; Claude Code refuses to skip permissions as root without it
            # the endpoint answers only final errors (the gateway has retried): retrying them only waits
            "CLAUDE_CODE_MAX_RETRIES": "0",
            # it asks 32,000 reply tokens by default; ask no more than the endpoint allows
            **({"CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(run.max_tokens)} if run.max_tokens else {}),
        }

    def read_transcript(self, run: AgentRun, stdout: str, stderr: str) -> Transcript:
        return read_stream_json(stdout)

    @property
    def tools_description(self) -> str:
        return (
            "The agent is Claude Code (headless, `claude -p`), working in the task's workspace folder with its own "
            "tools: Bash (runs shell commands in the workspace), Read, Write and Edit (files), Skill (loads an "
            "installed skill's SKILL.md by name) and Agent (delegates to a sub-agent with the same tools). Each "
            "installed skill's name and description are listed to it at the start; it reads the full SKILL.md "
            "(and files beside it) when it decides the skill applies. Every command and edit runs without "
            "confirmation inside an OS sandbox: no network, nothing outside the workspace is writable. Its turn "
            "limit is the task's step limit; its last message ends the task."
        )


__all__ = ["ClaudeCodeProgram"]
