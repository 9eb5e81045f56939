"""The SkillRouter-style baseline and the field/dreamer section retrievers over a real SectionIndex."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from corpus_tools.index import SectionIndex
from corpus_tools.retrieval.dataset import PoolSkill
from corpus_tools.sections import Section
from raso.retrieval.retrievers import SectionSearcher, build_retriever, skills_from_index
from raso.retrieval.skillrouter import SkillRouter
from raso.skill import Skill


@dataclass
class Rec:
    id: str
    name: str
    description: str
    body: str
    repo: str
    path: str = "SKILL.md"
    commit: str = "abc123"
    license: str = "MIT"


POOL = [
    Rec("r1/pivot", "pivot-tables", "Build pivot tables from spreadsheet data.",
        "# Pivot tables\n\n## Steps\nSelect the range, insert a pivot table, group by quarter.", "o/r1"),
    Rec("r2/charts", "excel-charts", "Create charts in Excel workbooks.",
        "# Charts\n\n## Steps\nPick a chart type and set axis titles.", "o/r2"),
    Rec("r3/git", "git-rebase", "Rewrite git history safely.", "# Rebase\n\n## Steps\nUse interactive rebase.", "o/r3"),
]


def test_router_returns_the_top_skill_as_a_skill():
    router = SkillRouter(POOL, method="tfidf-fields")
    skill = router.route("group spreadsheet rows into a pivot table by quarter")
    assert isinstance(skill, Skill)
    assert skill.name == "pivot-tables"
    assert skill.body == POOL[0].body  # used as-is
    assert skill.metadata["source"] == {"id": "r1/pivot", "repo": "o/r1", "path": "SKILL.md",
                                        "commit": "abc123", "license": "MIT"}
    assert skill.metadata["router"]["method"] == "tfidf-fields"
    assert Skill.parse(skill.to_markdown()).name == "pivot-tables"


def test_router_exclusions():
    router = SkillRouter(POOL, method="bm25")
    assert router.route("pivot table chart", exclude_repos=["o/r1"]).name == "excel-charts"
    assert router.route("pivot table chart", exclude_skills=["r1/pivot"]).name == "excel-charts"
    with pytest.raises(LookupError):
        router.route("pivot", exclude_skills=[r.id for r in POOL])
    with pytest.raises(ValueError, match="unknown method"):
        SkillRouter(POOL, method="magic")


def _index() -> SectionIndex:
    sections = []
    for rec in POOL:
        for n, part in enumerate(rec.body.split("\n\n")):
            sections.append(Section(id=f"{rec.id}#{n}", skill_id=rec.id, skill_name=rec.name,
                                    heading_path=f"{rec.name} › {n}", text=part, repo=rec.repo,
                                    path=f"{rec.id}/SKILL.md", commit="c", license="MIT"))
    return SectionIndex.build(sections)


def test_field_retriever_returns_sections_of_the_best_skills():
    index = _index()
    retriever = build_retriever({"kind": "field", "field_method": "tfidf-fields", "top_skills": 2}, index=index,
                                skills=[PoolSkill(r.id, r.name, r.description, r.body, r.repo) for r in POOL])
    assert isinstance(retriever, SectionSearcher)
    hits = retriever.search("insert a pivot table grouped by quarter", k=3)
    assert hits[0].section.skill_id == "r1/pivot"
    assert {h.section.skill_id for h in hits} <= {"r1/pivot", "r2/charts"}
    assert all(h.section.skill_id != "r1/pivot" for h in retriever.search("pivot table", k=3, exclude_repos=["o/r1"]))
    assert all(h.section.skill_id != "r1/pivot" for h in retriever.search("pivot table", k=3, exclude_skills=["r1/pivot"]))


def test_skills_rebuilt_from_an_index():
    pool = skills_from_index(_index())
    assert [p.id for p in pool] == [r.id for r in POOL]
    assert "insert a pivot table" in pool[0].body and pool[0].name == "pivot-tables"


def test_dreamer_retriever_plugs_in_with_a_scripted_model():
    from raso.llm import GatewayConfig, LLMGateway
    from raso.llm.scripted import ScriptedModel

    model = ScriptedModel([
        json.dumps({"capabilities": [{"capability": "Summarise spreadsheet rows with pivot tables"}],
                    "anchors": ["quarter"]}),
        json.dumps({"name": "pivot-summary", "description": "Summarise data with pivot tables.",
                    "body": "Insert a pivot table and group rows by quarter."}),
    ])
    gateway = LLMGateway(GatewayConfig.for_models(target=model.model))
    retriever = build_retriever({"kind": "dreamer", "encoder": "none", "dreamer": {"k": 2}}, index=_index(),
                                gateway=gateway)
    hits = retriever.search("Quarterly sales report from the sheet", k=2)
    assert len(model.calls) == 2
    assert hits and hits[0].section.skill_id == "r1/pivot"
    assert retriever.last_result.capabilities == ["Summarise spreadsheet rows with pivot tables"]
