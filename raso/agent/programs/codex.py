"""Codex CLI (@openai/codex) as an agent program: `codex exec --json` headless, talking OpenAI Responses to the
loopback endpoint through a model provider in $CODEX_HOME/config.toml, skills from $CODEX_HOME/skills."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from raso.choices import WireFormatName
from raso.harness.base import Step

from .base import AgentRun, Transcript
from .npm import NODE_ENV, NpmAgentProgram, finished_transcript, json_lines, mapping, tool_action

#: the environment variable Codex reads the endpoint's key from (named in config.toml's provider)
KEY_VARIABLE = "RASO_ENDPOINT_API_KEY"
#: Codex's permission profile for a run in raso's OS sandbox: no filesystem sandbox of its own (the box is the
#: boundary; Codex's nested bubblewrap cannot start inside it) and network off, so that the permissions text Codex
#: writes into its prompt says "Network access is restricted". `--dangerously-bypass-approvals-and-sandbox` (and
#: the built-in :danger-full-access profile, which a profile cannot extend) told it "Network access is enabled".
PERMISSION_PROFILE = "raso-box"


def _toml(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def _step(item: dict[str, Any]) -> Step | None:
    """A finished Codex item as a step (None for items that are not actions: messages, reasoning, errors)."""
    kind = item.get("type")
    if kind == "command_execution":
        return Step(observation="", action=tool_action("shell", {"command": str(item.get("command", ""))}),
                    result=str(item.get("aggregated_output") or ""), kind="tool",
                    info={"tool": "shell", "exit_code": item.get("exit_code"), "status": item.get("status")})
    if kind == "file_change":
        changes = item.get("changes") or []
        paths = ", ".join(f"{c.get('kind', 'change')} {c.get('path', '')}" for c in changes if isinstance(c, dict))
        return Step(observation="", action=f"apply_patch: {paths}", result=str(item.get("status") or ""), kind="tool",
                    info={"tool": "apply_patch", "status": item.get("status")})
    if kind == "mcp_tool_call":
        name = f"{item.get('server', '')}.{item.get('tool', '')}"
        result = item.get("result") if item.get("result") is not None else item.get("error")
        return Step(observation="", action=tool_action(name, item.get("arguments")), kind="tool",
                    result=result if isinstance(result, str) else json.dumps(result, ensure_ascii=False),
                    info={"tool": name, "status": item.get("status")})
    if kind == "web_search":
        return Step(observation="", action=f"web_search: {item.get('query', '')}", kind="tool", info={"tool": "web_search"})
    return None


def read_codex_json(stdout: str) -> Transcript:
    """A `codex exec --json` event stream as steps: each finished command, file change or tool call (the agent's
    message before it as its reply), then the last agent message as the final message. Never raises."""
    notes: list[str] = []
    events = json_lines(stdout, notes)
    steps: list[Step] = []
    pending_text = ""
    final: str | None = None
    prompt_tokens = completion_tokens = None
    for event in events:
        kind = event.get("type")
        if kind == "item.completed" and isinstance(event.get("item"), dict):
            item = event["item"]
            if item.get("type") == "agent_message":
                final = pending_text = str(item.get("text") or "")
            elif item.get("type") == "error":
                notes.append(f"codex: {item.get('message', '')}")
            else:
                step = _step(item)
                if step is not None:
                    step.reply, pending_text = pending_text, ""
                    steps.append(step)
        elif kind == "turn.completed" and isinstance(event.get("usage"), dict):
            usage = event["usage"]
            prompt_tokens = (prompt_tokens or 0) + int(usage.get("input_tokens") or 0)
            completion_tokens = (completion_tokens or 0) + int(usage.get("output_tokens") or 0)
        elif kind in ("turn.failed", "error"):
            error = mapping(event.get("error")) or event
            notes.append(f"codex {kind}: {error.get('message', '')}")
    return finished_transcript(steps, final, events=len(events), prompt_tokens=prompt_tokens,
                               completion_tokens=completion_tokens, notes=notes)


class CodexProgram(NpmAgentProgram):
    name: ClassVar[str] = "codex"
    wire_format: ClassVar[WireFormatName] = "openai-responses"
    npm_package: ClassVar[str] = "@openai/codex"
    version: ClassVar[str] = "0.169.0"
    package: ClassVar[str] = f"npm:{npm_package}@{version}"
    binary: ClassVar[str] = "codex"  # a Node launcher for the native codex executable in the same prefix

    def codex_home(self, run: AgentRun) -> Path:
        return run.home / ".codex"

    def skills_dir(self, run: AgentRun) -> Path:
        return self.codex_home(run) / "skills"

    def prepare_home(self, run: AgentRun) -> None:
        super().prepare_home(run)
        folder = self.codex_home(run)
        folder.mkdir(parents=True, exist_ok=True)
        config = "\n".join([
            f"model = {_toml(run.model_name)}",
            'model_provider = "raso"',
            "check_for_update_on_startup = false",
            'approval_policy = "never"',  # headless: nothing would answer an approval request
            f"default_permissions = {_toml(PERMISSION_PROFILE)}",
            "[analytics]",
            "enabled = false",
            "[history]",
            'persistence = "none"',
            "[model_providers.raso]",
            'name = "raso loopback endpoint"',
            f"base_url = {_toml(run.endpoint_url)}",
            f"env_key = {_toml(KEY_VARIABLE)}",
            'wire_api = "responses"',
            f"[permissions.{PERMISSION_PROFILE}.filesystem]",
            '":root" = "write"',
            f"[permissions.{PERMISSION_PROFILE}.network]",
            "enabled = false",
            "",
        ])
        (folder / "config.toml").write_text(config, encoding="utf-8")

    def command(self, run: AgentRun) -> list[str]:
        # approvals and permissions come from config.toml (see PERMISSION_PROFILE); a --sandbox or sandbox_mode here
        # would override the profile. `codex exec` has no turn limit; the rollout's wall clock bounds it.
        return [str(self.program()), "exec", "--json", "--color", "never", "--skip-git-repo-check", "--ephemeral",
                "--cd", str(run.workspace), "--", run.instruction]

    def environment(self, run: AgentRun) -> dict[str, str]:
        return {"CODEX_HOME": str(self.codex_home(run)), KEY_VARIABLE: run.api_key, **NODE_ENV}

    def read_transcript(self, run: AgentRun, stdout: str, stderr: str) -> Transcript:
        return read_codex_json(stdout)

    @property
    def tools_description(self) -> str:
        return (
            "The agent is Codex CLI (headless, `codex exec`), working in the task's workspace folder with its own "
            "tools: exec_command (runs shell commands in the workspace; it reads and writes files this way) and "
            "write_stdin (answers a running command). The installed skills are listed to it by name, description "
            "and SKILL.md path; it reads a SKILL.md (and files beside it) with the shell when it decides the skill "
            "applies. Every command runs without confirmation inside an OS sandbox: no network, nothing outside "
            "the workspace is writable. It has no turn limit of its own: the wall-clock limit ends it; its last "
            "message ends the task."
        )


__all__ = ["CodexProgram", "read_codex_json"]
