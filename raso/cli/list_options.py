"""`raso options [SECTION]`: every dotted option of the run configuration with its type, default, choices, flags
and description, generated from the config models (raso/engine/config.py and each section's model), so the list
cannot drift from what `--set KEY=VALUE` and a config file accept."""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
import typing
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined


@dataclass(frozen=True)
class OptionDoc:
    """One option as `raso options` shows it."""

    key: str
    type: str
    default: str
    choices: tuple[str, ...]
    flags: tuple[str, ...]
    description: str


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "options", help="list every option (dotted name, type, default, choices, flag) that --set and config "
        "files take",
        description="List the run configuration's options, generated from its models: each dotted name (for "
        "`--set KEY=VALUE` and config files), its type, default, choices, command-line flag and description. "
        "SECTION (e.g. agent, gate, retrieval.dreamer) or a dotted prefix limits the list.")
    parser.add_argument("section", nargs="?", default=None, metavar="SECTION",
                        help="a section or dotted prefix (default: every option)")
    parser.add_argument("--json", action="store_true", help="print the options as a JSON list")
    parser.set_defaults(func=list_options)


def _type_text(annotation: Any) -> str:
    """A short, readable type: `int | None`, `dict[str, Any]`, `Path`."""
    text = str(annotation) if not isinstance(annotation, type) else annotation.__name__
    text = re.sub(r"typing\.|pathlib\.|<class '([^']+)'>", lambda m: m.group(1) or "", text)
    text = re.sub(r"\b(?:[a-z_]+\.)+([A-Za-z_]+)", r"\1", text)  # raso.llm.config.ModelPrice -> ModelPrice
    text = re.sub(r"Literal\[[^\]]*\]", "choice", text)
    text = re.sub(r"^Optional\[(.*)\]$", r"\1 | None", text)
    return text.replace("NoneType", "None")


def _choices(annotation: Any) -> tuple[str, ...]:
    from raso.engine.config import base_type

    kind = base_type(annotation)
    if typing.get_origin(kind) is typing.Literal:
        return tuple(str(v) for v in typing.get_args(kind))
    if isinstance(kind, type) and issubclass(kind, Enum):
        return tuple(str(m.value) for m in kind)
    return ()


def _default_text(info: FieldInfo) -> str:
    if info.default_factory is not None:
        try:
            value = info.default_factory()  # type: ignore[call-arg]
        except TypeError:
            return "(computed)"
    elif info.default is PydanticUndefined:
        return "(required)"
    else:
        value = info.default
    if isinstance(value, BaseModel):
        return "(section)"
    if isinstance(value, Path):
        return str(value)
    return json.dumps(value, default=str) if value is not None else "none"


def option_docs() -> list[OptionDoc]:
    """Every leaf option of OptimizeConfig in field order (hidden bookkeeping fields left out)."""
    from raso.cli.options import all_flags
    from raso.engine.config import OptimizeConfig, section_model

    flags = {flag.key: flag.flags for flag in all_flags()}
    out: list[OptionDoc] = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, info in model.model_fields.items():
            extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
            meta = extra.get("cli", {})
            if isinstance(meta, dict) and meta.get("hidden"):
                continue
            key = f"{prefix}{name}"
            sub = section_model(info.annotation)
            if sub is not None:
                walk(sub, key + ".")
                continue
            out.append(OptionDoc(key=key, type=_type_text(info.annotation), default=_default_text(info),
                                 choices=_choices(info.annotation), flags=tuple(flags.get(key, ())),
                                 description=" ".join((info.description or "").split())))

    walk(OptimizeConfig, "")
    return out


def _selected(docs: list[OptionDoc], section: str | None) -> list[OptionDoc]:
    if not section:
        return docs
    prefix = section.strip().rstrip(".")
    return [d for d in docs if d.key == prefix or d.key.startswith(prefix + ".")]


def format_options(docs: list[OptionDoc]) -> str:
    lines: list[str] = []
    section = None
    for doc in docs:
        head = doc.key.split(".", 1)[0] if "." in doc.key else ""
        if head != section:
            section = head
            lines += ["", f"[{head}]" if head else "[top level]"]
        flag = f"  flag {', '.join(doc.flags)}" if doc.flags else ""
        lines.append(f"{doc.key}  ({doc.type}; default {doc.default}){flag}")
        if doc.choices:
            lines.append(f"    choices: {', '.join(doc.choices)}")
        if doc.description:
            lines += textwrap.wrap(doc.description, width=100, initial_indent="    ", subsequent_indent="    ")
    return "\n".join(lines).strip() + "\n"


def list_options(args: argparse.Namespace) -> int:
    docs = option_docs()
    chosen = _selected(docs, args.section)
    if not chosen:
        sections = sorted({d.key.split(".", 1)[0] for d in docs if "." in d.key})
        print(f"raso options: no option or section {args.section!r} (sections: {', '.join(sections)})",
              file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([doc.__dict__ for doc in chosen], indent=1))
        return 0
    print("Options for `--set KEY=VALUE` (repeatable) and config files (TOML/YAML/JSON, nested by section); "
          "a flag, where shown, sets the same option.\n")
    print(format_options(chosen), end="")
    return 0


__all__ = ["OptionDoc", "format_options", "list_options", "option_docs", "register"]
