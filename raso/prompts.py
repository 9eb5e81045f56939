"""Prompt templates of RASO's agents, kept as `.md` files beside this module.

A template marks a slot as ``{{name}}``. Values are inserted verbatim and never re-scanned, so text that
contains braces, dollars or ``{{...}}`` (skills, code, observations) cannot alter the template.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
PROMPT_DIRS = (_PACKAGE / "agent" / "prompts", _PACKAGE / "retrieval" / "prompts")
_SLOT = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


@cache
def load_template(name: str) -> str:
    """The text of template `name` (e.g. "agent_system.md")."""
    for folder in PROMPT_DIRS:
        path = folder / name
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise FileNotFoundError(f"no prompt template {name!r} in {', '.join(map(str, PROMPT_DIRS))}")


def render(name: str, **values: object) -> str:
    """Fill the ``{{slot}}`` markers of template `name`; a slot without a value is an error (KeyError)."""
    template = load_template(name)
    missing = sorted({m.group(1) for m in _SLOT.finditer(template)} - set(values))
    if missing:
        raise KeyError(f"prompt template {name!r} needs values for: {', '.join(missing)}")
    return _SLOT.sub(lambda m: str(values[m.group(1)]), template).strip() + "\n"
