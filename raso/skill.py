"""The skill document: a SKILL.md with YAML front matter (`name`, `description`) and a markdown body."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

from raso.fileio import atomic_write_text

_FRONT_MATTER = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_NAME_OK = re.compile(r"[^a-z0-9]+")


class SkillParseError(ValueError):
    """A SKILL.md text that cannot be read as a skill; the message says what is wrong."""


def slugify(text: str, fallback: str = "skill") -> str:
    """A skill name in the Agent Skills style: lowercase words joined by hyphens."""
    slug = _NAME_OK.sub("-", text.lower()).strip("-")
    return slug[:64] or fallback


class Skill(BaseModel):
    """One agent skill. `body` is the markdown after the front matter."""

    name: str
    description: str
    body: str
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def parse(cls, text: str, *, source: str = "<text>") -> "Skill":
        """Parse a SKILL.md. Raises SkillParseError naming `source` and the defect."""
        if not isinstance(text, str):
            raise SkillParseError(f"{source}: expected text, got {type(text).__name__}")
        if "\x00" in text:
            raise SkillParseError(f"{source}: binary content (NUL bytes), not a markdown document")
        if not text.strip():
            raise SkillParseError(f"{source}: empty document")
        stripped = text.lstrip("\ufeff")
        if not stripped.startswith("---"):
            raise SkillParseError(f"{source}: missing YAML front matter (the file must start with '---')")
        match = _FRONT_MATTER.match(stripped)
        if not match:
            raise SkillParseError(f"{source}: front matter opened with '---' but never closed")
        try:
            meta = yaml.safe_load(match.group(1)) or {}
        except yaml.YAMLError as exc:
            raise SkillParseError(f"{source}: invalid YAML in front matter: {exc}") from exc
        if not isinstance(meta, dict):
            raise SkillParseError(f"{source}: front matter must be a mapping, got {type(meta).__name__}")
        name, description = meta.pop("name", None), meta.pop("description", None)
        if not isinstance(name, str) or not name.strip():
            raise SkillParseError(f"{source}: front matter lacks a non-empty `name`")
        if not isinstance(description, str) or not description.strip():
            raise SkillParseError(f"{source}: front matter lacks a non-empty `description`")
        body = stripped[match.end():]
        return cls(name=name.strip(), description=" ".join(description.split()), body=body.strip() + "\n",
                   metadata=meta)

    @classmethod
    def load(cls, path: str | Path, *, max_chars: int | None = None) -> "Skill":
        """Read a SKILL.md; with `max_chars`, a longer document is refused (a skill is sent whole in every agent
        prompt, so an oversized one costs on every turn of every rollout)."""
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise SkillParseError(f"{path}: cannot read: {exc}") from exc
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SkillParseError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
        if max_chars is not None and len(text) > max_chars:
            raise SkillParseError(f"{path}: {len(text):,} characters, over the limit of {max_chars:,} for a skill "
                                  "(it is sent whole in every agent prompt); shorten it or raise the limit")
        return cls.parse(text, source=str(path))

    def to_markdown(self) -> str:
        meta: dict[str, Any] = {"name": self.name, "description": self.description, **self.metadata}
        front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1000).strip()
        return f"---\n{front}\n---\n\n{self.body.strip()}\n"

    def save(self, path: str | Path) -> Path:
        """Write atomically (temp file + rename) so a killed run never leaves half a skill."""
        return atomic_write_text(path, self.to_markdown())
