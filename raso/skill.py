"""The skill document: a SKILL.md with YAML front matter (`name`, `description`) and a markdown body, plus the
files that travel beside it in its folder (the Agent Skills layout: `scripts/`, `references/`, `assets/`)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from pydantic import BaseModel, Field, field_validator, model_validator

from raso.fileio import atomic_write_text, atomic_write_tree
from raso.safe_files import Entry, UnsafePathError, open_folder, read_bytes, walk_tree

_FRONT_MATTER = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_NAME_OK = re.compile(r"[^a-z0-9]+")

SKILL_FILE = "SKILL.md"
# Files beside SKILL.md are text only (UTF-8): a skill's scripts and references are read by agents and diffed by
# people, and a binary asset would need its own storage and limits everywhere a skill is copied.
MAX_SKILL_FILES = 200
MAX_SKILL_MD_BYTES = 64 * 1024 * 1024  # a SKILL.md read at all (init.skill_max_chars sets the usual, smaller limit)
MAX_SKILL_FILE_BYTES = 512 * 1024
MAX_SKILL_FILES_BYTES = 4 * 1024 * 1024
_MAX_PART_CHARS = 255
MAX_SKILL_DEPTH = 16  # folders below the skill's own (scripts/lib/x.py is 2)

# The Agent Skills specification (agentskills.io/specification): front-matter fields and their limits.
AGENT_SKILL_FIELDS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
MAX_COMPATIBILITY_CHARS = 500
_SPEC_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


class SkillParseError(ValueError):
    """A SKILL.md text (or skill folder) that cannot be read as a skill; the message says what is wrong."""


def slugify(text: str, fallback: str = "skill") -> str:
    """A skill name in the Agent Skills style: lowercase words joined by hyphens."""
    slug = _NAME_OK.sub("-", text.lower()).strip("-")
    return slug[:MAX_NAME_CHARS].strip("-") or fallback


def check_skill_name(name: object, source: str = "a skill") -> str:
    """`name` if it is an Agent Skills name (lowercase letters, digits and single hyphens, at most 64 characters),
    else SkillParseError in one line saying so and suggesting one. A skill's name is the name of its folder
    wherever raso writes it, so a name that is a path (`../x`, `/home/me/skill`), holds a NUL or runs to
    thousands of characters must never get that far."""
    if isinstance(name, str) and len(name) <= MAX_NAME_CHARS and _SPEC_NAME.fullmatch(name):
        return name
    shown = repr(name) if not isinstance(name, str) or len(name) <= 80 else f"{name[:60]!r}... ({len(name):,} chars)"
    suggestion = slugify(name) if isinstance(name, str) else "my-skill"
    raise SkillParseError(f"{source}: the skill name {shown} is not an Agent Skills name (lowercase letters, digits "
                          f"and single hyphens, at most {MAX_NAME_CHARS} characters; it names the skill's folder); "
                          f"rename it, e.g. to {suggestion!r}")


def check_file_path(path: str) -> str:
    """`path` as a safe relative POSIX path inside a skill folder; SkillParseError saying why it is not one."""
    if not isinstance(path, str) or not path:
        raise SkillParseError(f"skill file path {path!r}: must be a non-empty text path")
    if "\x00" in path or "\\" in path:
        raise SkillParseError(f"skill file path {path!r}: use '/' between folders (no backslashes or NUL bytes)")
    if path.startswith("/") or re.match(r"[A-Za-z]:", path):
        raise SkillParseError(f"skill file path {path!r}: must be relative to the skill folder, not absolute")
    parts = path.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise SkillParseError(f"skill file path {path!r}: empty, '.' or '..' parts would leave the skill folder")
        if part.startswith("."):
            raise SkillParseError(f"skill file path {path!r}: hidden files are not part of a skill")
        if len(part) > _MAX_PART_CHARS:
            raise SkillParseError(f"skill file path {path!r}: a name longer than {_MAX_PART_CHARS} characters")
    if len(parts) == 1 and parts[0].lower() == SKILL_FILE.lower():
        raise SkillParseError(f"skill file path {path!r}: SKILL.md is the skill document itself (its front matter "
                              "and body), not a file beside it")
    return str(PurePosixPath(path))


def check_files(files: dict[str, str]) -> dict[str, str]:
    """The files map if every path is safe and the count and sizes are within the limits; else SkillParseError."""
    if len(files) > MAX_SKILL_FILES:
        raise SkillParseError(f"a skill carries {len(files)} files beside SKILL.md, over the limit of "
                              f"{MAX_SKILL_FILES}")
    total = 0
    lowered: dict[str, str] = {}
    for path, text in files.items():
        check_file_path(path)
        if not isinstance(text, str):
            raise SkillParseError(f"skill file {path}: must be text, got {type(text).__name__} (binary files are "
                                  "not supported)")
        if "\x00" in text:
            raise SkillParseError(f"skill file {path}: binary content (NUL bytes); only text files are supported")
        size = len(text.encode("utf-8"))
        if size > MAX_SKILL_FILE_BYTES:
            raise SkillParseError(f"skill file {path}: {size:,} bytes, over the limit of {MAX_SKILL_FILE_BYTES:,} "
                                  "per file")
        total += size
        clash = lowered.setdefault(path.lower(), path)
        if clash != path:
            raise SkillParseError(f"skill files {clash} and {path} differ only in case (they collide on some "
                                  "file systems)")
    if total > MAX_SKILL_FILES_BYTES:
        raise SkillParseError(f"the files beside SKILL.md total {total:,} bytes, over the limit of "
                              f"{MAX_SKILL_FILES_BYTES:,}")
    paths = set(files)
    for path in files:  # a file and a folder of the same name cannot both exist
        parent = PurePosixPath(path).parent
        while str(parent) != ".":
            if str(parent) in paths:
                raise SkillParseError(f"skill file {parent} is also the folder of {path}")
            parent = parent.parent
    return dict(files)


class Skill(BaseModel):
    """One agent skill. `body` is the markdown after the front matter; `files` are the text files beside SKILL.md
    in its folder (relative POSIX path -> UTF-8 text), carried unchanged from a skill to the candidates made
    from it."""

    name: str
    description: str
    body: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    files: dict[str, str] = Field(default_factory=dict)
    # The files of `files` that were executable in the folder read (a skill's `scripts/run.sh` that its text tells
    # the agent to run): every copy of the skill into a folder keeps them executable.
    executable: list[str] = Field(default_factory=list)

    @field_validator("files")
    @classmethod
    def _safe_files(cls, files: dict[str, str]) -> dict[str, str]:
        return check_files(files)

    @model_validator(mode="after")
    def _executables_are_files(self) -> "Skill":
        unknown = sorted(set(self.executable) - set(self.files))
        if unknown:
            raise ValueError(f"executable names files the skill does not carry: {', '.join(unknown)}")
        self.executable = sorted(set(self.executable))
        return self

    def with_files_of(self, other: "Skill") -> "Skill":
        """This skill carrying `other`'s files beside SKILL.md, executables included (a candidate made from
        `other`: the optimizer edits the document only)."""
        return self.model_copy(update={"files": dict(other.files), "executable": list(other.executable)})


    @classmethod
    def parse(cls, text: str, *, source: str = "<text>", files: dict[str, str] | None = None) -> "Skill":
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
        files = check_files(dict(files or {}))  # before the model: a bad path is a SkillParseError, not pydantic's
        return cls(name=name.strip(), description=" ".join(description.split()), body=body.strip() + "\n",
                   metadata=meta, files=files)

    @classmethod
    def load(cls, path: str | Path, *, max_chars: int | None = None) -> "Skill":
        """Read a SKILL.md (that file alone), or a skill folder (its SKILL.md and the files beside it, see
        `load_folder`); with `max_chars`, a longer SKILL.md is refused (a skill is sent whole in every agent
        prompt, so an oversized one costs on every turn of every rollout)."""
        path = Path(path)
        if path.is_dir():
            return cls.load_folder(path, max_chars=max_chars)
        return cls.parse(_read_text(path, max_chars=max_chars), source=str(path))

    @classmethod
    def load_folder(cls, folder: str | Path, *, max_chars: int | None = None) -> "Skill":
        """A skill folder: `folder/SKILL.md` plus every file beside it (text, within the limits). Hidden entries
        (names starting with '.', as `.git` or `.DS_Store`) are not part of a skill and are skipped; a symbolic
        link, a non-UTF-8 file, an oversized file or too many files is refused with SkillParseError."""
        folder = Path(folder)
        if not folder.is_dir():
            raise SkillParseError(f"{folder}: not a folder")
        document = folder / SKILL_FILE
        if document.is_symlink() or not document.is_file():
            raise SkillParseError(f"{folder}: no {SKILL_FILE} in this folder (a skill folder holds its SKILL.md "
                                  "at the top)")
        text = _read_text(document, max_chars=max_chars)
        executable: list[str] = []
        skill = cls.parse(text, source=str(document), files=_read_files(folder, executable))
        return skill.model_copy(update={"executable": executable}) if executable else skill

    @classmethod
    def load_with_folder(cls, path: str | Path, *, max_chars: int | None = None) -> "Skill":
        """An initial skill from a path: a folder is read whole; a SKILL.md whose folder is named after the
        skill (the Agent Skills layout) is read with the files beside it; any other markdown file alone (a
        SKILL.md lying among unrelated files must not sweep them in)."""
        path = Path(path)
        if path.is_dir():
            return cls.load_folder(path, max_chars=max_chars)
        skill = cls.load(path, max_chars=max_chars)
        if path.name == SKILL_FILE and path.resolve().parent.name == skill.name:
            return cls.load_folder(path.parent, max_chars=max_chars)
        return skill

    def to_markdown(self) -> str:
        meta: dict[str, Any] = {"name": self.name, "description": self.description, **self.metadata}
        front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1000).strip()
        return f"---\n{front}\n---\n\n{self.body.strip()}\n"

    def save(self, path: str | Path) -> Path:
        """Write SKILL.md alone, atomically (temp file + rename) so a killed run never leaves half a skill."""
        return atomic_write_text(path, self.to_markdown())

    def save_folder(self, folder: str | Path) -> Path:
        """Write the skill folder: `folder/SKILL.md` and the files beside it, and nothing else. The folder is
        built next to its target and renamed into place (raso.fileio.atomic_write_tree), so a kill never leaves
        half a folder. An existing folder is replaced only if it is a skill folder (holds a SKILL.md); any other
        non-empty folder is refused."""
        folder = Path(folder)
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise SkillParseError(f"{folder}: exists and is not a folder; refusing to replace it")
        if folder.is_dir() and any(folder.iterdir()) and not (folder / SKILL_FILE).is_file():
            raise SkillParseError(f"{folder}: a non-empty folder without a SKILL.md; refusing to replace it "
                                  "with a skill (choose an empty or new folder)")
        return atomic_write_tree(folder, {SKILL_FILE: self.to_markdown(), **self.files},
                                 executable=set(self.executable))


def _read_text(path: Path, *, max_chars: int | None) -> str:
    """A SKILL.md's text, never through a link (a downloaded skill's SKILL.md linked to a private file would put
    that file in every prompt and error message) and bounded before it is read."""
    limit = MAX_SKILL_MD_BYTES if max_chars is None else min(MAX_SKILL_MD_BYTES, 4 * max_chars + 4)
    try:
        raw = read_bytes(path, limit)
    except UnsafePathError as exc:
        if os.path.islink(path):
            raise SkillParseError(f"{path}: a symbolic link; a SKILL.md is read only as a regular file (pass the file "
                                  "it points to, if you trust it)") from None
        if max_chars is not None and os.path.isfile(path) and os.path.getsize(path) > limit:
            raise SkillParseError(f"{path}: over the limit of {max_chars:,} characters for a skill (it is sent "
                                  "whole in every agent prompt); shorten it or raise the limit") from None
        raise SkillParseError(f"{path}: cannot be read as a skill: {exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillParseError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    if max_chars is not None and len(text) > max_chars:
        raise SkillParseError(f"{path}: {len(text):,} characters, over the limit of {max_chars:,} for a skill "
                              "(it is sent whole in every agent prompt); shorten it or raise the limit")
    return text


def _read_files(folder: Path, executable: list[str] | None = None) -> dict[str, str]:
    """The text files beside SKILL.md, by relative POSIX path; limits checked before reading (a huge folder is
    refused without being read). The walk is iterative and reads through descriptors without following links
    (raso.safe_files), so a folder of any depth is refused in words, never with a RecursionError. The paths of
    files with an execute bit set are appended to `executable` when given."""
    files: dict[str, str] = {}
    total = 0

    def on_entry(entry: Entry, _payload: object) -> bool | None:
        nonlocal total
        path = folder / entry.relative
        if entry.name.startswith("."):
            return None
        mode = entry.info.st_mode
        if stat.S_ISLNK(mode):
            raise SkillParseError(f"{path}: a symbolic link in a skill folder (links are not followed: copy the "
                                  "file in instead)")
        if stat.S_ISDIR(mode):
            if entry.depth > MAX_SKILL_DEPTH:
                raise SkillParseError(f"{path}: folders deeper than {MAX_SKILL_DEPTH} levels in a skill folder")
            return True
        if entry.relative == SKILL_FILE:
            return None
        if not stat.S_ISREG(mode):
            raise SkillParseError(f"{path}: not a regular file")
        if len(files) >= MAX_SKILL_FILES:
            raise SkillParseError(f"{folder}: more than {MAX_SKILL_FILES} files beside SKILL.md")
        if entry.info.st_size > MAX_SKILL_FILE_BYTES:
            raise SkillParseError(f"{path}: {entry.info.st_size:,} bytes, over the limit of {MAX_SKILL_FILE_BYTES:,} "
                                  "per skill file")
        total += entry.info.st_size
        if total > MAX_SKILL_FILES_BYTES:
            raise SkillParseError(f"{folder}: the files beside SKILL.md exceed {MAX_SKILL_FILES_BYTES:,} bytes in all")
        try:
            text = read_bytes(entry.name, MAX_SKILL_FILE_BYTES, within=path.parent).decode("utf-8")
        except UnicodeDecodeError:
            raise SkillParseError(f"{path}: not UTF-8 text; only text files can travel with a skill (binary "
                                  "files are not supported)") from None
        except UnsafePathError as exc:
            raise SkillParseError(f"cannot read {exc}") from None
        if "\x00" in text:
            raise SkillParseError(f"{path}: binary content (NUL bytes); only text files can travel with a skill")
        files[entry.relative] = text
        if executable is not None and mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH):
            executable.append(entry.relative)
        return None

    try:
        top = open_folder(folder)
    except UnsafePathError as exc:
        raise SkillParseError(str(exc)) from None
    try:
        walk_tree(top, on_entry, max_depth=MAX_SKILL_DEPTH + 1)
    finally:
        os.close(top)
    check_files(files)
    return dict(sorted(files.items()))


def validate_agent_skill(skill: Skill, *, folder_name: str | None = None) -> list[str]:
    """The ways `skill` breaks the Agent Skills specification (agentskills.io/specification), each in words;
    empty when it conforms. `folder_name`, when given, is the folder the skill lives in (its name must match)."""
    problems: list[str] = []
    name = skill.name
    if not name:
        problems.append("name: empty (required)")
    elif len(name) > MAX_NAME_CHARS:
        problems.append(f"name: {len(name)} characters, over the limit of {MAX_NAME_CHARS}")
    if name and not _SPEC_NAME.fullmatch(name):
        problems.append(f"name {name!r}: only lowercase letters, digits and single hyphens, not starting or "
                        "ending with a hyphen")
    if folder_name is not None and folder_name != name:
        problems.append(f"name {name!r}: must match the skill's folder name {folder_name!r}")
    description = skill.description
    if not description.strip():
        problems.append("description: empty (required)")
    elif len(description) > MAX_DESCRIPTION_CHARS:
        problems.append(f"description: {len(description)} characters, over the limit of {MAX_DESCRIPTION_CHARS}")
    meta = skill.metadata
    for key in meta:
        if key not in AGENT_SKILL_FIELDS:
            problems.append(f"front matter field {key!r}: not a field of the standard (put it under `metadata`)")
    if "license" in meta and (not isinstance(meta["license"], str) or not meta["license"].strip()):
        problems.append("license: must be a non-empty text")
    if "compatibility" in meta:
        value = meta["compatibility"]
        if not isinstance(value, str) or not value.strip():
            problems.append("compatibility: must be a non-empty text")
        elif len(value) > MAX_COMPATIBILITY_CHARS:
            problems.append(f"compatibility: {len(value)} characters, over the limit of {MAX_COMPATIBILITY_CHARS}")
    if "metadata" in meta:
        value = meta["metadata"]
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            problems.append("metadata: must map text keys to text values")
    if "allowed-tools" in meta and not isinstance(meta["allowed-tools"], str):
        problems.append("allowed-tools: must be one text of space-separated tool names")
    return problems


def validate_agent_skill_folder(folder: str | Path) -> list[str]:
    """Read `folder` as a skill folder and check it against the standard (its name must match the folder)."""
    folder = Path(folder)
    try:
        skill = Skill.load_folder(folder)
    except SkillParseError as exc:
        return [str(exc)]
    return validate_agent_skill(skill, folder_name=folder.name)


def conform_to_agent_skills(skill: Skill) -> tuple[Skill, list[str]]:
    """`skill` with its name and description brought within the standard (the name slugified and cut to 64
    characters, the description flattened and cut to 1024); the changes made, in words."""
    notes: list[str] = []
    name = slugify(skill.name, fallback="skill")
    if name != skill.name:
        notes.append(f"name {skill.name!r} became {name!r} (lowercase letters, digits and hyphens, at most "
                     f"{MAX_NAME_CHARS} characters)")
    description = " ".join(skill.description.split())
    if len(description) > MAX_DESCRIPTION_CHARS:
        cut = description[:MAX_DESCRIPTION_CHARS - 3].rsplit(" ", 1)[0].rstrip(" ,;:")
        description = cut + "..."
        notes.append(f"description cut from {len(skill.description)} to {len(description)} characters (the limit "
                     f"is {MAX_DESCRIPTION_CHARS})")
    if not description:
        description = f"How to use the {name} skill."
        notes.append("description was empty; a placeholder was written")
    return skill.model_copy(update={"name": name, "description": description}), notes
