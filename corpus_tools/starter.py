"""The starter corpus shipped with the package, and its cached BM25 index.

`corpus_tools/data/starter/` holds a few hundred MIT / Apache-2.0 skills chosen from the shared
corpus (see `select_starter`), in the same layout as the shared corpus (`MANIFEST.jsonl` with repo,
commit, path, license per file, documents under `skills/`), plus `LICENSES/` with the license text of
every source repository. It lets RASO run on a fresh machine without the shared data.

`starter_index()` builds the index once and caches it under `$RASO_CACHE_DIR/corpus/` (default
`~/.cache/raso/corpus/`), keyed by a hash of the starter files and the index format, so an edited
starter corpus or a new tokenizer never reuses a stale index.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corpus_tools.blocklist import find_leaks
from corpus_tools.card import CARD_FORMAT, STARTER_NAME, CorpusIdentity, card_digest, write_card
from corpus_tools.index import FORMAT_VERSION, SectionIndex
from corpus_tools.index_build import write_index
from corpus_tools.ingest import MANIFEST_FILE, SkillRecord, has_headings, load_corpus
from corpus_tools.sections import retrievable_sections, split_corpus
from corpus_tools.tokenizer import TOKENIZER_VERSION
from corpus_tools.vetting import flag_bits

STARTER_DIR = Path(__file__).resolve().parent / "data" / "starter"
STARTER_LICENSES = ("MIT", "Apache-2.0")
# What the starter index holds beyond the format: the skill level, vetting flags, retrievable sections only.
STARTER_BUILD = "skills+flags+retrievable+card-v2"

# Topic -> keyword regexes matched against name and description; a name hit counts 3, a description
# hit 1, and a skill needs 2 points for the topic. Topics are filled in this order.
STARTER_TOPICS: dict[str, tuple[str, ...]] = {
    "spreadsheets-data": (r"excel", r"spreadsheet", r"xlsx", r"\bcsv\b", r"pandas", r"dataframe", r"pivot",
                          r"formula", r"tabular", r"\bsql\b", r"data.analy", r"data.clean", r"\bcharts?\b",
                          r"workbook", r"google sheets", r"statistic"),
    "python-code": (r"python", r"pytest", r"unit.test", r"debug", r"refactor", r"code.review", r"\btdd\b",
                    r"test.driven", r"scripting", r"jupyter"),
    "planning-agents": (r"\bplan", r"task", r"workflow", r"checklist", r"decompos", r"reasoning", r"orchestrat",
                        r"brainstorm", r"problem.solving", r"decision", r"subagent", r"step.by.step"),
    "web-shopping": (r"browser", r"playwright", r"selenium", r"scrap", r"web.search", r"\bshop", r"e-?commerce",
                     r"product", r"checkout", r"\bcart\b", r"catalog", r"pricing", r"purchas", r"navigat"),
    "interactive-games": (r"\bgames?\b", r"household", r"interactive", r"puzzle", r"simulat", r"robot",
                          r"text.adventure", r"inventory", r"explor", r"state.machine"),
    "documents-office": (r"\bdocx?\b", r"\bpdf\b", r"word.document", r"powerpoint", r"\breport", r"office",
                         r"document", r"slides?\b", r"invoice"),
    "writing-general": (r"writ", r"summar", r"research", r"communicat", r"explain", r"documentation", r"edit"),
}
TOPIC_QUOTAS = {"spreadsheets-data": 80, "python-code": 45, "planning-agents": 50, "web-shopping": 45,
                "interactive-games": 20, "documents-office": 35, "writing-general": 25}
MAX_PER_REPO_PER_TOPIC = 8
MIN_SKILL_BYTES = 1500
MAX_SKILL_BYTES = 14000


def starter_corpus_dir() -> Path:
    """Folder of the packaged starter corpus (a MANIFEST.jsonl corpus, loadable with load_corpus)."""
    if not (STARTER_DIR / MANIFEST_FILE).is_file():
        raise FileNotFoundError(f"starter corpus missing at {STARTER_DIR} (incomplete installation?)")
    return STARTER_DIR


def default_cache_dir() -> Path:
    base = os.environ.get("RASO_CACHE_DIR")
    return Path(base) if base else Path.home() / ".cache" / "raso"


def starter_fingerprint(corpus_dir: Path | None = None) -> str:
    """Hash of the starter files plus the index format and tokenizer versions."""
    corpus_dir = corpus_dir or starter_corpus_dir()
    digest = hashlib.sha256(f"format={FORMAT_VERSION};tokenizer={TOKENIZER_VERSION};build={STARTER_BUILD}".encode())
    digest.update((corpus_dir / MANIFEST_FILE).read_bytes())
    for path in sorted((corpus_dir / "skills").rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(corpus_dir).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:20]


def starter_card(corpus_dir: Path | None = None) -> dict[str, Any]:
    """The starter index's corpus card, made from its files alone (no build needed), so the identity of the
    starter corpus has the same digest whether or not its index was built."""
    corpus_dir = corpus_dir or starter_corpus_dir()
    with (corpus_dir / MANIFEST_FILE).open(encoding="utf-8") as rows:
        skills = {row["skill"] for row in map(json.loads, rows) if row.get("kind") == "skill"}
    return {"name": STARTER_NAME, "release_date": None, "demo": True,
            "note": "demo data: a few hundred MIT/Apache-2.0 skills hand-picked by topic from the shared corpus to "
                    "match the shipped harnesses; not the paper's corpus",
            "skills": len(skills),
            "inputs": [{"kind": "manifest", "name": "corpus_tools/data/starter",
                        "fingerprint": starter_fingerprint(corpus_dir)}],
            "build": {"levels": [1, 2, 3], "starter_build": STARTER_BUILD}}


def starter_identity() -> CorpusIdentity:
    """The starter corpus's name for reports and results: always labelled a demo, never the paper's corpus."""
    card = starter_card()
    return CorpusIdentity(name=STARTER_NAME, skills=card["skills"], digest=card_digest({"format": CARD_FORMAT, **card}),
                          demo=True)


def starter_index(cache_dir: str | Path | None = None, *, rebuild: bool = False) -> SectionIndex:
    """The BM25 section index of the starter corpus, built on first use and cached on disk."""
    corpus_dir = starter_corpus_dir()
    root = Path(cache_dir) if cache_dir else default_cache_dir()
    target = root / "corpus" / f"starter-{starter_fingerprint(corpus_dir)}"
    if target.is_dir() and not rebuild:
        try:
            return SectionIndex.load(target)
        except (OSError, ValueError, KeyError):
            pass  # a damaged cache entry is rebuilt below
    records, _ = load_corpus(corpus_dir)
    write_index(retrievable_sections(split_corpus(records)), target, flagger=flag_bits)
    index = SectionIndex.load(target)
    write_card(target, starter_card(corpus_dir))
    return index


# --------------------------------------------------------------------------------------------------
# Choosing the starter corpus (run once by a maintainer; the result is committed).


def topic_score(record: SkillRecord, topic: str) -> int:
    name, description = record.name.lower(), record.description.lower()
    return sum(3 * bool(re.search(k, name)) + bool(re.search(k, description)) for k in STARTER_TOPICS[topic])


def select_starter(records: Sequence[SkillRecord], quotas: dict[str, int] | None = None) -> list[tuple[str, SkillRecord]]:
    """Pick (topic, record) pairs: permissive licenses only, no benchmark-leaking repository, no
    near-duplicates, mid-sized SKILL.md with headings and a description; per topic the best-scoring
    skills first, at most MAX_PER_REPO_PER_TOPIC from one repository."""
    quotas = quotas or TOPIC_QUOTAS
    leaking = set(find_leaks(records, ["all"]).excluded)
    eligible = [r for r in records
                if r.license in STARTER_LICENSES and r.repo not in leaking
                and not r.metadata.get("near_duplicate_of")
                and MIN_SKILL_BYTES <= len(r.text.encode("utf-8")) <= MAX_SKILL_BYTES
                and has_headings(r.body) and r.description]
    chosen: list[tuple[str, SkillRecord]] = []
    taken: set[str] = set()
    names: set[str] = set()
    for topic, quota in quotas.items():
        scored = [(topic_score(r, topic), r) for r in eligible if r.id not in taken]
        # Best score first; ties in a stable pseudo-random order (hash of the id), not alphabetical.
        scored = sorted((x for x in scored if x[0] >= 2),
                        key=lambda x: (-x[0], hashlib.sha256(x[1].id.encode()).hexdigest()))
        per_repo: dict[str, int] = defaultdict(int)
        picked = 0
        for _, r in scored:
            if picked >= quota:
                break
            if per_repo[r.repo] >= MAX_PER_REPO_PER_TOPIC or r.name.lower() in names:
                continue
            chosen.append((topic, r))
            taken.add(r.id)
            names.add(r.name.lower())
            per_repo[r.repo] += 1
            picked += 1
    return chosen


def write_starter(chosen: Sequence[tuple[str, SkillRecord]], source_dir: Path, out_dir: Path) -> dict[str, Any]:
    """Copy the chosen SKILL.md files byte-for-byte from a manifest corpus into `out_dir`."""
    manifest = {json.loads(line)["id"]: json.loads(line)
                for line in (source_dir / MANIFEST_FILE).read_text(encoding="utf-8").splitlines() if line.strip()}
    if (out_dir / "skills").exists():
        shutil.rmtree(out_dir / "skills")
    rows = []
    for topic, record in sorted(chosen, key=lambda x: x[1].id):
        row = dict(manifest[record.id])
        row["topic"] = topic
        dest = out_dir / "skills" / record.id
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source_dir / "skills" / record.id, dest)
        rows.append(row)
    (out_dir / MANIFEST_FILE).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                         encoding="utf-8")
    by_topic: dict[str, int] = defaultdict(int)
    by_repo: dict[str, int] = defaultdict(int)
    for r in rows:
        by_topic[r["topic"]] += 1
        by_repo[r["repo"]] += 1
    return {"skills": len(rows), "bytes": sum(r["bytes"] for r in rows), "topics": dict(by_topic),
            "repos": dict(sorted(by_repo.items(), key=lambda x: -x[1]))}


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m corpus_tools.starter SHARED_CORPUS OUT_DIR`: choose and copy a starter corpus
    (license files are collected separately, see data/starter/README.md)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    records, _ = load_corpus(args.corpus)
    args.out.mkdir(parents=True, exist_ok=True)
    info = write_starter(select_starter(records), args.corpus, args.out)
    print(json.dumps(info, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
