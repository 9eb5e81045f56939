"""OfficeQA actions: parse a model reply into `verb[argument]` and the arguments of each verb (action_format.md).

Reply rules, in order: the action is what follows the last `Action:` line (markdown emphasis around the word
is allowed); `verb[...]` runs to the last `]` of that line, for `python[...]` to the last `]` of the reply, so a
bracketed answer or a multi-line program stays whole. `python` with an empty argument, or a reply with no
action but a fenced code block, runs the last ```python block. Without an `Action:` line, the last line that
starts with a known verb and `[` is the action. Anything else comes back unchanged and the environment
explains the format.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass

VERBS = ("search", "open", "python", "answer")
_ACTION_LINE = re.compile(r"^[ \t]*[*_]*[ \t]*Action[ \t]*[*_]*[ \t]*:[ \t]*[*_`]*", re.IGNORECASE | re.MULTILINE)
_VERB_CALL = re.compile(r"^[ \t`]*(\w+)[ \t]*\[", re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)
_CANONICAL = re.compile(r"^\s*(\w+)\s*\[(.*)\]\s*$", re.DOTALL)
_YEAR_FILTER = re.compile(r"\byears?\s*[=:]\s*(\d{4})(?:\s*(?:-|–|to|\.\.)\s*(\d{4}))?", re.IGNORECASE)
_MONTH_FILTER = re.compile(r"\bmonth\s*[=:]\s*([A-Za-z]+|\d{1,2})\b", re.IGNORECASE)
_MONTHS = {name.lower(): n for n, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): n for n, name in enumerate(calendar.month_abbr) if name})
_PAGE_RANGE = re.compile(r"(\d+)(?:\s*(?:-|–|to|\.\.)\s*(\d+))?")


def _bracket_argument(tail: str, verb: str) -> str | None:
    """The text between the `[` after the verb and its closing `]` (module docstring), or None."""
    start = tail.find("[")
    scope = tail if verb == "python" else tail.split("\n", 1)[0]
    end = scope.rfind("]")
    return scope[start + 1:end] if 0 <= start < end else None


def _last_code_block(text: str) -> str | None:
    blocks = [b.strip("\n") for b in _FENCE.findall(text)]
    return blocks[-1] if blocks and blocks[-1].strip() else None


def parse_reply(reply: str) -> str:
    """The canonical action (`verb[argument]`) of a reply, or the stripped reply when none is found."""
    text = reply.replace("\r\n", "\n")
    lines = list(_ACTION_LINE.finditer(text))
    tail: str | None = None
    for match in reversed(lines):  # the last Action: line that holds something
        if text[match.end():].split("\n", 1)[0].strip():
            tail = text[match.end():]
            break
    if tail is None:
        calls = [m for m in re.finditer(r"^[ \t`]*(\w+)[ \t]*\[", text, re.MULTILINE) if m.group(1).lower() in VERBS]
        tail = text[calls[-1].start():] if calls else None
    if tail is not None:
        call = _VERB_CALL.match(tail)
        verb = call.group(1).lower() if call else tail.split()[0].strip("`*").lower() if tail.split() else ""
        argument = _bracket_argument(tail, verb) if call else None
        if verb == "python" and not (argument or "").strip():
            code = _last_code_block(text)
            return f"python[{code}]" if code else "python[]"
        if argument is not None:
            return f"{verb}[{argument.strip()}]"
        return tail.split("\n", 1)[0].strip()
    code = _last_code_block(text)
    return f"python[{code}]" if code else reply.strip()


@dataclass(frozen=True)
class Action:
    verb: str
    argument: str


def split_action(action: str) -> Action | None:
    """`verb[argument]` -> Action, or None when the text is not of that form or the verb is unknown."""
    match = _CANONICAL.match(action or "")
    if not match or match.group(1).lower() not in VERBS:
        return None
    return Action(match.group(1).lower(), match.group(2).strip())


@dataclass(frozen=True)
class SearchRequest:
    query: str
    years: tuple[int, int] | None
    month: int | None


def parse_search(argument: str) -> SearchRequest | str:
    """Keywords with optional `year=YYYY` / `year=YYYY-YYYY` and `month=M` (number or name); or a problem."""
    years: tuple[int, int] | None = None
    month: int | None = None
    year_match = _YEAR_FILTER.search(argument)
    if year_match:
        first = int(year_match.group(1))
        last = int(year_match.group(2) or first)
        years = (min(first, last), max(first, last))
        argument = argument[:year_match.start()] + " " + argument[year_match.end():]
    month_match = _MONTH_FILTER.search(argument)
    if month_match:
        raw = month_match.group(1).lower()
        month = int(raw) if raw.isdigit() else _MONTHS.get(raw)
        if month is None or not 1 <= month <= 12:
            return f"month must be 1-12 or a month name, got {month_match.group(1)!r}"
        argument = argument[:month_match.start()] + " " + argument[month_match.end():]
    query = " ".join(argument.replace(",", " ").split())
    if not query:
        return "search needs keywords, e.g. search[total public debt outstanding year=1945]"
    return SearchRequest(query, years, month)


@dataclass(frozen=True)
class OpenRequest:
    document: str
    first: int
    last: int


def parse_open(argument: str) -> OpenRequest | str:
    """`<document> [page] N[-M]` (comma or spaces between; default page 1); or a problem."""
    parts = argument.replace(",", " ").split(None, 1)
    if not parts:
        return "open needs a document name, e.g. open[treasury_bulletin_1945_06 page 2]"
    rest = re.sub(r"\b(?:pages?|pp?\.?)\s*[=:]?", " ", parts[1] if len(parts) > 1 else "", flags=re.IGNORECASE)
    pages = _PAGE_RANGE.search(rest)
    first = int(pages.group(1)) if pages else 1
    last = int(pages.group(2)) if pages and pages.group(2) else first
    if first < 1 or last < first:
        return f"page numbers start at 1 and a range runs upwards, got {rest.strip()!r}"
    return OpenRequest(parts[0], first, last)
