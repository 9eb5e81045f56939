"""RASI and RASU over a real BM25 index of real corpus skills (scripted optimizer model)."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from optimizer_helpers import calls_of, gateway, initialize, propose, rollout, router, user_text

from corpus_tools.index import SectionIndex
from corpus_tools.ingest import load_corpus
from corpus_tools.sections import split_sections

pytestmark = pytest.mark.shared
_TOPIC = re.compile(r"xlsx|excel|spreadsheet|\bcsv\b", re.IGNORECASE)


@pytest.fixture(scope="module")
def spreadsheet_index(tmp_path_factory):
    """A BM25 section index over the spreadsheet-related skills of the shared corpus (manifest layout)."""
    from conftest import require_shared

    corpus = require_shared("corpus")
    root = tmp_path_factory.mktemp("corpus")
    rows = []
    with open(corpus / "MANIFEST.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            about = f"{row.get('name') or ''} {row.get('description') or ''}"
            if row["id"].endswith("SKILL.md") and _TOPIC.search(about):
                rows.append(row)
    assert len(rows) >= 5, "the shared corpus should hold several spreadsheet skills"
    for row in rows:
        target = root / "skills" / row["id"]
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(corpus / "skills" / row["id"], target)
    (root / "MANIFEST.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    records, _ = load_corpus(root)
    sections = [s for record in records for s in split_sections(record)]
    return SectionIndex.build(sections), {(r["repo"], r["path"]): r["commit"] for r in rows}


def test_rasi_over_a_real_index_quotes_real_sections_with_their_provenance(spreadsheet_index):
    index, commits = spreadsheet_index
    gw, sm = gateway(router())
    init = initialize(gw, index, k=5, num_requirements=2)
    assert init.mode == "rasi" and len(init.lessons) == 2
    for lesson, retrieved in zip(init.lessons, init.retrieved):
        assert 1 <= len(retrieved) <= 5
        assert lesson.sources == [s.ref for s in retrieved]
        for ref in lesson.sources:
            assert commits[(ref.repo, ref.path)] == ref.commit  # provenance matches the corpus manifest
    prompt = user_text(calls_of(sm, "adapt")[0])
    first = init.retrieved[0][0]
    assert f'<section id="{first.ref.section_id}" repo="{first.ref.repo}" path="{first.ref.path}"' in prompt
    assert prompt.count("<section id=") == len(init.retrieved[0]) == prompt.count("</section>")


def test_rasu_over_a_real_index_turns_a_gradient_query_into_a_lesson(spreadsheet_index):
    index, _ = spreadsheet_index
    gw, sm = gateway(router())
    init_skill = initialize(gw, num_requirements=2).skill
    prop = propose(gw, init_skill, [rollout(i) for i in range(3)], index, k=3)
    [lesson] = prop.lessons
    assert lesson.requirement == prop.gradients[0].failure_mode
    assert 1 <= len(lesson.sources) <= 3
    assert user_text(calls_of(sm, "update")[0]).count("<lesson failure_mode=") == 1
