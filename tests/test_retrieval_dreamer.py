"""SkillDreamer with a scripted model: the prompts it sends and the round-robin merge."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from corpus_tools.retrieval.fusion import FieldAwareRetriever
from raso.llm import GatewayConfig, LLMGateway
from raso.llm.scripted import ScriptedModel
from raso.retrieval.dreamer import DreamerConfig, FieldAwareScorer, SkillDreamer, round_robin


@dataclass
class S:
    id: str
    name: str
    description: str
    body: str


POOL = [
    S("legal-brief", "legal-brief-writing", "Write legal briefs and case summaries.", "# Briefs\nCite the case law."),
    S("legal-contract", "contract-review", "Review legal contracts for risky clauses.", "# Contracts\nFlag indemnity."),
    S("pdf-extract", "pdf-table-extraction", "Extract tables and text from PDF files.", "# PDF\nUse pdfplumber."),
    S("pdf-merge", "pdf-merge-split", "Merge and split PDF documents.", "# PDF pages\nUse pypdf to merge."),
    S("docx-write", "docx-report-writer", "Write Word DOCX reports with headings.", "# DOCX\nUse python-docx."),
    S("git", "git-rebase", "Rewrite git history.", "# Rebase\nInteractive rebase."),
]

QUERY = "Summarise the court rulings in rulings.pdf into a legal report for the partners."
CAPS = {"capabilities": [{"capability": "Extract text and tables from PDF files"},
                         {"capability": "Write a structured report document in DOCX"}],
        "anchors": ["court rulings", "legal report"]}
PSEUDO_1 = {"name": "pdf-text-extraction", "description": "Extract text and tables from PDF files.",
            "body": "# PDF extraction\nOpen the PDF with pdfplumber, extract tables and text."}
PSEUDO_2 = {"name": "docx-report", "description": "Write reports as DOCX documents.",
            "body": "# DOCX reports\nUse python-docx to write headings and paragraphs."}


def _dreamer(replies, **cfg):
    model = ScriptedModel([json.dumps(r) if isinstance(r, dict) else r for r in replies])
    gateway = LLMGateway(GatewayConfig.for_models(target=model.model))
    scorer = FieldAwareScorer(FieldAwareRetriever(POOL))
    return model, gateway, SkillDreamer(gateway, scorer, DreamerConfig(**cfg))


def test_round_robin_by_hand():
    assert round_robin([["a", "b", "c"], ["d", "a", "e"], ["f"]], 10) == ["a", "d", "f", "b", "c", "e"]
    assert round_robin([["a", "b"], ["c", "d"]], 3) == ["a", "c", "b"]
    assert round_robin([], 5) == []


def test_prompts_sent_and_round_robin_order():
    model, gateway, dreamer = _dreamer([CAPS, PSEUDO_1, PSEUDO_2], kc=4, kr=4, k=5)
    result = dreamer.retrieve(QUERY)
    assert len(model.calls) == 3
    first = model.calls[0][-1]["content"]
    assert QUERY in first and "<task>" in first and "semantic anchors" in first
    assert "Extract text and tables from PDF files" in model.calls[1][-1]["content"]
    assert "Write a structured report document in DOCX" in model.calls[2][-1]["content"]
    assert QUERY in model.calls[2][-1]["content"]
    stages = set(gateway.ledger.by_stage())
    assert {"dreamer.capabilities", "dreamer.pseudo_skill"} <= stages
    assert result.error is None
    assert result.capabilities == [c["capability"] for c in CAPS["capabilities"]]
    assert [p.name for p in result.pseudo_skills] == ["pdf-text-extraction", "docx-report"]
    # round-robin: the first place of each capability's list, then the second places
    assert result.ranked == round_robin(result.per_capability, 5)
    assert result.ranked[0] == result.per_capability[0][0]
    assert result.per_capability[0][0].startswith("pdf")
    assert result.per_capability[1][0] == "docx-write"
    assert result.ranked[1] == "docx-write"
    # two lists of Kc=4 share skills, so fewer than K=5 distinct ones remain
    assert len(set(result.ranked)) == len(result.ranked) == len(set(sum(result.per_capability, [])))


def test_anchor_rerank_moves_anchor_matches_up():
    _, _, without = _dreamer([CAPS, PSEUDO_1, PSEUDO_2], kc=6, kr=6, k=6, gamma=0.0)
    _, _, with_anchors = _dreamer([CAPS, PSEUDO_1, PSEUDO_2], kc=6, kr=6, k=6, gamma=5.0)
    plain = without.retrieve(QUERY).per_capability[0]
    anchored = with_anchors.retrieve(QUERY).per_capability[0]
    assert anchored.index("legal-brief") < plain.index("legal-brief")


def test_exclusion_and_model_failure_fall_back_to_the_query():
    _, _, dreamer = _dreamer(["not json at all", "still not json"], k=3)
    result = dreamer.retrieve(QUERY, exclude=["legal-brief"])
    assert result.error and "StructuredOutput" in result.error
    assert "legal-brief" not in result.ranked and len(result.ranked) == 3
    assert result.capabilities == []


def test_scores_follow_the_hybrid_formula():
    _, _, dreamer = _dreamer([CAPS, PSEUDO_1, PSEUDO_2], kc=6, kr=0, k=6, alpha=2.0, beta=1.0)
    result = dreamer.retrieve(QUERY)
    sims = dreamer.scorer.similarity([QUERY, result.pseudo_skills[0].to_markdown()])
    expected = 2.0 * sims[0] + 1.0 * sims[1]
    ids = dreamer.scorer.ids
    order = [ids[i] for i in np.argsort(-expected, kind="stable")]
    assert result.per_capability[0] == order


def test_an_unusable_pseudo_skill_drops_only_its_capability():
    _, _, dreamer = _dreamer([CAPS, "not json", "still not json", PSEUDO_2], k=3)
    result = dreamer.retrieve(QUERY)
    assert result.error is None
    assert result.capabilities == ["Write a structured report document in DOCX"]
    assert len(result.dropped_capabilities) == 1 and "Extract text and tables" in result.dropped_capabilities[0]
    assert len(result.per_capability) == 1 and result.ranked[0] == "docx-write"
    assert result.to_dict()["dropped_capabilities"] == result.dropped_capabilities


def test_when_every_pseudo_skill_fails_the_query_alone_ranks():
    _, _, dreamer = _dreamer([CAPS, "x", "y", "z", "w"], k=3)
    result = dreamer.retrieve(QUERY)
    assert result.error and "no capability got a usable pseudo-skill" in result.error
    assert len(result.ranked) == 3 and result.capabilities == []
