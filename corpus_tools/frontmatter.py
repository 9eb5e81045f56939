"""Tolerant YAML front matter parsing for SKILL.md documents.

Published skills often carry front matter that is not valid YAML (unquoted colons in a description,
tabs, stray quotes) or that never closes. A strict parser would lose those skills, so parsing falls
back to a line-based `key: value` reader and reports what it had to do in `FrontMatter.issue`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

# The C loader (libyaml) is ~10x faster; same safe subset of YAML.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_FENCE = re.compile(r"^(?:---|\+\+\+)\s*$")
_KEY_LINE = re.compile(r"^([A-Za-z_][\w.-]*)\s*:\s?(.*)$")
_CONTINUATION = re.compile(r"^(?:\s+\S|\s*-\s)")
_BLOCK_INDICATORS = (">", "|", ">-", "|-", ">+", "|+")

# Why the front matter was not read plainly; None when it was valid YAML or absent.
ISSUE_INVALID_YAML = "invalid_yaml"
ISSUE_NOT_A_MAPPING = "front_matter_not_a_mapping"
ISSUE_UNCLOSED = "unclosed_front_matter"


@dataclass
class FrontMatter:
    data: dict[str, Any] = field(default_factory=dict)
    body: str = ""
    present: bool = False
    issue: str | None = None
    detail: str = ""


def parse_front_matter(text: str) -> FrontMatter:
    """Split `text` into front matter (a dict) and body; never raises."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return FrontMatter(body=text)
    close = next((i for i in range(1, len(lines)) if _FENCE.match(lines[i].rstrip("\r\n"))), None)
    if close is None:
        return _unclosed(lines)
    raw = "".join(lines[1:close])
    body = "".join(lines[close + 1 :])
    try:
        data = yaml.load(raw, Loader=_YAML_LOADER) if raw.strip() else {}
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return FrontMatter(_lenient_pairs(lines[1:close]), body, True, ISSUE_INVALID_YAML, first)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return FrontMatter(_lenient_pairs(lines[1:close]), body, True, ISSUE_NOT_A_MAPPING,
                           f"front matter is a {type(data).__name__}")
    return FrontMatter({str(k): v for k, v in data.items()}, body, True)


def _unclosed(lines: list[str]) -> FrontMatter:
    """Front matter opened with `---` but never closed: read the leading key/value lines as
    front matter and keep everything after them as the body, so the document is not lost."""
    end = 1
    while end < len(lines):
        stripped = lines[end].rstrip("\r\n")
        if _KEY_LINE.match(stripped) or (end > 1 and _CONTINUATION.match(stripped)):
            end += 1
            continue
        break
    data = _lenient_pairs(lines[1:end])
    return FrontMatter(data, "".join(lines[end:]), True, ISSUE_UNCLOSED,
                       f"no closing '---' line; read {len(data)} key(s) from the first {end - 1} line(s)")


def _lenient_pairs(lines: list[str]) -> dict[str, Any]:
    """Line-based `key: value` reader; indented lines continue the previous value."""
    data: dict[str, Any] = {}
    key: str | None = None
    for line in lines:
        stripped = line.rstrip("\r\n")
        match = _KEY_LINE.match(stripped)
        if match and not stripped[:1].isspace():
            key = match.group(1)
            data[key] = _unquote(match.group(2).strip())
        elif key is not None and stripped.strip():
            previous = data[key]
            if previous in _BLOCK_INDICATORS:
                previous = ""
            data[key] = f"{previous} {stripped.strip()}".strip() if isinstance(previous, str) else previous
    return {k: ("" if v in _BLOCK_INDICATORS else v) for k, v in data.items()}


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value
