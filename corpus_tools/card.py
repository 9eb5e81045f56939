"""Which corpus an index holds: the name every run, result and table carries.

An index built by `raso corpus build` carries a corpus card (`corpus_card.json`: its sources, counts and
build parameters, with a stable digest). `index_identity` reads the part a result needs to name its corpus:
a name, the number of skills, the digest, and whether it is the packaged starter corpus (a demo, never the
paper's corpus). An index without a card (built before cards existed) is named by its folder, with a digest
of its meta.json.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

CARD_FILE = "corpus_card.json"
CARD_FORMAT = "raso-corpus-card/1"
STARTER_NAME = "starter corpus"
#: How a result written before results named their corpus is labelled.
CORPUS_NOT_RECORDED = "corpus not recorded (made before results named their corpus)"
# Card fields that change from one build of the same corpus to the next: left out of the digest.
VOLATILE_FIELDS = frozenset({"digest", "built_at", "seconds", "path"})


@dataclass(frozen=True, slots=True)
class CorpusIdentity:
    """Name, size and digest of the corpus behind an index; `demo` is True for the starter corpus."""

    name: str
    skills: int
    digest: str
    demo: bool = False
    path: str | None = None

    def label(self) -> str:
        """One line for a report, a result or a table note, e.g. "starter corpus, 266 skills, demo"."""
        if self.demo:
            return f"{self.name}, {self.skills:,} skills, demo"
        return f"{self.name}, {self.skills:,} skills, digest {self.digest[:12]}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CorpusIdentity":
        return cls(name=str(data["name"]), skills=int(data["skills"]), digest=str(data["digest"]),
                   demo=bool(data.get("demo", False)), path=data.get("path"))


def _meta(index_dir: Path) -> dict[str, Any]:
    meta_file = index_dir / "meta.json"
    if not meta_file.is_file():
        raise FileNotFoundError(f"{index_dir} is not a section index (no meta.json)")
    return json.loads(meta_file.read_text(encoding="utf-8"))


def _skill_count(index_dir: Path) -> int:
    sources_file = index_dir / "sources.json"
    if not sources_file.is_file():
        return 0
    sources = json.loads(sources_file.read_text(encoding="utf-8"))
    return len({row.get("skill_id") for row in sources if isinstance(row, dict)})


def card_digest(card: dict[str, Any]) -> str:
    """sha256 over the card's content fields (sorted JSON, without timestamps, timings and the digest)."""
    content = {k: v for k, v in card.items() if k not in VOLATILE_FIELDS}
    return hashlib.sha256(json.dumps(content, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def write_card(index_dir: str | Path, card: dict[str, Any]) -> dict[str, Any]:
    """Add the format and digest to `card` and write it into `index_dir`; returns the written card."""
    card = {"format": CARD_FORMAT, **card}
    card["digest"] = card_digest(card)
    (Path(index_dir) / CARD_FILE).write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return card


def read_card(index_dir: str | Path) -> dict[str, Any] | None:
    """The index's corpus card, or None when it has none; IndexIntegrityError when it is damaged (truncated,
    not JSON)."""
    from corpus_tools.index import read_index_json

    card_file = Path(index_dir) / CARD_FILE
    if not card_file.is_file():
        return None
    return read_index_json(index_dir, CARD_FILE)


def index_identity(index_dir: str | Path) -> CorpusIdentity:
    """The identity of the corpus in the index folder `index_dir` (`corpus_tools.identity.corpus_identity` also
    names the packaged starter corpus)."""
    directory = Path(index_dir)
    card = read_card(directory)
    if card is not None:
        return CorpusIdentity(name=str(card.get("name") or directory.name), skills=int(card.get("skills", 0)),
                              digest=str(card["digest"]), demo=bool(card.get("demo", False)),
                              path=str(directory.resolve()))
    _meta(directory)  # raises a clear error for a folder that is not an index
    digest = hashlib.sha256((directory / "meta.json").read_bytes()).hexdigest()
    return CorpusIdentity(name=directory.name, skills=_skill_count(directory), digest=digest,
                          path=str(directory.resolve()))


def record_label(record: dict[str, Any] | None) -> str:
    """The one-line label of a recorded corpus (from `corpus_record`); `CORPUS_NOT_RECORDED` when there is none."""
    if not record:
        return CORPUS_NOT_RECORDED
    if "error" in record:
        return f"{record.get('name')} (unreadable when recorded: {record['error']})"
    return CorpusIdentity.from_dict(record).label()
