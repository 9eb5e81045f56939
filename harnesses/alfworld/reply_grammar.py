"""ALFWorld's reply grammar and action check: the action is one of the game's admissible commands, exactly
(ReAct mode also allows `think: ...`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from harnesses.alfworld.env import normalize_command
from raso.harness.grammar import THOUGHT_MAX_CHARS, action_reply_grammar, choice_rule, choices_without

_THINK_RULE = f'"think: " [^\\n]{{1,{THOUGHT_MAX_CHARS}}}'


def alfworld_reply_grammar(info: Mapping[str, Any], *, allow_think: bool = False,
                           avoid: Collection[str] = ()) -> str | None:
    """The GBNF of a valid reply in the state `info` describes (less the commands in `avoid`, unless they are all
    there is); None when the game lists no commands."""
    commands = choices_without((str(c) for c in info.get("admissible_commands") or []), avoid, key=normalize_command)
    if not commands:
        return None
    rule = choice_rule(commands)
    if allow_think:
        rule = f"{rule} | {_THINK_RULE}"
    # ReAct's format has no separate thought line: thinking is the `think:` action itself.
    return action_reply_grammar(rule, thought=not allow_think)


def alfworld_action_is_valid(action: str, info: Mapping[str, Any], *, allow_think: bool = False) -> bool:
    command = normalize_command(action)
    if allow_think and command.startswith("think:"):
        return True
    return command in {normalize_command(str(c)) for c in info.get("admissible_commands") or []}
