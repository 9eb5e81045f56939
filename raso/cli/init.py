"""`raso init`: write an initial SKILL.md for a harness with zero rollouts (RASI, or RFSI with --no-retrieval)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from raso.cli.options import MODEL_FIELDS, add_config_options, config_overrides
from raso.errors import ConfigError
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
                        help="where to write the skill: a path ending in .md is that file (default ./SKILL.md); any "
                        "other path is a skills directory, which gets <out>/<name>/SKILL.md in the Agent Skills "
                        "layout (name and description brought within the standard's limits)")


def write_skill(skill: Skill, out: Path) -> tuple[Path, Path, list[str]]:
    """Write `skill` to `out`: a `.md` path is that file, as always; any other path is a skills directory that gets
    `<out>/<name>/` in the Agent Skills layout (SKILL.md with conforming front matter, plus the skill's files).
    Returns where the skill went, where its lessons file goes, and what was changed or is still amiss, in words."""
    if out.suffix.lower() == ".md":
        return skill.save(out), out.with_name(out.stem + ".lessons.json"), []
    if out.exists() and not out.is_dir():
        raise SkillParseError(f"--out {out}: a file that is not a .md; give a folder for the Agent Skills layout "
                              "or a path ending in .md for a single SKILL.md")
    skill, notes = conform_to_agent_skills(skill)
    folder = out / skill.name
    if (folder / "SKILL.md").is_file():  # replacing a skill is fine; dropping files someone put beside it is not
        others = sorted(set(Skill.load_folder(folder).files) - set(skill.files))
        if others:
            raise SkillParseError(f"--out {out}: {folder} already holds a skill with files beside its SKILL.md "
                                  f"({', '.join(others[:3])}{', ...' if len(others) > 3 else ''}) that the new "
                                  "skill would drop; move them away or choose another --out")
    notes += [f"the skill does not meet the Agent Skills standard: {problem}"
              for problem in validate_agent_skill(skill, folder_name=folder.name)]
    # the lessons file sits beside the skill folder, not in it: it is a record of how the skill was made
    return skill.save_folder(folder) / "SKILL.md", out / f"{skill.name}.lessons.json", notes


def run_init(args: argparse.Namespace) -> int:
    import raso.api as api
    from raso.errors import RunError
    from raso.llm import LLMError

    started = time.perf_counter()
    try:
        config = api.resolve_config(config_file=args.config, overrides=config_overrides(args, args.config_fields))
        gateway = api.make_gateway(config)
        result = api.init_skill(config=config, retrieval=not args.no_retrieval, gateway=gateway)
    except (ConfigError, RunError) as exc:
        print(f"raso: error: {exc}", file=sys.stderr)
        return 2
    except LLMError as exc:
        print(f"raso: error: {exc}", file=sys.stderr)
        return 1
    try:
        out, lessons_path, notes = write_skill(result.skill, args.out)
    except SkillParseError as exc:
        print(f"raso: error: {exc}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    from raso.llm.ledger import bucket_cost_text

    totals = gateway.ledger.totals()
    lessons_path.write_text(json.dumps({
        "mode": result.mode,
        "requirements": [r.to_dict() for r in result.requirements],
        "lessons": [lesson.to_dict() for lesson in result.lessons],
        "errors": list(result.errors),
        "usage": totals,
    }, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out} ({result.mode}: {len(result.requirements)} requirements, {len(result.lessons)} lessons; "
          f"{totals['prompt_tokens']}+{totals['completion_tokens']} tokens, {bucket_cost_text(totals, hint=True)}, "
          f"{time.perf_counter() - started:.1f}s); lessons with provenance: {lessons_path}")
    for err in result.errors:
        print(f"note: {err}", file=sys.stderr)
    return 0
