"""WebShop's reply grammar and action check: `search[<words>]` where searching works, else one of the page's
clickables exactly (the env's `available_actions`), so a model cannot copy the `<keywords>` placeholder or
invent a button."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from harnesses.webshop.env import parse_shop_action
from raso.harness.grammar import action_reply_grammar, choices_without, gbnf_caseless

SEARCH_PLACEHOLDER = "search[<keywords>]"
SEARCH_WORDS_MAX_CHARS = 100
# Search words: no brackets (they would end the action), no newline, no <...> (the placeholder's marks).
_SEARCH_RULE = f'"search[" [^\\[\\]\\n<>]{{1,{SEARCH_WORDS_MAX_CHARS}}} "]"'


def _available(info: Mapping[str, Any]) -> list[str]:
    return [str(a) for a in info.get("available_actions") or []]


def webshop_reply_grammar(info: Mapping[str, Any], avoid: Collection[str] = (), *, thought: bool = True) -> str | None:
    """The GBNF of a valid reply on the page `info` describes (less the clicks in `avoid`, unless they are all
    there is); None on a page without actions."""
    available = _available(info)
    alternatives = []
    if SEARCH_PLACEHOLDER in available:
        alternatives.append("search")
    clicks = [a for a in available if a != SEARCH_PLACEHOLDER and a.startswith("click[")]
    if alternatives and clicks and all(c.lower() in {a.lower() for a in avoid} for c in clicks):
        clicks = []  # searching again is still a way out
    # a click in any letter case (the env reads them so): the page shows `[Buy Now]`, `[B0WS000029]`
    alternatives += [_click_rule(a) for a in choices_without(clicks, avoid, key=str.lower)]
    if not alternatives:
        return None
    rules = {"search": _SEARCH_RULE} if "search" in alternatives else None
    return action_reply_grammar(" | ".join(alternatives), extra_rules=rules, thought=thought)


def _click_rule(click: str) -> str:
    """`click[<button>]` with the button in any letter case."""
    return '"click[" ' + gbnf_caseless(click[len("click["):-1]) + ' "]"'


def webshop_action_is_valid(action: str, info: Mapping[str, Any]) -> bool:
    """Whether `action` does something on the page `info` describes (the env answers anything else with a note)."""
    parsed = parse_shop_action(action)
    if parsed is None:
        return False
    name, arg = parsed
    available = _available(info)
    if name == "search":
        return SEARCH_PLACEHOLDER in available and bool(arg) and "<" not in arg
    return name == "click" and f"click[{arg.lower()}]" in available
