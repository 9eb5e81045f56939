"""Vetting of retrieved sections before adaptation (the retriever side of corpus_tools.vetting).

`VettedSearcher` wraps any section searcher: it asks for a few more sections than wanted, leaves out
those the injection / exfiltration scan flags (unless the inner searcher already skipped the sections
flagged at build time) and any near-duplicate of a section already kept (word-shingle Jaccard),
and returns the best `k` of the rest. Every section left out is kept as a `Drop` (reason and
provenance) until the caller takes them (`take_dropped`), so a run report can list each one.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from corpus_tools.vetting import DUPLICATE_JACCARD, jaccard, scan, shingles

if TYPE_CHECKING:
    from corpus_tools.index import Hit


@dataclass(frozen=True)
class Drop:
    """A retrieved section left out of the adaptation prompt, and why."""

    reason: str  # "flagged: override, pipe-to-shell" | "near-duplicate of <section id> (<repo>)"
    section_id: str
    repo: str
    path: str
    commit: str
    heading_path: str
    query: str
    duplicate_of: str = ""  # a near-duplicate's kept twin (its section id), so a caller can count the copies

    def describe(self) -> str:
        return (f"vetting left out section {self.section_id!r} ({self.repo}/{self.path}@{self.commit[:12]}, "
                f"{self.heading_path!r}) for query {self.query[:60]!r}: {self.reason}")


def drop_of(section: Any, reason: str, query: str, *, duplicate_of: str = "") -> Drop:
    return Drop(reason=reason, section_id=section.id, repo=section.repo, path=section.path, commit=section.commit,
                heading_path=section.heading_path, query=query, duplicate_of=duplicate_of)


class VettedSearcher:
    """A section searcher whose results are vetted (see the module docstring). `overfetch` extra
    sections are asked of the inner searcher so that drops rarely leave fewer than `k`."""

    def __init__(self, inner: Any, *, overfetch: int = 10, duplicate_jaccard: float = DUPLICATE_JACCARD) -> None:
        self.inner = inner
        self.overfetch = overfetch
        self.duplicate_jaccard = duplicate_jaccard
        self._dropped: list[Drop] = []
        self._lock = threading.Lock()

    def search(self, query: str, k: int = 5, exclude_repos: Sequence[str] = (),
               exclude_skills: Sequence[str] = ()) -> list[Hit]:
        hits = self.inner.search(query, k + self.overfetch, exclude_repos, exclude_skills)
        drops: list[Drop] = list(_take(self.inner))
        # A searcher that already left out the sections flagged at build time needs no second scan.
        rescan = not getattr(self.inner, "skips_flagged_sections", False)
        kept: list[Hit] = []
        kept_shingles: list[frozenset[int]] = []
        for hit in hits:  # in rank order, until k are kept: only drops that displaced a section are listed
            if len(kept) == k:
                break
            findings = scan(f"{hit.section.heading_path}\n{hit.section.text}") if rescan else []
            if findings:
                drops.append(drop_of(hit.section, "flagged: " + ", ".join(f.family for f in findings), query))
                continue
            mine = shingles(hit.section.text)
            twin = next((i for i, other in enumerate(kept_shingles) if jaccard(mine, other) >= self.duplicate_jaccard),
                        None)
            if twin is not None:
                first = kept[twin].section
                drops.append(drop_of(hit.section, f"near-duplicate of {first.id} ({first.repo})", query,
                                     duplicate_of=first.id))
                continue
            kept.append(hit)
            kept_shingles.append(mine)
        with self._lock:
            self._dropped.extend(drops)
        return kept

    def take_dropped(self) -> list[Drop]:
        """The sections left out since the last call (and forget them)."""
        with self._lock:
            dropped, self._dropped = self._dropped, []
        return dropped

    def __getattr__(self, name: str) -> Any:
        # Everything else (e.g. a dreamer retriever's last_result) is the inner searcher's.
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


def _take(searcher: Any) -> list[Drop]:
    take = getattr(searcher, "take_dropped", None)
    return take() if callable(take) else []
