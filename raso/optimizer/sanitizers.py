"""Small-model repairs ("sanitizers"): named fixes and drops applied to the optimizer model's replies.

A small model loops, echoes its input or copies text of its prompt where the method expects new content. Each
repair below handles one such habit. They are not part of RASI/RASU: the optimizer model's profile switches them
on (raso.llm.profiles.ModelProfile.sanitizers; the embedded profile enables all, a hosted model none), `sanitize`
applies the enabled ones, and every change is returned as a note for the run's report. docs/model-profiles.md
lists each with the observation that motivated it.

Checks that hold for every model (an empty skill body, a lesson without words) are not sanitizers: they stay
where the reply is turned into a skill or lesson.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from raso.llm import StructuredOutputError
from raso.llm.errors import LLMError
from raso.llm.profiles import HasProfiles, SanitizerName
from raso.prompts import DEFAULT_PROMPTS, PromptLibrary

from . import roles
from .roles import SkillDraft

Target = Literal["skill_body", "lesson"]


@dataclass(frozen=True)
class Context:
    """What a sanitizer may compare a reply against."""

    requirement: str = ""  # the requirement a lesson answers
    prompts: PromptLibrary | None = None  # the templates the reply was asked with (None: the package's)
    headings: Sequence[str] = ()  # heading paths ("a › b › c") of the sections a lesson was adapted from


@dataclass(frozen=True)
class Sanitized:
    """The text after the enabled sanitizers, the notes of what they changed, and why it was rejected (or None)."""

    text: str
    notes: tuple[str, ...] = ()
    rejected: str | None = None


@dataclass(frozen=True)
class Rejection:
    """The text carries nothing usable: drop it."""

    reason: str


@dataclass(frozen=True)
class Repair:
    """The text with something removed, and a note saying what."""

    text: str
    note: str


# A sanitizer returns None (nothing to do), a Repair, or a Rejection.
SanitizerFn = Callable[[str, Context], "Repair | Rejection | None"]


@dataclass(frozen=True)
class Sanitizer:
    name: SanitizerName
    target: Target
    apply: SanitizerFn
    summary: str


# ---------------------------------------------------------------- skill bodies
#: Sentences at least this long are compared for repeats; shorter ones ("Save it.", "- [ ] Done") may recur.
MIN_REPEAT_CHARS = 40
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def drop_repeated_sentences(body: str) -> tuple[str, int]:
    """`body` without the second and later copies of a long sentence outside code blocks, and how many were
    dropped: a looping model repeats one sentence until its length bound, and a repeat costs the agent's
    context on every turn."""
    seen: set[str] = set()
    dropped = 0
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
                dropped += 1
                continue
            seen.add(key)
            kept.append(sentence)
        if kept or not line.strip():
            out.append(" ".join(kept) if kept else line)
    return "\n".join(out).strip(), dropped


def _repeated_sentences(body: str, _context: Context) -> Repair | None:
    text, dropped = drop_repeated_sentences(body)
    return Repair(text, f"removed {dropped} repeated sentence(s)") if dropped else None


#: raso.optimizer.render's clip markers, which a small model may copy from its prompt as the whole body.
_CLIP_MARKER = re.compile(r"\[?\s*\.\.\.\s*\d+ (?:more|earlier) characters cut\s*\]?", re.IGNORECASE)
#: A body shorter than this carries no instructions; a one-line rule ("Always call save().") has more.
MIN_BODY_WORDS = 3


def _copied_clip_marker(body: str, _context: Context) -> Rejection | None:
    return Rejection("it is a clip marker copied from the prompt") if _CLIP_MARKER.fullmatch(body.strip()) else None


def _short_body(body: str, _context: Context) -> Rejection | None:
    words = len(re.findall(r"[A-Za-z0-9]+", body))
    if body.strip() and words < MIN_BODY_WORDS:  # an empty body is every model's error, reported elsewhere
        return Rejection(f"it has under {MIN_BODY_WORDS} words")
    return None


# ---------------------------------------------------------------- lessons
def words_of(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


_NUMBERING = re.compile(r"^[\s\d.)]+")  # "5. Verify visually" -> "Verify visually"


def _echoed_lesson(lesson: str, context: Context) -> Rejection | None:
    """Drop a lesson that only echoes the model's input instead of adapting the sections: one word (such as the
    reply schema's name), the requirement itself, a phrase of the adaptation instructions, or a heading of a
    retrieved section."""
    words = words_of(lesson)
    if words and " " not in words:
        return Rejection("it is a single word")
    if words == words_of(context.requirement):
        return Rejection("it only restates the requirement")
    # The template's slot markers become words too; harmless, as a lesson is judged by containment.
    instructions = words_of((context.prompts or DEFAULT_PROMPTS).template(roles.ADAPTATION_TEMPLATE))
    if len(words) >= 12 and words in instructions:
        return Rejection("it copies the prompt's instructions")
    parts = (part for path in context.headings for part in re.split(r"\s*[›>]\s*", path))
    if words and any(words == words_of(_NUMBERING.sub("", part)) for part in parts):
        return Rejection("it only copies a section heading")
    return None


SANITIZERS: dict[str, Sanitizer] = {s.name: s for s in (
    Sanitizer("copied_clip_marker", "skill_body", _copied_clip_marker, "drop a skill body that is a copied clip marker"),
    Sanitizer("short_body", "skill_body", _short_body, f"drop a skill body of under {MIN_BODY_WORDS} words"),
    Sanitizer("repeated_sentences", "skill_body", _repeated_sentences,
              f"keep one copy of each sentence of {MIN_REPEAT_CHARS}+ characters outside code"),
    Sanitizer("echoed_lesson", "lesson", _echoed_lesson, "drop a lesson that only echoes its input"),
)}


def sanitize(text: str, target: Target, enabled: Sequence[str], context: Context | None = None) -> Sanitized:
    """Apply the `enabled` sanitizers of `target` in SANITIZERS' order; stop at the first rejection."""
    context = context or Context()
    notes: list[str] = []
    for name, sanitizer in SANITIZERS.items():
        if name not in enabled or sanitizer.target != target:
            continue
        out = sanitizer.apply(text, context)
        if isinstance(out, Rejection):
            return Sanitized(text, tuple(notes), f"{out.reason} (sanitizer {name})")
        if out is not None:
            notes.append(f"sanitizer {name}: {out.note} from the {target.replace('_', ' ')}")
            text = out.text
    return Sanitized(text, tuple(notes))


def sanitizers_for(gateway: object, role: str = roles.OPTIMIZER_ROLE) -> tuple[str, ...]:
    """The sanitizers `role`'s model profile enables (none for a gateway stand-in without profiles)."""
    if not isinstance(gateway, HasProfiles):  # a stand-in without profiles
        return ()
    try:
        return tuple(gateway.profile(role).sanitizers)
    except (AttributeError, LLMError):  # no such role
        return ()


def sanitize_draft(draft: SkillDraft, enabled: Sequence[str]) -> tuple[SkillDraft, list[str]]:
    """The draft with its body sanitized, and the notes of what changed. Raises StructuredOutputError when a
    sanitizer rejects the body (the caller treats it like any unusable reply)."""
    from .skills import unpack_draft

    draft = unpack_draft(draft)
    result = sanitize(draft.body.strip(), "skill_body", enabled)
    if result.rejected is not None:
        raise StructuredOutputError(
            f"the model returned a skill body without instructions ({result.rejected}): {draft.body.strip()[:80]!r}",
            raw_text=draft.model_dump_json(), validation_error="body: " + result.rejected)
    return draft.model_copy(update={"body": result.text}), list(result.notes)


def lesson_rejection(lesson: str, enabled: Sequence[str], context: Context) -> str | None:
    """Why the enabled sanitizers drop `lesson`, or None."""
    return sanitize(lesson, "lesson", enabled, context).rejected
