"""The `raso` command line: one subcommand module per feature under `raso.cli`.

Each module in COMMAND_MODULES exposes `register(subparsers)` which adds its subcommand(s)
and sets `func` on the parser; `func(args) -> int` is the exit status. Packages built on raso add commands
the same way through the `raso.commands` entry point group (the experiments package adds `raso experiment`),
so raso never imports them.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import re
import sys
from importlib.metadata import entry_points
from typing import NoReturn

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


class RasoArgumentParser(argparse.ArgumentParser):
    """argparse with "did you mean" for a mistyped command or choice (its sub-commands' parsers are of this class
    too: argparse makes them with the parent's class)."""

    def error(self, message: str) -> NoReturn:
        match = _INVALID_CHOICE.search(message)
        if match:
            choices = re.findall(r"'([^']*)'", match.group(2))
            close = difflib.get_close_matches(match.group(1), choices, n=1, cutoff=0.6)
            if close:
                message += f"; did you mean {close[0]!r}?"
        super().error(message)


_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


def chosen_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub-)command `args` ran: its options are what a mistyped flag was meant to be."""
    while True:
        action = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        name = getattr(args, action.dest, None) if action is not None else None
        if action is None or not isinstance(name, str) or name not in action.choices:
            return parser
        parser = action.choices[name]


def unknown_flags_message(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    options = [flag for action in parser._actions for flag in action.option_strings]
    hints = []
    for extra in extras:
        if extra.startswith("-"):
            close = difflib.get_close_matches(extra.split("=", 1)[0], options, n=1, cutoff=0.6)
            if close:
                hints.append(f"{extra.split('=', 1)[0]}: did you mean {close[0]}?")
    return f"unrecognized arguments: {' '.join(extras)}" + (f" ({'; '.join(hints)})" if hints else "")


def build_parser() -> argparse.ArgumentParser:
    parser = RasoArgumentParser(
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
    args, extras = parser.parse_known_args(argv)
    if extras:  # said by the command's own parser, with its usage and the flag it was likely meant to be
        command = chosen_parser(parser, args)
        command.error(unknown_flags_message(command, extras))
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
