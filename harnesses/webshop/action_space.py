"""WebShop's action space and action check: `search[<words>]` where searching works, else one of the page's
clickables exactly (the env's `available_actions`, the button in any letter case), so a model cannot copy the
`<keywords>` placeholder or invent a button."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harnesses.webshop.env import parse_shop_action
from raso.harness.actions import Action, ActionSpace, FreeText, Text

SEARCH_PLACEHOLDER = "search[<keywords>]"
SEARCH_WORDS_MAX_CHARS = 100
# Search words: no brackets (they would end the action), no newline, no <...> (the placeholder's marks).
SEARCH = Action.of("search[", FreeText(SEARCH_WORDS_MAX_CHARS, excludes="[]\n<>"), "]", name="search")


def _available(info: Mapping[str, Any]) -> list[str]:
    return [str(a) for a in info.get("available_actions") or []]


def webshop_action_space(info: Mapping[str, Any], *, thought: bool = True) -> ActionSpace | None:
    """The valid actions on the page `info` describes; None on a page without actions. The env reads clicks in
    any letter case and the page shows `[Buy Now]`, `[B0WS000029]`: a click is accepted as the page writes it."""
    available = _available(info)
    actions = [SEARCH] if SEARCH_PLACEHOLDER in available else []
    actions += [Action.of("click[", Text(a[len("click["):-1], caseless=True), "]")
                for a in available if a != SEARCH_PLACEHOLDER and a.startswith("click[")]
    if not actions:
        return None
    return ActionSpace(tuple(actions), thought=thought, key=str.lower)


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
