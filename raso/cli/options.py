"""Command-line options generated from OptimizeConfig's fields: name, type, choices, default and help come from
the field, so an option and its default are written once (raso/engine/config.py and each section's model).

Every command that takes options takes `--set KEY=VALUE` for any of them by dotted name (`--set
agent.max_steps=8`, `--set limits.section_chars=800`), plus flags for the common ones. Which fields have a flag
is field metadata (`raso.engine.config.cli`): a field's own `cli("--flag")`, or its section's
`cli(flags={...})` / `cli(flag_all=True)`. Every flag defaults to None, meaning "not given": the config file
and the config's own defaults then apply (see `build_config`).
"""

from __future__ import annotations

import argparse
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from raso.engine.config import OptimizeConfig, base_type, parse_assignments, section_model


def _cli_meta(info: FieldInfo) -> dict[str, Any]:
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    meta = extra.get("cli", {})
    return meta if isinstance(meta, dict) else {}


@dataclass(frozen=True)
class Flag:
    """One generated flag: the dotted option it sets (and any others it also sets), its spellings, its field."""

    key: str
    flags: tuple[str, ...]
    info: FieldInfo
    also: tuple[str, ...] = ()


def _section_flags(section: str, info: FieldInfo, model: type[BaseModel]) -> list[Flag]:
    meta = _cli_meta(info)
    named: dict[str, list[str]] = meta["flags"] if isinstance(meta.get("flags"), dict) else {}
    also: dict[str, list[str]] = meta.get("also", {})
    out: list[Flag] = []
    for name, leaf in model.model_fields.items():
        own = _cli_meta(leaf)
        if own.get("hidden"):
            continue
        sub = section_model(leaf.annotation)
        if sub is not None:  # a section inside a section (program.command): only its leaves' own flags
            out.extend(_section_flags(f"{section}.{name}", leaf, sub))
            continue
        spellings = own.get("flags") or named.get(name) or ([f"--{name.replace('_', '-')}"] if meta.get("flag_all")
                                                           else [])
        if spellings:
            out.append(Flag(f"{section}.{name}", tuple(spellings), leaf, tuple(also.get(name, ()))))
    return out


def all_flags() -> list[Flag]:
    """Every generated flag, in field order."""
    out: list[Flag] = []
    for name, info in OptimizeConfig.model_fields.items():
        meta = _cli_meta(info)
        model = section_model(info.annotation)
        if model is not None:
            out.extend(_section_flags(name, info, model))
        elif not meta.get("hidden"):
            out.append(Flag(name, tuple(meta.get("flags") or [f"--{name.replace('_', '-')}"]), info))
    return out


def _default_text(info: FieldInfo) -> str:
    if info.default_factory is not None or info.default is None:
        return ""
    return f" (default: {info.default})"


def _is_mapping(kind: Any) -> bool:
    return typing.get_origin(kind) is dict or kind is dict


def _add_flag(parser: argparse.ArgumentParser, flag: Flag) -> bool:
    info, meta = flag.info, _cli_meta(flag.info)
    help_text = (info.description or flag.key) + _default_text(info) + f" [{', '.join((flag.key, *flag.also))}]"
    kind = base_type(info.annotation)
    metavar = meta.get("metavar") or flag.key.rsplit(".", 1)[-1].upper()
    common: dict[str, Any] = {"dest": flag.key, "default": None, "help": help_text}
    if kind is bool:
        parser.add_argument(flag.flags[0], action=argparse.BooleanOptionalAction, **common)
    elif typing.get_origin(kind) is typing.Literal:
        parser.add_argument(*flag.flags, choices=typing.get_args(kind), **common)
    elif _is_mapping(kind):
        parser.add_argument(*flag.flags, action="append", metavar=meta.get("metavar", "KEY=VALUE"),
                            **{**common, "help": help_text + " (repeatable; VALUE parsed as JSON/YAML)"})
    elif kind in (int, float, str, Path):
        parser.add_argument(*flag.flags, type=kind, metavar=metavar, **common)
    else:  # a field type this generator does not know: reachable through --set
        return False
    return True


def _selected(flag: Flag, names: Iterable[str] | None) -> bool:
    if names is None:
        return True
    return any(flag.key == name or flag.key.startswith(name + ".") for name in names)


def add_config_options(parser: argparse.ArgumentParser, names: Iterable[str] | None = None) -> list[Flag]:
    """Add `--set KEY=VALUE` and a flag for each flagged option in `names` (dotted keys or section names;
    default: every one); returns the flags added (for `config_overrides`)."""
    selected = list(names) if names is not None else None
    parser.add_argument("--set", action="append", default=[], dest="config_set", metavar="KEY=VALUE",
                        help="any option by its dotted name, e.g. --set agent.max_steps=8 --set schedule.epochs=1 "
                        "(repeatable; VALUE parsed as JSON/YAML); `raso options [SECTION]` lists every option with its type, "
                        "default and choices")
    return [flag for flag in all_flags() if _selected(flag, selected) and _add_flag(parser, flag)]


def config_overrides(args: argparse.Namespace, flags: Iterable[Flag]) -> dict[str, Any]:
    """The options given on the command line (flags left at None are omitted, then every `--set`) as dotted
    overrides for `raso.api.resolve_config`. ConfigError for a malformed or unknown `--set`."""
    out: dict[str, Any] = {}
    for flag in flags:
        value = getattr(args, flag.key, None)
        if value is None:
            continue
        if _is_mapping(base_type(flag.info.annotation)):
            value = parse_assignments(value, flag.flags[0], check=False)
        for key in (flag.key, *flag.also):
            out[key] = value
    out.update(parse_assignments(getattr(args, "config_set", None) or []))
    return out


#: The options that choose the harness and the models: shared by every command that runs a model.
MODEL_FIELDS: tuple[str, ...] = ("harness", "harness_options", "models")

__all__ = ["Flag", "MODEL_FIELDS", "add_config_options", "all_flags", "config_overrides"]
