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


#: A list marker: "10." / "10)" (numbered) or an ellipsis a looping model writes between empty items.
_MARKER = r"(?:\d{1,3}[.)]|\.\.\.|…)"
#: Two or more list markers with nothing between them ("10. 11. 12. ... 22."), across lines or on one line. The
#: first starts an item: at a line's start or after a finished sentence ("size 10.\n3. Buy" is no run).
_EMPTY_RUN = re.compile(rf"(?:^[ \t]*|(?<=[.!?:]\s))(?P<run>{_MARKER}(?:\s+{_MARKER})+)(?!\S)", re.MULTILINE)
_NUMBERED = re.compile(r"\d{1,3}[.)]")


def _prose_segments(body: str) -> list[tuple[bool, str]]:
    """`body` split into (is_code, text) runs of lines: fenced code blocks are kept apart and never changed."""
    segments: list[tuple[bool, list[str]]] = []
    in_code = False
    for line in body.split("\n"):
        fence = line.lstrip().startswith("```")
        code = in_code or fence
        in_code = in_code != fence
        if segments and segments[-1][0] == code:
            segments[-1][1].append(line)
        else:
            segments.append((code, [line]))
    return [(code, "\n".join(lines)) for code, lines in segments]


def drop_empty_items(body: str) -> tuple[str, int]:
    """`body` without runs of empty numbered list items outside code ("... product. 10. 11. 12. ... 22. Click"
    -> "... product. 22. Click"), and how many empty items were dropped. A run needs two numbered markers
    with nothing between them; where text follows the run, its last marker numbers that text and is kept."""
    dropped = 0

    def cut(match: re.Match[str]) -> str:
        nonlocal dropped
        prefix = match.group(0)[: match.start("run") - match.start()]
        markers = match.group("run").split()
        rest = match.string[match.end():].split("\n", 1)[0]
        keep = markers[-1] if rest.strip() and _NUMBERED.fullmatch(markers[-1]) else ""
        empty = sum(1 for m in (markers[:-1] if keep else markers) if _NUMBERED.fullmatch(m))
        if empty + (1 if keep else 0) < 2:  # one number beside an ellipsis ("see 3. ..."): not a runaway list
            return match.group(0)
        dropped += empty
        return prefix + keep

    out = []
    for code, text in _prose_segments(body):
        if not code:
            text = _EMPTY_RUN.sub(cut, text)
            text = "\n".join(line.rstrip() for line in text.split("\n"))
            text = re.sub(r"\n{3,}", "\n\n", text)
        out.append(text)
    return "\n".join(out).strip(), dropped


def _runaway_enumeration(body: str, _context: Context) -> Repair | None:
    text, dropped = drop_empty_items(body)
    return Repair(text, f"removed {dropped} empty list item(s)") if dropped else None


#: Words a sentence does not end on: a reply cut at its token limit often stops right after one.
_DANGLING_WORDS = frozenset(
    "a an the to of and or but with for in on at by from into onto as than then if that which when while "
    "your its their this these click select open use type enter".split())
_SENTENCE_STOP = re.compile(r"[.!?](?=\s)")
_ITEM_START = re.compile(r"(?:\d{1,3}[.)]|[-*+])\s+")


def _unbalanced(text: str) -> bool:
    """Whether `text` leaves a quote, backtick or bracket open (an apostrophe inside a word is not a quote)."""
    single = len(re.findall(r"(?<![A-Za-z0-9])'|'(?![A-Za-z0-9])", text))
    if single % 2 or text.count('"') % 2 or text.count("`") % 2:
        return True
    return any(text.count(o) > text.count(c) for o, c in ("()", "[]", "{}"))


def cut_off_tail(line: str) -> str | None:
    """The unfinished end of `line` (a skill body's last line) when it stops mid-sentence: an open quote or
    bracket, a dangling word ("Click the"), a trailing comma or colon, or a list marker without text; else None."""
    stripped = line.strip()
    if not stripped:
        return None
    last_word = re.findall(r"[A-Za-z]+", stripped.lower())[-1:] or [""]
    unfinished = (_unbalanced(stripped) or stripped[-1] in ",:(['\"`" or _NUMBERED.fullmatch(stripped) is not None
                  or (last_word[0] in _DANGLING_WORDS and stripped.lower().endswith(last_word[0])))
    if not unfinished:
        return None
    # The tail starts after the last finished sentence. A list number's period ends none, so an unfinished item
    # ("22. Click the '") goes with its number, and a line that is one unfinished item goes whole.
    item = _ITEM_START.match(stripped)
    stops = [m for m in _SENTENCE_STOP.finditer(stripped, item.end() if item else 0)
             if not re.search(r"(?:^|\s)\d{1,3}$", stripped[: m.start()])]
    start = stops[-1].end() if stops else 0
    tail = stripped[start:].strip()
    return tail or None


def drop_cut_off_ending(body: str) -> tuple[str, str]:
    """`body` without an unfinished last sentence outside code, and the text that was dropped ('' if none)."""
    lines = body.rstrip().split("\n")
    if not lines or lines[-1].strip().startswith("```") or _prose_segments(body.rstrip())[-1][0]:
        return body, ""  # a body that ends in code is left to its fences
    tail = cut_off_tail(lines[-1])
    if tail is None:
        return body, ""
    kept = lines[-1].rstrip()[: len(lines[-1].rstrip()) - len(tail)].rstrip()
    if not re.search(r"[A-Za-z0-9]", kept):  # only a list marker or bullet was left: drop the whole line
        kept = ""
    lines[-1] = kept
    return "\n".join(lines).strip(), tail


def _cut_off_ending(body: str, _context: Context) -> Repair | None:
    text, tail = drop_cut_off_ending(body)
    if not tail or not text.strip():  # a body that is nothing but the unfinished sentence: short_body judges it
        return None
    return Repair(text, f"removed the unfinished ending {tail[:60]!r}")


def skill_body_problems(body: str) -> list[str]:
    """What makes a skill body unusable as written, for every model (the report's check of the best skill):
    runaway empty list items, a cut-off ending, long repeated sentences, or no instructions at all."""
    problems = []
    if not re.search(r"[A-Za-z]{2,}", body):
        return ["it has no instructions"]
    if drop_empty_items(body)[1]:
        problems.append(f"it runs into {drop_empty_items(body)[1]} empty list item(s)")
    if drop_cut_off_ending(body)[1]:
        problems.append(f"it ends mid-sentence ({drop_cut_off_ending(body)[1][:60]!r})")
    if drop_repeated_sentences(body)[1]:
        problems.append(f"it repeats {drop_repeated_sentences(body)[1]} sentence(s)")
    if len(re.findall(r"[A-Za-z0-9]+", body)) < MIN_BODY_WORDS:
        problems.append(f"it has under {MIN_BODY_WORDS} words")
    return problems


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
    Sanitizer("runaway_enumeration", "skill_body", _runaway_enumeration,
              "drop runs of empty numbered list items outside code"),
    Sanitizer("cut_off_ending", "skill_body", _cut_off_ending, "drop an unfinished last sentence outside code"),
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
