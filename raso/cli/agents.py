"""`raso agents`: the agent programs a skill can be run inside (`program.name`, flag --agent), and installing them."""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "agents", help="list the agent programs (--agent) and install them",
        description="Without a subcommand: each agent program, its pinned package and whether it is installed "
        "here (or why not). `raso agents install NAME` installs NAME's package into its own folder under the raso "
        "cache ($RASO_CACHE_DIR/agents/NAME): a PyPI package into a virtual environment there, an npm package into "
        "an npm prefix there, never into raso's own environment.")
    parser.set_defaults(func=list_agents)
    sub = parser.add_subparsers(dest="agents_command", metavar="ACTION")
    install = sub.add_parser("install", help="install an agent program's pinned package")
    install.add_argument("name", metavar="NAME", help="a program name from `raso agents`")
    install.set_defaults(func=install_agent)


def list_agents(args: argparse.Namespace) -> int:
    from raso.agent.programs.install import agents_dir
    from raso.agent.programs.registry import BUILTIN, make_program, program_names

    print(f"Agent programs (--agent NAME; they install under {agents_dir()}):")
    print(f"  {BUILTIN:<16} raso's own agent loop (no program to install)  ready")
    for name in program_names():
        if name == BUILTIN:
            continue
        try:
            program = make_program(name)
            package, reason = program.package, program.unavailable_reason()
        except Exception as exc:  # noqa: BLE001 - one broken program must not hide the others
            package, reason = "?", f"cannot be loaded: {exc}"
        print(f"  {name:<16} {package:<45} {'ready' if reason is None else reason}")
    return 0


def install_agent(args: argparse.Namespace) -> int:
    from raso.agent.programs.install import install, parse_package
    from raso.agent.programs.registry import BUILTIN, program_class, program_names

    if args.name == BUILTIN:
        print("raso agents: the builtin agent needs no install", file=sys.stderr)
        return 0
    try:
        cls = program_class(args.name)
        parse_package(cls.package)
    except ValueError as exc:
        known = ", ".join(n for n in program_names() if n not in (BUILTIN, "command"))
        print(f"raso agents: {exc}" + ("" if "unknown" in str(exc) else f" (installable: {known})"), file=sys.stderr)
        return 2
    print(f"installing {cls.package} for {args.name} ...", flush=True)
    try:
        where = install(args.name, cls.package)
    except (RuntimeError, OSError) as exc:
        print(f"raso agents: {exc}", file=sys.stderr)
        return 1
    print(f"installed {cls.package} in {where}")
    return 0
