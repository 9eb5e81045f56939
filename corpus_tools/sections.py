"""Split skills into heading-delimited sections (the unit RASO retrieves).

Headings are found with markdown-it-py, so a `#` line inside fenced code is not a heading. Only
top-level headings (not inside lists or quotes) whose level is in `levels` split; deeper headings
stay inside their section. Each section keeps its heading path, e.g.
"xlsx-helper › Formulas › Absolute references": the skill name, then the enclosing split headings
(an H1 that merely repeats the skill name is left out). The text before the first heading, preceded
by the skill's description, is the first section. Sections over `max_chars` are cut into windows at
paragraph or line breaks with a small overlap; sections with no content besides their heading are
dropped. Reference files of a skill are split the same way, their file name joining the path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from markdown_it import MarkdownIt

from corpus_tools.frontmatter import parse_front_matter
from corpus_tools.ingest import SkillRecord

HEADING_SEPARATOR = " › "
DEFAULT_LEVELS = (1, 2, 3)
DEFAULT_MAX_CHARS = 4000
DEFAULT_OVERLAP_CHARS = 200


@dataclass(slots=True)
class Section:
    id: str
    skill_id: str
    skill_name: str
    heading_path: str
    text: str
    repo: str
    path: str
    commit: str
    license: str

    @property
    def headings(self) -> list[str]:
        return self.heading_path.split(HEADING_SEPARATOR)


@lru_cache(maxsize=1)
def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark")
    # Only headings, fences, indented code and paragraphs (for setext headings) matter here. Skipping
    # inline parsing and the list/quote/reference/HTML block rules makes parsing ~4x faster; the one
    # difference is that a heading indented inside a list item also splits (CommonMark nests it).
    md.core.ruler.disable("inline")
    md.block.ruler.disable(["list", "blockquote", "reference", "html_block"])
    return md


_INLINE_MARKUP = re.compile(r"`+|\*{1,3}|(?<!\w)_{1,3}|_{1,3}(?!\w)")
_NON_ALNUM = re.compile(r"[\W_]+")


def _clean_heading(raw: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", raw)  # [label](url) -> label
    return " ".join(_INLINE_MARKUP.sub("", text).split())


def _same_name(a: str, b: str) -> bool:
    return _NON_ALNUM.sub("", a.lower()) == _NON_ALNUM.sub("", b.lower())


def split_markdown(body: str, levels: tuple[int, ...] = DEFAULT_LEVELS) -> list[tuple[list[tuple[int, str]], str]]:
    """Split a markdown body into (heading stack, text) parts; the first part (empty stack) is the
    text before the first splitting heading. Text includes the heading line itself."""
    body = body.replace("\r\n", "\n").replace("\r", "\n")
    lines = body.split("\n")
    tokens = _markdown().parse(body)
    cuts: list[tuple[int, int, str]] = []  # (first line, level, title)
    wanted = {f"h{n}" for n in levels}
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.level == 0 and token.tag in wanted and token.map:
            title = _clean_heading(tokens[i + 1].content if i + 1 < len(tokens) else "")
            cuts.append((token.map[0], int(token.tag[1]), title))
    parts: list[tuple[list[tuple[int, str]], str]] = []
    first = cuts[0][0] if cuts else len(lines)
    parts.append(([], "\n".join(lines[:first])))
    stack: list[tuple[int, str]] = []
    for n, (start, level, title) in enumerate(cuts):
        end = cuts[n + 1][0] if n + 1 < len(cuts) else len(lines)
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title or f"(untitled h{level})"))
        parts.append((list(stack), "\n".join(lines[start:end])))
    return parts


def _has_content(text: str, with_heading: bool) -> bool:
    if not with_heading:
        return bool(text.strip())
    rest = text.split("\n", 1)[1] if "\n" in text else ""
    # A setext heading's underline is part of the heading, not content.
    rest = re.sub(r"^\s*(=+|-+)\s*(\n|$)", "", rest, count=1)
    return bool(rest.strip())


def window_text(text: str, max_chars: int, overlap: int = DEFAULT_OVERLAP_CHARS) -> list[str]:
    """Cut `text` into pieces of at most `max_chars`, preferring paragraph then line breaks, with
    about `overlap` characters repeated at the start of the next piece."""
    if max_chars <= 0 or len(text) <= max_chars:
        return [text]
    overlap = max(0, min(overlap, max_chars // 4))
    pieces: list[str] = []
    start = 0
    while start < len(text):
        end = start + max_chars
        if end >= len(text):
            pieces.append(text[start:])
            break
        cut = text.rfind("\n\n", start + max_chars // 2, end)
        if cut < 0:
            cut = text.rfind("\n", start + max_chars // 2, end)
        if cut < 0:
            cut = text.rfind(" ", start + max_chars // 2, end)
        if cut < 0:
            cut = end
        pieces.append(text[start:cut])
        next_start = max(cut - overlap, start + 1)
        line_start = text.find("\n", next_start, cut)
        start = line_start + 1 if 0 <= line_start < cut else next_start
    return [p for p in pieces if p.strip()]


def split_sections(
    record: SkillRecord,
    levels: tuple[int, ...] = DEFAULT_LEVELS,
    max_chars: int = DEFAULT_MAX_CHARS,
    *,
    include_references: bool = True,
    overlap_chars: int = DEFAULT_OVERLAP_CHARS,
) -> list[Section]:
    """Sections of a skill's SKILL.md body (and, by default, of its reference files)."""
    levels = tuple(sorted(set(levels)))
    sections: list[Section] = []
    preamble_prefix = record.description.strip()
    documents: list[tuple[str, str, str, list[str], str]] = [(record.id, record.path, record.body, [], preamble_prefix)]
    if include_references:
        for ref in record.references:
            ref_body = parse_front_matter(ref.text).body
            documents.append((f"{record.id}|{ref.path}", ref.path, ref_body, [ref.path.rsplit("/", 1)[-1]], ""))
    for doc_id, path, body, base_path, prefix in documents:
        ordinal = 0
        for stack, text in split_markdown(body, levels):
            with_heading = bool(stack)
            if not with_heading and prefix:
                text = f"{prefix}\n\n{text.strip()}" if text.strip() else prefix
            if not _has_content(text, with_heading):
                continue
            titles = [t for lvl, t in stack if not (lvl == 1 and _same_name(t, record.name))]
            heading_path = HEADING_SEPARATOR.join([record.name, *base_path, *titles])
            windows = window_text(text.strip("\n"), max_chars, overlap_chars)
            for w, piece in enumerate(windows):
                suffix = f"#{ordinal}" if len(windows) == 1 else f"#{ordinal}.{w}"
                sections.append(Section(id=doc_id + suffix, skill_id=record.id, skill_name=record.name,
                                        heading_path=heading_path, text=piece, repo=record.repo, path=path,
                                        commit=record.commit, license=record.license))
            ordinal += 1
    return sections


def split_corpus(records, levels: tuple[int, ...] = DEFAULT_LEVELS, max_chars: int = DEFAULT_MAX_CHARS,
                 *, include_references: bool = True):
    """Yield the sections of every record in turn."""
    for record in records:
        yield from split_sections(record, levels, max_chars, include_references=include_references)


# --------------------------------------------------------------------------------------------------
# Sections worth retrieving

#: Why a section is not a retrievable unit (counted in the build report under these names).
UNRETRIEVABLE_REASONS = ("cross-reference block", "link list", "heading without body")
_CROSS_REFERENCE_TITLE = re.compile(
    r"\b(related|see also|further reading|references?|resources|links|other skills|more skills|next steps|"
    r"learn more|useful links|external links|credits|acknowledg\w*)\b", re.IGNORECASE)
_LINK = re.compile(r"\[[^\]]*\]\([^)]*\)|https?://\S+|\[\[[^\]]+\]\]")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_HEADING_LINE = re.compile(r"^\s{0,3}#{1,6}\s|^\s*(=+|-+)\s*$")
_WORD = re.compile(r"[^\W_]{2,}")
MIN_BODY_WORDS = 3


def _body_lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip() and not _HEADING_LINE.match(line)]


def _reference_item(line: str) -> bool:
    """A list item that only points elsewhere: a link, or a short name (`skill-x`, **Y**) with at most a
    short gloss."""
    if not _LIST_ITEM.match(line):
        return bool(_LINK.search(line)) and len(_WORD.findall(_LINK.sub(" ", line))) <= 8
    rest = _LINK.sub(" ", _LIST_ITEM.sub("", line))
    return bool(_LINK.search(line)) or len(_WORD.findall(rest)) <= 12


def unretrievable_reason(section: Section) -> str | None:
    """Why `section` carries no procedural content worth retrieving (one of UNRETRIEVABLE_REASONS), or None:
    * a cross-reference block: its own heading is "Related skills", "See also", "References", ... and
      its lines are list items that point elsewhere (links, skill names with a short gloss);
    * a link list: most of its lines are links (at least 2 and 80 %) with few other words;
    * a heading without body: fewer than MIN_BODY_WORDS words besides heading lines (e.g. a skill-root
      heading followed directly by its sub-headings' section)."""
    lines = _body_lines(section.text)
    words = sum(len(_WORD.findall(line)) for line in lines)
    if words < MIN_BODY_WORDS:
        return "heading without body"
    title = section.heading_path.split(HEADING_SEPARATOR)[-1]
    # Each count only when its test can still pass: most sections have neither such a title nor many links.
    if _CROSS_REFERENCE_TITLE.search(title) and sum(_reference_item(line) for line in lines) >= 0.8 * len(lines):
        return "cross-reference block"
    links = sum(bool(_LINK.search(line)) for line in lines)
    if links >= 2 and links >= 0.8 * len(lines) and len(_WORD.findall(_LINK.sub(" ", "\n".join(lines)))) <= 12 * links:
        return "link list"
    return None


def retrievable_sections(sections, counts: dict[str, int] | None = None):
    """The sections worth retrieving; `counts` (reason -> number) collects what was left out."""
    for section in sections:
        reason = unretrievable_reason(section)
        if reason is None:
            yield section
        elif counts is not None:
            counts[reason] = counts.get(reason, 0) + 1
