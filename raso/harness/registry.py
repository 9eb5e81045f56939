"""Finding harnesses by name: the entry-point group ``raso.harnesses`` (a user registers their own in their
package's metadata) or an explicit ``"package.module:ClassName"``.

A registered name may carry one argument after a colon, ``"NAME:ARG"`` (``tasks:./my_tasks``): the harness class
names the constructor option that ARG fills in its ``name_argument`` class attribute (``path`` for ``tasks``).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from .base import Harness

ENTRY_POINT_GROUP = "raso.harnesses"


class HarnessNotFoundError(ValueError):
    """No harness of that name is registered and the name is not a 'module:Class' target."""


class HarnessLoadError(ImportError):
    """A harness is registered (or named as 'module:Class') but cannot be imported or constructed,
    typically because an optional dependency is missing; the message names the cause."""


class HarnessInfo(BaseModel):
    """One row of `describe_harnesses()`: a registered harness and whether it loads here."""

    name: str
    target: str
    loaded: bool
    split_sizes: dict[str, int] = Field(default_factory=dict)
    max_steps: int | None = None
    error: str | None = None


def available_harnesses() -> dict[str, str]:
    """Harness names registered in the entry-point group, mapped to their 'module:Class' target."""
    return {ep.name: ep.value for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def _load_target(target: str) -> type[Harness]:
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise HarnessNotFoundError(f"{target!r} is not a 'package.module:ClassName' target")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise HarnessLoadError(f"cannot import {module_name!r} for harness {target!r}: {exc}") from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise HarnessNotFoundError(f"{target!r}: module {module_name!r} has no attribute {attr!r}") from None
    if not (isinstance(obj, type) and issubclass(obj, Harness)):
        raise TypeError(f"{target} is not a raso.harness.Harness subclass")
    return obj


def split_name_argument(name: str) -> tuple[str, str | None]:
    """("NAME", "ARG") for a registered name with an argument ("tasks:./my_tasks"), else (name, None)."""
    head, sep, tail = name.partition(":")
    if sep and head in available_harnesses():
        return head, tail
    return name, None


def harness_class(name: str) -> type[Harness]:
    """The class of a registered harness name (with or without ':ARG') or an explicit 'package.module:ClassName',
    not instantiated. Raises like get_harness."""
    registered = available_harnesses()
    name = split_name_argument(name)[0]
    if name in registered:
        return _load_target(registered[name])
    if ":" in name:
        return _load_target(name)
    known = ", ".join(sorted(registered)) or "none"
    close = difflib.get_close_matches(name, list(registered), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise HarnessNotFoundError(f"unknown harness {name!r}; {hint}registered harnesses: {known} (or pass "
                               "'module:Class')")


def get_harness(name: str, **kwargs: Any) -> Harness:
    """Instantiate a harness by registered name, or by an explicit 'package.module:ClassName'.

    Raises HarnessNotFoundError (a ValueError) for an unknown name, HarnessLoadError when the harness's
    module cannot be imported (e.g. its optional dependencies are not installed). `NAME:ARG` passes ARG as the
    option the class's `name_argument` names (an explicit keyword of the same name is a conflict).
    """
    cls = harness_class(name)
    base, argument = split_name_argument(name)
    if argument is not None:
        option = getattr(cls, "name_argument", None)
        if option is None:
            raise HarnessNotFoundError(f"harness {base!r} takes no ':ARG' in its name (got {name!r})")
        if option in kwargs and str(kwargs[option]) != argument:
            raise ValueError(f"harness {name!r}: {option}={kwargs[option]!r} conflicts with {argument!r} in the name")
        kwargs = {**kwargs, option: argument}
    return cls(**kwargs)


def describe_harnesses(names: Sequence[str] | None = None) -> list[HarnessInfo]:
    """Try to load each registered harness (or `names`) and report its split sizes, or why it does not load.

    Never raises: a harness whose optional dependencies or data are missing is reported with the reason.
    """
    registered = available_harnesses()
    rows: list[HarnessInfo] = []
    for name in names if names is not None else sorted(registered):
        target = registered.get(name, name)
        try:
            harness = get_harness(name)
            sizes = {split: len(tasks) for split, tasks in harness.splits().items()}
            harness.check_runnable()  # "loads here" means its tasks can run here
            rows.append(HarnessInfo(name=name, target=target, loaded=True, split_sizes=sizes,
                                    max_steps=getattr(harness, "max_steps", None)))
        except Exception as exc:  # report, don't crash: this is a diagnostic listing
            cause = exc.__cause__ if isinstance(exc, HarnessLoadError) and exc.__cause__ else exc
            rows.append(HarnessInfo(name=name, target=target, loaded=False,
                                    error=f"{type(cause).__name__}: {cause}".strip()))
    return rows
