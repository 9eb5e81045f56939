"""Turning a model's skill draft into a valid SKILL.md (`raso.skill.Skill`), filling gaps deterministically."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from raso.llm import StructuredOutputError
from raso.skill import MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS, Skill, SkillParseError, slugify

from .roles import SkillDraft
from .types import Lesson, Requirement

MAX_NAME = MAX_NAME_CHARS  # the Agent Skills limits (raso.skill)
MAX_DESCRIPTION = MAX_DESCRIPTION_CHARS
_HEADING_MARKS = re.compile(r"^[#>*\-\s]+")


def _first_sentence(text: str, limit: int = 200) -> str:
    for line in text.splitlines():
        line = _HEADING_MARKS.sub("", line).strip()
        if line:
            sentence = re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0]
            return sentence[:limit].rstrip()
    return ""


def fallback_name(task_description: str) -> str:
    words = _first_sentence(task_description).split()[:6]
    return slugify(" ".join(words), fallback="task-skill")


def fallback_description(task_description: str) -> str:
    sentence = _first_sentence(task_description)
    return f"How to solve tasks of this kind: {sentence}" if sentence else "How to solve the tasks of this harness."


def unpack_draft(draft: SkillDraft) -> SkillDraft:
    """A draft whose body is itself a whole SKILL.md, as its parts (front matter filling a missing name or
    description); any other draft as it is."""
    body = draft.body.strip()
    if not body.startswith("---"):
        return draft
    try:
        inner = Skill.parse(body)
    except SkillParseError:
        return draft
    return draft.model_copy(update={"name": draft.name or inner.name,
                                    "description": draft.description or inner.description, "body": inner.body.strip()})


def draft_to_skill(
    draft: SkillDraft,
    *,
    default_name: str,
    default_description: str,
    keep_name: bool = False,
    metadata: dict[str, Any] | None = None,
    files: dict[str, str] | None = None,
) -> Skill:
    """A valid Skill from a draft. A body that is itself a whole SKILL.md is unpacked; a missing name or
    description gets the default; names are slugified and descriptions flattened and capped. The model
    profile's repairs (raso.optimizer.sanitizers.sanitize_draft) run before, at the call site.

    `keep_name` pins the name to `default_name` (an update keeps the skill's identity); `metadata` and `files`
    (the files beside SKILL.md) are carried over unchanged: the model edits the document, never the files.
    Raises StructuredOutputError when the draft has no body text at all.
    """
    draft = unpack_draft(draft)
    name, description, body = draft.name, draft.description, draft.body.strip()
    if not body:
        raise StructuredOutputError(
            "the model returned a skill with an empty body",
            raw_text=draft.model_dump_json(), validation_error="body: empty after stripping front matter",
        )
    final_name = default_name if keep_name else slugify(name, fallback="")[:MAX_NAME].strip("-")
    final_description = " ".join(description.split())[:MAX_DESCRIPTION]
    return Skill(
        name=final_name or slugify(default_name, fallback="task-skill"),
        description=final_description or " ".join(default_description.split())[:MAX_DESCRIPTION],
        body=body + "\n",
        metadata=dict(metadata or {}),
        files=dict(files or {}),
    )


def assemble_body(requirements: Sequence[Requirement], lessons: Sequence[Lesson]) -> str:
    """A skill body made deterministically from the requirements and their lessons (the init fallback)."""
    by_requirement: dict[str, list[str]] = {}
    for lesson in lessons:
        by_requirement.setdefault(lesson.requirement, []).append(lesson.text.strip())
    parts = ["## Steps", ""]
    for number, requirement in enumerate(requirements, start=1):
        parts.append(f"### {number}. {requirement.requirement.strip()}")
        parts.extend(f"- {text}" for text in by_requirement.get(requirement.requirement, []))
        parts.append("")
    return "\n".join(parts).strip() + "\n"
