"""Turning a model's skill draft into a valid SKILL.md (`raso.skill.Skill`), filling gaps deterministically."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from raso.llm import StructuredOutputError
from raso.skill import Skill, SkillParseError, slugify

from .roles import SkillDraft
from .types import Lesson, Requirement

MAX_NAME = 64
MAX_DESCRIPTION = 1024  # the Agent Skills limit on `description`
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


#: Sentences at least this long are compared for repeats; shorter ones ("Save it.", "- [ ] Done") may recur.
MIN_REPEAT_CHARS = 40
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def drop_repeated_sentences(body: str) -> str:
    """`body` without the second and later copies of a long sentence outside code blocks. Small models loop:
    the 0.5B's s0 said the same 190-character sentence five times until its length bound; a repeat carries
    nothing an agent needs, and it costs the agent's context on every turn."""
    seen: set[str] = set()
    out: list[str] = []
    in_code = False
    for line in body.split("\n"):
        fence = line.lstrip().startswith("```")
        in_code = in_code != fence  # a fence line opens or closes a block and is kept like the code inside
        if fence or in_code:
            out.append(line)
            continue
        kept = []
        for sentence in _SENTENCE_END.split(line):
            key = " ".join(sentence.lower().split())
            if len(key) >= MIN_REPEAT_CHARS and key in seen:
                continue
            seen.add(key)
            kept.append(sentence)
        if kept or not line.strip():
            out.append(" ".join(kept) if kept else line)
    return "\n".join(out).strip()


#: A body shorter than this carries no instructions; a one-line rule ("Always call save().") has more.
MIN_BODY_WORDS = 3
#: raso.optimizer.render's clip markers, which a small model may copy from its prompt as the whole body
_CLIP_MARKER = re.compile(r"\[?\s*\.\.\.\s*\d+ (?:more|earlier) characters cut\s*\]?", re.IGNORECASE)


def draft_to_skill(
    draft: SkillDraft,
    *,
    default_name: str,
    default_description: str,
    keep_name: bool = False,
    metadata: dict[str, Any] | None = None,
) -> Skill:
    """A valid Skill from a draft. A body that is itself a whole SKILL.md is unpacked; a missing name or
    description gets the default; names are slugified and descriptions flattened and capped.

    `keep_name` pins the name to `default_name` (an update keeps the skill's identity).
    Raises StructuredOutputError when the draft has no body text at all.
    """
    name, description, body = draft.name, draft.description, draft.body.strip()
    if body.startswith("---"):
        try:
            inner = Skill.parse(body)
        except SkillParseError:
            pass
        else:
            name, description, body = name or inner.name, description or inner.description, inner.body.strip()
    if not body:
        raise StructuredOutputError(
            "the model returned a skill with an empty body",
            raw_text=draft.model_dump_json(), validation_error="body: empty after stripping front matter",
        )
    if len(re.findall(r"[A-Za-z0-9]+", body)) < MIN_BODY_WORDS or _CLIP_MARKER.fullmatch(body):
        # e.g. "... 868 more characters cut": the 0.5B model copied a clip marker of its prompt as the body
        raise StructuredOutputError(
            f"the model returned a skill body without instructions (under {MIN_BODY_WORDS} words, or a copied "
            f"clip marker): {body[:80]!r}",
            raw_text=draft.model_dump_json(), validation_error="body: too short to instruct an agent",
        )
    body = drop_repeated_sentences(body)
    final_name = default_name if keep_name else slugify(name, fallback="")[:MAX_NAME].strip("-")
    final_description = " ".join(description.split())[:MAX_DESCRIPTION]
    return Skill(
        name=final_name or slugify(default_name, fallback="task-skill"),
        description=final_description or " ".join(default_description.split())[:MAX_DESCRIPTION],
        body=body + "\n",
        metadata=dict(metadata or {}),
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
