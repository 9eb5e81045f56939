"""The `raso` command line: one subcommand module per feature under `raso.cli`.

Each module in COMMAND_MODULES exposes `register(subparsers)` which adds its subcommand(s)
and sets `func` on the parser; `func(args) -> int` is the exit status. Packages built on raso add commands
the same way through the `raso.commands` entry point group (the experiments package adds `raso experiment`),
so raso never imports them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from importlib.metadata import entry_points

COMMAND_MODULES: tuple[str, ...] = (
    "raso.cli.init",
    "raso.cli.runs",
    "raso.cli.eval",
    "raso.cli.harnesses",
    "raso.cli.harness",
    "raso.cli.corpus",
    "raso.cli.retrieval",
    "raso.cli.models",
    "raso.cli.agents",
    "raso.cli.list_options",
    "raso.cli.migrate",
)
#: Entry point group of commands registered by other packages: `name = "package.module:register"`.
COMMAND_GROUP = "raso.commands"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="raso",
        description="Retrieval-augmented skill optimization: write and improve agent skills (SKILL.md).",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    for entry in sorted(entry_points(group=COMMAND_GROUP), key=lambda e: e.name):
        try:
            register = entry.load()
        except ImportError as exc:  # a missing optional dependency of that package: its command is absent
            print(f"raso: note: the {entry.name!r} command is unavailable ({exc})", file=sys.stderr)
            continue
        register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
