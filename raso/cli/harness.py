"""`raso harness new NAME`: a harness package from the template; `raso harness describe NAME`: drafts of its
task and harness descriptions (T, H) written by the optimizer model from the harness's own code."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "harness",
        help="make a new harness from the template, or draft a harness's descriptions from its code",
        description="Tools for writing a harness (see docs/adding-a-harness.md). `raso harnesses` lists them.",
    )
    sub = parser.add_subparsers(dest="harness_command", metavar="ACTION")
    parser.set_defaults(func=lambda args: _usage(parser))

    new = sub.add_parser(
        "new", help="scaffold a harness package from the template",
        description="Copy RASO's harness template into DIR/NAME with its classes and name renamed, write the "
        "entry point that registers it, and print the next steps. An existing folder is never overwritten.",
    )
    new.add_argument("name", metavar="NAME", help="harness and package name: lowercase letters, digits, underscores")
    new.add_argument("--dir", type=Path, default=Path("."), help="folder to create the package in (default: .)")
    new.set_defaults(func=run_new)

    describe = sub.add_parser(
        "describe", help="draft the harness's task and harness descriptions from its code",
        description="The optimizer model reads the harness's .py and .md files (bounded in size) and drafts its "
        "task description T and harness description H. They are written as task_description.draft.md and "
        "harness_description.draft.md for you to review and copy over the real files; RASO never uses a draft.",
    )
    describe.add_argument("name", metavar="NAME", help="registered harness name or 'package.module:Class'")
    describe.add_argument("--out", type=Path, default=None,
                          help="folder for the drafts (default: the harness's resource folder, beside the real files)")
    describe.add_argument("--optimizer-model", default=os.environ.get("RASO_OPTIMIZER_MODEL")
                          or os.environ.get("RASO_MODEL"),
                          help="model that writes the drafts (default: $RASO_OPTIMIZER_MODEL, $RASO_MODEL, or the "
                          "embedded model)")
    describe.add_argument("--api-base", default=None, help="OpenAI-compatible server URL for --optimizer-model")
    describe.add_argument("--replace-drafts", action="store_true",
                          help="replace drafts left by an earlier run (the real description files are never touched)")
    describe.set_defaults(func=run_describe)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def run_new(args: argparse.Namespace) -> int:
    from raso.harness.scaffold import HarnessScaffoldError, scaffold_harness

    try:
        result = scaffold_harness(args.name, args.dir)
    except HarnessScaffoldError as exc:
        return _fail(str(exc))
    package = result.package_dir
    # a console script does not look in the current folder: say how to import the package until it is installed
    top = importlib.util.find_spec(result.module.split(".")[0])
    on_path = top is not None and top.origin is not None and Path(top.origin).resolve().is_relative_to(
        result.import_root.resolve())
    env = "" if on_path else f"PYTHONPATH={result.import_root} "
    print(f"Created harness {result.name!r} in {package}/ ({len(result.files)} files).")
    print(f"\nRegister it: paste this into the pyproject.toml of the project that holds {package} "
          f"(also saved as {package / 'entry_point.toml'}), then `pip install -e .`:\n")
    print(result.entry_point)
    print("Next steps:")
    print(f"  1. Replace the example game in {package / 'harness.py'} and {package / 'tasks.json'} with yours.")
    print(f"  2. Test it with the scripted model: python -m pytest -q {package / 'test_harness.py'}")
    print(f"  3. Draft T and H from your code, review, copy over the real files: "
          f"{env}raso harness describe {result.target}")
    print(f"  4. Check it loads: {env}raso harnesses {result.target}   (by name, `{result.name}`, once registered)")
    print(f"  5. Optimize a skill for it: raso optimize --harness {result.name}")
    return 0


def run_describe(args: argparse.Namespace) -> int:
    from raso.api import load_harness, make_gateway
    from raso.engine.config import ModelsConfig, OptimizeConfig
    from raso.llm import DEFAULT_LOCAL_MODEL, LLMError
    from raso.optimizer.describe import DraftsExistError, check_drafts_absent, draft_descriptions, write_drafts

    try:
        harness = load_harness(args.name, for_runs=False)  # drafting H and T runs no task
        config = OptimizeConfig(harness=args.name, models=ModelsConfig(
            target=args.optimizer_model or DEFAULT_LOCAL_MODEL, api_base=args.api_base))
    except ValueError as exc:  # ConfigError (unknown harness, missing extra) or a bad option
        return _fail(str(exc))
    out = args.out if args.out is not None else Path(harness.resource_dir)
    if not args.replace_drafts:
        try:
            check_drafts_absent(out)
        except DraftsExistError as exc:
            return _fail(str(exc))
    try:
        gateway = make_gateway(config)
        caveat = gateway.profile("optimizer").caveat
        if caveat:
            print(f"note: drafting with {config.models.target}: {caveat}", file=sys.stderr)
        drafts = draft_descriptions(gateway, harness)
    except LLMError as exc:
        print(f"error: the optimizer model could not draft the descriptions: {exc}", file=sys.stderr)
        return 1
    try:
        paths = write_drafts(drafts, out, replace=args.replace_drafts)
    except (DraftsExistError, OSError) as exc:
        return _fail(str(exc))
    for path in paths:
        print(f"wrote {path}")
    print("Review the drafts against the code, then copy what is right into task_description.md and "
          "harness_description.md (the drafts are never used by RASO).")
    return 0
