"""What the npm-installed agent programs (Claude Code, Codex CLI, Qwen Code) share: a pinned package in its own npm
prefix under the raso cache (raso.agent.programs.install), Node where the program is a Node script, and the
stream-json transcript that Claude Code and Qwen Code both print (one JSON object a line: the assistant's messages
with text and tool_use blocks, the tool results as user messages, then a result line with usage)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, ClassVar

from raso.harness.base import Step

from .base import AgentProgram, AgentRun, Transcript
from .install import install_dir

#: Node's WebAssembly bounds checks by trap handler reserve a 10 GB address range per memory; under the sandbox's
#: address-space limit that reservation fails and so does every HTTP request (undici's parser is WebAssembly).
#: Inline bounds checks need no reservation.
NODE_ENV = {"NODE_OPTIONS": "--disable-wasm-trap-handler"}

#: what one tool call's input is cut to in a step's action (the output is cut by the runner)
ACTION_CHARS = 4000


def node_paths() -> list[Path]:
    """The Node interpreter (resolved) and its module folder, for the sandbox to show read-only."""
    node = shutil.which("node")
    if node is None:
        return []
    real = Path(node).resolve()
    paths = [real]
    shared = Path("/usr/share/nodejs")  # Debian's node keeps its bundled modules here
    if shared.is_dir():
        paths.append(shared)
    return paths


def _clip(text: str, limit: int = ACTION_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 20] + f"... [{len(text) - limit + 20} chars cut]"


def tool_action(name: str, arguments: Any) -> str:
    """A tool call as one line of text: the tool's name and its input (a shell command as is)."""
    if isinstance(arguments, dict) and len(arguments) >= 1:
        for key in ("command", "cmd"):
            if isinstance(arguments.get(key), str):
                return _clip(f"{name}: {arguments[key]}")
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return _clip(f"{name} {text}")


def content_text(content: Any) -> str:
    """A tool result's or message's content as text (a string, or text blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) if isinstance(b, dict) else str(b) for b in content)
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def mapping(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object, else an empty one (transcripts are the program's output: trust no shape)."""
    return value if isinstance(value, dict) else {}


def json_lines(stdout: str, notes: list[str]) -> list[dict[str, Any]]:
    """The JSON objects among `stdout`'s lines; other lines are counted in `notes`."""
    events, junk = [], 0
    for line in stdout.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            junk += 1
            continue
        if isinstance(event, dict):
            events.append(event)
        else:
            junk += 1
    if junk:
        notes.append(f"{junk} output line(s) were not JSON events")
    return events


def read_stream_json(stdout: str) -> Transcript:
    """A Claude Code / Qwen Code `--output-format stream-json` transcript as steps: one step per tool call (its
    input as the action, its result as the result, the assistant's text before it as the reply), then the final
    message. Never raises."""
    notes: list[str] = []
    events = json_lines(stdout, notes)
    steps: list[Step] = []
    open_calls: dict[str, Step] = {}
    done: Step | None
    last_text = ""
    final: str | None = None
    prompt_tokens = completion_tokens = None
    for event in events:
        kind = event.get("type")
        message = mapping(event.get("message"))
        if event.get("parent_tool_use_id"):  # a sub-agent's own turns: its result comes back as the parent's tool result
            continue
        if kind == "assistant":
            texts = []
            for block in message.get("content") or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and block.get("text"):
                    texts.append(str(block["text"]))
                elif block.get("type") == "tool_use":
                    step = Step(observation="", action=tool_action(str(block.get("name", "")), block.get("input")),
                                reply="\n".join(texts), kind="tool",
                                info={"tool": block.get("name"), "tool_use_id": block.get("id")})
                    texts = []
                    steps.append(step)
                    open_calls[str(block.get("id"))] = step
            if texts:
                last_text = "\n".join(texts)
        elif kind == "user":
            for block in message.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    done = open_calls.pop(str(block.get("tool_use_id")), None)
                    if done is not None:
                        done.result = content_text(block.get("content"))
                        done.info["is_error"] = bool(block.get("is_error"))
        elif kind == "result":
            if isinstance(event.get("result"), str):
                final = event["result"]
            elif isinstance(event.get("error"), dict):
                notes.append(f"the agent ended with an error: {mapping(event['error']).get('message', '')}")
            usage = mapping(event.get("usage"))
            if isinstance(usage.get("input_tokens"), int):
                prompt_tokens = usage["input_tokens"] + int(usage.get("cache_read_input_tokens") or 0) \
                    + int(usage.get("cache_creation_input_tokens") or 0)
            if isinstance(usage.get("output_tokens"), int):
                completion_tokens = usage["output_tokens"]
            if event.get("subtype") not in (None, "success"):
                notes.append(f"the agent's run ended with {event.get('subtype')}")
    if final is None and last_text:
        final = last_text
        notes.append("no result line: the final message is the assistant's last text")
    return finished_transcript(steps, final, events=len(events), prompt_tokens=prompt_tokens,
                               completion_tokens=completion_tokens, notes=notes)


def finished_transcript(steps: list[Step], final: str | None, *, events: int, prompt_tokens: int | None,
                        completion_tokens: int | None, notes: list[str]) -> Transcript:
    """A transcript read from `events` JSON events: the tool steps, then the final message as the last step."""
    if not events:
        notes.append("the program printed no JSON events")
    tool_calls = len(steps)
    if final is not None:
        steps.append(Step(observation="", action="final message", reply=final, kind="message"))
    return Transcript(steps=steps, final_message=final, tool_calls=tool_calls, prompt_tokens=prompt_tokens,
                      completion_tokens=completion_tokens, notes=notes)


def conform_skill_names(skills_dir: Path) -> list[str]:
    """Make each installed skill's front-matter `name` its folder's name, as the Agent Skills standard requires
    (lowercase, hyphens). Qwen Code ignores a skill whose name breaks that rule ("Answer Files" in answer-files/);
    the skill's title stays in its body. Returns the folders changed."""
    changed = []
    for skill_md in sorted(skills_dir.glob("*/SKILL.md")):
        text = skill_md.read_text(encoding="utf-8")
        if not text.startswith("---\n"):
            continue
        end = text.find("\n---", 4)
        if end < 0:
            continue
        lines = text[4:end].split("\n")
        wanted = f"name: {skill_md.parent.name}"
        for index, line in enumerate(lines):
            if line.startswith("name:") and line.strip() != wanted:
                lines[index] = wanted
                skill_md.write_text("---\n" + "\n".join(lines) + text[end:], encoding="utf-8")
                changed.append(skill_md.parent.name)
                break
    return changed


class NpmAgentProgram(AgentProgram):
    """An agent program installed from npm into its own prefix (`raso agents install NAME`)."""

    npm_package: ClassVar[str]  # "@anthropic-ai/claude-code"
    version: ClassVar[str]  # pinned: the version the tests ran
    binary: ClassVar[str]  # the program's name in node_modules/.bin
    needs_node: ClassVar[bool] = True  # False for a native executable
    # min_memory_mb (AgentProgram): V8 and Bun reserve large virtual ranges (WebAssembly memories among them) and
    # abort or fail every request below it

    def prefix(self) -> Path:
        return install_dir(self.name)

    def program(self) -> Path:
        """The program's own file (node_modules/.bin holds a link to it; the sandbox shows the resolved prefix)."""
        return (self.prefix() / "node_modules" / ".bin" / self.binary).resolve()

    def installed_version(self) -> str | None:
        manifest = self.prefix() / "node_modules" / self.npm_package / "package.json"
        try:
            return str(json.loads(manifest.read_text(encoding="utf-8")).get("version"))
        except (OSError, ValueError):
            return None

    def unavailable_reason(self) -> str | None:
        install = f"run `raso agents install {self.name}` (npm install {self.npm_package}@{self.version})"
        if self.needs_node and shutil.which("node") is None:
            return f"Node.js is not installed (the program is a Node script); install node, then {install}"
        if not self.program().exists():
            return f"{self.npm_package} is not installed in {self.prefix()}; {install}"
        found = self.installed_version()
        if found != self.version:
            return f"{self.npm_package} {found or '(unknown version)'} is installed, raso pins {self.version}; {install}"
        return None

    def read_only_paths(self) -> list[Path]:
        return [self.prefix().resolve(), *(node_paths() if self.needs_node else [])]

    def prepare_home(self, run: AgentRun) -> None:
        conform_skill_names(self.skills_dir(run))


__all__ = ["NODE_ENV", "NpmAgentProgram", "conform_skill_names", "content_text", "json_lines", "mapping", "node_paths",
           "read_stream_json", "tool_action"]
