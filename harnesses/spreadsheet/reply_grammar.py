"""The spreadsheet harness's reply grammar and action check (RUN / SUBMIT mode): a ```python block holding the
whole program, then `Action: RUN` or `Action: SUBMIT`; or `Action: SUBMIT` alone (submits the last program run).
Program lines may not contain a backtick, so the block cannot end early."""

from __future__ import annotations

from harnesses.spreadsheet.actions import parse_reply
from raso.harness.grammar import THOUGHT_MAX_CHARS

SPREADSHEET_REPLY_GRAMMAR = (
    'root ::= thought? (program "Action: " ("RUN" | "SUBMIT") | "Action: SUBMIT")\n'
    f'thought ::= "Thought: " [^\\n`]{{1,{THOUGHT_MAX_CHARS}}} "\\n"\n'
    'program ::= "```python\\n" line+ "```\\n"\n'
    'line ::= [^`\\n]* "\\n"\n'
)


def spreadsheet_action_is_valid(action: str) -> bool:
    """Whether the harness's parsed action (RUN / SUBMIT with code, see actions.py) is usable."""
    return parse_reply(action).command != "INVALID"
