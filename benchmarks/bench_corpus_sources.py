"""Corpus sources at scale: the same synthetic release as a GitSkills-shaped SQLite, a parquet dataset and a
folder tree, each built into an index by `raso corpus build` in its own process, in one run.

The release: --contents distinct SKILL.md contents (synthetic, generated here: words drawn from a
Zipf-like vocabulary of 20k terms under a few headings, 1-3 KB each), each carried by
--occurrences-per-content repositories (default 3: 1M contents -> 3M occurrences), 1 in 5
repositories without a licence.

* sqlite: `occurrences(repo, path, content_hash)` with every occurrence, `representatives(content_hash,
  content)` with one row per content, `repositories(full_name, license, stargazers_count)`: the mapping and
  joins are detected; each content gets its repository count.
* parquet: `skills.parquet` with one row per occurrence (`content_hash, repo, path, stars, content`, so
  every text is stored --occurrences-per-content times) plus `repos.parquet` (repo, license).
* folder: `repos/<owner>/<name>/skills/<id>/SKILL.md`, one file per distinct content (its first occurrence),
  so the folder build reads N files where the others read 3N occurrences.

Per source: build CPU seconds (user + sys of the build process), peak RSS of the build process, the input's
size and the index's size on disk, and the skills indexed (the same for all three). Peak RSS must stay under
1.5 GB at 1M contents (the issue's bound); the table says whether it did.

Usage: python benchmarks/bench_corpus_sources.py --contents 50000 [--work DIR] [--keep] [--json out.json]
                                                 [--parallel N]
`--parallel N` writes and builds up to N sources at once, each build still in its own process (CPU s and peak
RSS are per process, so they do not change; wall does).
The 1M run needs about 15 GB of disk in --work and about 40 CPU minutes per source (docs/corpus-sources.md).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RSS_BOUND_MB = 1500
VOCABULARY = 20_000


def _words(rng: random.Random) -> list[str]:
    syllables = ["ka", "lo", "mi", "ter", "sun", "vo", "rat", "pel", "qua", "dis", "ent", "ox", "ul", "fa"]
    words = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


class Contents:
    """Deterministic synthetic SKILL.md texts, one per content number (regenerated on demand, never all held)."""

    def __init__(self, seed: int = 7) -> None:
        rng = random.Random(seed)
        self.words = _words(rng)
        # cumulative weights once: rng.choices with plain weights re-sums all 20k of them on every call
        self.cum_weights = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(VOCABULARY)))
        self.seed = seed

    def text(self, number: int) -> str:
        rng = random.Random(self.seed * 1_000_003 + number)

        def sentence() -> str:
            return " ".join(rng.choices(self.words, cum_weights=self.cum_weights,
                                        k=rng.randint(8, 18))).capitalize() + "."

        parts = [f"---\nname: skill-{number}\ndescription: {sentence()}\n---\n# Skill {number}\n\n{sentence()}\n"]
        for heading in rng.sample(["Steps", "Usage", "Examples", "Pitfalls", "Checks", "Setup"], rng.randint(2, 4)):
            body = "\n".join(f"{i + 1}. {sentence()}" for i in range(rng.randint(3, 8)))
            parts.append(f"## {heading}\n\n{body}\n")
        return "\n".join(parts)


def occurrences(contents: int, per_content: int):
    """(repo, path, content) per occurrence, in the order a folder walk reads them; repo i has ~30 skills."""
    repos = max(1, contents * per_content // 30)
    for content in range(contents):
        for k in range(per_content):
            repo = (content * 7919 + k * 104729) % repos
            yield f"owner{repo % 997}/repo{repo}", f"skills/s{content}/SKILL.md", content


def licence_of(repo: str) -> str | None:
    number = int(repo.rsplit("repo", 1)[1])
    return None if number % 5 == 4 else ("MIT" if number % 2 else "Apache-2.0")


def write_sqlite(contents: Contents, n: int, per: int, file: Path) -> None:
    db = sqlite3.connect(file)
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    db.execute("CREATE TABLE occurrences (repo TEXT, path TEXT, content_hash TEXT)")
    db.execute("CREATE TABLE representatives (content_hash TEXT PRIMARY KEY, content TEXT)")
    db.execute("CREATE TABLE repositories (full_name TEXT PRIMARY KEY, license TEXT, stargazers_count INTEGER)")
    batch, repos = [], set()
    for repo, path, content in occurrences(n, per):
        batch.append((repo, path, f"c{content}"))
        repos.add(repo)
        if len(batch) >= 50_000:
            db.executemany("INSERT INTO occurrences VALUES (?, ?, ?)", batch)
            batch.clear()
    db.executemany("INSERT INTO occurrences VALUES (?, ?, ?)", batch)
    for start in range(0, n, 20_000):
        db.executemany("INSERT INTO representatives VALUES (?, ?)",
                       ((f"c{c}", contents.text(c)) for c in range(start, min(n, start + 20_000))))
    db.executemany("INSERT INTO repositories VALUES (?, ?, ?)", ((r, licence_of(r), 1) for r in sorted(repos)))
    db.commit()
    db.close()


def write_parquet(contents: Contents, n: int, per: int, folder: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    schema = pa.schema([("content_hash", pa.string()), ("repo", pa.string()), ("path", pa.string()),
                        ("stars", pa.int32()), ("content", pa.string())])
    repos: set[str] = set()
    last: tuple[int, str] = (-1, "")
    with pq.ParquetWriter(folder / "skills.parquet", schema) as writer:
        rows: dict[str, list] = {name: [] for name in schema.names}
        for repo, path, content in occurrences(n, per):
            repos.add(repo)
            if last[0] != content:  # a content's occurrences are consecutive: generate its text once
                last = (content, contents.text(content))
            for name, value in zip(schema.names, (f"c{content}", repo, path, 1, last[1])):
                rows[name].append(value)
            if len(rows["repo"]) >= 10_000:
                writer.write_table(pa.table(rows, schema=schema))
                rows = {name: [] for name in schema.names}
        if rows["repo"]:
            writer.write_table(pa.table(rows, schema=schema))
    ordered = sorted(repos)
    pq.write_table(pa.table({"repo": ordered, "license": [licence_of(r) for r in ordered]}), folder / "repos.parquet")


def write_folder(contents: Contents, n: int, per: int, root: Path) -> None:
    """One SKILL.md per distinct content, in the repository of its first occurrence (k = 0)."""
    licences = set()
    for repo, path, content in itertools.islice(occurrences(n, per), 0, None, per):
        target = root / "repos" / repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(contents.text(content), encoding="utf-8")
        if repo not in licences and licence_of(repo):
            licences.add(repo)
            text = "MIT License\n\nPermission is hereby granted, free of charge, to any person ...\n" \
                if licence_of(repo) == "MIT" else "Apache License\nVersion 2.0, January 2004\n"
            (root / "repos" / repo / "LICENSE").write_text(text, encoding="utf-8")


def disk_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def build(source: Path, out: Path) -> dict:
    """One `raso corpus build` in its own process: CPU seconds and peak RSS from wait4."""
    command = [sys.executable, "-m", "raso.cli.main", "corpus", "build", str(source), "--out", str(out)]
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(process.pid, 0)
    stdout, stderr = process.stdout.read(), process.stderr.read()  # type: ignore[union-attr]
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"build of {source} failed:\n{stderr[-2000:]}")
    card = json.loads((out / "corpus_card.json").read_text())
    return {"cpu_s": round(usage.ru_utime + usage.ru_stime, 1), "wall_s": round(time.perf_counter() - started, 1),
            "peak_rss_mb": round(usage.ru_maxrss / 1024), "input_mb": round(disk_bytes(source) / 1e6, 1),
            "index_mb": round(disk_bytes(out) / 1e6, 1), "skills": card["skills"],
            "sections": card["sections"], "printed": stdout.splitlines()[:1]}


def prepare_and_build(name: str, n: int, per: int, work: Path) -> dict:
    """Write one source's input (unless already there) and build it: the unit of work of one source."""
    write, source = {"sqlite": (write_sqlite, work / "gitskills.sqlite"), "parquet": (write_parquet, work / "parquet"),
                     "folder": (write_folder, work / "folder")}[name]
    if not source.exists():
        started = time.perf_counter()
        partial = source.with_name(source.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True) if partial.is_dir() else partial.unlink(missing_ok=True)
        write(Contents(), n, per, partial)
        partial.rename(source)  # a killed writer leaves no half-written input that a rerun would take as whole
        print(f"wrote {name} input in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    result = build(source, work / f"index-{name}")
    print(f"{name}: {result}", file=sys.stderr)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--contents", type=int, default=1_000_000, help="distinct contents (default 1M)")
    parser.add_argument("--occurrences-per-content", type=int, default=3)
    parser.add_argument("--sources", default="sqlite,parquet,folder")
    parser.add_argument("--work", type=Path, help="folder for the inputs and indexes (default: a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep --work afterwards")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--parallel", type=int, default=1, help="sources written and built at once (default 1)")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="raso-bench-sources-"))
    work.mkdir(parents=True, exist_ok=True)
    n, per = args.contents, args.occurrences_per_content
    names = args.sources.split(",")
    results: dict[str, dict] = {}
    try:
        if args.parallel > 1:
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(max_workers=args.parallel) as pool:
                futures = {name: pool.submit(prepare_and_build, name, n, per, work) for name in names}
                results = {name: future.result() for name, future in futures.items()}
        else:
            results = {name: prepare_and_build(name, n, per, work) for name in names}
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\n{n:,} distinct contents, {n * per:,} occurrences; peak RSS bound {RSS_BOUND_MB} MB\n")
    print(f"{'source':<8} {'build CPU s':>11} {'peak RSS MB':>11} {'input MB':>9} {'index MB':>9} {'skills':>9} "
          f"{'sections':>9}  under bound")
    for name, r in results.items():
        print(f"{name:<8} {r['cpu_s']:>11} {r['peak_rss_mb']:>11} {r['input_mb']:>9} {r['index_mb']:>9} "
              f"{r['skills']:>9} {r['sections']:>9}  {'yes' if r['peak_rss_mb'] < RSS_BOUND_MB else 'NO'}")
    if "folder" in results:
        base = results["folder"]["cpu_s"] or 1
        print("\nbuild CPU relative to the folder source: " + ", ".join(
            f"{name} {r['cpu_s'] / base:.2f}x" for name, r in results.items()))
    if args.json:
        args.json.write_text(json.dumps({"contents": n, "occurrences": n * per, "results": results}, indent=1))
    return 0 if all(r["peak_rss_mb"] < RSS_BOUND_MB for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
