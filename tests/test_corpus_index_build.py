"""Streaming index build (corpus_tools.index_build) and sharded search (corpus_tools.shards)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from corpus_tools.index import SectionIndex
from corpus_tools.index_build import IndexWriter, build_streaming, write_index
from corpus_tools.sections import Section
from corpus_tools.shards import ShardedIndex, load_index

REPO = Path(__file__).resolve().parent.parent
ARRAYS = ("indptr", "postings", "weights", "term_max", "doc_lengths", "doc_source")


def synthetic(n: int, seed: int = 0) -> list[Section]:
    """Sections over a skewed vocabulary, with some exact duplicates (score ties) and many repos."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(2000)]
    out: list[Section] = []
    for i in range(n):
        skill = i // 6
        if i % 17 == 5:
            text = out[i - 3].text  # an exact duplicate: equal scores, ties broken by section order
        else:
            vocab = words[: rng.choice([40, 400, 2000])]
            text = " ".join(rng.choice(vocab) for _ in range(rng.randint(2, 60)))
        out.append(Section(id=f"s{i}", skill_id=f"k{skill}", skill_name=f"skill {skill}",
                           heading_path=f"skill {skill} › part {i % 4}", text=text, repo=f"owner/r{skill % 11}",
                           path="SKILL.md", commit="abc", license="MIT"))
    return out


def assert_same_index(a: SectionIndex, b: SectionIndex) -> None:
    assert a.vocab == b.vocab
    assert a.sources == b.sources
    for name in ARRAYS:
        x, y = np.asarray(getattr(a, name)), np.asarray(getattr(b, name))
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    for column in ("text", "heading", "id"):
        assert np.array_equal(a.blobs[column][0], b.blobs[column][0]), column
        assert np.array_equal(a.blobs[column][1], b.blobs[column][1]), column
    for key in ("sections", "terms", "postings", "avgdl", "k1", "b", "idf", "dtype", "tokenizer", "format_version"):
        assert a.meta[key] == b.meta[key], key


@pytest.mark.parametrize("idf", ["lucene", "okapi"])
def test_streaming_build_equals_in_memory_build(tmp_path: Path, idf: str) -> None:
    sections = synthetic(3000)
    # Small batches and merge blocks, so there are many spilled runs and many term blocks.
    streamed = build_streaming(sections, tmp_path / "idx", idf=idf, batch_sections=257, block_postings=3000)
    assert_same_index(SectionIndex.build(sections, idf=idf), streamed)
    assert streamed.search("w1 w7 w300", 3)[0].section.id == SectionIndex.build(sections, idf=idf).search(
        "w1 w7 w300", 3)[0].section.id


def test_streaming_build_of_shared_corpus_equals_in_memory_build(shared_corpus: Path, tmp_path: Path) -> None:
    from corpus_tools.build import build_corpus_index
    from corpus_tools.ingest import load_corpus
    from corpus_tools.sections import retrievable_sections, split_sections

    records, _ = load_corpus(shared_corpus)
    in_memory = SectionIndex.build(list(retrievable_sections(s for r in records for s in split_sections(r))))
    del records
    result = build_corpus_index([shared_corpus], tmp_path / "idx", scan=False)  # the scan is tested elsewhere
    assert len(in_memory) > 50_000
    assert_same_index(in_memory, SectionIndex.load(tmp_path / "idx"))
    for query in ("read excel workbook formulas openpyxl", "git commit message conventions", "docker deploy"):
        assert [h.section.id for h in result.index.search(query, 10)] == [h.section.id for h in in_memory.search(query, 10)]


def test_shards_return_exactly_the_single_index_results(tmp_path: Path) -> None:
    sections = synthetic(4000, seed=3)
    single = build_streaming(sections, tmp_path / "one", batch_sections=500)
    write_index(sections, tmp_path / "two", shards=2, batch_sections=333, block_postings=2000)
    sharded = load_index(tmp_path / "two")
    assert isinstance(sharded, ShardedIndex) and len(sharded.shards) == 2 and len(sharded) == len(single)
    assert json.loads((tmp_path / "two" / "shards.json").read_text())["shards"][1]["doc_offset"] == 2000
    rng = random.Random(7)
    words = [f"w{i}" for i in range(2000)]
    queries = [" ".join(rng.sample(words[: rng.choice([50, 500, 2000])], rng.randint(1, 14))) for _ in range(150)]
    queries += [sections[i].text for i in range(5, 4000, 170)]  # long queries that hit exact duplicates
    ties = 0
    for query in queries:
        for k in (1, 5, 25):
            docs, scores = single.top_k(query, k)
            got_docs, got_scores = sharded.top_k(query, k)
            assert got_docs.tolist() == docs.tolist(), (query, k)
            assert got_scores.tolist() == scores.tolist(), (query, k)
            ties += len(np.unique(scores)) < len(scores)
        kept = single.top_k(query, 5, exclude_repos=["owner/r1", "owner/r2"], exclude_skills=["k3"])
        got = sharded.top_k(query, 5, exclude_repos=["owner/r1", "owner/r2"], exclude_skills=["k3"])
        assert got[0].tolist() == kept[0].tolist()
    assert ties > 0  # the comparison did include tied scores
    hit = sharded.search(queries[-1], 1)[0]
    assert hit.section == single.search(queries[-1], 1)[0].section
    sharded.close()


def test_bad_writer_options_and_abort_keep_the_old_index(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="shards"):
        IndexWriter(tmp_path / "x", shards=0)
    with pytest.raises(ValueError, match="idf"):
        IndexWriter(tmp_path / "x", idf="nope")
    target = tmp_path / "idx"
    write_index(synthetic(50), target)

    def failing():
        yield from synthetic(30)
        raise RuntimeError("source broke")

    with pytest.raises(RuntimeError, match="source broke"):
        write_index(failing(), target)
    assert len(SectionIndex.load(target)) == 50
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]  # no temporary folders left behind


_MEMORY_CHILD = textwrap.dedent("""
    import random, sys, tempfile
    sys.path.insert(0, {repo!r})
    from corpus_tools.sections import Section
    from corpus_tools.index import SectionIndex
    from corpus_tools.index_build import write_index

    n, mode = int(sys.argv[1]), sys.argv[2]
    skills = n if len(sys.argv) > 3 and sys.argv[3] == "skill-per-section" else 50
    words = [f"w{{i}}" for i in range(5000)]

    def sections():
        rng = random.Random(0)
        for i in range(n):
            k = i % skills
            yield Section(id=f"s{{i}}", skill_id=f"owner{{k}}/repo{{k}}/skills/skill-{{k}}/SKILL.md",
                          skill_name="s", heading_path="s › h", text=" ".join(rng.choice(words) for _ in range(150)),
                          repo=f"owner{{k}}/repo{{k}}", path=f"skills/skill-{{k}}/SKILL.md", commit="c", license="MIT")

    with tempfile.TemporaryDirectory() as tmp:
        if mode == "stream":
            write_index(sections(), tmp + "/idx", batch_sections=2048, block_postings=200_000)
        else:
            SectionIndex.build(sections()).save(tmp + "/idx")
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the (large) forking test process.
    print(next(int(line.split()[1]) // 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:")))
""")

# The streaming build's peak RSS may grow by at most this much from N to 4N sections. What grows is
# 8 bytes per section (length, source) plus allocator slack; the text alone of the 3N extra
# sections is ~27 MB and the in-memory build grows by far more (checked below, so the bound bites).
MEMORY_GROWTH_BOUND_MB = 12


def _peak_rss_mb(n: int, mode: str, skills: str = "50-skills") -> int:
    out = subprocess.run([sys.executable, "-c", _MEMORY_CHILD.format(repo=str(REPO)), str(n), mode, skills],
                         capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1])


def test_streaming_build_peak_memory_stays_flat() -> None:
    n = 10_000
    small, large = _peak_rss_mb(n, "stream"), _peak_rss_mb(4 * n, "stream")
    assert large - small <= MEMORY_GROWTH_BOUND_MB, f"streaming peak RSS {small} MB -> {large} MB"
    in_memory_small, in_memory_large = _peak_rss_mb(n, "memory"), _peak_rss_mb(4 * n, "memory")
    assert in_memory_large - in_memory_small > 3 * MEMORY_GROWTH_BOUND_MB, (in_memory_small, in_memory_large)


def test_streaming_build_peak_memory_stays_flat_in_the_number_of_skills() -> None:
    """Every section its own skill (a source, a sources.json entry, a skill-level document): the distinct
    sources live in the writer's SQLite table, not in memory, so 3N more skills add only their per-section
    and per-skill-document arrays (was ~1.2 KB per skill: the key tuples of both writers and the whole
    sources list at the end)."""
    n = 10_000
    small = _peak_rss_mb(n, "stream", "skill-per-section")
    large = _peak_rss_mb(4 * n, "stream", "skill-per-section")
    assert large - small <= MEMORY_GROWTH_BOUND_MB, f"streaming peak RSS {small} MB -> {large} MB"


def test_sources_recurring_apart_and_non_ascii_keep_their_numbers_and_bytes(tmp_path: Path) -> None:
    """The writer's sources live in SQLite: a source seen again after others (a skill's sections apart, a
    reference file between them) keeps its first number, and sources.json has json.dumps's exact bytes."""
    sections = synthetic(300, seed=3)
    for i, section in enumerate(sections):
        k = [0, 1, 0, 2, 1, 3][i % 6] + 4 * (i // 60)
        section.skill_id, section.skill_name, section.repo = f"k{k}", f"skíll {k} “ü”", f"ówner/r{k % 3}"
        section.path = "SKILL.md" if i % 4 else f"refs/ref {k}.md"
    built = SectionIndex.build(sections)
    streamed = build_streaming(sections, tmp_path / "idx")
    assert_same_index(built, streamed)
    source = np.asarray(built.doc_source)
    runs = source[np.r_[True, source[1:] != source[:-1]]]
    assert len(runs) > len(set(runs.tolist()))  # some source does come back after another one
    on_disk = (tmp_path / "idx" / "sources.json").read_text(encoding="utf-8")
    assert on_disk == json.dumps(built.sources, ensure_ascii=False)
    sharded = load_index(write_index(sections, tmp_path / "sharded", shards=3))
    assert isinstance(sharded, ShardedIndex)
    for shard in sharded.shards:
        seen = [shard.sources[i] for i in np.unique(np.asarray(shard.doc_source))]
        assert seen == shard.sources and all(s in built.sources for s in seen)


def test_the_merges_run_without_the_vocabulary_dicts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real corpus has millions of distinct terms (~140 bytes each in a writer's dict, and there are two writers:
    sections and skill level), and the merge is where a build peaks: the merges need only term ids, so both dicts
    are let go before them (the 1M-content benchmark peaked at 1.5 GB with them held). The index is unchanged."""
    sections = synthetic(600, seed=5)
    terms_at_merge: list[int] = []
    merge = IndexWriter._merge

    def recording_merge(self: IndexWriter, *args, **kwargs):  # type: ignore[no-untyped-def]
        terms_at_merge.append(len(self.vocab))
        return merge(self, *args, **kwargs)

    monkeypatch.setattr(IndexWriter, "_merge", recording_merge)
    streamed = build_streaming(sections, tmp_path / "idx")
    assert terms_at_merge == [0, 0]  # the skill level's merge, then the sections'
    assert_same_index(SectionIndex.build(sections), streamed)
