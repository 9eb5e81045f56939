"""Test utilities for RASO users and RASO itself: a scripted model and a toy harness, no real model needed.

    from raso.testing import CountingHarness, ScriptedModel, count_script, scripted_gateway

`ScriptedModel` is a real litellm provider (`scripted/<name>`): pass its `.model` wherever a model string goes
(`raso.optimize(..., model=m.model)`, `raso eval --model ...`) and assert on `m.calls`, the prompts it got.
`CountingHarness` (registered as harness `toy`) is a counting game; `count_script` plays it correctly.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .toy import CountingEnv, CountingHarness, count_script, scripted_gateway

if TYPE_CHECKING:
    from raso.llm.scripted import Reply, Script, ScriptedModel, ScriptExhaustedError

_FROM_SCRIPTED = ("ScriptedModel", "ScriptExhaustedError", "Script", "Reply")


def __getattr__(name: str) -> Any:
    """The scripted model's names, imported on first use: it imports litellm (seconds), and loading the `toy`
    harness by name must stay fast."""
    if name not in _FROM_SCRIPTED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module("raso.llm.scripted"), name)


__all__ = [
    "CountingEnv", "CountingHarness", "Reply", "Script", "ScriptExhaustedError", "ScriptedModel", "count_script",
    "scripted_gateway",
]
