"""RetrievalOptions -> build_retriever: every kind over a real SectionIndex returns sections with provenance."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest
from pydantic import ValidationError

from corpus_tools.index import SectionIndex
from corpus_tools.ingest import SkillRecord
from corpus_tools.retrieval.dense import CallableEncoder
from corpus_tools.sections import split_sections
from raso.retrieval.retrievers import (
    HybridSectionRetriever,
    RetrievalOptions,
    SectionSearcher,
    build_retriever,
)
from raso.retrieval.vetting import VettedSearcher


def _record(i: int, name: str, description: str, body: str) -> SkillRecord:
    return SkillRecord(id=f"o/r{i}/{name}/SKILL.md", name=name, description=description, body=body, text=body,
                       metadata={}, repo=f"o/r{i}", path=f"{name}/SKILL.md", commit=f"c{i}", license="MIT")


RECORDS = [
    _record(1, "pivot-tables", "Build pivot tables from spreadsheet data.",
            "# Pivot tables\n\n## Steps\nSelect the range, insert a pivot table, group rows by quarter.\n\n"
            "## Pitfalls\nBlank header cells break the pivot source range."),
    _record(2, "excel-charts", "Create charts in Excel workbooks.",
            "# Charts\n\n## Steps\nPick a chart type and set axis titles.\n\n## Colours\nUse a palette."),
    _record(3, "git-rebase", "Rewrite git history safely.",
            "# Rebase\n\n## Steps\nUse interactive rebase to squash commits.\n\n## Recovery\nUse the reflog."),
    _record(4, "csv-cleaning", "Clean CSV files before analysis.",
            "# CSV\n\n## Steps\nTrim whitespace, fix the header row, drop duplicate rows.\n\n## Dates\nParse dates."),
]


@pytest.fixture(scope="module")
def index() -> SectionIndex:
    return SectionIndex.build([s for r in RECORDS for s in split_sections(r)])


def hashing_bow_encoder() -> CallableEncoder:
    """A deterministic test encoder (hashed bag of words), not a model: enough to check the fusion."""

    def embed(texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1.0
        return out + 1e-3

    return CallableEncoder(embed, "test:hashing-bow")


def test_options_validate_and_reject_unknown_fields() -> None:
    options = RetrievalOptions.model_validate({"kind": "dreamer", "dreamer": {"kc": 5, "alpha": 1.5}})
    assert options.dreamer.kc == 5 and options.dreamer.alpha == 1.5 and options.dreamer.kr == 20
    with pytest.raises(ValidationError):
        RetrievalOptions.model_validate({"kind": "bm25", "topk": 3})
    with pytest.raises(ValidationError):
        RetrievalOptions(kind="magic")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        RetrievalOptions(kind="hybrid", dense_weight=1.5)


def test_bm25_kind_is_the_index_in_every_call_form(index: SectionIndex) -> None:
    # vetted by default (raso.retrieval.vetting); `vet: false` hands out the index itself
    assert RetrievalOptions().kind == "two_stage" and RetrievalOptions().vet
    assert RetrievalOptions().skill_scoring == "fused"  # chosen in docs/retrieval-at-scale.md 5.7
    for form in ("bm25", RetrievalOptions(kind="bm25"), {"kind": "bm25"}):
        vetted = build_retriever(form, index=index)
        assert isinstance(vetted, VettedSearcher) and vetted.inner is index
    assert build_retriever(RetrievalOptions(kind="bm25", vet=False), index=index) is index
    assert build_retriever({"kind": "bm25", "vet": False}, index=index) is index


@pytest.mark.parametrize("options", [
    RetrievalOptions(kind="tfidf", top_skills=2),
    RetrievalOptions(kind="field", encoder="none", top_skills=2),
    RetrievalOptions(kind="two_stage", top_skills=2),
])
def test_skill_level_kinds_return_sections_of_the_top_skills(index: SectionIndex, options: RetrievalOptions) -> None:
    retriever = build_retriever(options, index=index)
    assert isinstance(retriever, SectionSearcher)
    hits = retriever.search("group spreadsheet rows into a pivot table by quarter", k=3)
    assert hits and hits[0].section.skill_name == "pivot-tables"
    assert {h.section.skill_id for h in hits} <= {r.id for r in RECORDS}
    top = hits[0].section
    assert (top.repo, top.commit, top.license, top.path) == ("o/r1", "c1", "MIT", "pivot-tables/SKILL.md")
    excluded = retriever.search("pivot table", k=3, exclude_repos=["o/r1"])
    assert all(h.section.repo != "o/r1" for h in excluded)


def test_hybrid_rescores_the_bm25_candidates_with_the_encoder(index: SectionIndex) -> None:
    encoder = hashing_bow_encoder()
    query = "steps to group rows by quarter in a pivot table"
    dense_only = build_retriever(RetrievalOptions(kind="hybrid", dense_weight=1.0, candidates=6, vet=False),
                                 index=index, encoder=encoder)
    assert isinstance(dense_only, HybridSectionRetriever)
    docs, _ = index.top_k(query, 6)
    vectors = encoder.encode([index.section(int(d)).heading_path + "\n" + index.section(int(d)).text for d in docs])
    cosine = vectors @ encoder.encode([query])[0]
    expected = [index.section(int(docs[i])).id for i in np.lexsort((docs, -cosine))[:3]]
    assert [h.section.id for h in dense_only.search(query, k=3)] == expected
    sparse_only = build_retriever(RetrievalOptions(kind="hybrid", dense_weight=0.0, candidates=6, vet=False),
                                  index=index, encoder=encoder)
    assert [h.section.id for h in sparse_only.search(query, k=3)] == [h.section.id for h in index.search(query, 3)]
    assert all(h.section.repo != "o/r1" for h in dense_only.search(query, k=3, exclude_repos=["o/r1"]))
    assert dense_only.search("zzzz unknownword", k=3) == []


def test_hybrid_without_an_encoder_is_a_clear_error(index: SectionIndex) -> None:
    with pytest.raises(RuntimeError, match="dense encoder"):
        build_retriever(RetrievalOptions(kind="hybrid", encoder="none"), index=index)


def test_dreamer_needs_a_gateway_and_options_come_only_as_retrieval_options(index: SectionIndex) -> None:
    with pytest.raises(ValueError, match="gateway"):
        build_retriever(RetrievalOptions(kind="dreamer"), index=index)
    field = build_retriever({"kind": "field", "field_method": "tfidf-fields", "top_skills": 1}, index=index)
    assert field.search("interactive rebase squash commits", k=2)[0].section.skill_name == "git-rebase"
    with pytest.raises(TypeError, match="top_skills"):
        build_retriever("bm25", index=index, top_skills=3)  # type: ignore[call-arg]


def test_an_optimize_run_with_hybrid_retrieval_goes_end_to_end_on_the_scripted_model(tmp_path) -> None:
    """RASI + RASU with `retrieval="hybrid"` (BM25 sections re-scored by the int8 MiniLM) over the starter
    corpus; the scripted optimizer answers every JSON prompt, so the run reaches `done` and its
    adaptation prompts carry retrieved corpus sections."""
    import json

    import onnxruntime  # noqa: F401  (the hybrid retriever's encoder: the `dense` extra of the README install)
    from test_cli_runs import algorithm_reply
    from test_engine_support import ToyHarness, named_scripted_model, toy_agent_reply

    import raso

    agent = named_scripted_model("hybrid-e2e-agent", toy_agent_reply)
    optimizer = named_scripted_model("hybrid-e2e-optimizer", algorithm_reply)
    result = raso.optimize(ToyHarness(), **{"models.target": agent, "models.optimizer": optimizer,
                                            "schedule.epochs": 1, "schedule.minibatch": 3,
                                            "schedule.workers": 1, "schedule.seed": 1}, init="rasi", update="rasu",
                           retrieval="hybrid", run_dir=tmp_path / "run")
    state = json.loads((tmp_path / "run" / "checkpoint.json").read_text())
    assert state["phase"] == "done" and result.best_version >= 0
    config = json.loads((tmp_path / "run" / "config.resolved.json").read_text())
    assert config["retrieval"]["kind"] == "hybrid"
    lessons = [json.loads(line) for line in (tmp_path / "run" / "lessons.jsonl").read_text().splitlines() if line]
    assert lessons, "RASI/RASU adapted retrieved sections into lessons"
    sources = [src for lesson in lessons for src in lesson["sources"]]
    assert sources and all(src["repo"] and src["commit"] and src["section_id"] for src in sources)
