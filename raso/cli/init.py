"""`raso init`: write an initial SKILL.md for a harness with zero rollouts (RASI, or RFSI with --no-retrieval)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from raso.cli.heartbeat import Heartbeat
from raso.cli.options import MODEL_FIELDS, add_config_options, config_overrides
from raso.errors import ConfigError
from raso.fileio import atomic_write_text
from raso.skill import Skill, SkillParseError, conform_to_agent_skills, validate_agent_skill

_INIT_FIELDS = (*MODEL_FIELDS, "retrieval", "init.num_requirements", "init.adapt", "limits")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "init",
        help="write an initial SKILL.md for a harness with zero rollouts (RASI; RFSI with --no-retrieval)",
        description="Decompose the harness's task into requirements, retrieve corpus sections for each, adapt them "
        "into lessons for this harness and write a SKILL.md. No rollouts are run. The lessons and the corpus "
        "sections they came from are written next to the skill (<out>.lessons.json; <out>/<name>.lessons.json for a "
        "skills directory). With the embedded model, the quick defaults (fewer requirements and sections) apply "
        "unless given.",
    )
    parser.add_argument("--config", type=Path, default=None, help="a TOML/YAML/JSON file of options (flags and --set "
                        "override it)")
    parser.set_defaults(func=run_init, config_fields=add_config_options(parser, _INIT_FIELDS))
    parser.add_argument("--no-retrieval", action="store_true", help="RFSI: the same prompts without corpus lessons")
    parser.add_argument("--out", type=Path, default=Path("SKILL.md"),
                        help="where to write the skill: an existing folder, or a path without a suffix, is a skills "
                        "directory, which gets <out>/<name>/SKILL.md in the Agent Skills layout (name and "
                        "description brought within the standard's limits); any other path (SKILL.md, "
                        "notes.txt) is that one file (default ./SKILL.md)")
    parser.add_argument("--force", action="store_true", help="replace a skill (and its lessons file) already at "
                        "--out; without it an existing one is refused")


def writes_a_file(out: Path) -> bool:
    """Whether `--out` names the skill file itself (else a skills directory): an existing folder is a skills
    directory, any other existing path a file; a new path is a file when it has a suffix (SKILL.md, x.txt)."""
    if out.is_dir():
        return False
    return out.is_symlink() or out.exists() or bool(out.suffix)


def _lessons_beside(out: Path) -> Path:
    return out.with_name(out.stem + ".lessons.json")


def _refuse_existing(targets: list[Path], force: bool) -> None:
    """Nothing someone else put there is replaced without --force."""
    existing = [t for t in targets if t.is_symlink() or t.exists()]
    if existing and not force:
        names = " and ".join(str(t) for t in existing)
        one = len(existing) == 1
        raise SkillParseError(f"--out: {names} already exist{'s' if one else ''}; pass --force to replace "
                              f"{'it' if one else 'them'}, or choose another --out")


def check_out(out: Path, force: bool) -> None:
    """Before any model call: a skill file that is there already is refused without --force (a skills directory's
    `<name>/` is known only once the model has named the skill: write_skill checks it)."""
    if writes_a_file(out):
        _refuse_existing([out, _lessons_beside(out)], force)


def write_skill(skill: Skill, out: Path, force: bool = False) -> tuple[Path, Path, list[str]]:
    """Write `skill` to `out` (see writes_a_file): a file path is that file; a skills directory gets `<out>/<name>/`
    in the Agent Skills layout (SKILL.md with conforming front matter, plus the skill's files). What is there
    already is replaced only with `force`, and never a folder's files the new skill would drop. Returns where the
    skill went, where its lessons file goes, and what was changed or is still amiss, in words."""
    if writes_a_file(out):
        if out.is_symlink() or (out.exists() and not out.is_file()):
            raise SkillParseError(f"--out {out}: not a regular file; choose a file path or a folder")
        lessons = _lessons_beside(out)
        _refuse_existing([out, lessons], force)
        return skill.save(out), lessons, []
    skill, notes = conform_to_agent_skills(skill)
    folder, lessons = out / skill.name, out / f"{skill.name}.lessons.json"
    _refuse_existing([folder, lessons], force)
    if (folder / "SKILL.md").is_file():  # replacing a skill is asked for; dropping files someone put beside it is not
        others = sorted(set(Skill.load_folder(folder).files) - set(skill.files))
        if others:
            raise SkillParseError(f"--out {out}: {folder} already holds a skill with files beside its SKILL.md "
                                  f"({', '.join(others[:3])}{', ...' if len(others) > 3 else ''}) that the new "
                                  "skill would drop; move them away or choose another --out")
    notes += [f"the skill does not meet the Agent Skills standard: {problem}"
              for problem in validate_agent_skill(skill, folder_name=folder.name)]
    # the lessons file sits beside the skill folder, not in it: it is a record of how the skill was made
    return skill.save_folder(folder) / "SKILL.md", lessons, notes


def run_init(args: argparse.Namespace) -> int:
    import raso.api as api
    from raso.errors import RunError
    from raso.llm import LLMError

    started = time.perf_counter()
    try:
        check_out(args.out, args.force)
    except SkillParseError as exc:
        print(f"raso: error: {exc}", file=sys.stderr)
        return 2
    try:
        config = api.resolve_config(config_file=args.config, overrides=config_overrides(args, args.config_fields))
        gateway = api.make_gateway(config)
        with Heartbeat("raso init", gateway.ledger.totals):  # the embedded model works for minutes in silence
            result = api.init_skill(config=config, retrieval=not args.no_retrieval, gateway=gateway)
    except (ConfigError, RunError) as exc:
        print(f"raso: error: {exc}", file=sys.stderr)
        return 2
    except LLMError as exc:
        print(f"raso: error: {exc}", file=sys.stderr)
        return 1
    try:
        out, lessons_path, notes = write_skill(result.skill, args.out, force=args.force)
    except SkillParseError as exc:
        print(f"raso: error: {exc}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    from raso.llm.ledger import bucket_cost_text

    totals = gateway.ledger.totals()
    atomic_write_text(lessons_path, json.dumps({
        "mode": result.mode,
        "requirements": [r.to_dict() for r in result.requirements],
        "lessons": [lesson.to_dict() for lesson in result.lessons],
        "errors": list(result.errors),
        "usage": totals,
    }, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {out} ({result.mode}: {len(result.requirements)} requirements, {len(result.lessons)} lessons; "
          f"{totals['prompt_tokens']}+{totals['completion_tokens']} tokens, {bucket_cost_text(totals, hint=True)}, "
          f"{time.perf_counter() - started:.1f}s); lessons with provenance: {lessons_path}")
    for err in result.errors:
        print(f"note: {err}", file=sys.stderr)
    return 0
