"""Sections: heading paths, fenced code, preamble, windowing, empty sections, references."""

from __future__ import annotations

from pathlib import Path

import pytest

from corpus_tools.ingest import RefDoc, SkillRecord, load_corpus
from corpus_tools.sections import HEADING_SEPARATOR, split_sections, window_text


def record(body: str, name: str = "xlsx-helper", description: str = "Edit workbooks.",
           references: list[RefDoc] | None = None) -> SkillRecord:
    return SkillRecord(id="acme/skills/xlsx/SKILL.md", name=name, description=description, body=body,
                       text=body, metadata={}, repo="acme/skills", path="xlsx/SKILL.md", commit="c1",
                       license="MIT", references=references or [])


BODY = """Some intro before any heading.

# XLSX Helper

Top-level overview.

## Formulas

Use absolute references.

```python
# this is a comment, not a heading
## nor is this
x = 1
```

### Absolute references

Write $A$1.

#### Deep detail stays inside

Detail text.

## Empty parent

### Child

Child text.

Setext Title
------------

Setext body.
"""


def test_heading_paths_fences_and_preamble() -> None:
    sections = split_sections(record(BODY))
    paths = [s.heading_path for s in sections]
    assert paths == [
        "xlsx-helper",
        "xlsx-helper",  # H1 that repeats the skill name is left out of the path
        "xlsx-helper › Formulas",
        "xlsx-helper › Formulas › Absolute references",
        "xlsx-helper › Empty parent › Child",
        "xlsx-helper › Setext Title",
    ]
    preamble = sections[0]
    assert preamble.text.startswith("Edit workbooks.") and "Some intro before any heading." in preamble.text
    formulas = sections[2]
    assert "# this is a comment, not a heading" in formulas.text and "## nor is this" in formulas.text
    assert "#### Deep detail stays inside" in sections[3].text and "Detail text." in sections[3].text
    assert all(s.repo == "acme/skills" and s.commit == "c1" and s.license == "MIT" for s in sections)
    assert len({s.id for s in sections}) == len(sections)
    assert all(s.skill_id == "acme/skills/xlsx/SKILL.md" and s.skill_name == "xlsx-helper" for s in sections)


def test_levels_are_configurable() -> None:
    sections = split_sections(record(BODY), levels=(2,))
    assert [s.heading_path for s in sections] == [
        "xlsx-helper", "xlsx-helper › Formulas", "xlsx-helper › Empty parent", "xlsx-helper › Setext Title"]
    # The H1 section's text falls into the preamble when H1 does not split.
    assert "Top-level overview." in sections[0].text
    assert "### Absolute references" in sections[1].text


def test_distinct_h1_stays_in_path_and_no_description_no_empty_preamble() -> None:
    sections = split_sections(record("# Workbook Tricks\n\n## Use\n\nText.\n", description=""))
    assert [s.heading_path for s in sections] == ["xlsx-helper › Workbook Tricks › Use"]


def test_body_without_headings_is_one_section() -> None:
    sections = split_sections(record("Only advice, no headings.\n"))
    assert len(sections) == 1 and sections[0].heading_path == "xlsx-helper"
    assert "Only advice" in sections[0].text


def test_overlong_sections_are_windowed() -> None:
    paragraph = "The quick brown fox jumps over the lazy dog. " * 20
    body = "## Long\n\n" + "\n\n".join(f"{i}: {paragraph}" for i in range(30))
    sections = split_sections(record(body, description=""), max_chars=1000)
    assert len(sections) > 10
    assert all(len(s.text) <= 1000 for s in sections)
    assert {s.heading_path for s in sections} == {"xlsx-helper › Long"}
    assert len({s.id for s in sections}) == len(sections)
    joined = " ".join(s.text for s in sections)
    for i in range(30):
        assert f"{i}: The quick" in joined


def test_window_text_covers_text_without_breaks() -> None:
    text = "x" * 2500
    pieces = window_text(text, 1000, overlap=100)
    assert all(len(p) <= 1000 for p in pieces)
    assert sum(len(p) for p in pieces) >= 2500
    assert window_text("short", 1000) == ["short"]


def test_references_become_sections_with_their_path() -> None:
    refs = [RefDoc(path="xlsx/references/api.md", text="---\ntitle: x\n---\n# API\n\n## Calls\n\nload_workbook()\n")]
    sections = split_sections(record("## Use\n\nText.\n", references=refs))
    ref_sections = [s for s in sections if s.path == "xlsx/references/api.md"]
    assert [s.heading_path for s in ref_sections] == ["xlsx-helper › api.md › API › Calls"]
    assert "title: x" not in ref_sections[0].text
    assert split_sections(record("## Use\n\nText.\n", references=refs), include_references=False)[-1].path == \
        "xlsx/SKILL.md"


@pytest.mark.shared
def test_shared_corpus_sections_are_well_formed(shared_corpus: Path) -> None:
    records, _ = load_corpus(shared_corpus)
    sample = records[::25]
    sections = [s for r in sample for s in split_sections(r, max_chars=4000)]
    assert len(sections) > 5 * len(sample)
    assert len({s.id for s in sections}) == len(sections)
    assert all(s.text.strip() and len(s.text) <= 4000 for s in sections)
    assert all(s.heading_path.split(HEADING_SEPARATOR)[0] == s.skill_name for s in sections)
    assert all("```" not in s.heading_path for s in sections)
