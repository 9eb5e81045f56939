"""The retrieval dataset format and the reference-file benchmark builder."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from corpus_tools.retrieval.dataset import (
    PoolSkill,
    RetrievalDataset,
    RetrievalQuery,
    build_instruction_benchmarks,
    build_reference_benchmark,
    query_from_reference,
    short_query_from_reference,
    subsample_pool,
)

REF_TEXT = "# Pivot tables\n\nBuild a pivot table from the sales sheet and group the rows by quarter.\n\n## More\nx\n"


def _write_corpus(root: Path, n_skills: int = 6) -> Path:
    rows = []
    for i in range(n_skills):
        sid = f"o__r/skill{i}/SKILL.md"
        text = f"---\nname: skill-{i}\ndescription: Skill number {i} about topic{i}.\n---\n# Skill {i}\n\nDo topic{i} well.\n"
        (root / "skills" / f"o__r/skill{i}").mkdir(parents=True, exist_ok=True)
        (root / "skills" / sid).write_text(text, encoding="utf-8")
        rows.append({"id": sid, "repo": "o/r", "commit": "c", "path": f"skill{i}/SKILL.md", "license": "MIT",
                     "kind": "skill", "skill": sid, "near_duplicate_of": "o__r/skill0/SKILL.md" if i == 5 else None,
                     "name": f"skill-{i}", "description": f"Skill number {i} about topic{i}."})
        rid = f"o__r/skill{i}/references/guide.md"
        (root / "skills" / f"o__r/skill{i}/references").mkdir(parents=True, exist_ok=True)
        (root / "skills" / rid).write_text(REF_TEXT.replace("sales", f"sales{i}"), encoding="utf-8")
        rows.append({"id": rid, "repo": "o/r", "commit": "c", "path": f"skill{i}/references/guide.md",
                     "license": "MIT", "kind": "reference", "skill": sid, "near_duplicate_of": None})
    # a reference too short to be a query, and one whose skill is absent
    (root / "skills" / "o__r/skill1/references/tiny.md").write_text("# Hi\n", encoding="utf-8")
    rows.append({"id": "o__r/skill1/references/tiny.md", "repo": "o/r", "kind": "reference", "skill": "o__r/skill1/SKILL.md"})
    rows.append({"id": "o__r/gone/x.md", "repo": "o/r", "kind": "reference", "skill": None})
    (root / "MANIFEST.jsonl").write_text("".join(json.dumps(r) + "\n" for r in sorted(rows, key=lambda r: r["id"])))
    return root


def test_query_is_title_plus_opening_paragraph():
    text = "---\nx: 1\n---\n# Pivot **tables**\n\n```py\ncode\n```\n\n| a | b |\n\nBuild a [pivot](u) table.\nSecond line.\n\nLater.\n"
    assert query_from_reference(text, "f.md") == "Pivot tables\nBuild a pivot table. Second line."
    assert query_from_reference("Just prose here.", "my_ref-file.md") == "my ref file\nJust prose here."


def test_builder_keeps_reference_text_out_of_the_pool(tmp_path):
    ds = build_reference_benchmark(_write_corpus(tmp_path))
    assert len(ds.pool) == 6
    assert len(ds.queries) == 6  # tiny.md is too short, x.md has no skill
    assert ds.meta["dropped"] == {"short": 1, "gold_not_in_pool": 1, "unreadable": 0}
    for q in ds.queries:
        assert q.gold == [q.source.split("/references/")[0] + "/SKILL.md"]
        assert "Build a pivot table" in q.text
        for skill in ds.pool:
            assert "pivot" not in skill.concat.lower()
    # the near-duplicate pair is excluded from each other's queries
    by_gold = {q.gold[0]: q for q in ds.queries}
    assert by_gold["o__r/skill0/SKILL.md"].exclude == ["o__r/skill5/SKILL.md"]
    assert by_gold["o__r/skill5/SKILL.md"].exclude == ["o__r/skill0/SKILL.md"]
    assert by_gold["o__r/skill2/SKILL.md"].exclude == []


def test_split_is_deterministic_and_grouped_by_gold_skill(tmp_path):
    corpus = _write_corpus(tmp_path)
    first = build_reference_benchmark(corpus)
    second = build_reference_benchmark(corpus)
    assert [(q.id, q.split) for q in first.queries] == [(q.id, q.split) for q in second.queries]
    for q in first.queries:
        digest = int(hashlib.sha256(f"raso-retrieval-v1:{q.gold[0]}".encode()).hexdigest()[:12], 16)
        assert q.split == ("dev" if digest < 0.5 * 16**12 else "test")


def test_jsonl_round_trip_inline_and_by_corpus(tmp_path):
    corpus = _write_corpus(tmp_path / "c")
    ds = build_reference_benchmark(corpus)
    by_ref = ds.save(tmp_path / "bench.jsonl")
    assert sum(1 for line in by_ref.read_text().splitlines() if '"type": "skill"' in line) == 0
    loaded = RetrievalDataset.load(by_ref)
    assert [q.text for q in loaded.queries] == [q.text for q in ds.queries]
    assert loaded.pool_ids() == ds.pool_ids()
    inline = ds.save(tmp_path / "inline.jsonl", inline_pool=True)
    loaded_inline = RetrievalDataset.load(inline)
    assert [s.body for s in loaded_inline.pool] == [s.body for s in ds.pool]
    assert loaded_inline.meta["split_rule"].startswith("dev iff sha256")


def test_load_rejects_bad_files(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "meta", "name": "x", "pool_corpus": null}\n{"type": "skill", "id": "a", "name": "a", '
                   '"description": "", "body": ""}\n{"type": "query", "id": "q", "text": "t", "gold": ["zzz"]}\n')
    with pytest.raises(ValueError, match="not in the pool"):
        RetrievalDataset.load(bad)
    bad.write_text('{"type": "query", "id": "q", "text": "t", "gold": ["a"]}\n')
    with pytest.raises(ValueError, match="no meta line"):
        RetrievalDataset.load(bad)
    bad.write_text("{not json\n")
    with pytest.raises(ValueError, match="not JSON"):
        RetrievalDataset.load(bad)


def test_subsample_pool_keeps_gold():
    pool = [PoolSkill(id=f"s{i}", name="", description="", body="") for i in range(20)]
    queries = [RetrievalQuery(id="q", text="t", gold=["s7", "s13"])]
    small = subsample_pool(pool, queries, 5, seed=1)
    assert len(small) == 5 and {"s7", "s13"} <= {s.id for s in small}
    assert [s.id for s in small] == [s.id for s in subsample_pool(pool, queries, 5, seed=1)]


def test_real_corpus_benchmark(shared_corpus):
    ds = build_reference_benchmark(shared_corpus)
    assert len(ds.pool) == 4771
    refs = sum(1 for line in (shared_corpus / "MANIFEST.jsonl").open() if '"kind": "reference"' in line)
    assert len(ds.queries) + sum(ds.meta["dropped"].values()) == refs
    assert 0.4 < ds.meta["dev_queries"] / len(ds.queries) < 0.6
    dev_gold = {q.gold[0] for q in ds.split("dev")}
    assert not dev_gold & {q.gold[0] for q in ds.split("test")}


def test_short_query_is_heading_keywords_outside_code() -> None:
    text = ("---\nname: x\n---\n# Pivot Tables\n\nSome prose about pivots.\n\n## Grouping by quarter\n"
            "```\n# not a heading\n```\n## Calculated fields and the API\n### Pivot grouping again\n")
    assert short_query_from_reference(text, "x.md") == "pivot tables grouping quarter calculated fields api again"
    assert short_query_from_reference("no headings at all", "advanced-formula_tips.md") == "advanced formula tips"
    many = "# " + " ".join(f"word{i}" for i in range(20))
    assert len(short_query_from_reference(many, "m.md").split()) == 8


def test_stored_short_query_benchmark_is_reproducible_by_rule(shared_corpus: Path) -> None:
    stored = RetrievalDataset.load(Path(__file__).resolve().parent.parent / "experiments" / "data"
                                   / "reference_short_queries.jsonl", corpus_dir=shared_corpus)
    assert stored.meta["style"] == "short" and len(stored.pool) > 4000
    assert {q.split for q in stored.queries} == {"dev", "test"}
    assert all(3 <= len(q.text.split()) <= 8 for q in stored.queries)
    rebuilt = {q.id: q for q in build_reference_benchmark(shared_corpus, style="short", pool=stored.pool).queries}
    for q in stored.queries:
        assert rebuilt[q.id].text == q.text and rebuilt[q.id].gold == q.gold and rebuilt[q.id].split == q.split


def _instruction_spec(root: Path, gold: list[str]) -> Path:
    tasks = root / "tasks"
    tasks.mkdir()
    (tasks / "a.json").write_text(json.dumps([{"id": f"t{i}", "instruction": f"  Fill the   sheet {i}\n"}
                                              for i in range(6)]), encoding="utf-8")
    (tasks / "b.csv").write_text("uid,question\nq1,What was the debt?\nq2,Which bond?\n", encoding="utf-8")
    spec = {"pool_corpus": "data:corpus", "sets": [
        {"name": "sheets", "gold": gold, "judgement": "why",
         "tasks": [{"file": "data:tasks/a.json", "id_field": "id", "text_field": "instruction", "sample": 4,
                    "salt": "s"}]},
        {"name": "qa", "gold": ["o__r/skill2/SKILL.md"],
         "tasks": [{"file": "data:tasks/b.csv", "format": "csv", "id_field": "uid", "text_field": "question"}]}]}
    path = root / "spec.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


def test_instruction_queries_are_task_statements_judged_against_the_pool(tmp_path: Path) -> None:
    _write_corpus(tmp_path / "corpus")
    spec = _instruction_spec(tmp_path, ["o__r/skill0/SKILL.md", "o__r/skill1/SKILL.md"])
    sheets, qa = build_instruction_benchmarks(spec, roots={"data": tmp_path})
    # a fixed sample: the 4 ids first in sha256(salt:id) order, texts as the task gives them (whitespace folded)
    order = sorted((f"t{i}" for i in range(6)), key=lambda i: hashlib.sha256(f"s:{i}".encode()).hexdigest())
    assert [q.id for q in sheets.queries] == [f"sheets/{i}" for i in order[:4]]
    assert sheets.queries[0].text == f"Fill the sheet {order[0][1:]}"
    # the gold skills' near-duplicates (skill5 copies skill0) are excluded from the ranking, not counted
    assert all(q.gold == ["o__r/skill0/SKILL.md", "o__r/skill1/SKILL.md"] for q in sheets.queries)
    assert all(q.exclude == ["o__r/skill5/SKILL.md"] for q in sheets.queries)
    assert [q.text for q in qa.queries] == ["What was the debt?", "Which bond?"] and qa.queries[0].exclude == []
    assert sheets.meta["judgement"] == "why" and len(sheets.pool) == 6


def test_an_instruction_judgement_naming_a_skill_outside_the_pool_is_refused(tmp_path: Path) -> None:
    _write_corpus(tmp_path / "corpus")
    spec = _instruction_spec(tmp_path, ["o__r/nothere/SKILL.md"])
    with pytest.raises(ValueError, match="gold skills not in the pool"):
        build_instruction_benchmarks(spec, roots={"data": tmp_path})
    with pytest.raises(ValueError, match="names no known root"):
        build_instruction_benchmarks(spec, roots={"repo": tmp_path})


def test_shipped_instruction_queries_resolve_against_the_shared_data(shared_dir: Path) -> None:
    repo = Path(__file__).resolve().parent.parent
    sets = build_instruction_benchmarks(repo / "experiments" / "data" / "instruction_queries.json",
                                        roots={"repo": repo, "shared": shared_dir})
    sizes = {d.name: len(d.queries) for d in sets}
    assert sizes == {"spreadsheet-instructions": 100, "officeqa-questions": 30}
    for dataset in sets:
        assert len({q.id for q in dataset.queries}) == len(dataset.queries) and all(q.text for q in dataset.queries)
