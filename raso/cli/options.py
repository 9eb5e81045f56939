"""Command-line flags generated from OptimizeConfig's fields: name, type, choices, default and help come from
the field, so an option and its default are written once (raso/engine/config.py).

A field's `json_schema_extra={"cli": {...}}` (see `raso.engine.config.cli`) may give other flag spellings,
a metavar, or `hidden=True`. Every flag defaults to None, meaning "not given": the config file and the
config's own defaults then apply (see `build_config`).
"""

from __future__ import annotations

import argparse
import json
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

from raso.engine.config import ConfigError, OptimizeConfig

_FIELDS: dict[str, FieldInfo] = OptimizeConfig.model_fields


def _cli_meta(info: FieldInfo) -> dict[str, Any]:
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    meta = extra.get("cli", {})
    return meta if isinstance(meta, dict) else {}


def _base_type(annotation: Any) -> Any:
    """`int | None` -> int; other annotations unchanged."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _default_text(info: FieldInfo) -> str:
    if info.default_factory is not None:
        return ""
    if info.default is None:
        return ""
    return f" (default: {info.default})"


def parse_key_values(pairs: Iterable[str], flag: str = "--harness-arg") -> dict[str, Any] | None:
    """KEY=VALUE pairs as a dict (VALUE parsed as JSON when it can be); None when no pair was given."""
    pairs = list(pairs or [])
    if not pairs:
        return None
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{flag} {pair!r}: expected KEY=VALUE")
        try:
            out[key.strip()] = json.loads(value)
        except ValueError:
            out[key.strip()] = value
    return out


def add_config_options(parser: argparse.ArgumentParser, names: Iterable[str] | None = None) -> list[str]:
    """Add a flag for each OptimizeConfig field in `names` (default: every visible field); returns the names."""
    added: list[str] = []
    for name in (names if names is not None else _FIELDS):
        info = _FIELDS[name]
        meta = _cli_meta(info)
        if meta.get("hidden"):
            continue
        flags = meta.get("flags") or [f"--{name.replace('_', '-')}"]
        help_text = (info.description or name) + _default_text(info)
        kind = _base_type(info.annotation)
        common: dict[str, Any] = {"dest": name, "default": None, "help": help_text}
        if meta.get("choices"):  # a structured field whose command-line form is one of a few words
            parser.add_argument(*flags, choices=meta["choices"], **common)
        elif kind is bool:
            parser.add_argument(flags[0], action=argparse.BooleanOptionalAction, **common)
        elif typing.get_origin(kind) is typing.Literal:
            parser.add_argument(*flags, choices=typing.get_args(kind), **common)
        elif typing.get_origin(kind) is dict or kind is dict:
            parser.add_argument(*flags, action="append", metavar=meta.get("metavar", "KEY=VALUE"),
                                **{**common, "help": help_text + " (repeatable; VALUE parsed as JSON if it can be)"})
        elif kind in (int, float, str, Path):
            parser.add_argument(*flags, type=kind, metavar=meta.get("metavar"), **common)
        else:  # a field type this generator does not know: a config-file-only option
            continue
        added.append(name)
    return added


def config_overrides(args: argparse.Namespace, names: Iterable[str]) -> dict[str, Any]:
    """The options given on the command line (flags left at None are omitted) as config overrides."""
    out: dict[str, Any] = {}
    for name in names:
        value = getattr(args, name, None)
        if value is None:
            continue
        kind = _base_type(_FIELDS[name].annotation)
        if typing.get_origin(kind) is dict or kind is dict:
            value = parse_key_values(value)
            if value is None:
                continue
        out[name] = value
    return out


#: The fields that choose the harness and the models: shared by every command that runs a model.
MODEL_FIELDS: tuple[str, ...] = ("harness", "harness_options", "model", "optimizer_model", "api_base",
                                 "optimizer_api_base")

__all__ = ["MODEL_FIELDS", "add_config_options", "config_overrides", "parse_key_values"]
