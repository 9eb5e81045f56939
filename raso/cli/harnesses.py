"""`raso harnesses`: the registered harnesses, their split sizes, or why one does not load here."""

from __future__ import annotations

import argparse
import json

from raso.choices import Split, choices_of
from raso.harness import describe_harnesses


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "harnesses",
        help="list the registered harnesses with their split sizes",
        description="List the harnesses registered in the `raso.harnesses` entry-point group. Each one is loaded "
        "to count its train/val/test tasks; one whose optional dependencies or data are missing is listed with "
        "the reason.",
    )
    parser.add_argument("names", nargs="*", help="only these harnesses (names or 'module:Class')")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=run_harnesses)


def run_harnesses(args: argparse.Namespace) -> int:
    rows = describe_harnesses(args.names or None)
    if args.json:
        print(json.dumps([row.model_dump() for row in rows], indent=1))
        return 0
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Registered harnesses")
    table.add_column("name")
    table.add_column("status")
    for split in choices_of(Split):
        table.add_column(split, justify="right")
    table.add_column("max steps", justify="right")
    table.add_column("target / reason", overflow="fold")
    # a harness named on the command line is the one the user is fixing: its reason in full below the table, where
    # a narrow terminal does not fold it into a column
    below = [row for row in rows if not row.loaded and args.names]
    for row in rows:
        if row.loaded:
            sizes = [str(row.split_sizes.get(split, "-")) for split in choices_of(Split)]
            table.add_row(escape(row.name), "[green]ok[/green]", *sizes, str(row.max_steps or "-"), escape(row.target))
        else:
            reason = "(below)" if row in below else escape(row.error or "")
            table.add_row(escape(row.name), "[red]unavailable[/red]", *(["-"] * len(choices_of(Split))), "-", reason)
    Console().print(table)
    for row in below:
        print(f"{row.name}: {row.error}")
    if not rows:
        print("No harness is registered in the `raso.harnesses` entry-point group.")
    return 0
