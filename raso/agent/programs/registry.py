"""Agent programs by name (`program.name`). `builtin` is raso's own ExecutionAgent (not an AgentProgram: it needs no
program, endpoint or workspace); every other name is an AgentProgram class registered in the entry-point group
``raso.agent_programs`` of some installed package's metadata: raso's own in its pyproject.toml, a third party's in
theirs (``[project.entry-points."raso.agent_programs"] my-agent = "my_pkg.agent:MyAgentProgram"``). Nothing here
lists them: installing the package is what adds one.

Each program is built from its own options model (`AgentProgram.options_model`), the `program.<name>` section of the
run's config (raso.agent.programs.config).
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import Any

from .base import AgentProgram, ProgramOptions

ENTRY_POINT_GROUP = "raso.agent_programs"
BUILTIN = "builtin"


class ProgramLoadError(ValueError):
    """A registered program that cannot be imported here, or whose target is not an AgentProgram of that name."""


def registered_programs() -> dict[str, str]:
    """Each registered program's name and its 'module:Class' target."""
    return {ep.name: ep.value for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def program_names() -> list[str]:
    """Every `program.name` value: builtin first, then the registered programs."""
    return [BUILTIN, *sorted(registered_programs())]


def _load(name: str, target: str) -> type[AgentProgram]:
    module_name, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ProgramLoadError(f"agent program {name!r} ({target}) cannot be loaded: {type(exc).__name__}: {exc}") \
            from None
    if not (isinstance(obj, type) and issubclass(obj, AgentProgram)):
        raise ProgramLoadError(f"agent program {name!r}: {target} is not a raso.agent.programs.base.AgentProgram")
    if obj.name != name:
        raise ProgramLoadError(f"agent program {name!r}: {target} calls itself {obj.name!r}")
    return obj


def program_class(name: str) -> type[AgentProgram]:
    """The class registered as `name`; ValueError for an unknown name or one that cannot be loaded here."""
    registered = registered_programs()
    if name not in registered:
        raise ValueError(f"unknown agent program {name!r} (known: {', '.join(program_names())})")
    return _load(name, registered[name])


def loadable_programs() -> dict[str, type[AgentProgram]]:
    """Every registered program that loads here, by name (one that does not is left out: choosing it reports why)."""
    found = {}
    for name, target in sorted(registered_programs().items()):
        try:
            found[name] = _load(name, target)
        except ProgramLoadError:
            continue
    return found


def make_program(name: str, options: ProgramOptions | None = None) -> AgentProgram:
    """The program `name`, built with `options` (its options model; None = its defaults). ValueError for an unknown
    name or one that cannot be loaded."""
    return program_class(name)(options)


__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "ProgramLoadError", "loadable_programs", "make_program", "program_class",
           "program_names", "registered_programs"]
