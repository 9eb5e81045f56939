"""The spreadsheet harness's action space and action check (RUN / SUBMIT mode): a ```python block holding the
whole program, then `Action: RUN` or `Action: SUBMIT`; or `Action: SUBMIT` alone (submits the last program run)."""

from __future__ import annotations

from harnesses.spreadsheet.actions import parse_reply
from raso.harness.actions import ActionSpace, CodeBlock

# An action carries its program, so one taken before is no loop to rule out (key=None).
SPREADSHEET_ACTION_SPACE = ActionSpace.choices(["RUN", "SUBMIT"], key=None,
                                               code_block=CodeBlock("python", optional_for=("SUBMIT",)))


def spreadsheet_action_is_valid(action: str) -> bool:
    """Whether the harness's parsed action (RUN / SUBMIT with code, see actions.py) is usable."""
    return parse_reply(action).command != "INVALID"
