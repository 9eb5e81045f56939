"""A skill-retrieval dataset (queries with gold skill ids over a pool of skills) and the
reference-file benchmark built from a corpus manifest.

File format (JSONL, one object per line, `type` says which):

* ``{"type": "meta", "name", "description", "pool_corpus": str | null, "split_rule", ...}`` — first line;
  `pool_corpus` names a corpus folder (MANIFEST.jsonl layout) holding the pool, or null when the pool
  is stored inline.
* ``{"type": "skill", "id", "name", "description", "body", "repo"}`` — an inline pool skill.
* ``{"type": "query", "id", "text", "gold": [skill ids], "exclude": [skill ids], "split", "source"}``.
  `exclude` lists pool skills that must not be ranked for this query (near-identical copies of the
  gold skill, which would make the answer ambiguous).

The reference-file benchmark (`build_reference_benchmark`): every reference markdown file of a skill
becomes one query — its title plus its opening paragraph — whose gold is the parent skill (the
manifest's `skill` field). The pool holds only SKILL.md documents (name, description, body), so the
reference text itself is never in the pool. Split: a query is in "dev" when
sha256("raso-retrieval-v1:" + gold skill id) read as an integer is below `dev_fraction` of the range
(50% by default), else "test"; grouping by gold skill keeps a skill's queries on one side, so a fusion
model trained on dev never sees a test answer.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SPLIT_SALT = "raso-retrieval-v1"
SPLITS = ("dev", "test")
DEFAULT_DEV_FRACTION = 0.5
DEFAULT_MAX_PARAGRAPH_CHARS = 500
DEFAULT_MIN_QUERY_CHARS = 40


@dataclass(slots=True)
class PoolSkill:
    id: str
    name: str
    description: str
    body: str
    repo: str = ""

    @property
    def concat(self) -> str:
        return f"{self.name}\n{self.description}\n{self.body}"


@dataclass(slots=True)
class RetrievalQuery:
    id: str
    text: str
    gold: list[str]
    exclude: list[str] = field(default_factory=list)
    split: str = "test"
    source: str = ""


@dataclass
class RetrievalDataset:
    name: str
    queries: list[RetrievalQuery]
    pool: list[PoolSkill]
    description: str = ""
    pool_corpus: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def split(self, name: str) -> list[RetrievalQuery]:
        if name == "all":
            return list(self.queries)
        return [q for q in self.queries if q.split == name]

    def pool_ids(self) -> list[str]:
        return [s.id for s in self.pool]

    def validate(self) -> None:
        """Raise ValueError when a query has no gold, or a gold id that is not in the pool."""
        ids = set(self.pool_ids())
        if len(ids) != len(self.pool):
            raise ValueError(f"dataset {self.name!r}: duplicate skill ids in the pool")
        for q in self.queries:
            if not q.gold:
                raise ValueError(f"dataset {self.name!r}: query {q.id} has no gold skill")
            missing = [g for g in q.gold if g not in ids]
            if missing:
                raise ValueError(f"dataset {self.name!r}: query {q.id} has gold ids not in the pool: {missing[:3]}")

    # ---- JSONL
    def save(self, path: str | Path, *, inline_pool: bool | None = None) -> Path:
        """Write the dataset. The pool is written inline unless it comes from a corpus folder
        (`pool_corpus`) and `inline_pool` is not True."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        inline = inline_pool if inline_pool is not None else self.pool_corpus is None
        meta = {"type": "meta", "name": self.name, "description": self.description,
                "pool_corpus": None if inline else self.pool_corpus, "pool_size": len(self.pool),
                "queries": len(self.queries), **self.meta}
        tmp = path.with_suffix(path.suffix + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(meta, ensure_ascii=False) + "\n")
            if inline:
                for skill in self.pool:
                    fh.write(json.dumps({"type": "skill", **asdict(skill)}, ensure_ascii=False) + "\n")
            for q in self.queries:
                fh.write(json.dumps({"type": "query", **asdict(q)}, ensure_ascii=False) + "\n")
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path, *, corpus_dir: str | Path | None = None) -> "RetrievalDataset":
        """Read a dataset. A pool stored by reference is loaded from `corpus_dir` when given, else
        from the `pool_corpus` folder recorded in the file."""
        path = Path(path)
        meta: dict[str, Any] | None = None
        pool: list[PoolSkill] = []
        queries: list[RetrievalQuery] = []
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except ValueError as exc:
                    raise ValueError(f"{path}:{lineno}: not JSON ({exc})") from exc
                kind = obj.pop("type", None)
                try:
                    if kind == "meta":
                        meta = obj
                    elif kind == "skill":
                        pool.append(PoolSkill(**obj))
                    elif kind == "query":
                        queries.append(RetrievalQuery(**obj))
                    else:
                        raise ValueError(f"unknown record type {kind!r}")
                except TypeError as exc:
                    raise ValueError(f"{path}:{lineno}: bad {kind} record ({exc})") from exc
        if meta is None:
            raise ValueError(f"{path}: no meta line (a retrieval dataset starts with {{\"type\": \"meta\", ...}})")
        pool_corpus = meta.pop("pool_corpus", None)
        name = meta.pop("name", path.stem)
        description = meta.pop("description", "")
        for key in ("pool_size", "queries"):
            meta.pop(key, None)
        if not pool:
            source = corpus_dir or pool_corpus
            if source is None:
                raise ValueError(f"{path}: the pool is neither inline nor a corpus folder")
            pool = load_pool(source)
        dataset = cls(name=name, queries=queries, pool=pool, description=description,
                      pool_corpus=str(corpus_dir) if corpus_dir else pool_corpus,
                      meta=meta)
        dataset.validate()
        return dataset


# --------------------------------------------------------------------------------------------------
# The pool from a corpus


def load_pool(corpus: str | Path) -> list[PoolSkill]:
    """Every skill of a corpus source (see corpus_tools.ingest.load_corpus) as a pool entry; only the
    SKILL.md is used (name, description, body), never its reference files."""
    from corpus_tools.ingest import load_corpus

    records, _report = load_corpus([corpus])
    return [PoolSkill(id=r.id, name=r.name, description=r.description, body=r.body, repo=r.repo) for r in records]


# --------------------------------------------------------------------------------------------------
# Queries from reference files

_FRONT_MATTER = re.compile(r"\A\ufeff?---[ \t]*\r?\n.*?\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_MARKUP = re.compile(r"`+|\*{1,3}|(?<!\w)_{1,3}|_{1,3}(?!\w)")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


def _plain(text: str) -> str:
    return " ".join(_MARKUP.sub("", _LINK.sub(r"\1", text)).split())


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    return cut[: space if space > limit // 2 else limit].rstrip() + " …"


def _lines_outside_code(text: str) -> Iterator[str | None]:
    """The lines of a markdown file after its front matter (right-stripped), fenced code left out:
    None stands where a code fence opens."""
    text = _FRONT_MATTER.sub("", text.replace("\r\n", "\n"), count=1)
    fence: str | None = None
    for raw in text.split("\n"):
        line = raw.rstrip()
        fence_match = _FENCE.match(line)
        if fence is not None:
            if fence_match and fence_match.group(1)[0] == fence[0] and len(fence_match.group(1)) >= len(fence):
                fence = None
            continue
        if fence_match:
            fence = fence_match.group(1)
            yield None
            continue
        yield line


def query_from_reference(text: str, file_name: str, *, max_paragraph_chars: int = DEFAULT_MAX_PARAGRAPH_CHARS) -> str:
    """Title plus opening paragraph of a markdown reference file.

    Title: the first heading (else the file name, hyphens and underscores as spaces). Opening
    paragraph: the first block of prose after it — headings, code fences, tables and HTML are passed
    over; a list counts as prose when nothing else comes first. Markup is stripped."""
    title = ""
    paragraph: list[str] = []
    for line in _lines_outside_code(text):
        if line is None:  # a code block starts
            if paragraph:
                break
            continue
        heading = _HEADING.match(line)
        if heading:
            if paragraph:
                break
            if not title:
                title = _plain(heading.group(2))
            continue
        stripped = line.strip()
        if not stripped:
            if paragraph:
                break
            continue
        if stripped.startswith(("|", "<", "---", "***", "===")):
            if paragraph:
                break
            continue
        paragraph.append(stripped)
    if not title:
        title = re.sub(r"[-_]+", " ", Path(file_name).stem).strip()
    body = _clip(_plain(" ".join(paragraph)), max_paragraph_chars)
    return f"{title}\n{body}".strip() if body else title


DEFAULT_MAX_KEYWORDS = 8
MIN_KEYWORDS = 3
QUERY_STYLES = ("long", "short")


def short_query_from_reference(text: str, file_name: str, *, max_keywords: int = DEFAULT_MAX_KEYWORDS) -> str:
    """A requirement-style keyword query for a reference file, written by rule from its headings:
    the words of its title, then of its other headings in order (code fences skipped), lower-cased,
    stop words dropped, each word once, at most `max_keywords` -- the 3 to 8 keywords the RASI/RASU
    query prompt asks the optimizer for. The title falls back to the file name."""
    from corpus_tools.retrieval.fields import tokenize

    headings: list[str] = []
    for line in _lines_outside_code(text):
        heading = _HEADING.match(line) if line is not None else None
        if heading:
            headings.append(_plain(heading.group(2)))
    if not headings:
        headings.append(re.sub(r"[-_]+", " ", Path(file_name).stem))
    words: list[str] = []
    for title in headings:
        for word in tokenize(title):
            if word not in words and not word.isdigit():
                words.append(word)
    return " ".join(words[:max_keywords])


def _split_of(skill_id: str, dev_fraction: float) -> str:
    digest = hashlib.sha256(f"{SPLIT_SALT}:{skill_id}".encode()).hexdigest()
    return "dev" if int(digest[:12], 16) < dev_fraction * 16**12 else "test"


def near_duplicate_twins(rows: Iterable[dict[str, Any]]) -> dict[str, set[str]]:
    """Skill id -> the ids of its near-identical copies (manifest `near_duplicate_of`, either direction)."""
    twins: dict[str, set[str]] = {}
    for row in rows:
        other = row.get("near_duplicate_of")
        if row.get("kind") == "skill" and other:
            twins.setdefault(row["id"], set()).add(other)
            twins.setdefault(other, set()).add(row["id"])
    return twins


def _read_manifest(corpus_dir: Path) -> list[dict[str, Any]]:
    rows = []
    with open(corpus_dir / "MANIFEST.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rows.append(json.loads(line))
    return rows


def build_reference_benchmark(
    corpus_dir: str | Path,
    *,
    dev_fraction: float = DEFAULT_DEV_FRACTION,
    max_paragraph_chars: int = DEFAULT_MAX_PARAGRAPH_CHARS,
    min_query_chars: int = DEFAULT_MIN_QUERY_CHARS,
    pool: Sequence[PoolSkill] | None = None,
    style: str = "long",
) -> RetrievalDataset:
    """Build the reference-file benchmark from a corpus folder with MANIFEST.jsonl (see module doc).

    `style` "long": query = title + opening paragraph; queries shorter than `min_query_chars` (a bare
    title) are dropped. "short": query = 3 to 8 keywords from the file's headings
    (`short_query_from_reference`); fewer than 3 keywords is dropped. Queries whose parent skill is
    not in the pool are dropped. `pool` defaults to `load_pool(corpus_dir)`."""
    corpus_dir = Path(corpus_dir)
    if not (corpus_dir / "MANIFEST.jsonl").is_file():
        raise FileNotFoundError(f"{corpus_dir} has no MANIFEST.jsonl")
    if not 0.0 < dev_fraction < 1.0:
        raise ValueError(f"dev_fraction must be in (0, 1), got {dev_fraction}")
    if style not in QUERY_STYLES:
        raise ValueError(f"style must be one of {QUERY_STYLES}, got {style!r}")
    rows = _read_manifest(corpus_dir)
    pool = list(pool) if pool is not None else load_pool(corpus_dir)
    pool_ids = {s.id for s in pool}
    # Near-identical copies of a skill (manifest `near_duplicate_of`, either direction) are excluded
    # from its queries' rankings: ranking the copy first is not an error.
    twins = near_duplicate_twins(rows)
    queries: list[RetrievalQuery] = []
    dropped = {"short": 0, "gold_not_in_pool": 0, "unreadable": 0}
    for row in rows:
        if row.get("kind") != "reference":
            continue
        gold = str(row.get("skill") or "")
        if gold not in pool_ids:
            dropped["gold_not_in_pool"] += 1
            continue
        try:
            raw = (corpus_dir / "skills" / row["id"]).read_text(encoding="utf-8", errors="replace")
        except OSError:
            dropped["unreadable"] += 1
            continue
        if style == "short":
            text = short_query_from_reference(raw, row["id"])
            too_short = len(text.split()) < MIN_KEYWORDS
        else:
            text = query_from_reference(raw, row["id"], max_paragraph_chars=max_paragraph_chars)
            too_short = len(text) < min_query_chars
        if too_short:
            dropped["short"] += 1
            continue
        exclude = sorted(t for t in twins.get(gold, ()) if t in pool_ids and t != gold)
        queries.append(RetrievalQuery(id=row["id"], text=text, gold=[gold], exclude=exclude,
                                      split=_split_of(gold, dev_fraction), source=row["id"]))
    meta = {"split_rule": f"dev iff sha256('{SPLIT_SALT}:' + gold skill id) < {dev_fraction} of the range",
            "style": style, "dev_fraction": dev_fraction, "max_paragraph_chars": max_paragraph_chars,
            "min_query_chars": min_query_chars, "dropped": dropped,
            "dev_queries": sum(q.split == "dev" for q in queries),
            "test_queries": sum(q.split == "test" for q in queries)}
    dataset = RetrievalDataset(
        name="reference-files" if style == "long" else "reference-headings-short",
        description=("query = a reference file's title + opening paragraph" if style == "long" else
                     "query = 3 to 8 keywords from a reference file's headings (title first)")
        + "; gold = its parent skill; pool = SKILL.md documents only",
        queries=queries, pool=pool, pool_corpus=str(corpus_dir), meta=meta)
    dataset.validate()
    return dataset


def sample_queries(queries: Sequence[RetrievalQuery], n: int | None, *, seed: str = SPLIT_SALT) -> list[RetrievalQuery]:
    """A fixed pseudo-random sample of `n` queries (all when n is None or >= len): the queries
    ordered by sha256(seed + ":" + query id), first n — the same sample on every machine."""
    if n is None or n >= len(queries):
        return list(queries)
    keyed = sorted(queries, key=lambda q: hashlib.sha256(f"{seed}:{q.id}".encode()).hexdigest())
    return keyed[:n]


def subsample_pool(
    pool: Sequence[PoolSkill], queries: Iterable[RetrievalQuery], size: int, *, seed: int = 0
) -> list[PoolSkill]:
    """A pool of `size` skills that keeps every gold skill of `queries` and fills the rest with a
    fixed pseudo-random choice of the others (for Recall@K as the pool grows)."""
    import random

    gold = {g for q in queries for g in q.gold}
    keep = [s for s in pool if s.id in gold]
    others = [s for s in pool if s.id not in gold]
    random.Random(seed).shuffle(others)
    need = max(0, size - len(keep))
    chosen = {s.id for s in keep} | {s.id for s in others[:need]}
    return [s for s in pool if s.id in chosen]


# --------------------------------------------------------------------------------------------------
# Instruction-style queries: real task statements that never name the skill they need

def _task_rows(path: Path, fmt: str) -> list[dict[str, Any]]:
    if fmt == "csv":
        import csv

        with open(path, encoding="utf-8", newline="") as fh:
            return list(csv.DictReader(fh))
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of tasks")
    return data


def build_instruction_benchmarks(spec_path: str | Path, *, roots: dict[str, str | Path],
                                 pool: Sequence[PoolSkill] | None = None) -> list[RetrievalDataset]:
    """The instruction-query sets of a judgement file (experiments/data/instruction_queries.json): each set
    takes real task statements (a harness's task instructions, a benchmark's questions) from the task files it
    names, as they are given to the agent, and judges against the pool which skills would help solve them (its
    `gold`, with the judgement written beside it). Task files are named `<root>:<path>` and read from `roots`
    (e.g. {"repo": ..., "shared": ...}); only ids and judgements are stored, never the task texts. A task
    source with `sample: N` takes the N ids first in sha256(salt + ":" + id) order. Every query excludes the
    near-duplicates (manifest `near_duplicate_of`) of its gold skills, as the reference-file benchmark does."""
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))

    def resolve(name: str) -> Path:
        root, sep, rest = name.partition(":")
        if not sep or root not in roots:
            raise ValueError(f"{spec_path}: {name!r} names no known root ({', '.join(roots)})")
        return Path(roots[root]) / rest

    corpus_dir = resolve(spec["pool_corpus"])
    rows = _read_manifest(corpus_dir)
    pool = list(pool) if pool is not None else load_pool(corpus_dir)
    pool_ids = {s.id for s in pool}
    twins = near_duplicate_twins(rows)
    datasets = []
    for entry in spec["sets"]:
        gold = list(entry["gold"])
        missing = [g for g in gold if g not in pool_ids]
        if missing:
            raise ValueError(f"{spec_path}: set {entry['name']!r} has gold skills not in the pool: {missing}")
        exclude = sorted({t for g in gold for t in twins.get(g, ()) if t in pool_ids} - set(gold))
        queries: list[RetrievalQuery] = []
        seen: set[str] = set()
        for source in entry["tasks"]:
            path = resolve(source["file"])
            tasks = _task_rows(path, source.get("format", "json"))
            by_id = {str(t[source["id_field"]]): t for t in tasks}
            ids = list(by_id)
            if source.get("sample") is not None:
                salt = source.get("salt", SPLIT_SALT)
                ids = sorted(ids, key=lambda i: hashlib.sha256(f"{salt}:{i}".encode()).hexdigest())
                ids = ids[:int(source["sample"])]
            for task_id in ids:
                text = " ".join(str(by_id[task_id][source["text_field"]]).split())
                if task_id in seen or not text:
                    continue
                seen.add(task_id)
                queries.append(RetrievalQuery(id=f"{entry['name']}/{task_id}", text=text, gold=gold,
                                              exclude=exclude, split="test", source=source["file"]))
        dataset = RetrievalDataset(name=entry["name"], description=entry.get("description", ""), queries=queries,
                                   pool=pool, pool_corpus=str(corpus_dir),
                                   meta={"judgement": entry.get("judgement", ""), "gold": gold})
        dataset.validate()
        datasets.append(dataset)
    return datasets
