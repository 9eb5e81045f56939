"""The Treasury Bulletin corpus as pages, searchable with corpus_tools' BM25.

A document is one parsed text file, `treasury_bulletin_YYYY_MM.txt` (its year and month come from the name).
Its pages: the `--- PAGE N ---` blocks when the file has such markers (the official page-level transform),
else consecutive windows of about `page_chars` characters cut at blank lines, then line breaks (the official
`transformed/` files carry no page markers), numbered from 1. Every page is one BM25 section whose indexed
text starts with the document name and its month and year.

A large corpus's index is built once and saved under the cache folder (`$RASO_CACHE_DIR/officeqa`, else
`$XDG_CACHE_HOME/raso/officeqa`, else `~/.cache/raso/officeqa`), keyed by the files' names, sizes and
modification times and the page size; the shipped demo corpus is indexed in memory.
"""

from __future__ import annotations

import calendar
import hashlib
import json
import logging
import os
import re
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from corpus_tools.index import SectionIndex
from corpus_tools.sections import Section, window_text
from corpus_tools.tokenizer import TOKENIZER_VERSION, tokenize

log = logging.getLogger(__name__)

DEFAULT_PAGE_CHARS = 3000
PAGE_CACHE_DOCUMENTS = 64  # split documents kept in memory (a full bulletin is ~0.7 MB)
IN_MEMORY_LIMIT_BYTES = 20_000_000  # corpora smaller than this are indexed in memory, never cached
_DATED_NAME = re.compile(r"_(?P<year>\d{4})_(?P<month>\d{1,2})$")
_PAGE_MARKER = re.compile(r"^--- PAGE (\d+) ---[ \t]*$", re.MULTILINE)
_REPO = "officeqa-corpus"


@dataclass(frozen=True)
class Document:
    name: str  # file stem, e.g. treasury_bulletin_1945_06
    path: Path
    year: int | None
    month: int | None

    @property
    def label(self) -> str:
        if self.year is None:
            return self.name
        return f"{calendar.month_name[self.month]} {self.year}" if self.month else str(self.year)


def document_of(path: Path) -> Document:
    match = _DATED_NAME.search(path.stem)
    year = int(match["year"]) if match else None
    month = int(match["month"]) if match and 1 <= int(match["month"]) <= 12 else None
    return Document(name=path.stem, path=path, year=year, month=month)


def split_pages(text: str, page_chars: int = DEFAULT_PAGE_CHARS) -> list[tuple[int, str]]:
    """(page number, text) of a document, by page markers or by windows (module docstring)."""
    text = text.replace("\r\n", "\n")
    markers = list(_PAGE_MARKER.finditer(text))
    if markers:
        pages = []
        for i, marker in enumerate(markers):
            end = markers[i + 1].start() if i + 1 < len(markers) else len(text)
            body = text[marker.end():end].strip("\n")
            if body.strip():
                pages.append((int(marker.group(1)), body))
        return pages
    return [(n, piece.strip("\n")) for n, piece in enumerate(window_text(text, page_chars, 0), start=1)]


def _cache_root() -> Path:
    if os.environ.get("RASO_CACHE_DIR"):
        return Path(os.environ["RASO_CACHE_DIR"]).expanduser() / "officeqa"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "raso" / "officeqa"


class Corpus:
    """The documents of a corpus folder, their pages and a BM25 index over the pages."""

    def __init__(self, folder: Path, page_chars: int = DEFAULT_PAGE_CHARS, cache_dir: Path | None = None) -> None:
        self.folder = Path(folder)
        self.page_chars = page_chars
        paths = sorted(self.folder.glob("*.txt"))
        self.documents = {p.stem: document_of(p) for p in paths}
        self.cache_dir = cache_dir
        self._index: SectionIndex | None = None
        self._pages: OrderedDict[str, list[tuple[int, str]]] = OrderedDict()  # recently read documents

    # ------------------------------------------------------------------ documents and pages
    def find(self, name: str) -> Document | None:
        """The document called `name` (with or without .txt, any case), or None."""
        stem = name.strip().strip("'\"`").rsplit("/", 1)[-1]
        stem = stem[:-4] if stem.lower().endswith((".txt", ".pdf")) else stem
        stem = stem[:-5] if stem.lower().endswith(".json") else stem
        return self.documents.get(stem) or self.documents.get(stem.lower())

    def pages(self, name: str) -> list[tuple[int, str]]:
        if name in self._pages:
            self._pages.move_to_end(name)
        else:
            text = self.documents[name].path.read_text(encoding="utf-8", errors="replace")
            self._pages[name] = split_pages(text, self.page_chars)
            while len(self._pages) > PAGE_CACHE_DOCUMENTS:
                self._pages.popitem(last=False)
        return self._pages[name]

    def matching(self, years: tuple[int, int] | None, month: int | None) -> list[str]:
        """Names of the documents within the year range and of the month (None = any)."""
        return [d.name for d in self.documents.values()
                if (years is None or (d.year is not None and years[0] <= d.year <= years[1]))
                and (month is None or d.month == month)]

    # ------------------------------------------------------------------ search
    def sections(self) -> Iterable[Section]:
        for doc in self.documents.values():
            for number, text in self.pages(doc.name):
                yield Section(id=f"{doc.name}#{number}", skill_id=doc.name, skill_name=doc.name,
                              heading_path=f"{doc.name} ({doc.label}) › page {number}", text=text, repo=_REPO,
                              path=doc.path.name, commit="", license="")
            self._pages.pop(doc.name, None)  # a large corpus is read once for indexing, not kept in memory

    def _fingerprint(self) -> str:
        listing = [(d.path.name, d.path.stat().st_size, d.path.stat().st_mtime_ns) for d in self.documents.values()]
        key = json.dumps({"files": listing, "page_chars": self.page_chars, "tokenizer": TOKENIZER_VERSION})
        return hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]

    @property
    def index(self) -> SectionIndex:
        if self._index is None:
            self._index = self._load_or_build()
        return self._index

    def _load_or_build(self) -> SectionIndex:
        size = sum(d.path.stat().st_size for d in self.documents.values())
        if size < IN_MEMORY_LIMIT_BYTES and self.cache_dir is None:
            return SectionIndex.build(self.sections())
        folder = (self.cache_dir or _cache_root()) / f"index-{self._fingerprint()}"
        if (folder / "meta.json").is_file():
            try:
                return SectionIndex.load(folder)
            except (OSError, ValueError, KeyError) as exc:
                log.warning("officeqa: cached index %s is unreadable (%s); rebuilding it", folder, exc)
        log.warning("officeqa: indexing %d documents (%.0f MB) once; saved to %s", len(self.documents),
                    size / 1e6, folder)
        index = SectionIndex.build(self.sections())
        try:
            index.save(folder)
        except OSError as exc:
            log.warning("officeqa: could not save the index to %s (%s); it is rebuilt next time", folder, exc)
        return index

    def search(self, query: str, k: int = 5, years: tuple[int, int] | None = None,
               month: int | None = None) -> list[tuple[Document, int, float, str]]:
        """Top-`k` pages for `query` within the filters: (document, page number, score, page text)."""
        exclude: list[str] = []
        if years is not None or month is not None:
            keep = set(self.matching(years, month))
            exclude = [name for name in self.documents if name not in keep]
        hits = self.index.search(query, k=k, exclude_skills=exclude)
        out = []
        for hit in hits:
            doc_name, _, page = hit.section.id.rpartition("#")
            out.append((self.documents[doc_name], int(page), hit.score, hit.section.text))
        return out


def _window(line: str, words: set[str], width: int) -> str:
    """The `width`-character stretch of a long line richest in query words."""
    if len(line) <= width:
        return line
    lowered = line.lower()
    starts = {0} | {max(0, m.start() - width // 5) for w in words for m in re.finditer(re.escape(w), lowered)}
    def richness(start: int) -> tuple[int, int]:  # distinct query words, then all their occurrences
        tokens = [t for t in tokenize(line[start:start + width]) if t in words]
        return len(set(tokens)), len(tokens)

    best = max(sorted(starts), key=richness)
    return ("..." if best else "") + line[best:best + width].strip() + ("..." if best + width < len(line) else "")


def snippet(text: str, query: str, max_chars: int = 360, line_chars: int = 200) -> str:
    """The lines of `text` richest in query words, in page order, each long line cut to its richest stretch,
    about `max_chars` in all."""
    words = set(tokenize(query))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    scored = sorted(range(len(lines)), key=lambda i: -len(words & set(tokenize(lines[i]))))
    chosen: list[int] = []
    used = 0
    for i in scored:
        if used >= max_chars or (chosen and not words & set(tokenize(lines[i]))):
            break
        chosen.append(i)
        used += min(len(lines[i]), line_chars)
    return " / ".join(_window(lines[i], words, line_chars) for i in sorted(chosen))[:max_chars + 20]
