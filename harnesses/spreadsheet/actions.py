"""Parse the agent's reply into a spreadsheet action: RUN or SUBMIT, with the program (see action_format.md).

Rules, in order:
* the program is the last fenced code block (```python ...```, or a bare ``` fence); a final block whose
  closing fence is missing (the reply was cut off) counts up to the end of the reply;
* the command is the word after the last `Action:` line outside code blocks (RUN or SUBMIT, any case), else
  the last standalone RUN / SUBMIT word outside code blocks;
* a code block without a command is RUN (running never ends the task; submitting must be deliberate);
* SUBMIT without a code block submits the last program that was run.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel

Command = Literal["RUN", "SUBMIT", "INVALID"]

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
_ACTION_LINE = re.compile(r"^\s*\**\s*Action\s*\**\s*:\s*\**\s*`?\s*([A-Za-z_]+)", re.IGNORECASE | re.MULTILINE)
_BARE_COMMAND = re.compile(r"\b(RUN|SUBMIT)\b")


class ParsedAction(BaseModel):
    command: Command
    code: str | None = None
    problem: str | None = None  # why the reply is INVALID

    def to_action(self) -> str:
        """The canonical action string (what `parse_action` returns and `env.step` accepts)."""
        if self.command == "INVALID":
            return f"INVALID: {self.problem}"
        if self.code is None:
            return self.command
        return f"{self.command}\n```python\n{self.code.rstrip()}\n```"


def _outside_code(text: str) -> str:
    return _FENCE.sub("\n", text)


def parse_reply(text: str) -> ParsedAction:
    text = text.replace("\r\n", "\n")
    if text.startswith("INVALID:"):  # the canonical form of an unusable reply (see ParsedAction.to_action)
        return ParsedAction(command="INVALID", problem=text.partition(":")[2].strip())
    blocks = [m.group(2) for m in _FENCE.finditer(text)]
    code = blocks[-1].strip("\n") if blocks else None
    if code is not None and not code.strip():
        code = None
    prose = _outside_code(text)
    actions = _ACTION_LINE.findall(prose)
    command: str | None = None
    if actions:
        word = actions[-1].upper()
        if word in ("RUN", "SUBMIT"):
            command = word
    if command is None:
        bare = _BARE_COMMAND.findall(prose)
        command = bare[-1] if bare else None
    if command is None:
        if code is not None:
            return ParsedAction(command="RUN", code=code)
        return ParsedAction(command="INVALID", problem="no ```python code block and no RUN or SUBMIT command found")
    return ParsedAction(command=command, code=code)
