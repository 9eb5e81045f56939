"""Qwen Code (@qwen-code/qwen-code) as an agent program: `qwen` headless with stream-json output, talking OpenAI
chat to the loopback endpoint (OPENAI_BASE_URL), skills from ~/.qwen/skills."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

from raso.choices import WireFormatName

from .base import AgentRun, Transcript
from .npm import NODE_ENV, NpmAgentProgram, read_stream_json

#: ~/.qwen/settings.json: nothing leaves the machine, no update checks, and only the candidate skills listed (not
#: the ones bundled with the program)
SETTINGS = {
    "skills": {"disabledLevels": ["bundled"]},
    "telemetry": {"enabled": False},
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
}


class QwenCodeProgram(NpmAgentProgram):
    name: ClassVar[str] = "qwen-code"
    wire_format: ClassVar[WireFormatName] = "openai-chat"
    npm_package: ClassVar[str] = "@qwen-code/qwen-code"
    version: ClassVar[str] = "0.24.4"
    package: ClassVar[str] = f"npm:{npm_package}@{version}"
    binary: ClassVar[str] = "qwen"
    #: measured (with NODE_ENV): at 4 GiB of address space its shell tool returns no output; at 16 GiB all works
    min_memory_mb: ClassVar[int] = 16384

    def skills_dir(self, run: AgentRun) -> Path:
        return run.home / ".qwen" / "skills"

    def prepare_home(self, run: AgentRun) -> None:
        super().prepare_home(run)
        folder = run.home / ".qwen"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "settings.json").write_text(json.dumps(SETTINGS, indent=2), encoding="utf-8")

    def command(self, run: AgentRun) -> list[str]:
        # yolo: every edit and command runs without asking; the OS sandbox is the boundary
        return [str(self.program()), "--auth-type", "openai", "--model", run.model_name, "--approval-mode", "yolo",
                "--max-session-turns", str(max(1, run.max_steps)),
                "--max-wall-time", f"{max(1, int(run.wall_seconds * 0.9))}s",
                # `--prompt=TEXT`, one argument: a positional prompt after `--` is ignored, one starting with "-"
                # would be read as an option
                "--output-format", "stream-json", f"--prompt={run.instruction}"]

    def environment(self, run: AgentRun) -> dict[str, str]:
        return {"OPENAI_BASE_URL": run.endpoint_url, "OPENAI_API_KEY": run.api_key, "OPENAI_MODEL": run.model_name,
                "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1", **NODE_ENV}

    def read_transcript(self, run: AgentRun, stdout: str, stderr: str) -> Transcript:
        return read_stream_json(stdout)

    @property
    def tools_description(self) -> str:
        return (
            "The agent is Qwen Code (headless, `qwen`), working in the task's workspace folder with its own tools: "
            "run_shell_command (shell commands in the workspace), read_file, write_file, edit, glob and "
            "grep_search (files), skill (loads an installed skill's SKILL.md by name) and agent (a sub-agent). "
            "Each installed skill's name and description are listed to it; it loads the full SKILL.md when it "
            "decides the skill applies. Every command and edit runs without confirmation inside an OS sandbox: "
            "no network, nothing outside the workspace is writable. Its turn limit is the task's step limit; its "
            "last message ends the task."
        )


__all__ = ["QwenCodeProgram"]
