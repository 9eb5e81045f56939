"""Table-shaped and packed corpus sources: SQLite files, parquet files, and .zip/.tar archives of any source.

Each is read as a stream of rows (a SQLite cursor, parquet record batches), so memory stays flat whatever
the release's size. A row becomes a skill through a **column mapping** (`ColumnMapping`): which column holds
the SKILL.md text and, optionally, name, description, repo, path, commit, licence, content hash, stars and
references. The mapping is detected from column names (`FIELD_NAMES`) and, for the text column, from the
contents (long multi-line strings); `--map FIELD=COLUMN` overrides one field, `--sql` replaces the query of
a SQLite source. A source whose mapping finds no text column is an error naming the columns it saw.

Joins, detected from the tables (or parquet files) beside the one with the text:

* **occurrences**: a table with the content hash and a repo column but no text (GitSkills ships one row per
  SKILL.md file, one representative row per distinct content). Joined by hash, it gives each content the
  number of repositories that carry it (a popularity signal, `repos`) and, when the text table has none,
  the repo, path and commit of the content's first occurrence.
* **repository metadata**: a table with a repo column and a licence or stars column but neither text nor
  hash (e.g. `repos.parquet` with SPDX licences). Joined by repo name, it fills licence and stars.

Bad input that concerns the whole source (no text column, a column of the wrong type, a truncated file) is a
`SourceError`: one line, and the build writes nothing. A bad row (a huge or non-text value) is skipped with a
reason in the ingest report, as a bad file is.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import io
import os
import re
import shutil
import sqlite3
import stat
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

# Canonical fields a row can map to, and the column names each is detected from (exact, case-insensitive),
# best first.
FIELD_NAMES: dict[str, tuple[str, ...]] = {
    "text": ("text", "content", "skill_md", "skill_content", "markdown", "raw_content", "full_text",
             "raw_text", "raw", "skill_text", "body", "document", "md"),
    "name": ("name", "skill_name", "title"),
    "description": ("description", "skill_description", "desc", "summary"),
    "repo": ("repo", "repository", "full_name", "repo_name", "repo_full_name", "repository_full_name",
             "github_repo", "repo_id", "owner_repo", "repo_slug"),
    "path": ("path", "file_path", "skill_path", "filepath", "relpath", "skill_md_path", "source_path"),
    "commit": ("commit", "commit_sha", "sha", "revision", "head_sha", "commit_hash", "ref"),
    "license": ("license", "licence", "spdx", "spdx_id", "license_spdx", "license_spdx_id", "license_id",
                "license_key", "repo_license"),
    "content_hash": ("content_hash", "hash", "sha256", "content_sha256", "text_hash", "file_sha", "blob_sha",
                     "digest", "md5", "content_md5"),
    "stars": ("stars", "stargazers", "stargazers_count", "stargazer_count", "star_count", "repo_stars",
              "github_stars"),
    "references": ("references", "refs", "reference_files"),
    # The release's own choice of the row that stands for its content (GitSkills: `dedup_primary`).
    "primary": ("dedup_primary", "is_primary", "primary", "is_representative", "representative"),
    # Kept in the skill's metadata, for a filter to use (GitSkills' artifacts columns).
    "frontmatter_valid": ("frontmatter_valid", "front_matter_valid"),
    "composition_truncated": ("composition_truncated",),
    "has_scripts": ("has_scripts",),
    "has_references": ("has_references",),
}
FIELDS = tuple(FIELD_NAMES)
#: Fields copied into the skill's metadata as they are.
METADATA_FIELDS = ("frontmatter_valid", "composition_truncated", "has_scripts", "has_references")
# A folder-listing table (GitSkills' `artifact_siblings`): one row per file or folder beside a SKILL.md.
SIBLING_PATH_NAMES = ("artifact_path", "parent_path", "skill_dir")
SIBLING_ENTRY_NAMES = ("entry_name", "entry_path", "sibling_path", "file_name")
SIBLING_TYPE_NAMES = ("entry_type", "type", "kind")
# A listed file under scripts/ or with one of these endings counts as a script (`has_scripts`).
SCRIPT_SUFFIXES = (".py", ".sh", ".bash", ".js", ".mjs", ".ts", ".rb", ".go", ".ps1", ".pl")
# A text column found by content: most sampled values are strings this long with line breaks.
_TEXT_MIN_AVG_CHARS = 120
_SAMPLE_ROWS = 50
SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
PARQUET_SUFFIX = ".parquet"
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
# Bounds on what an archive may unpack to (actual bytes written, not what headers claim).
MAX_ARCHIVE_BYTES = 64 * 1024**3
MAX_ARCHIVE_MEMBERS = 10_000_000
_FTS_SHADOW = re.compile(r"_(data|idx|content|docsize|config)$")
PARQUET_EXTRA_HINT = "parquet sources need pyarrow: pip install 'raso[parquet]'"


class SourceError(ValueError):
    """A corpus source that cannot be read as a whole; the message is one line for the user."""


@dataclass(frozen=True)
class SourceOptions:
    """How sources are read: mapping overrides (`field -> column`), a SQLite query and a repository metadata
    file to join (parquet or SQLite) for table sources; for folder trees, whether links that lead out of the
    tree are followed (off: a downloaded tree's links must not reach the machine's other files)."""

    overrides: dict[str, str] = field(default_factory=dict)
    sql: str | None = None
    repos: Path | None = None
    follow_links_out: bool = False


def parse_overrides(pairs: Sequence[str]) -> dict[str, str]:
    """`["text=content", "content_hash=occurrences.sha"]` -> {"text": "content", "content_hash": "occurrences.sha"};
    a column may be table-qualified (TABLE.COLUMN, for a SQLite source; unqualified names the text table's), and
    `TABLE.COLUMN=FIELD` is read as `FIELD=TABLE.COLUMN`. Bad pairs raise."""
    overrides: dict[str, str] = {}
    for pair in pairs:
        key, sep, column = pair.partition("=")
        key, column = key.strip().lower().replace("licence", "license"), column.strip()
        if not sep or not column:
            raise SourceError(f"--map wants FIELD=COLUMN, got {pair!r}")
        swapped = column.lower().replace("licence", "license")
        if key not in FIELD_NAMES and "." in key and swapped in FIELD_NAMES:
            key, column = swapped, pair.partition("=")[0].strip()
        if key not in FIELD_NAMES:
            raise SourceError(f"--map: unknown field {key!r} (fields: {', '.join(FIELDS)})")
        overrides[key] = column
    return overrides


@dataclass
class ColumnMapping:
    """field -> column of one table, plus how each field was found ("name", "content" or "--map")."""

    table: str
    columns: list[str]
    fields: dict[str, str] = field(default_factory=dict)
    how: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        parts = [f"{f}={c}" + (f" ({self.how[f]})" if self.how.get(f) not in (None, "name") else "")
                 for f, c in self.fields.items()]
        return f"{self.table}: " + ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "fields": dict(self.fields), "how": dict(self.how)}


def _looks_like_text(values: Sequence[Any]) -> bool:
    strings = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in values if v is not None]
    strings = [v for v in strings if isinstance(v, str)]
    if not strings or len(strings) < 0.8 * len([v for v in values if v is not None]):
        return False
    avg = sum(map(len, strings)) / len(strings)
    multiline = sum("\n" in v for v in strings)
    return avg >= _TEXT_MIN_AVG_CHARS and multiline >= 0.5 * len(strings)


def detect_mapping(table: str, columns: Sequence[str], sample: Sequence[dict[str, Any]],
                   overrides: dict[str, str] | None = None, *, need_text: bool = True) -> ColumnMapping:
    """The mapping of `columns` (with `sample` rows to look at): overrides first, then names, then (for
    the text column) contents. Raises SourceError for an override naming a missing column, or (with
    `need_text`) when no text column is found."""
    mapping = ColumnMapping(table=table, columns=list(columns))
    lower = {c.lower(): c for c in columns}
    taken: set[str] = set()
    for key, column in (overrides or {}).items():
        if column not in columns:
            actual = lower.get(column.lower())
            if actual is None:
                raise SourceError(f"--map {key}={column}: {table} has no column {column!r} "
                                  f"(columns: {', '.join(columns)})")
            column = actual
        mapping.fields[key] = column
        mapping.how[key] = "--map"
        taken.add(column)
    for key, names in FIELD_NAMES.items():
        if key in mapping.fields:
            continue
        for name in names:
            found = lower.get(name)
            if found is not None and found not in taken:
                mapping.fields[key] = found
                mapping.how[key] = "name"
                taken.add(found)
                break
    if "text" not in mapping.fields:
        for column in columns:
            if column not in taken and _looks_like_text([row.get(column) for row in sample]):
                mapping.fields["text"] = column
                mapping.how["text"] = "content"
                break
    if need_text and "text" not in mapping.fields:
        raise SourceError(f"{table}: no text column found (columns: {', '.join(columns) or 'none'}); "
                          "name it with --map text=COLUMN")
    # Keep the fields in the canonical order for printing.
    mapping.fields = {k: mapping.fields[k] for k in FIELDS if k in mapping.fields}
    return mapping


def check_text_values(mapping: ColumnMapping, sample: Sequence[dict[str, Any]]) -> None:
    """A text column whose sampled values are numbers (not strings or bytes) is the wrong column."""
    column = mapping.fields["text"]
    values = [row.get(column) for row in sample if row.get(column) is not None]
    if values and not any(isinstance(v, (str, bytes)) for v in values):
        kind = type(values[0]).__name__
        raise SourceError(f"{mapping.table}: text column {column!r} holds {kind} values, not text "
                          f"(columns: {', '.join(mapping.columns)}); name the right one with --map text=COLUMN")


# --------------------------------------------------------------------------------------------------
# Source kinds


def is_glob(source: str | Path) -> bool:
    return any(ch in str(source) for ch in "*?[")


def _magic(path: Path, size: int) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(size)
    except OSError:
        return b""


def is_sqlite(path: Path) -> bool:
    return path.is_file() and (path.suffix.lower() in SQLITE_SUFFIXES or _magic(path, 16) == b"SQLite format 3\x00")


def is_parquet(path: Path) -> bool:
    return path.is_file() and (path.suffix.lower() == PARQUET_SUFFIX or _magic(path, 4) == b"PAR1")


def is_archive(path: Path) -> bool:
    name = path.name.lower()
    return path.is_file() and name.endswith(ARCHIVE_SUFFIXES)


def parquet_files(source: str | Path) -> list[Path]:
    """The parquet files of a source: one file, a glob, or a folder holding them (top level or `data/`)."""
    if is_glob(source):
        return sorted(Path(p) for p in glob.glob(str(source), recursive=True) if p.endswith(PARQUET_SUFFIX))
    path = Path(source)
    if path.is_file():
        return [path]
    if path.is_dir():
        found = sorted(path.glob("*" + PARQUET_SUFFIX))
        return found or sorted(path.glob("data/**/*" + PARQUET_SUFFIX))
    return []


def is_parquet_folder(path: Path) -> bool:
    return path.is_dir() and not (path / "SKILL.md").exists() and bool(parquet_files(path))


# --------------------------------------------------------------------------------------------------
# Rows: what a table source yields, already mapped to the canonical fields


@dataclass(slots=True)
class Row:
    where: str
    text: Any
    text_bytes: int
    name: str = ""
    description: str = ""
    repo: str = ""
    path: str = ""
    commit: str = ""
    license: str = ""
    content_hash: str = ""
    stars: int | None = None
    repos: int | None = None
    references: Any = None
    # METADATA_FIELDS and the folder listing's counts (`sibling_files`, `sibling_scripts`), when the source has them
    metadata: dict[str, Any] | None = None


def _as_str(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace").strip()
    return str(value).strip()


def _as_int(value: Any) -> int | None:
    try:
        return int(value) if value is not None and value != "" else None
    except (TypeError, ValueError):
        return None


# ---- SQLite


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class SiblingsTable:
    """A folder-listing table: which files sit beside each SKILL.md (GitSkills' `artifact_siblings`)."""

    table: str
    repo: str
    path: str
    entry: str
    type: str | None = None

    def describe(self) -> str:
        kind = f", {self.type}='file' rows" if self.type else ""
        return (f"{self.table}: repo={self.repo}, path={self.path}, entry={self.entry}{kind} "
                "(files beside each SKILL.md: sibling_files, sibling_scripts in the skill's metadata)")


@dataclass
class SqlitePlan:
    """What a SQLite source reads: the mapped text table, and the detected joins."""

    text: ColumnMapping
    occurrences: ColumnMapping | None = None
    repos: ColumnMapping | None = None
    sql: str = ""
    # Tables declared WITHOUT ROWID have no rowid to keep the release's order (or pick a first occurrence) by.
    without_rowid: frozenset[str] = frozenset()
    # The text table holds one row per occurrence (a content hash and a repo column, no occurrences table): rows
    # are grouped by hash, one representative read per content, its distinct repositories counted.
    occurrence_rows: bool = False
    siblings: SiblingsTable | None = None
    # One line per table that looks like occurrences, repositories or text and was not used: why, and how to.
    unused: list[str] = field(default_factory=list)

    def describe(self) -> str:
        lines = [self.text.describe()]
        if self.occurrence_rows:
            primary = self.text.fields.get("primary")
            chosen = f"the row with {primary} set, else the first" if primary else "the first row"
            lines.append(f"one row per occurrence, grouped by {self.text.fields['content_hash']}: repository count "
                         f"per content; {chosen} of each content is read")
        if self.occurrences is not None:
            lines.append(f"joined by {self.text.fields['content_hash']}: " + self.occurrences.describe()
                         + " (repository count per content)")
        if self.repos is not None:
            lines.append(f"joined by repo: {self.repos.describe()}")
        if self.siblings is not None:
            lines.append(f"joined by repo and path: {self.siblings.describe()}")
        lines += [f"not joined: {line}" for line in self.unused]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text.to_dict(),
                "occurrences": self.occurrences.to_dict() if self.occurrences else None,
                "occurrence_rows": self.occurrence_rows,
                "repos": self.repos.to_dict() if self.repos else None,
                "siblings": asdict(self.siblings) if self.siblings else None,
                "not_joined": list(self.unused), "sql": self.sql}


def open_sqlite(path: Path) -> sqlite3.Connection:
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise SourceError(f"{path.name}: not a readable SQLite database ({exc})") from None
    connection.text_factory = bytes  # decoded by the loader, so one bad byte is a note, not a crash
    return connection


def _table_columns(connection: sqlite3.Connection, table: str) -> list[str]:
    return [row[1].decode() if isinstance(row[1], bytes) else row[1]
            for row in connection.execute(f"PRAGMA table_info({_quote(table)})")]


def _sample(connection: sqlite3.Connection, query: str) -> tuple[list[str], list[dict[str, Any]]]:
    cursor = connection.execute(f"SELECT * FROM ({query}) LIMIT {_SAMPLE_ROWS}")
    names = [d[0] for d in cursor.description]
    return names, [dict(zip(names, row)) for row in cursor.fetchall()]


def _tables(connection: sqlite3.Connection) -> list[str]:
    """Regular tables and FTS virtual tables, without SQLite's own and FTS5's shadow tables."""
    rows = connection.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
    entries = [(_as_str(name), _as_str(sql).lower()) for name, sql in rows]
    virtual = {name for name, sql in entries if "virtual table" in sql}
    tables = []
    for name, _sql in entries:
        if name.startswith("sqlite_"):
            continue
        shadow = _FTS_SHADOW.search(name)
        if shadow and name[: shadow.start()] in virtual:
            continue
        tables.append(name)
    # Regular tables before virtual (FTS) ones: an FTS table usually indexes a regular table's text.
    return sorted(tables, key=lambda t: (t in virtual, t))


def plan_sqlite(path: Path, options: SourceOptions) -> SqlitePlan:
    """Find the text table and its joins (or map the columns of `options.sql`)."""
    connection = open_sqlite(path)
    try:
        return _plan_sqlite(connection, path, options)
    except sqlite3.DatabaseError as exc:
        raise SourceError(f"{path.name}: cannot read the database ({exc})") from None
    finally:
        connection.close()


def _split_overrides(overrides: dict[str, str], tables: Sequence[str]) -> tuple[dict[str, str],
                                                                             dict[str, dict[str, str]]]:
    """(unqualified overrides: the text table's, {table: its overrides}) for `--map FIELD=TABLE.COLUMN`."""
    by_name = {t.lower(): t for t in tables}
    plain: dict[str, str] = {}
    qualified: dict[str, dict[str, str]] = {}
    for key, column in overrides.items():
        table, dot, rest = column.partition(".")
        if dot and rest and table.lower() in by_name:
            qualified.setdefault(by_name[table.lower()], {})[key] = rest
        else:
            plain[key] = column
    return plain, qualified


def _column(columns: Sequence[str], names: Sequence[str]) -> str | None:
    lower = {c.lower(): c for c in columns}
    return next((lower[n] for n in names if n in lower), None)


def _siblings_of(table: str, mapping: ColumnMapping) -> SiblingsTable | None:
    path = _column(mapping.columns, SIBLING_PATH_NAMES)
    entry = _column(mapping.columns, SIBLING_ENTRY_NAMES)
    if "repo" not in mapping.fields or path is None or entry is None:
        return None
    return SiblingsTable(table, mapping.fields["repo"], path, entry, _column(mapping.columns, SIBLING_TYPE_NAMES))


def _plan_sqlite(connection: sqlite3.Connection, path: Path, options: SourceOptions) -> SqlitePlan:
    if options.sql:
        try:
            names, sample = _sample(connection, options.sql)
        except sqlite3.Error as exc:
            raise SourceError(f"{path.name}: --sql failed: {exc}") from None
        mapping = detect_mapping("--sql", names, sample, options.overrides)
        check_text_values(mapping, sample)
        return SqlitePlan(text=mapping, sql=options.sql)
    tables = _tables(connection)
    if not tables:
        raise SourceError(f"{path.name}: the database has no tables")
    plain, qualified = _split_overrides(options.overrides, tables)
    mappings: dict[str, ColumnMapping] = {}
    samples: dict[str, list[dict[str, Any]]] = {}
    for table in tables:
        names, sample = _sample(connection, f"SELECT * FROM {_quote(table)}")
        mappings[table] = detect_mapping(table, names, sample, qualified.get(table), need_text=False)
        samples[table] = sample
    virtual = {name for name, sql in ((_as_str(n), _as_str(q).lower()) for n, q in connection.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table'")) if "virtual table" in sql}
    siblings = {t: _siblings_of(t, mappings[t]) for t in tables}
    # A folder listing may carry its files' text; it is not the skills' table while another table has text.
    with_text = [t for t in tables if "text" in mappings[t].fields]
    with_text = [t for t in with_text if siblings[t] is None] or with_text
    # The skills' table maps the most fields (GitSkills' `artifacts` beside the text of `artifact_siblings`);
    # regular tables before FTS ones, then by name.
    with_text.sort(key=lambda t: (t in virtual, -len(mappings[t].fields), t))
    chosen = [t for t in tables if "text" in qualified.get(t, {})]
    if plain.get("text"):
        chosen += [t for t in tables if plain["text"].lower() in map(str.lower, mappings[t].columns)]
    if not with_text and not chosen:
        seen = "; ".join(f"{t}({', '.join(mappings[t].columns)})" for t in tables)
        raise SourceError(f"{path.name}: no table has a text column (tables: {seen}); "
                          "name it with --map text=COLUMN or --sql 'SELECT ...'")
    text_table = (chosen or with_text)[0]
    without_rowid = frozenset(_as_str(name) for name, sql in connection.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table'") if "without rowid" in _as_str(sql).lower())
    names = mappings[text_table].columns
    text = detect_mapping(text_table, names, samples[text_table], {**qualified.get(text_table, {}), **plain})
    check_text_values(text, samples[text_table])
    plan = SqlitePlan(text=text, without_rowid=without_rowid)
    others = [t for t in tables if t != text_table]
    has_hash = "content_hash" in text.fields
    occurrence = [t for t in others if {"content_hash", "repo"} <= set(mappings[t].fields)
                  and "text" not in mappings[t].fields]
    occurrence.sort(key=lambda t: "content_hash" not in qualified.get(t, {}))  # the one --map names first
    if has_hash and occurrence:
        plan.occurrences = mappings[occurrence[0]]
    elif has_hash and "repo" in text.fields and text_table not in without_rowid:
        plan.occurrence_rows = True
    repo_tables = [t for t in others if "repo" in mappings[t].fields and "content_hash" not in mappings[t].fields
                   and "text" not in mappings[t].fields and siblings[t] is None
                   and ({"license", "stars"} & set(mappings[t].fields))]
    if repo_tables:
        plan.repos = mappings[repo_tables[0]]
    listing = [t for t in others if siblings[t] is not None]
    if listing and {"repo", "path"} <= set(text.fields):
        plan.siblings = siblings[listing[0]]
    used = {text_table} | {m.table for m in (plan.occurrences, plan.repos) if m is not None} | \
        ({plan.siblings.table} if plan.siblings else set())
    plan.unused = [line for t in others if t not in used and t not in virtual
                   for line in [_why_not_joined(t, mappings[t], plan, siblings[t])] if line]
    return plan


def _why_not_joined(table: str, mapping: ColumnMapping, plan: SqlitePlan, listing: SiblingsTable | None) -> str:
    """One line on a table that looks like occurrences, repositories, a folder listing or text and was not used
    (why, and the --map that would use it); "" for a table that looks like none of them."""
    fields, text = mapping.fields, plan.text
    columns = mapping.columns
    hash_like = [c for c in columns if re.search(r"sha|hash|digest|md5", c, re.I)]
    if listing is not None:
        return (f"{table} (a folder listing: {listing.repo}, {listing.path}, {listing.entry}): the text table "
                f"{text.table} has no repo and path to join it by; name them with --map repo={text.table}.COLUMN "
                f"--map path={text.table}.COLUMN")
    if "text" in fields:
        return (f"{table} (text column {fields['text']}): only one table is read as the skills ({text.table}); "
                f"to read {table} instead: --map text={table}.{fields['text']}")
    if "repo" not in fields:
        return ""
    if "content_hash" in fields or "path" in fields or hash_like:
        if "content_hash" not in text.fields:
            return (f"{table} (occurrences? columns: {', '.join(columns)}): the text table {text.table} has no "
                    f"content hash column to join it by; name it with --map content_hash={text.table}.COLUMN")
        if "content_hash" not in fields:
            guess = next((c for c in hash_like if c != fields.get("repo")), "COLUMN")
            taken = f" ({guess} reads as {next(k for k, v in fields.items() if v == guess)})" \
                if guess in fields.values() else ""
            return (f"{table} (occurrences? columns: {', '.join(columns)}): no content hash column{taken}; "
                    f"join it with --map content_hash={table}.{guess}")
        if plan.occurrences is not None:
            return f"{table} (occurrences): only one occurrences table is joined ({plan.occurrences.table})"
        return ""
    if not {"license", "stars"} & set(fields):
        return (f"{table} (repositories? columns: {', '.join(columns)}): no licence or stars column; "
                f"join it with --map license={table}.COLUMN or --map stars={table}.COLUMN")
    if plan.repos is not None:
        return f"{table} (repositories): only one repository table is joined ({plan.repos.table})"
    return (f"{table} (repositories): the text table {text.table} has no repo column to join it by; "
            f"name it with --map repo={text.table}.COLUMN")


def _sqlite_query(plan: SqlitePlan, max_bytes: int) -> str:
    """One SELECT yielding the canonical fields; a text over `max_bytes` comes back as NULL with its size."""
    text = plan.text
    base = f"({plan.sql})" if plan.sql else _quote(text.table)
    selects: dict[str, str] = {}
    for key, column in text.fields.items():
        selects[key] = f"t.{_quote(column)}"
    joins = ""
    occ = plan.occurrences
    if occ is not None:
        o = occ.fields
        # SQLite's bare columns next to MIN(rowid) come from that row: the first occurrence of a content.
        extra = "".join(f", {_quote(o[k])} AS first_{k}" for k in ("repo", "path", "commit") if k in o)
        first = "MIN(rowid)" if occ.table not in plan.without_rowid else "MIN(" + _quote(o["repo"]) + ")"
        joins += (f" LEFT JOIN (SELECT {_quote(o['content_hash'])} AS hash, {first}{extra}, "
                  f"COUNT(DISTINCT {_quote(o['repo'])}) AS n_repos FROM {_quote(occ.table)} "
                  f"GROUP BY {_quote(o['content_hash'])}) o ON o.hash = t.{_quote(text.fields['content_hash'])}")
        selects["repos"] = "o.n_repos"
        for key in ("repo", "path", "commit"):
            if key in o:
                selects[key] = f"COALESCE({selects[key]}, o.first_{key})" if key in selects else f"o.first_{key}"
    where = ""
    if plan.occurrence_rows:
        h, repo = _quote(text.fields["content_hash"]), _quote(text.fields["repo"])
        primary = text.fields.get("primary")
        # The representative of a content: the row the release marks primary, else the first row with a text.
        firsts = [f"MIN(CASE WHEN {_quote(primary)} IN (1, '1', 'true', 'True', 'TRUE', 't') THEN rowid END)"] \
            if primary else []
        # typeof() reads the row header only, not a text spilled to overflow pages
        firsts += [f"MIN(CASE WHEN typeof({_quote(text.fields['text'])}) <> 'null' THEN rowid END)", "MIN(rowid)"]
        joins += (f" LEFT JOIN (SELECT {h} AS hash, COALESCE({', '.join(firsts)}) AS representative, "
                  f"COUNT(DISTINCT {repo}) AS n_repos FROM {_quote(text.table)} WHERE {h} IS NOT NULL "
                  f"GROUP BY {h}) o ON o.hash = t.{h}")
        where = f" WHERE t.{h} IS NULL OR t.rowid = o.representative"
        selects["repos"] = "o.n_repos"
    listing = plan.siblings
    if listing is not None:
        entry = f"lower({_quote(listing.entry)})"
        script = " OR ".join([f"{entry} LIKE 'scripts/%'"] + [f"{entry} LIKE '%{s}'" for s in SCRIPT_SUFFIXES])
        only_files = f" WHERE lower({_quote(listing.type)}) = 'file'" if listing.type else ""
        joins += (f" LEFT JOIN (SELECT {_quote(listing.repo)} AS repo, {_quote(listing.path)} AS path, "
                  f"COUNT(*) AS files, MAX({script}) AS scripts FROM {_quote(listing.table)}{only_files} "
                  f"GROUP BY 1, 2) s ON s.repo = {selects['repo']} AND s.path = {selects['path']}")
        selects["sibling_files"] = "COALESCE(s.files, 0)"
        selects["sibling_scripts"] = "COALESCE(s.scripts, 0)"
    repos = plan.repos
    if repos is not None and "repo" in selects:
        r = repos.fields
        joins += f" LEFT JOIN {_quote(repos.table)} r ON r.{_quote(r['repo'])} = {selects['repo']}"
        for key in ("license", "stars"):
            if key in r:
                selects[key] = f"COALESCE({selects[key]}, r.{_quote(r[key])})" if key in selects \
                    else f"r.{_quote(r[key])}"
    text_expr = selects.pop("text")
    size = f"length(CAST({text_expr} AS BLOB))"
    columns = [f"CASE WHEN {size} > {int(max_bytes)} THEN NULL ELSE {text_expr} END AS text",
               f"{size} AS text_bytes"]
    columns += [f"{expr} AS {_quote(key)}" for key, expr in selects.items()]
    ordered = not plan.sql and text.table not in plan.without_rowid
    return f"SELECT {', '.join(columns)} FROM {base} t{joins}{where}" + (" ORDER BY t.rowid" if ordered else "")


def iter_sqlite_rows(path: Path, plan: SqlitePlan, max_bytes: int) -> Iterator[Row]:
    connection = open_sqlite(path)
    query = _sqlite_query(plan, max_bytes)
    try:
        cursor = connection.execute(query)
        names = [d[0] for d in cursor.description]
        for number, values in enumerate(cursor, 1):
            yield _row(f"{path.name}:{plan.text.table}:{number}", dict(zip(names, values)))
    except sqlite3.DatabaseError as exc:
        raise SourceError(f"{path.name}: cannot read the database ({exc})") from None
    finally:
        connection.close()


def _as_flag(value: Any) -> bool | None:
    if value is None or value == "" or value == b"":
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "t", "yes", "y")
    return bool(value)


def _row(where: str, values: dict[str, Any]) -> Row:
    metadata: dict[str, Any] = {key: flag for key in METADATA_FIELDS
                                if (flag := _as_flag(values.get(key))) is not None}
    if values.get("sibling_files") is not None:
        metadata["sibling_files"] = _as_int(values["sibling_files"]) or 0
        metadata["sibling_scripts"] = bool(_as_flag(values.get("sibling_scripts")))
    return Row(metadata=metadata or None, where=where, text=values.get("text"),
               text_bytes=_as_int(values.get("text_bytes")) or 0,
               name=_as_str(values.get("name")), description=_as_str(values.get("description")),
               repo=_as_str(values.get("repo")), path=_as_str(values.get("path")),
               commit=_as_str(values.get("commit")), license=_as_str(values.get("license")),
               content_hash=_as_str(values.get("content_hash")), stars=_as_int(values.get("stars")),
               repos=_as_int(values.get("repos")), references=values.get("references"))


# ---- parquet


def _pyarrow() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise SourceError(PARQUET_EXTRA_HINT) from None
    return pq


@dataclass
class ParquetPlan:
    files: list[Path]
    text: ColumnMapping
    repos_files: list[Path] = field(default_factory=list)
    repos: ColumnMapping | None = None

    def describe(self) -> str:
        lines = [f"{len(self.files)} file(s), " + self.text.describe()]
        if "content_hash" in self.text.fields and "repo" in self.text.fields:
            lines.append(f"repository count per content from {self.text.fields['content_hash']} "
                         f"and {self.text.fields['repo']}")
        if self.repos is not None:
            lines.append(f"joined by repo: {self.repos.describe()}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"files": [f.name for f in self.files], "text": self.text.to_dict(),
                "repos_files": [f.name for f in self.repos_files],
                "repos": self.repos.to_dict() if self.repos else None}


def _parquet_schema(pq: Any, file: Path) -> Any:
    try:
        return pq.ParquetFile(file)
    except Exception as exc:  # pyarrow raises ArrowInvalid / OSError for a truncated or foreign file
        raise SourceError(f"{file.name}: not a readable parquet file ({str(exc).splitlines()[0]})") from None


def _parquet_sample(handle: Any) -> list[dict[str, Any]]:
    if handle.metadata.num_row_groups == 0:
        return []
    batch = next(handle.iter_batches(batch_size=_SAMPLE_ROWS), None)
    return batch.to_pylist() if batch is not None else []


def plan_parquet(source: str | Path, options: SourceOptions) -> ParquetPlan:
    pq = _pyarrow()
    files = parquet_files(source)
    if not files:
        raise SourceError(f"{source}: no parquet files")
    text_files: list[Path] = []
    repo_files: list[Path] = []
    text: ColumnMapping | None = None
    repos: ColumnMapping | None = None
    seen: list[str] = []
    for file in files:
        handle = _parquet_schema(pq, file)
        columns = list(handle.schema_arrow.names)
        sample = _parquet_sample(handle)
        mapping = detect_mapping(file.name, columns, sample, options.overrides, need_text=False) \
            if not options.overrides.get("text") or options.overrides["text"] in columns \
            else detect_mapping(file.name, columns, sample, need_text=False)
        seen.append(f"{file.name}({', '.join(columns)})")
        if "text" in mapping.fields:
            _check_parquet_types(handle, mapping)
            if text is None:
                text = mapping
            elif set(mapping.fields.items()) != set(text.fields.items()):
                raise SourceError(f"{file.name}: its columns map differently from {text.table} "
                                  f"({mapping.describe()} vs {text.describe()}); pass the files separately")
            text_files.append(file)
        elif "repo" in mapping.fields and {"license", "stars"} & set(mapping.fields):
            repos = repos or mapping
            repo_files.append(file)
    if options.repos is not None:
        handle = _parquet_schema(pq, options.repos)
        repos = detect_mapping(options.repos.name, list(handle.schema_arrow.names), _parquet_sample(handle),
                               need_text=False)
        if "repo" not in repos.fields:
            raise SourceError(f"{options.repos.name}: no repo column to join on "
                              f"(columns: {', '.join(repos.columns)})")
        repo_files = [options.repos]
    if text is None:
        raise SourceError(f"no text column found in {'; '.join(seen)}; name it with --map text=COLUMN")
    return ParquetPlan(files=text_files, text=text, repos_files=repo_files, repos=repos)


def _check_parquet_types(handle: Any, mapping: ColumnMapping) -> None:
    import pyarrow as pa

    column = mapping.fields["text"]
    kind = handle.schema_arrow.field(column).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind)
            or pa.types.is_large_binary(kind)):
        raise SourceError(f"{mapping.table}: text column {column!r} holds {kind} values, not text "
                          f"(columns: {', '.join(mapping.columns)}); name the right one with --map text=COLUMN")


def _batches(pq: Any, file: Path, columns: list[str], batch_size: int = 512) -> Iterator[Any]:
    # One thread: pyarrow's threaded reader held more memory the longer it read (~0.7 KB a row of the
    # benchmark's release, 64 MB from 60k to 150k rows); single-threaded, peak RSS stays flat, at the same CPU.
    try:
        yield from pq.ParquetFile(file, pre_buffer=False).iter_batches(batch_size=batch_size, columns=columns,
                                                                      use_threads=False)
    except SourceError:
        raise
    except Exception as exc:  # a truncated or corrupt row group
        raise SourceError(f"{file.name}: cannot read the parquet file ({str(exc).splitlines()[0]})") from None


def _repo_metadata(pq: Any, plan: ParquetPlan) -> dict[str, tuple[str, int | None]]:
    """repo -> (licence, stars) from the repository metadata files (one row per repository: small)."""
    if plan.repos is None:
        return {}
    fields = plan.repos.fields
    wanted = [fields[k] for k in ("repo", "license", "stars") if k in fields]
    table: dict[str, tuple[str, int | None]] = {}
    for file in plan.repos_files:
        for batch in _batches(pq, file, wanted, 8192):
            data = batch.to_pydict()
            repos = data[fields["repo"]]
            licences = data.get(fields.get("license", ""), [None] * len(repos))
            stars = data.get(fields.get("stars", ""), [None] * len(repos))
            for repo, licence, star in zip(repos, licences, stars):
                table[_as_str(repo)] = (_as_str(licence), _as_int(star))
    return table


class RepoCounts:
    """Distinct repositories per content hash, counted in one pass over two columns with numpy arrays
    (8 bytes per occurrence), not a Python set per content."""

    def __init__(self, content_keys: Any, counts: Any) -> None:
        self.keys, self.counts = content_keys, counts

    @classmethod
    def count(cls, pairs: Iterator[tuple[list[Any], list[Any]]]) -> "RepoCounts":
        import numpy as np

        content_chunks, pair_chunks = [], []
        for hashes, repos in pairs:
            content_chunks.append(np.fromiter((hash(h) for h in hashes), dtype=np.int64, count=len(hashes)))
            pair_chunks.append(np.fromiter((hash((h, r)) for h, r in zip(hashes, repos)), dtype=np.int64,
                                           count=len(hashes)))
        if not content_chunks:
            return cls(np.zeros(0, np.int64), np.zeros(0, np.int64))
        content = np.concatenate(content_chunks)
        pair = np.concatenate(pair_chunks)
        del content_chunks, pair_chunks
        _, first = np.unique(pair, return_index=True)
        keys, counts = np.unique(content[first], return_counts=True)
        return cls(keys, counts)

    def get(self, content_hash: str) -> int | None:
        import numpy as np

        key = hash(content_hash)
        at = int(np.searchsorted(self.keys, key))
        return int(self.counts[at]) if at < len(self.keys) and self.keys[at] == key else None


def iter_parquet_rows(plan: ParquetPlan, max_bytes: int) -> Iterator[Row]:
    import pyarrow as pa
    import pyarrow.compute as pc

    pq = _pyarrow()
    fields = plan.text.fields
    metadata = _repo_metadata(pq, plan)
    counts = None
    if "content_hash" in fields and "repo" in fields:
        counts = RepoCounts.count(
            (b.column(0).to_pylist(), b.column(1).to_pylist())
            for file in plan.files for b in _batches(pq, file, [fields["content_hash"], fields["repo"]], 65536))
    # Contents the release marks a representative row of: their other rows are occurrences, not read.
    with_primary = None
    if "content_hash" in fields and "primary" in fields:
        import numpy as np

        marked = [hash(_as_str(h)) for file in plan.files
                  for b in _batches(pq, file, [fields["content_hash"], fields["primary"]], 65536)
                  for h, flag in zip(b.column(0).to_pylist(), b.column(1).to_pylist()) if _as_flag(flag)]
        with_primary = np.unique(np.asarray(marked, dtype=np.int64))
    # pyarrow's pool keeps freed buffers for reuse; hand them back between passes and at the end, so the
    # index merge that follows does not stack on top of them (35-50 MB of the benchmark's release).
    pa.default_memory_pool().release_unused()
    columns = list(dict.fromkeys(fields.values()))
    for file in plan.files:
        number = 0
        for batch in _batches(pq, file, columns):
            text_column = batch.column(columns.index(fields["text"]))
            sizes = pc.binary_length(text_column.cast("binary")).to_pylist()
            data = batch.to_pydict()
            for i, size in enumerate(sizes):
                number += 1
                values = {key: data[column][i] for key, column in fields.items()}
                values["text_bytes"] = size
                if size is not None and size > max_bytes:
                    values["text"] = None
                if with_primary is not None and not _as_flag(values.get("primary")) and values.get("content_hash"):
                    key = hash(_as_str(values["content_hash"]))
                    at = int(with_primary.searchsorted(key))
                    if at < len(with_primary) and with_primary[at] == key:
                        continue
                row = _row(f"{file.name}:{number}", values)
                if counts is not None and row.content_hash:
                    row.repos = counts.get(row.content_hash)
                if metadata and row.repo in metadata:
                    licence, stars = metadata[row.repo]
                    row.license = row.license or licence
                    row.stars = row.stars if row.stars is not None else stars
                yield row
    pa.default_memory_pool().release_unused()


# --------------------------------------------------------------------------------------------------
# Archives


def _member_name(name: str) -> PurePosixPath | None:
    """A safe relative path for an archive member, or None (absolute, `..`, empty)."""
    parts = [p for p in PurePosixPath(name.replace("\\", "/")).parts if p not in ("", ".")]
    if not parts or parts[0] == "/" or ".." in parts or re.match(r"^[A-Za-z]:", parts[0]):
        return None
    return PurePosixPath(*parts)


def _write_member(root: Path, name: PurePosixPath, stream: io.BufferedIOBase | Any, budget: list[int]) -> None:
    target = root.joinpath(*name.parts)
    target.parent.mkdir(parents=True, exist_ok=True)
    # O_NOFOLLOW | O_EXCL: never write through a link, never overwrite (nothing in the temp folder is a link).
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as out:
        while True:
            chunk = stream.read(1 << 20)
            if not chunk:
                break
            budget[0] -= len(chunk)
            if budget[0] < 0:
                raise SourceError(f"archive unpacks to more than {MAX_ARCHIVE_BYTES} bytes")
            out.write(chunk)


@contextlib.contextmanager
def unpacked(archive: Path, *, max_bytes: int = MAX_ARCHIVE_BYTES,
             max_members: int = MAX_ARCHIVE_MEMBERS) -> Iterator[tuple[Path, dict[str, int]]]:
    """Unpack `archive` into a private temp folder (regular files and folders only: links, devices and
    paths leaving the folder are skipped and counted), yield (the folder to read, skip counts), and remove
    it afterwards. The folder to read is the archive's single top-level entry when it has one."""
    tmp = Path(tempfile.mkdtemp(prefix="raso-unpack-"))
    skipped: dict[str, int] = {}
    budget = [max_bytes]
    try:
        try:
            if archive.name.lower().endswith(".zip"):
                with zipfile.ZipFile(archive) as zf:
                    infos = zf.infolist()
                    if len(infos) > max_members:
                        raise SourceError(f"{archive.name}: more than {max_members} members")
                    for info in infos:
                        mode = (info.external_attr >> 16) & 0o170000
                        name = _member_name(info.filename)
                        if name is None:
                            skipped["unsafe_path"] = skipped.get("unsafe_path", 0) + 1
                        elif info.is_dir():
                            tmp.joinpath(*name.parts).mkdir(parents=True, exist_ok=True)
                        elif mode and not stat.S_ISREG(mode):
                            skipped["link_or_special"] = skipped.get("link_or_special", 0) + 1
                        else:
                            with zf.open(info) as stream:
                                _write_member(tmp, name, stream, budget)
            else:
                with tarfile.open(archive, mode="r:*") as tf:
                    for count, member in enumerate(tf, 1):
                        if count > max_members:
                            raise SourceError(f"{archive.name}: more than {max_members} members")
                        name = _member_name(member.name)
                        if name is None:
                            skipped["unsafe_path"] = skipped.get("unsafe_path", 0) + 1
                        elif member.isdir():
                            tmp.joinpath(*name.parts).mkdir(parents=True, exist_ok=True)
                        elif not member.isreg():
                            skipped["link_or_special"] = skipped.get("link_or_special", 0) + 1
                        else:
                            member_stream = tf.extractfile(member)
                            if member_stream is not None:
                                _write_member(tmp, name, member_stream, budget)
        except SourceError:
            raise
        except FileExistsError as exc:
            raise SourceError(f"{archive.name}: the archive names a file twice ({Path(exc.filename).name})") from None
        except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, zlib_error()) as exc:
            raise SourceError(f"{archive.name}: cannot unpack the archive ({exc})") from None
        entries = list(tmp.iterdir())
        root = entries[0] if len(entries) == 1 else tmp
        yield root, skipped
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def zlib_error() -> type[Exception]:
    import zlib

    return zlib.error


# --------------------------------------------------------------------------------------------------
# Fingerprints for the corpus card


def file_fingerprint(path: Path) -> dict[str, Any]:
    """Size and sha256 of one input file (streamed)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}


def source_kind(source: str | Path) -> str:
    """What `source` is read as: manifest, tree, jsonl, skill_file, sqlite, parquet, archive or unknown."""
    if is_glob(source):
        return "parquet"
    path = Path(source)
    if path.is_dir():
        if (path / "MANIFEST.jsonl").is_file():
            return "manifest"
        return "parquet" if is_parquet_folder(path) else "tree"
    if not path.is_file():
        return "missing"
    if path.suffix == ".jsonl":
        return "jsonl"
    if path.name == "SKILL.md":
        return "skill_file"
    if is_archive(path):
        return "archive"
    if is_parquet(path):
        return "parquet"
    if is_sqlite(path):
        return "sqlite"
    return "unknown"
