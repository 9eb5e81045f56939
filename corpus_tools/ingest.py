"""Load skill corpora into `SkillRecord`s, with a report of every file that was skipped or adjusted.

The source kinds (`load_corpus` picks by looking at each source):

* a folder with `MANIFEST.jsonl` (the shared corpus layout: `skills/<id>` files, one manifest row per
  file with repo, commit, path, license, kind and the `skill` a reference belongs to);
* a `.jsonl` dump, one skill per line (`text`, or `name`/`description`/`body`; optional `id`, `repo`,
  `path`, `commit`, `license`, `references: [{path, text}]`);
* any other directory tree: every folder holding a `SKILL.md` is a skill, other `.md` files below it
  (not inside a nested skill) are its references. A skill's repository is the nearest git checkout above
  it, else `repos/<owner>/<name>/...` in its path, else the tree's own checkout or folder name;
* a SQLite file (`.sqlite`/`.db`), parquet (a file, a folder of them or a glob) and a `.zip`/`.tar(.gz)`
  of any source: see corpus_tools.sources (column mapping, joins, bounds).

Bad input never stops a build. Files are skipped with a reason (binary, empty, too large, symlink
loop, ...) or kept with a note (non-UTF-8 bytes replaced, invalid front matter read leniently, no
headings). Decision on non-UTF-8 text: bytes that do not decode are replaced with U+FFFD and the file
is kept (a note `decoded_with_replacement`), because one stray Latin-1 byte should not cost a good
skill; a file where more than 5% of the characters would be replacements is not text and is skipped
as `not_utf8`. Exact duplicates are dropped, keeping the first one loaded: the same content hash when the
source has one (a release's own hash column), else the same SKILL.md text (`dedupe_digest`, alike for every
source). A skill's licence is its front matter's `license:` when that names one (or reserves the rights:
`proprietary`), else its source's: the nearest LICENSE file of a folder tree (the skill folder's, then the
repository's), a manifest row's or a table's licence column. The report lists at
most `MAX_LISTED_PER_REASON` files per reason and counts the rest, so a release with millions of
duplicate rows keeps a small report.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import heapq
import json
import os
import re
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np

from corpus_tools import sources as table_sources
from corpus_tools.frontmatter import parse_front_matter
from corpus_tools.sources import Row, SourceOptions

SKILL_FILE = "SKILL.md"
MANIFEST_FILE = "MANIFEST.jsonl"
DEFAULT_MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_LISTED_PER_REASON = 1000
MAX_REPLACEMENT_RATIO = 0.05
CHECKOUT_CACHE = 256  # folders whose git-checkout verdict a tree walk keeps (its recent ancestors)
DEDUPE_BATCH = 1 << 16  # new dedupe keys held in a set before they join the sorted array (SeenKeys)
_SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv"})
_BOILERPLATE = re.compile(r"^(license|licence|copying|changelog|history|notice|code_of_conduct)\b", re.I)
_HEADING_LINE = re.compile(r"^ {0,3}#{1,6}(?:\s|$)")
_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})")

# Reasons a file is skipped.
SKIP_BINARY = "binary"
SKIP_NOT_UTF8 = "not_utf8"
SKIP_TOO_LARGE = "too_large"
SKIP_EMPTY = "empty"
SKIP_SYMLINK_LOOP = "symlink_loop"
SKIP_BROKEN_SYMLINK = "broken_symlink"
SKIP_UNREADABLE = "unreadable"
SKIP_LINK_OUTSIDE = "link_outside"  # resolves (through a link, or a manifest's path) outside the folder read
SKIP_NOT_REGULAR = "not_regular"  # a FIFO, device or socket where a file was expected: never opened for reading
SKIP_DUPLICATE = "duplicate"
SKIP_OUTSIDE_SKILL = "outside_skill"
SKIP_BOILERPLATE = "boilerplate"
SKIP_INVALID_JSON = "invalid_json"
SKIP_MISSING_TEXT = "missing_text"
SKIP_MISSING_FILE = "missing_file"
SKIP_ORPHAN_REFERENCE = "orphan_reference"
SKIP_NOT_A_SOURCE = "not_a_source"
SKIP_WRONG_TYPE = "wrong_type"
SKIP_ARCHIVE_MEMBER = "archive_member"
# Notes on files that were kept.
NOTE_REPLACED = "decoded_with_replacement"
NOTE_NO_HEADINGS = "no_headings"
NOTE_NO_NAME = "no_name"
NOTE_SHA_MISMATCH = "sha256_mismatch"
# A second content at a (repository, path) already loaded: kept as its own skill, its id suffixed with its hash.
NOTE_PATH_COLLISION = "path_collision"
# Front matter issues (see corpus_tools.frontmatter) are notes as well.

ProgressFn = Callable[[int, "int | None"], None]


@dataclass(slots=True)
class RefDoc:
    """A markdown reference file that belongs to a skill."""

    path: str
    text: str


@dataclass
class SkillRecord:
    id: str
    name: str
    description: str
    body: str
    text: str
    metadata: dict[str, Any]
    repo: str
    path: str
    commit: str
    license: str
    references: list[RefDoc] = field(default_factory=list)
    content_hash: str = ""


@dataclass(slots=True)
class FileIssue:
    source: str
    path: str
    reason: str
    detail: str = ""


@dataclass
class IngestReport:
    sources: list[str] = field(default_factory=list)
    files_seen: int = 0
    skills_loaded: int = 0
    references_loaded: int = 0
    skipped: list[FileIssue] = field(default_factory=list)
    notes: list[FileIssue] = field(default_factory=list)
    # How each table source's columns were mapped (corpus_tools.sources), by source.
    mappings: dict[str, Any] = field(default_factory=dict)
    _skip_counter: Counter[str] = field(default_factory=Counter)
    _note_counter: Counter[str] = field(default_factory=Counter)

    def skip(self, source: str, path: str, reason: str, detail: str = "") -> None:
        self._skip_counter[reason] += 1
        if self._skip_counter[reason] <= MAX_LISTED_PER_REASON:
            self.skipped.append(FileIssue(source, path, reason, detail))

    def note(self, source: str, path: str, reason: str, detail: str = "") -> None:
        self._note_counter[reason] += 1
        if self._note_counter[reason] <= MAX_LISTED_PER_REASON:
            self.notes.append(FileIssue(source, path, reason, detail))

    def skip_counts(self) -> dict[str, int]:
        return dict(self._skip_counter.most_common())

    def note_counts(self) -> dict[str, int]:
        return dict(self._note_counter.most_common())

    def reasons_for(self, path_suffix: str) -> list[str]:
        """Skip and note reasons recorded for files whose path ends with `path_suffix`."""
        return [i.reason for i in (*self.skipped, *self.notes) if i.path.endswith(path_suffix)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "sources": self.sources,
            "files_seen": self.files_seen,
            "skills_loaded": self.skills_loaded,
            "references_loaded": self.references_loaded,
            "skipped_counts": self.skip_counts(),
            "note_counts": self.note_counts(),
            "mappings": self.mappings,
            "listed_per_reason": MAX_LISTED_PER_REASON,
            "skipped": [asdict(i) for i in self.skipped],
            "notes": [asdict(i) for i in self.notes],
        }

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")

    def summary(self) -> str:
        lines = [f"files seen {self.files_seen}; skills loaded {self.skills_loaded}; "
                 f"references loaded {self.references_loaded}"]
        if self.skipped:
            lines.append("skipped: " + ", ".join(f"{k} {v}" for k, v in self.skip_counts().items()))
        if self.notes:
            lines.append("kept with notes: " + ", ".join(f"{k} {v}" for k, v in self.note_counts().items()))
        collisions = self.note_counts().get(NOTE_PATH_COLLISION, 0)
        if collisions:
            lines.append(f"warning: {collisions} skill(s) share a repository and path with a different content "
                         "loaded before; each is kept as its own skill, its id suffixed with @<content hash>")
        for source, mapping in self.mappings.items():
            lines.append(f"columns of {source}:\n  " + mapping["described"].replace("\n", "\n  "))
        return "\n".join(lines)


def load_corpus(
    sources: Sequence[str | Path] | str | Path,
    *,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    progress: ProgressFn | None = None,
    options: SourceOptions | None = None,
) -> tuple[list[SkillRecord], IngestReport]:
    """Load every skill from `sources` (manifest folders, .jsonl dumps, directory trees, SQLite, parquet,
    archives); `options` says how table sources map their columns."""
    if isinstance(sources, (str, Path)):
        sources = [sources]
    report = IngestReport(sources=[str(s) for s in sources])
    records = list(iter_corpus(sources, report, max_file_bytes=max_file_bytes, progress=progress,
                               options=options))
    return records, report


def iter_corpus(
    sources: Sequence[str | Path] | str | Path,
    report: IngestReport | None = None,
    *,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    progress: ProgressFn | None = None,
    options: SourceOptions | None = None,
) -> Iterator[SkillRecord]:
    """Yield the skills of `sources` one at a time (what `load_corpus` returns, in the same order),
    so a build holds one skill's text at a time; `report` fills in as the records go by."""
    if isinstance(sources, (str, Path)):
        sources = [sources]
    if report is None:
        report = IngestReport(sources=[str(s) for s in sources])
    loader = _Loader(report, max_file_bytes, progress, options or SourceOptions())
    for source in sources:
        for record in loader.load_source(source):
            report.skills_loaded += 1
            report.references_loaded += len(record.references)
            yield record


# --------------------------------------------------------------------------------------------------
# Reading one file


@dataclass(slots=True)
class _Decoded:
    text: str | None
    reason: str = ""
    detail: str = ""
    replaced: int = 0


def _stat_problem(path: Path) -> tuple[str, str] | None:
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return SKIP_SYMLINK_LOOP, "symbolic link loop"
        if path.is_symlink():
            return SKIP_BROKEN_SYMLINK, "link target missing"
        return SKIP_UNREADABLE, exc.strerror or str(exc)
    return None


def read_text_file(path: Path, max_bytes: int = DEFAULT_MAX_FILE_BYTES, within: str | None = None) -> _Decoded:
    """The decoded text of `path`, or why it was skipped (see `read_file_bytes`)."""
    data = read_file_bytes(path, max_bytes, within)
    return data if isinstance(data, _Decoded) else decode_bytes(data)


def read_file_bytes(path: Path, max_bytes: int, within: str | None = None) -> bytes | _Decoded:
    """The bytes of the regular file at `path` (links resolved), or a `_Decoded` saying why not. At most
    `max_bytes` are read; a FIFO, device or socket is never opened for reading (it could block or never end);
    with `within` (a real folder path), a file whose real path lies outside that folder is refused
    (`link_outside`), so a link in a downloaded tree cannot make the build read ~/.ssh or /etc into an index."""
    try:
        real = os.path.realpath(path, strict=True)
    except OSError:
        problem = _stat_problem(path)
        return _Decoded(None, *(problem or (SKIP_UNREADABLE, "cannot resolve the path")))
    if within is not None and not _inside(real, within):
        return _Decoded(None, SKIP_LINK_OUTSIDE, "resolves outside the folder read")
    try:
        # O_NOFOLLOW: `real` has no links left; one put there since is refused, not followed
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return _Decoded(None, SKIP_UNREADABLE, exc.strerror or str(exc))
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fd)
        if not stat.S_ISREG(mode.st_mode):
            return _Decoded(None, SKIP_NOT_REGULAR, "not a regular file (a FIFO, device or socket)")
        if mode.st_size > max_bytes:
            return _Decoded(None, SKIP_TOO_LARGE, f"{mode.st_size} bytes > limit {max_bytes}")
        try:
            data = fh.read(max_bytes + 1)
        except OSError as exc:
            return _Decoded(None, SKIP_UNREADABLE, exc.strerror or str(exc))
    if len(data) > max_bytes:  # it grew after the size check
        return _Decoded(None, SKIP_TOO_LARGE, f"more than {max_bytes} bytes")
    return data


def _bounded_lines(fh: Any, max_bytes: int) -> Iterator[tuple[bytes, int]]:
    """(line, its length) for each line of binary file `fh`, holding at most `max_bytes` + 1 bytes of a line:
    a longer one yields its head (to be skipped as too large) and its tail is read past in 1 MiB pieces."""
    while True:
        raw = fh.readline(max_bytes + 1)
        if not raw:
            return
        length = len(raw)
        if length > max_bytes and not raw.endswith(b"\n"):
            while True:
                rest = fh.readline(1 << 20)
                length += len(rest)
                if not rest or rest.endswith(b"\n"):
                    break
        yield raw, length


def _inside(real: str, folder: str) -> bool:
    """Whether real path `real` is `folder` or lies below it."""
    return real == folder or real.startswith(folder.rstrip(os.sep) + os.sep)


def decode_bytes(data: bytes) -> _Decoded:
    if not data.strip():
        return _Decoded(None, SKIP_EMPTY, "no content" if not data else "only whitespace")
    if b"\x00" in data[:8192]:
        return _Decoded(None, SKIP_BINARY, "NUL bytes in the first 8 KiB")
    try:
        return _Decoded(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        first_error = f"first bad byte at offset {exc.start}"
    text = data.decode("utf-8", errors="replace").lstrip("\ufeff")
    replaced = text.count("\ufffd")
    if replaced > MAX_REPLACEMENT_RATIO * max(len(text), 1):
        return _Decoded(None, SKIP_NOT_UTF8, f"{replaced} of {len(text)} characters do not decode")
    return _Decoded(text, detail=f"{replaced} undecodable byte sequence(s) replaced; {first_error}", replaced=replaced)


def has_headings(body: str) -> bool:
    """True when `body` has an ATX heading outside fenced code (a cheap check for the report)."""
    fence: str | None = None
    for line in body.splitlines():
        m = _FENCE_LINE.match(line)
        if m:
            marker = m.group(1)
            if fence is None:
                fence = marker[0] * 3
            elif marker.startswith(fence):
                fence = None
            continue
        if fence is None and _HEADING_LINE.match(line):
            return True
    return False


# --------------------------------------------------------------------------------------------------
# Provenance helpers for plain directory trees

_LICENSE_NAMES = ("LICENSE", "LICENSE.md", "LICENSE.txt", "LICENCE", "COPYING", "COPYING.md")
# A vendored copy of another repository inside a skill collection: `<owner>--<name>/` directly in a folder of
# one of these names (`skills/anthropics--skills/docx/SKILL.md`). A GitHub owner has no `--`, so the first one
# splits it from the name.
VENDORED_PARENTS = frozenset({"skills", "vendor", "vendored", "repos", "collections", "third_party"})
_VENDORED = re.compile(r"([A-Za-z0-9]+(?:-[A-Za-z0-9]+)*)--([A-Za-z0-9._-]+)")
_COMMIT = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
# What a tree's provenance files may hold before they are taken as unknown (read whole, so bounded).
LICENSE_FILE_BYTES = 1 << 20
GIT_CONFIG_BYTES = 1 << 20
GIT_REF_BYTES = 4096
GIT_PACKED_REFS_BYTES = 16 << 20


# Licence texts and front-matter values that reserve the rights: class `proprietary`, never `unknown`.
_PROPRIETARY = re.compile(r"\ball rights reserved\b|\bproprietary\b|\bconfidential\b|\bnot for (re)?distribution\b|"
                          r"\bsource[- ]available\b|\bmay not be (copied|reproduced|redistributed)\b", re.I)
PROPRIETARY = "proprietary"
# Licence values that say nothing: treated as unknown by the licence filter (corpus_tools.build), and a
# front-matter value among them (or one naming only the licence file) falls through to the source's licence.
UNKNOWN_LICENSES = frozenset({"", "unknown", "noassertion", "none", "null", "other", "unlicensed"})
_LICENSE_FILE_WORDS = frozenset({"license", "licence", "license.txt", "license.md", "licence.txt", "copying"})
# A front-matter `license:` value that is an identifier (MIT, Apache-2.0, CC-BY-4.0), not a sentence; or a
# licence family spelled out ("MIT License", "Apache License 2.0", "BSD 3-Clause License").
_LICENSE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+-]*")
_LICENSE_WORDS = re.compile(r"\b(?:licen[cs]e|version)\b", re.I)
_LICENSE_FAMILIES = frozenset({"mit", "apache", "bsd", "0bsd", "gpl", "lgpl", "agpl", "mpl", "epl", "eupl", "cc",
                               "cc0", "isc", "unlicense", "zlib", "artistic", "wtfpl", "bsl", "ofl", "upl", "cddl",
                               "osl", "afl", "ncsa", "postgresql", "cecill"})


def dedupe_digest(text: str) -> bytes:
    """sha256 of a SKILL.md text as every source dedupes it: line endings made \\n, a BOM and the whitespace
    around the text dropped (a JSONL dump's stripped text and a table's raw one are then the same content)."""
    normal = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").strip()
    return hashlib.sha256(normal.encode("utf-8")).digest()


def license_value(value: str) -> str:
    """A source's or front matter's licence value as the index records it: `proprietary` for a text that
    reserves the rights ("Proprietary. LICENSE.txt has complete terms", "All rights reserved"), the value
    itself for an identifier, "" for anything else (a sentence such as "Complete terms in LICENSE.txt": the
    next source of the licence decides)."""
    text = value.strip()
    if _PROPRIETARY.search(text):
        return PROPRIETARY
    if text.lower() in UNKNOWN_LICENSES or text.lower() in _LICENSE_FILE_WORDS:
        return ""
    if _LICENSE_ID.fullmatch(text) and _licence_family(text):
        return text
    words = _LICENSE_WORDS.sub(" ", text).split()
    spelled = "-".join(words)
    if 1 <= len(words) <= 2 and _licence_family(words[0]) and _LICENSE_ID.fullmatch(spelled):
        return spelled
    return ""


def _licence_family(word: str) -> bool:
    """Whether `word` starts with a known licence family ("Apache-2.0": apache), not any word ("internal")."""
    return re.split(r"[-.]", word, maxsplit=1)[0].lower() in _LICENSE_FAMILIES


def detect_license(text: str) -> str:
    """Best-effort SPDX identifier from a license file's text; `proprietary` for one that reserves the rights."""
    head = text[:3000].lower()
    if "apache license" in head and "version 2.0" in head:
        return "Apache-2.0"
    if "permission is hereby granted, free of charge" in head:
        return "MIT"
    if "creative commons" in head and "sharealike" in head.replace("-", "").replace(" ", ""):
        return "CC-BY-SA-4.0"
    if "creative commons" in head and "attribution" in head:
        return "CC-BY-4.0"
    if "redistribution and use in source and binary forms" in head:
        return "BSD"
    if "gnu general public license" in head:
        return "GPL"
    if "mozilla public license" in head:
        return "MPL-2.0"
    if "this is free and unencumbered software" in head:
        return "Unlicense"
    if _PROPRIETARY.search(head):  # after BSD: its text says "All rights reserved" too
        return PROPRIETARY
    return "unknown"


def _git_provenance(root: Path, within: str | None = None) -> tuple[str | None, str]:
    """(owner/name from the origin remote, HEAD commit) of a git checkout at `root`, if any. Its files are read
    as a corpus file is (bounded, no FIFO, nothing outside `within`); a commit that is not a hash is ""."""

    def text(name: str, max_bytes: int) -> str:
        data = read_file_bytes(git / name, max_bytes, within)
        return "" if isinstance(data, _Decoded) else data.decode("utf-8", errors="replace")

    git = root / ".git"
    if not git.is_dir() or (within is not None and not _inside(os.path.realpath(git), within)):
        return None, ""
    repo = None
    m = re.search(r'\[remote "origin"\][^\[]*?url\s*=\s*(\S+)', text("config", GIT_CONFIG_BYTES))
    if m:
        tail = re.sub(r"\.git$", "", m.group(1).rstrip("/"))
        parts = re.split(r"[/:]", tail)
        if len(parts) >= 2:
            repo = f"{parts[-2]}/{parts[-1]}"
    commit = ""
    head = text("HEAD", GIT_REF_BYTES).strip()
    if head.startswith("ref: "):
        ref = head[5:]
        commit = text(ref, GIT_REF_BYTES).strip()
        if not commit:
            for line in text("packed-refs", GIT_PACKED_REFS_BYTES).splitlines():
                if line.endswith(" " + ref):
                    commit = line.split()[0]
    else:
        commit = head
    return repo, commit if _COMMIT.fullmatch(commit) else ""


# --------------------------------------------------------------------------------------------------


class SeenKeys:
    """A set of 16-byte keys in ~16 bytes each (a Python set of bytes takes ~90): the newest keys in a
    set, merged every `batch` keys into one sorted numpy array that is binary-searched. A release of
    millions of contents then costs tens of MB for dedupe, not hundreds."""

    def __init__(self, batch: int | None = None) -> None:
        self.batch = batch or DEDUPE_BATCH
        self.recent: set[bytes] = set()
        self.older = np.zeros(0, dtype="V16")  # raw 16 bytes, ordered as memcmp orders them

    def __contains__(self, key: bytes) -> bool:
        if key in self.recent:
            return True
        if len(key) != 16:  # never added (add refuses it)
            return False
        at = int(self.older.searchsorted(np.void(key)))
        return at < len(self.older) and self.older[at].tobytes() == key

    def add(self, key: bytes) -> None:
        if len(key) != 16:
            raise ValueError(f"dedupe keys are 16 bytes, got {len(key)}")
        self.recent.add(key)
        if len(self.recent) >= self.batch:
            merged = np.concatenate([self.older, np.frombuffer(b"".join(self.recent), dtype="V16")])
            merged.sort()
            self.older, self.recent = merged, set()

    def __len__(self) -> int:
        return len(self.recent) + len(self.older)


class _Loader:
    def __init__(self, report: IngestReport, max_bytes: int, progress: ProgressFn | None,
                 options: SourceOptions):
        self.report = report
        self.max_bytes = max_bytes
        self.progress = progress
        self.options = options
        # 16-byte key of every content kept (the release's hash, else `dedupe_digest`): duplicates are dropped
        self.seen_hashes = SeenKeys()
        # 16-byte key of every (repository, path) kept: a second content there is a collision, kept apart
        self.seen_paths = SeenKeys()

    # ---- dispatch
    def load_source(self, given: str | Path) -> Iterator[SkillRecord]:
        label = str(given)
        if table_sources.is_glob(given):
            yield from self._load_parquet(given)
            return
        source = Path(given)
        problem = _stat_problem(source)
        kind = table_sources.source_kind(source) if not problem else "missing"
        if problem:
            self.report.skip(label, label, *problem)
        elif kind == "manifest":
            yield from self._load_manifest(source)
        elif kind == "parquet":
            yield from self._load_parquet(source)
        elif kind == "tree":
            yield from self._load_tree(source)
        elif kind == "jsonl":
            yield from self._load_jsonl(source)
        elif kind == "sqlite":
            yield from self._load_sqlite(source)
        elif kind == "archive":
            yield from self._load_archive(source)
        elif source.name == SKILL_FILE:
            record = self._load_tree_skill(source.parent, [], source.parent.parent, label,
                                           "local/" + source.parent.name, "")
            if record is not None:
                yield record
        else:
            self.report.skip(label, label, SKIP_NOT_A_SOURCE,
                             "expected a folder, a .jsonl dump, a SKILL.md, a folder with MANIFEST.jsonl, a SQLite "
                             "(.sqlite/.db) or parquet file, or a .zip/.tar(.gz) of one")

    def _tick(self, done: int, total: int | None) -> None:
        if self.progress is not None:
            self.progress(done, total)

    # ---- shared record construction
    def _add_record(self, source: str, *, record_id: str, text: str, repo: str, path: str, commit: str,
                    license: str, references: list[RefDoc], fallback_name: str,
                    extra_metadata: dict[str, Any] | None = None, known_name: str | None = None,
                    known_description: str | None = None, content_hash: str = "") -> SkillRecord | None:
        digest = dedupe_digest(text)
        key = hashlib.blake2b(content_hash.encode(), digest_size=16).digest() if content_hash else digest[:16]
        if key in self.seen_hashes:
            what = f"content hash {content_hash}" if content_hash else "SKILL.md text"
            self.report.skip(source, path_label(repo, path), SKIP_DUPLICATE, f"same {what} as a skill already loaded")
            return None
        content_hash = content_hash or digest.hex()
        label = path_label(repo, path)
        path_key = hashlib.blake2b(f"{repo}\0{path}".encode(), digest_size=16).digest()
        if path_key in self.seen_paths:
            # Two contents at one (repository, path) must not merge into one skill document downstream.
            record_id = f"{record_id}@{content_hash[:12]}"
            self.report.note(source, label, NOTE_PATH_COLLISION,
                             f"another content was loaded at this repository and path; kept as {record_id}")
        fm = parse_front_matter(text)
        if fm.issue:
            self.report.note(source, label, fm.issue, fm.detail)
        data = dict(fm.data)
        # The skill's own front matter first, then what the source says (its folder's or repository's licence).
        license = license_value(_as_text(data.get("license"))) or license_value(license) or license or "unknown"
        name = _as_text(data.pop("name", None)) or (known_name or "")
        description = _as_text(data.pop("description", None)) or (known_description or "")
        if not name:
            name = fallback_name
            self.report.note(source, label, NOTE_NO_NAME, f"name taken from the folder: {fallback_name}")
        if not has_headings(fm.body):
            self.report.note(source, label, NOTE_NO_HEADINGS, "the body becomes a single section")
        metadata = {k: v for k, v in data.items()}
        if extra_metadata:
            metadata.update(extra_metadata)
        record = SkillRecord(id=record_id, name=name, description=description, body=fm.body, text=text,
                             metadata=metadata, repo=repo, path=path, commit=commit, license=license,
                             references=references, content_hash=content_hash)
        self.seen_hashes.add(key)
        if path_key not in self.seen_paths:
            self.seen_paths.add(path_key)
        return record

    def _decode_file(self, source: str, file: Path, label: str, within: str | None) -> str | None:
        return self._decoded(source, read_text_file(file, self.max_bytes, within), label)

    def _decoded(self, source: str, decoded: _Decoded, label: str) -> str | None:
        if decoded.text is None:
            self.report.skip(source, label, decoded.reason, decoded.detail)
            return None
        if decoded.replaced:
            self.report.note(source, label, NOTE_REPLACED, decoded.detail)
        return decoded.text

    # ---- manifest folders
    def _load_manifest(self, root: Path) -> Iterator[SkillRecord]:
        source = str(root)
        rows: list[dict[str, Any]] = []
        with open(root / MANIFEST_FILE, "rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                if not raw.strip():
                    continue
                try:
                    row = json.loads(raw)
                except ValueError as exc:
                    self.report.skip(source, f"{MANIFEST_FILE}:{lineno}", SKIP_INVALID_JSON, str(exc))
                    continue
                if not isinstance(row, dict) or "id" not in row:
                    self.report.skip(source, f"{MANIFEST_FILE}:{lineno}", SKIP_INVALID_JSON, "row without an id")
                    continue
                rows.append(row)
        refs_by_skill: dict[str, list[dict[str, Any]]] = {}
        skills: list[dict[str, Any]] = []
        for row in rows:
            if row.get("kind", "skill") == "skill" and row.get("skill", row["id"]) == row["id"]:
                skills.append(row)
            else:
                refs_by_skill.setdefault(str(row.get("skill")), []).append(row)
        files_dir = root / "skills"
        within = os.path.realpath(files_dir)  # a row's id names a file in skills/, never one elsewhere
        total = len(rows)
        done = 0
        skill_ids = set()
        for row in skills:
            skill_ids.add(row["id"])
            references: list[RefDoc] = []
            for ref in refs_by_skill.get(row["id"], []):
                self.report.files_seen += 1
                text = self._manifest_file(source, files_dir, ref, within)
                if text is not None:
                    references.append(RefDoc(path=str(ref.get("path") or ref["id"]), text=text))
            self.report.files_seen += 1
            text = self._manifest_file(source, files_dir, row, within)
            done += 1 + len(refs_by_skill.get(row["id"], []))
            self._tick(done, total)
            if text is None:
                for doc in references:
                    self.report.skip(source, doc.path, SKIP_ORPHAN_REFERENCE, f"its skill {row['id']} was skipped")
                continue
            path = str(row.get("path") or row["id"])
            extra = {k: row[k] for k in ("near_duplicate_of",) if row.get(k)}
            record = self._add_record(source, record_id=str(row["id"]), text=text, repo=str(row.get("repo") or "unknown"),
                             path=path, commit=str(row.get("commit") or ""),
                             license=str(row.get("license") or "unknown"), references=references,
                             fallback_name=Path(path).parent.name or Path(path).stem, extra_metadata=extra,
                             known_name=row.get("name"), known_description=row.get("description"))
            if record is not None:
                yield record
        for skill_id, refs in refs_by_skill.items():
            if skill_id not in skill_ids:
                for ref in refs:
                    self.report.files_seen += 1
                    detail = f"no skill row {skill_id}" if ref.get("skill") else "manifest row names no skill"
                    self.report.skip(source, path_label(str(ref.get("repo") or ""), str(ref.get("path") or ref["id"])),
                                     SKIP_ORPHAN_REFERENCE, detail)

    def _manifest_file(self, source: str, files_dir: Path, row: dict[str, Any], within: str) -> str | None:
        file = files_dir / str(row["id"])
        label = path_label(str(row.get("repo") or ""), str(row.get("path") or row["id"]))
        if not os.path.lexists(file):
            self.report.skip(source, label, SKIP_MISSING_FILE, f"{file} does not exist")
            return None
        data = read_file_bytes(file, self.max_bytes, within)
        if isinstance(data, _Decoded):
            return self._decoded(source, data, label)
        text = self._decoded(source, decode_bytes(data), label)
        expected = row.get("sha256")
        if text is not None and expected and hashlib.sha256(data).hexdigest() != expected:
            self.report.note(source, label, NOTE_SHA_MISMATCH, "file differs from its manifest row")
        return text

    # ---- .jsonl dumps
    def _load_jsonl(self, file: Path) -> Iterator[SkillRecord]:
        source = str(file)
        try:
            total = file.stat().st_size
            fh = open(file, "rb")
        except OSError as exc:
            self.report.skip(source, source, SKIP_UNREADABLE, str(exc))
            return
        with fh:
            position = 0
            for lineno, (raw, length) in enumerate(_bounded_lines(fh, self.max_bytes), 1):
                position += length
                if lineno % 500 == 0:
                    self._tick(position, total)
                if not raw.strip():
                    continue
                self.report.files_seen += 1
                record = self._jsonl_line(source, f"{file.name}:{lineno}", raw, length)
                if record is not None:
                    yield record
            self._tick(total, total)

    def _jsonl_line(self, source: str, where: str, raw: bytes, length: int) -> SkillRecord | None:
        if length > self.max_bytes:
            self.report.skip(source, where, SKIP_TOO_LARGE, f"{length} bytes > limit {self.max_bytes}")
            return None
        decoded = decode_bytes(raw)
        if decoded.text is None:
            self.report.skip(source, where, decoded.reason, decoded.detail)
            return None
        try:
            row = json.loads(decoded.text)
        except ValueError as exc:
            self.report.skip(source, where, SKIP_INVALID_JSON, str(exc))
            return None
        if not isinstance(row, dict):
            self.report.skip(source, where, SKIP_INVALID_JSON, "line is not a JSON object")
            return None
        text = _as_text(row.get("text") or row.get("content") or row.get("skill_md") or row.get("markdown"))
        if not text and row.get("body"):
            front = {k: row[k] for k in ("name", "description") if row.get(k)}
            text = ("---\n" + yaml_dump(front) + "---\n" if front else "") + _as_text(row["body"])
        if not text or not text.strip():
            self.report.skip(source, where, SKIP_MISSING_TEXT, "no text/content/body field")
            return None
        repo = _as_text(row.get("repo")) or "unknown"
        path = _as_text(row.get("path")) or where
        if decoded.replaced:
            self.report.note(source, path_label(repo, path), NOTE_REPLACED, decoded.detail)
        references = []
        for ref in row.get("references") or []:
            if isinstance(ref, dict) and _as_text(ref.get("text") or ref.get("content")).strip():
                references.append(RefDoc(path=_as_text(ref.get("path")) or "reference.md",
                                         text=_as_text(ref.get("text") or ref.get("content"))))
        content_id = dedupe_digest(text).hex()[:16]
        record_id = _as_text(row.get("id")) or (f"{repo}/{path}" if row.get("path") else f"jsonl:{content_id}")
        extra = row.get("metadata") if isinstance(row.get("metadata"), dict) else None
        return self._add_record(source, record_id=record_id, text=text, repo=repo, path=path,
                         commit=_as_text(row.get("commit")), license=_as_text(row.get("license")) or "unknown",
                         references=references, fallback_name=Path(path).parent.name or content_id,
                         extra_metadata=extra)

    # ---- table sources (corpus_tools.sources)
    def _load_sqlite(self, file: Path) -> Iterator[SkillRecord]:
        plan = table_sources.plan_sqlite(file, self.options)
        self._record_mapping(str(file), "sqlite", plan.describe(), plan.to_dict())
        yield from self._load_rows(str(file), table_sources.iter_sqlite_rows(file, plan, self.max_bytes))

    def _load_parquet(self, source: str | Path) -> Iterator[SkillRecord]:
        plan = table_sources.plan_parquet(source, self.options)
        self._record_mapping(str(source), "parquet", plan.describe(), plan.to_dict())
        yield from self._load_rows(str(source), table_sources.iter_parquet_rows(plan, self.max_bytes))

    def _record_mapping(self, source: str, kind: str, described: str, detail: dict[str, Any]) -> None:
        self.report.mappings[source] = {"kind": kind, "described": described, **detail}

    def _load_archive(self, archive: Path) -> Iterator[SkillRecord]:
        with table_sources.unpacked(archive) as (root, skipped):
            for reason, count in skipped.items():
                for _ in range(count):
                    self.report.skip(str(archive), archive.name, SKIP_ARCHIVE_MEMBER, reason)
            if table_sources.source_kind(root) == "archive":
                self.report.skip(str(archive), archive.name, SKIP_NOT_A_SOURCE, "an archive inside an archive")
                return
            yield from self.load_source(root)

    def _load_rows(self, source: str, rows: Iterator[Row]) -> Iterator[SkillRecord]:
        for number, row in enumerate(rows, 1):
            self.report.files_seen += 1
            if number % 1000 == 0:
                self._tick(number, None)
            record = self._row_record(source, row)
            if record is not None:
                yield record

    def _row_record(self, source: str, row: Row) -> SkillRecord | None:
        label = path_label(row.repo, row.path) if row.path else row.where
        if row.text is None and row.text_bytes > self.max_bytes:
            self.report.skip(source, label, SKIP_TOO_LARGE, f"{row.text_bytes} bytes > limit {self.max_bytes}")
            return None
        if row.text is None:
            self.report.skip(source, label, SKIP_MISSING_TEXT, "the text column is empty")
            return None
        if isinstance(row.text, bytes):
            decoded = decode_bytes(row.text)
        elif isinstance(row.text, str):
            if not row.text.strip():
                decoded = _Decoded(None, SKIP_EMPTY, "only whitespace" if row.text else "no content")
            elif "\x00" in row.text[:8192]:
                decoded = _Decoded(None, SKIP_BINARY, "NUL characters in the first 8 KiB")
            else:
                decoded = _Decoded(row.text)
        else:
            self.report.skip(source, label, SKIP_WRONG_TYPE, f"text is {type(row.text).__name__}, not text")
            return None
        if decoded.text is None:
            self.report.skip(source, label, decoded.reason, decoded.detail)
            return None
        if decoded.replaced:
            self.report.note(source, label, NOTE_REPLACED, decoded.detail)
        text = decoded.text
        repo = row.repo or "unknown"
        content_id = row.content_hash[:16] or dedupe_digest(text).hex()[:16]
        path = row.path or row.where
        record_id = f"{repo}/{row.path}" if row.repo and row.path else f"{repo}/{content_id}"
        extra: dict[str, Any] = dict(row.metadata or {})
        if row.repos is not None:
            extra["repos"] = row.repos
        if row.stars is not None:
            extra["stars"] = row.stars
        return self._add_record(source, record_id=record_id, text=text, repo=repo, path=path, commit=row.commit,
                                license=row.license or "unknown", references=_row_references(row.references),
                                fallback_name=Path(row.path).parent.name if row.path else content_id,
                                extra_metadata=extra, known_name=row.name or None,
                                known_description=row.description or None, content_hash=row.content_hash)

    # ---- directory trees
    def _load_tree(self, root: Path) -> Iterator[SkillRecord]:
        source = str(root)
        # What the tree's files may resolve to: the tree itself, unless the user trusts its links out
        within = None if self.options.follow_links_out else os.path.realpath(root)
        git_repo, commit = _git_provenance(root, within)
        repo = git_repo or f"local/{root.resolve().name}"
        # Consecutive skills share their ancestors: a small LRU keeps the repository look-up cheap without a
        # cache entry for every folder of the tree.
        checkout_at = functools.lru_cache(maxsize=CHECKOUT_CACHE)(functools.partial(_checkout_at, within=within))
        walk = _TreeWalk(root, source, self.report, within)
        for done, (skill_dir, ref_files) in enumerate(walk.skills(), 1):
            repo_root, skill_repo, skill_commit = self._tree_repo(skill_dir, root, checkout_at)
            if repo_root is None:
                repo_root, skill_repo, skill_commit = root, repo, commit
            record = self._load_tree_skill(skill_dir, ref_files, repo_root, source, skill_repo, skill_commit,
                                           walk_root=root, within=within)
            self._tick(done, None)  # streamed: the number of skills is not known up front
            if record is not None:
                yield record

    @staticmethod
    def _tree_repo(skill_dir: Path, root: Path,
                   checkout_at: Callable[[Path], tuple[bool, str | None, str]]) -> tuple[Path | None, str, str]:
        """(repository folder, owner/name, commit) of a skill inside a tree of checkouts: the nearest git
        checkout or vendored `<owner>--<name>/` folder (`VENDORED_PARENTS`; not the skill's own folder) between
        the skill and the tree's root, else a `repos/<owner>/<name>/` folder in its path; (None, "", "") when
        none (the tree's own repository applies). A vendored copy has no commit of its own: ""."""
        for folder in (skill_dir, *skill_dir.parents):
            if folder == root:
                break
            is_checkout, repo, commit = checkout_at(folder)
            if is_checkout:
                return folder, repo or f"local/{folder.name}", commit
            vendored = _VENDORED.fullmatch(folder.name) if folder != skill_dir else None
            if vendored and folder.parent.name in VENDORED_PARENTS:
                return folder, f"{vendored[1]}/{vendored[2]}", ""
        parts = skill_dir.relative_to(root).parts
        for i, part in enumerate(parts[:-2]):
            if part == "repos":
                return root.joinpath(*parts[: i + 3]), f"{parts[i + 1]}/{parts[i + 2]}", ""
        if root.name == "repos" and len(parts) >= 3:
            return root.joinpath(*parts[:2]), f"{parts[0]}/{parts[1]}", ""
        return None, "", ""

    def _load_tree_skill(self, skill_dir: Path, ref_files: list[Path], root: Path, source: str, repo: str,
                         commit: str, walk_root: Path | None = None, within: str | None = None) -> SkillRecord | None:
        rel_dir = skill_dir.relative_to(root).as_posix()
        skill_path = f"{rel_dir}/{SKILL_FILE}" if rel_dir != "." else SKILL_FILE
        references = []
        for ref in ref_files:
            self.report.files_seen += 1
            rel = ref.relative_to(root).as_posix()
            text = self._decode_file(source, ref, rel, within)
            if text is not None:
                references.append(RefDoc(path=rel, text=text))
        self.report.files_seen += 1
        text = self._decode_file(source, skill_dir / SKILL_FILE, skill_path, within)
        if text is None:
            for doc in references:
                self.report.skip(source, doc.path, SKIP_ORPHAN_REFERENCE, f"its skill {skill_path} was skipped")
            return None
        return self._add_record(source, record_id=f"{repo}/{skill_path}", text=text, repo=repo, path=skill_path,
                         commit=commit, license=self._tree_license(skill_dir, walk_root or root, within),
                         references=references,
                         fallback_name=skill_dir.name if rel_dir != "." else root.resolve().name)

    def _tree_license(self, skill_dir: Path, root: Path, within: str | None) -> str:
        """The licence of the nearest licence file from the skill up to `root`; "unknown" when none, or when
        the nearest cannot be read (too large, a link out of the tree, not a regular file)."""
        for folder in (skill_dir, *skill_dir.parents):
            for name in _LICENSE_NAMES:
                candidate = folder / name
                if not os.path.lexists(candidate) or os.path.isdir(candidate):
                    continue
                data = read_file_bytes(candidate, LICENSE_FILE_BYTES, within)
                if isinstance(data, _Decoded):
                    return "unknown"
                return detect_license(data.decode("utf-8", errors="replace"))
            if folder == root:
                break
        return "unknown"


def _checkout_at(folder: Path, within: str | None = None) -> tuple[bool, str | None, str]:
    """(is a git checkout, owner/name, commit) of `folder`."""
    if not (folder / ".git").is_dir():
        return False, None, ""
    return (True, *_git_provenance(folder, within))


@dataclass(slots=True)
class _Folder:
    """One folder of a tree walk: its path (as the walk reached it, links unresolved), its real path and its
    path relative to the walk's root."""

    path: Path
    real: str
    rel: str


@dataclass(slots=True)
class _Listing:
    """What a walk keeps of one folder's entries: child folders to walk and .md file names, sorted by name."""

    folders: list[str]
    linked: dict[str, str]  # child folder name -> real path, for the (few) followed links
    markdown: list[str]

    def child(self, parent: _Folder, name: str) -> _Folder:
        real = self.linked.get(name) or os.path.join(parent.real, name)
        return _Folder(parent.path / name, real, f"{parent.rel}/{name}" if parent.rel != "." else name)


# One key of a tree walk: (the subtree key, not the folder's own?, folder, known to be a skill?, the root skill's
# references when the key is the root's own)
_Step: TypeAlias = tuple[bool, _Folder, bool, "list[Path] | None"]


class _TreeWalk:
    """The skill folders of a directory tree, streamed in the order `sorted` gives their relative posix paths
    (the order the index records), each with its reference files. It holds the sorted entry names of the
    folders on the current path and the (rare) nested skills waiting for their turn, not the tree.

    Order. Sorted paths are not a plain depth-first order: "a" < "a b" < "a b/x" < "a/x", because " " (and
    "-", ".", ...) sort below "/". Within a folder each child folder c stands for two keys: c (its own
    SKILL.md) and c + "/" (everything below it, which is a contiguous run of the sorted paths); the walk takes
    those keys in sorted order. The root's own skill is ".", as its relative path.

    Ownership. A folder holding a SKILL.md is a skill; every other .md file below it belongs to it, up to a
    nested skill folder, which owns its own subtree (boilerplate names are reported, not kept). The skill's
    folders are listed when its turn comes (its references are needed then); the nested skills found on the
    way are kept until their keys come. .md files outside every skill are reported.

    Links. With `within` (a real folder path: the tree's own, unless the user trusts its links out), a link
    to a folder or .md file outside it is reported as `link_outside` and not followed: a downloaded tree must
    not make the build read the machine's other files. A linked file inside is read through the link. A linked
    folder is followed only when nothing else walks it: a link whose target lies inside the tree (where the
    walk reaches it under its own path, unless below a skipped folder such as node_modules) or inside a folder
    already followed through a link is reported as `symlink_loop` and not followed; so is a link that cannot
    resolve because it loops. The walk keeps only the real paths of the root and of the followed link
    targets, and inside a followed folder it does not re-enter one of those (a link to a folder above an
    earlier target). Broken links to .md files (or that fail for another reason than a missing target) are
    reported as `broken_symlink`. A SKILL.md link is judged when its skill is read, not here."""

    def __init__(self, root: Path, source: str, report: IngestReport, within: str | None = None) -> None:
        self.root = root
        self.source = source
        self.report = report
        self.within = within
        self.top = _Folder(root, os.path.realpath(root), ".")
        self.walked = {self.top.real}  # the root and every followed link target (real paths)

    def skills(self) -> Iterator[tuple[Path, list[Path]]]:
        """(skill folder, its reference files sorted as paths) for every skill folder, in sorted-path order."""
        if _holds_skill(self.top.path):
            owned = self._own_files(self.top)
            if owned is None:
                return
            refs, nested = owned
            frames = [self._nested_keys(nested, root_refs=refs)]
        else:
            frames = [self._folder_keys(self.top)]
        # Skills whose own key has come and whose subtree key has not: their nested skills.
        waiting: dict[str, list[_Folder]] = {}
        while frames:
            step = next(frames[-1], None)
            if step is None:
                frames.pop()
                continue
            below, folder, known_skill, root_refs = step
            if root_refs is not None:
                yield folder.path, root_refs
            elif not below:
                if not known_skill and not _holds_skill(folder.path):
                    continue
                owned = self._own_files(folder)
                if owned is None:
                    waiting[folder.rel] = []  # reported unreadable: neither a skill nor walked
                    continue
                refs, waiting[folder.rel] = owned
                yield folder.path, refs
            elif folder.rel in waiting:
                nested = waiting.pop(folder.rel)
                if nested:
                    frames.append(self._nested_keys(nested))
            else:
                frames.append(self._folder_keys(folder))

    def _folder_keys(self, folder: _Folder) -> Iterator[_Step]:
        """The keys of a folder outside every skill: its .md files are reported, each child folder gives its
        own key and its subtree's."""
        listing = self._list(folder)
        if listing is None:
            return
        for name in listing.markdown:
            self.report.files_seen += 1
            self.report.skip(self.source, listing.child(folder, name).rel, SKIP_OUTSIDE_SKILL,
                             "markdown file not inside a skill folder")
        by_subtree = sorted(listing.folders, key=lambda name: name + "/")
        own = ((name, False) for name in listing.folders)
        subtree = ((name + "/", True) for name in by_subtree)
        for key, below in heapq.merge(own, subtree):
            yield below, listing.child(folder, key[:-1] if below else key), False, None

    def _nested_keys(self, nested: list[_Folder], root_refs: list[Path] | None = None) -> Iterator[_Step]:
        """The keys of the skills nested in a skill (and of the root skill itself, "."), in sorted-path order."""
        keys: list[tuple[str, bool, _Folder]] = []
        for folder in nested:
            keys += [(folder.rel, False, folder), (folder.rel + "/", True, folder)]
        if root_refs is not None:
            keys.append((".", False, self.top))
        keys.sort(key=lambda key: key[0])
        for _, below, folder in keys:
            yield below, folder, True, (root_refs if folder is self.top else None)

    def _own_files(self, skill: _Folder) -> tuple[list[Path], list[_Folder]] | None:
        """(reference files, nested skill folders) of a skill folder; None when it cannot be listed."""
        refs: list[Path] = []
        nested: list[_Folder] = []
        stack = [skill]
        while stack:
            folder = stack.pop()
            if folder is not skill and _holds_skill(folder.path):
                nested.append(folder)
                continue
            listing = self._list(folder)
            if listing is None:
                if folder is skill:
                    return None
                continue
            for name in listing.markdown:
                if folder is skill and name == SKILL_FILE:
                    continue
                if _BOILERPLATE.match(name):
                    self.report.files_seen += 1
                    self.report.skip(self.source, listing.child(folder, name).rel, SKIP_BOILERPLATE,
                                     "license/changelog file, not skill content")
                else:
                    refs.append(folder.path / name)
            # Pushed in reverse: folders are listed (and their links followed) in name order.
            stack += [listing.child(folder, name) for name in reversed(listing.folders)]
        refs.sort()
        return refs, nested

    def _list(self, folder: _Folder) -> _Listing | None:
        """A folder's child folders to walk and .md files, links resolved (and reported) by the rule above;
        None (reported) when it cannot be read."""
        folders: list[str] = []
        markdown: list[str] = []
        links: list[str] = []
        try:
            with os.scandir(folder.path) as entries:
                for entry in entries:
                    name = entry.name
                    if name in _SKIPPED_DIRS:
                        continue
                    if entry.is_symlink():
                        links.append(name)
                    elif entry.is_dir(follow_symlinks=False):
                        if os.path.join(folder.real, name) not in self.walked:
                            folders.append(name)
                    elif name.endswith(".md") and entry.is_file(follow_symlinks=False):
                        markdown.append(name)
        except OSError as exc:
            self.report.skip(self.source, str(folder.path), SKIP_UNREADABLE, exc.strerror or str(exc))
            return None
        linked: dict[str, str] = {}
        for name in sorted(links):  # in name order, so which of two links to one folder is followed is stable
            real = self._follow(folder, name)
            if real is None:
                continue
            if os.path.isdir(real):
                linked[name] = real
                folders.append(name)
            elif name.endswith(".md"):
                markdown.append(name)
        folders.sort()
        markdown.sort()
        return _Listing(folders, linked, markdown)

    def _follow(self, folder: _Folder, name: str) -> str | None:
        """The real path of link `name` in `folder` if it is to be read (a file, or a folder nothing else
        walks, which is then recorded as walked); None, reported, when not."""
        path = folder.path / name
        rel = f"{folder.rel}/{name}" if folder.rel != "." else name
        try:
            real = os.path.realpath(path, strict=True)
        except OSError as exc:
            is_md = name.endswith(".md")
            if exc.errno == errno.ELOOP:
                self.report.skip(self.source, rel, SKIP_SYMLINK_LOOP, "symbolic link loop")
            elif is_md or exc.errno != errno.ENOENT:
                self.report.skip(self.source, rel, SKIP_BROKEN_SYMLINK, f"cannot resolve: {exc.strerror}")
            if is_md:
                self.report.files_seen += 1
            return None
        is_dir = os.path.isdir(real)
        if self.within is not None and not _inside(real, self.within):
            if name != SKILL_FILE and (is_dir or name.endswith(".md")):
                self.report.files_seen += not is_dir
                self.report.skip(self.source, rel, SKIP_LINK_OUTSIDE, "links out of the tree")
            return None
        if not is_dir:
            return real
        if self._walked_anyway(real):
            self.report.skip(self.source, rel, SKIP_SYMLINK_LOOP, f"links to a folder the walk reaches anyway: {real}")
            return None
        self.walked.add(real)
        return real

    def _walked_anyway(self, real: str) -> bool:
        """Whether folder `real` lies in the tree or in a followed link target, below no skipped folder."""
        while True:
            if real in self.walked:
                return True
            parent, name = os.path.split(real)
            if name in _SKIPPED_DIRS or parent == real:
                return False
            real = parent


def _holds_skill(folder: Path) -> bool:
    """Whether `folder` has a SKILL.md the walk reads: a regular file, or a link to something not a folder
    (the same verdict the folder's listing gives, without reporting anything)."""
    try:
        mode = os.lstat(folder / SKILL_FILE).st_mode
        if stat.S_ISLNK(mode):
            mode = os.stat(folder / SKILL_FILE).st_mode
            return not stat.S_ISDIR(mode)
    except OSError:
        return False
    return stat.S_ISREG(mode)


def path_label(repo: str, path: str) -> str:
    return f"{repo}/{path}" if repo else path


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, (list, tuple)):
        return " ".join(_as_text(v) for v in value)
    return str(value).strip()


def yaml_dump(data: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _row_references(value: Any) -> list[RefDoc]:
    """References of a table row: a JSON list (or a list) of {path, text} objects; anything else is none."""
    if isinstance(value, (bytes, str)):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    if not isinstance(value, list):
        return []
    refs = []
    for ref in value:
        if isinstance(ref, dict) and _as_text(ref.get("text") or ref.get("content")):
            refs.append(RefDoc(path=_as_text(ref.get("path")) or "reference.md",
                               text=str(ref.get("text") or ref.get("content"))))
    return refs


def iter_documents(record: SkillRecord) -> Iterable[tuple[str, str]]:
    """(path, text) of the skill file and each reference."""
    yield record.path, record.text
    for ref in record.references:
        yield ref.path, ref.text
