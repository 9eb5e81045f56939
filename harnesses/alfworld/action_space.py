"""ALFWorld's action space and action check: the action is one of the game's admissible commands, exactly
(ReAct mode also allows `think: ...`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harnesses.alfworld.env import normalize_command
from raso.harness.actions import THOUGHT_MAX_CHARS, Action, ActionSpace, FreeText

# A `think:` note is one line like a reply's thought; it does not change the game's state, so it is no way out
# of a state whose commands all looped.
THINK = Action.of("think: ", FreeText(THOUGHT_MAX_CHARS), leaves_state=False)


def alfworld_action_space(info: Mapping[str, Any], *, allow_think: bool = False) -> ActionSpace | None:
    """The valid actions in the state `info` describes; None when the game lists no commands."""
    commands = [str(c) for c in info.get("admissible_commands") or [] if str(c)]
    if not commands:
        return None
    actions = [Action.exact(c) for c in commands]
    if allow_think:
        actions.append(THINK)
    # ReAct's format has no separate thought line: thinking is the `think:` action itself.
    return ActionSpace(tuple(actions), thought=not allow_think, key=normalize_command)


def alfworld_action_is_valid(action: str, info: Mapping[str, Any], *, allow_think: bool = False) -> bool:
    command = normalize_command(action)
    if allow_think and command.startswith("think:"):
        return True
    return command in {normalize_command(str(c)) for c in info.get("admissible_commands") or []}
