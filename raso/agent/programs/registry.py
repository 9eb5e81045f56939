"""Agent backends by name (`agent.backend`). `builtin` is raso's own ExecutionAgent (not an AgentProgram: it needs
no program, endpoint or workspace); every other name is an AgentProgram class registered here.

A backend module in this package decorates its class with `register` and is named in `_MODULES` (imported when
present). A class with a `from_config(config: AgentConfig)` classmethod is built with it (e.g. the command backend
reads its template); any other is built with no arguments.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .base import AgentProgram

if TYPE_CHECKING:
    from raso.agent.agent import AgentConfig

BUILTIN = "builtin"
BACKENDS: dict[str, type[AgentProgram]] = {}
_MODULES = ("command", "mini_swe_agent", "claude_code", "codex", "qwen_code")
_loaded = False


def register(cls: type[AgentProgram]) -> type[AgentProgram]:
    """Add a backend class under its `name` (a class decorator)."""
    BACKENDS[cls.name] = cls
    return cls


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in _MODULES:
        try:
            importlib.import_module(f"{__package__}.{module}")
        except ModuleNotFoundError as exc:  # a backend not written (yet); any other import error is a bug
            if exc.name != f"{__package__}.{module}":
                raise


def program_names() -> list[str]:
    """Every `agent.backend` value: builtin first, then the registered backends."""
    _load()
    return [BUILTIN, *sorted(BACKENDS)]


def program_class(name: str) -> type[AgentProgram]:
    _load()
    if name not in BACKENDS:
        raise ValueError(f"unknown agent backend {name!r} (known: {', '.join(program_names())})")
    return BACKENDS[name]


def make_program(name: str, config: AgentConfig | None = None) -> AgentProgram:
    """The backend `name`, built from the agent section `config`. ValueError for an unknown name or bad options."""
    from raso.agent.agent import AgentConfig

    cls = program_class(name)
    from_config = getattr(cls, "from_config", None)
    if callable(from_config):
        return from_config(config or AgentConfig())
    return cls()


__all__ = ["BACKENDS", "BUILTIN", "program_class", "program_names", "make_program", "register"]
