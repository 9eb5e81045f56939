"""Ingest: the three source kinds, provenance, dedup, and every kind of bad input in the build report."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path

import pytest

from corpus_tools.frontmatter import parse_front_matter
from corpus_tools.ingest import load_corpus

GOOD_SKILL = """---
name: {name}
description: {desc}
license: MIT
---
# {title}

Intro paragraph for {name}.

## Steps

1. Open the workbook.
2. Write the formula.
"""


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


@pytest.fixture
def messy_tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    write(root / "LICENSE", "MIT License\n\nPermission is hereby granted, free of charge, to any person ...\n")
    write(root / "good-one" / "SKILL.md", GOOD_SKILL.format(name="good-one", desc="First good skill", title="Good"))
    write(root / "good-two" / "SKILL.md", GOOD_SKILL.format(name="good-two", desc="Second", title="Two"))
    write(root / "good-two" / "references" / "api.md", "# API\n\n## Calls\n\nUse load_workbook.\n")
    write(root / "good-two" / "CHANGELOG.md", "# Changes\n\n- v1\n")
    write(root / "notes.md", "# Loose notes outside any skill\n")
    # A binary file named SKILL.md.
    write(root / "binary" / "SKILL.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4)
    # Mostly valid UTF-8 with one Latin-1 byte: kept, the byte replaced.
    latin = GOOD_SKILL.format(name="latin-skill", desc="Caf\u00e9 notes", title="Latin").encode("utf-8")
    write(root / "latin" / "SKILL.md", latin.replace("Caf\u00e9".encode(), b"Caf\xe9"))
    # Not text in any UTF-8 sense (Latin-1/Windows-1252 bytes throughout): skipped.
    write(root / "cp1252" / "SKILL.md", bytes([0xE9, 0xE8, 0x20, 0xE0, 0xFC]) * 400)
    # Invalid YAML (unquoted colon in a flow value): kept, front matter read leniently.
    write(root / "bad-yaml" / "SKILL.md",
          "---\nname: bad-yaml\ndescription: Use it: when [the sheet: has\n---\n# Bad\n\n## Use\n\nText.\n")
    # Front matter that never closes: kept, leading key lines read as front matter.
    write(root / "unclosed" / "SKILL.md",
          "---\nname: unclosed-skill\ndescription: never closed\n\n# Title\n\n## Steps\n\nDo the thing.\n")
    # A 50 MB file: skipped by the size limit without being read.
    big = root / "huge" / "SKILL.md"
    big.parent.mkdir(parents=True)
    with open(big, "w", encoding="utf-8") as fh:
        fh.write("---\nname: huge\ndescription: too big\n---\n# Huge\n\n")
        chunk = "lorem ipsum dolor sit amet " * 4000
        while fh.tell() < 50 * 1024 * 1024:
            fh.write(chunk)
    # No headings at all: kept, noted, one section.
    write(root / "flat" / "SKILL.md", "---\nname: flat-skill\ndescription: flat\n---\nJust one paragraph of advice.\n")
    # Empty file.
    write(root / "empty" / "SKILL.md", "")
    # Exact duplicate of good-one.
    write(root / "zz-copy-of-good" / "SKILL.md", GOOD_SKILL.format(name="good-one", desc="First good skill", title="Good"))
    # Symlink loops: a folder linking to its parent, and a file linking to itself.
    (root / "good-one" / "loop").symlink_to("..", target_is_directory=True)
    os.symlink("self.md", root / "good-one" / "self.md")
    os.symlink("missing.md", root / "good-one" / "dangling.md")
    return root


def test_tree_keeps_every_good_skill_and_reports_each_bad_file(messy_tree: Path) -> None:
    records, report = load_corpus([messy_tree], max_file_bytes=4 * 1024 * 1024)
    names = sorted(r.name for r in records)
    assert names == ["bad-yaml", "flat-skill", "good-one", "good-two", "latin-skill", "unclosed-skill"]

    assert report.reasons_for("binary/SKILL.md") == ["binary"]
    assert report.reasons_for("cp1252/SKILL.md") == ["not_utf8"]
    assert report.reasons_for("huge/SKILL.md") == ["too_large"]
    assert report.reasons_for("empty/SKILL.md") == ["empty"]
    assert report.reasons_for("zz-copy-of-good/SKILL.md") == ["duplicate"]
    assert report.reasons_for("good-one/loop") == ["symlink_loop"]
    assert report.reasons_for("good-one/self.md") == ["symlink_loop"]
    assert report.reasons_for("good-one/dangling.md") == ["broken_symlink"]
    assert report.reasons_for("notes.md") == ["outside_skill"]
    assert report.reasons_for("good-two/CHANGELOG.md") == ["boilerplate"]
    # Kept files with notes.
    assert report.reasons_for("latin/SKILL.md") == ["decoded_with_replacement"]
    assert report.reasons_for("bad-yaml/SKILL.md") == ["invalid_yaml"]
    assert report.reasons_for("unclosed/SKILL.md") == ["unclosed_front_matter"]
    assert report.reasons_for("flat/SKILL.md") == ["no_headings"]

    counts = report.skip_counts()
    assert counts["symlink_loop"] == 2 and counts["duplicate"] == 1
    assert report.skills_loaded == 6 and report.references_loaded == 1
    assert "skipped:" in report.summary()
    assert json.loads(json.dumps(report.to_dict()))["skipped_counts"] == counts


def test_tree_records_carry_content_and_provenance(messy_tree: Path) -> None:
    records, _ = load_corpus(messy_tree)
    by_name = {r.name: r for r in records}
    two = by_name["good-two"]
    assert two.description == "Second"
    assert two.path == "good-two/SKILL.md" and two.repo == "local/tree" and two.license == "MIT"
    assert two.id == "local/tree/good-two/SKILL.md"
    assert [ref.path for ref in two.references] == ["good-two/references/api.md"]
    assert two.metadata == {"license": "MIT"}
    assert two.body.startswith("# Two")
    assert "\ufffd" in by_name["latin-skill"].description
    assert by_name["unclosed-skill"].description == "never closed"
    assert by_name["unclosed-skill"].body.lstrip().startswith("# Title")
    assert by_name["bad-yaml"].description.startswith("Use it: when")


def test_front_matter_block_scalars_and_bom() -> None:
    fm = parse_front_matter("\ufeff---\nname: x\ndescription: >\n  folded\n  text\n---\nbody\n")
    assert fm.issue is None and fm.data["description"].strip() == "folded text" and fm.body == "body\n"
    lenient = parse_front_matter("---\nname: y\ndescription: |\n  a: b: c\n  more\nx: [\n---\nbody")
    assert lenient.issue == "invalid_yaml"
    assert lenient.data["name"] == "y" and lenient.data["description"] == "a: b: c more"
    assert parse_front_matter("# no front matter\n").present is False


def test_jsonl_dump(tmp_path: Path) -> None:
    dump = tmp_path / "dump.jsonl"
    good = GOOD_SKILL.format(name="j1", desc="from jsonl", title="J")
    lines = [
        json.dumps({"id": "x/j1", "repo": "acme/skills", "path": "j1/SKILL.md", "commit": "abc", "license": "MIT",
                    "text": good, "references": [{"path": "j1/ref.md", "text": "# Ref\n\nbody"}]}),
        "{not json",
        json.dumps(["a", "list"]),
        json.dumps({"repo": "acme/skills", "path": "empty/SKILL.md"}),
        json.dumps({"name": "j2", "description": "built from fields", "body": "## Use\n\nDo it.\n",
                    "repo": "acme/other", "path": "j2/SKILL.md"}),
        json.dumps({"id": "x/j1-copy", "text": good}),
        "",
    ]
    dump.write_text("\n".join(lines), encoding="utf-8")
    records, report = load_corpus([dump])
    assert [(r.id, r.name) for r in records] == [("x/j1", "j1"), ("acme/other/j2/SKILL.md", "j2")]
    assert records[0].commit == "abc" and records[0].references[0].path == "j1/ref.md"
    assert records[1].description == "built from fields" and "## Use" in records[1].body
    assert report.skip_counts() == {"invalid_json": 2, "missing_text": 1, "duplicate": 1}


def test_a_huge_jsonl_line_is_skipped_without_being_held(tmp_path: Path) -> None:
    # One 24 MB line (no newline inside it) between two good ones, with a 256 KiB limit per skill: the line is
    # reported as too large with its real length, the lines after it still load, and the read never holds it.
    dump = tmp_path / "dump.jsonl"
    huge = json.dumps({"text": "# Big\n\n" + "x" * (24 << 20)}).encode()
    with dump.open("wb") as fh:
        fh.write(json.dumps({"text": GOOD_SKILL.format(name="a", desc="A", title="A")}).encode() + b"\n")
        fh.write(huge + b"\n")
        fh.write(json.dumps({"text": GOOD_SKILL.format(name="b", desc="B", title="B")}).encode())
    del huge
    tracemalloc.start()
    try:
        records, report = load_corpus([dump], max_file_bytes=256 << 10)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [r.name for r in records] == ["a", "b"]
    assert report.reasons_for("dump.jsonl:2") == ["too_large"]
    assert f"{(24 << 20) + len(json.dumps({'text': '# Big' + chr(10) * 2})) + 1} bytes" in report.skipped[0].detail
    assert peak < 8 << 20, peak


def test_manifest_folder(tmp_path: Path) -> None:
    root = tmp_path / "corp"
    rows = []
    for sid, text in [("o__r/a/SKILL.md", GOOD_SKILL.format(name="a", desc="A", title="A")),
                      ("o__r/b/SKILL.md", "")]:
        write(root / "skills" / sid, text)
        rows.append({"id": sid, "repo": "o/r", "commit": "c0ffee", "path": sid.split("/", 1)[1],
                     "license": "Apache-2.0", "kind": "skill", "skill": sid})
    write(root / "skills" / "o__r/a/references/x.md", "# X\n\ntext\n")
    write(root / "skills" / "o__r/b/references/y.md", "# Y\n\nits skill is empty\n")
    rows.append({"id": "o__r/a/references/x.md", "repo": "o/r", "commit": "c0ffee", "path": "a/references/x.md",
                 "license": "Apache-2.0", "kind": "reference", "skill": "o__r/a/SKILL.md"})
    rows.append({"id": "o__r/b/references/y.md", "repo": "o/r", "commit": "c0ffee", "path": "b/references/y.md",
                 "license": "Apache-2.0", "kind": "reference", "skill": "o__r/b/SKILL.md"})
    rows.append({"id": "o__r/gone/SKILL.md", "repo": "o/r", "path": "gone/SKILL.md", "kind": "skill",
                 "skill": "o__r/gone/SKILL.md"})
    (root / "MANIFEST.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    records, report = load_corpus(root)
    assert [r.id for r in records] == ["o__r/a/SKILL.md"]
    rec = records[0]
    # the skill's front matter says MIT: it comes before the manifest row's licence (the repository's)
    assert (rec.repo, rec.commit, rec.path, rec.license) == ("o/r", "c0ffee", "a/SKILL.md", "MIT")
    assert rec.references[0].path == "a/references/x.md"
    assert report.reasons_for("b/SKILL.md") == ["empty"]
    assert report.reasons_for("gone/SKILL.md") == ["missing_file"]
    assert report.skip_counts()["orphan_reference"] == 1


def test_a_manifest_row_cannot_name_a_file_outside_its_skills_folder(tmp_path: Path) -> None:
    secret = write(tmp_path / "secret.md", "# Secret\n\n## Key\n\nAKIA-SECRET\n")
    root = tmp_path / "corp"
    write(root / "skills" / "ok" / "SKILL.md", GOOD_SKILL.format(name="ok", desc="Ok", title="Ok"))
    (root / "skills" / "linked.md").symlink_to(secret)
    rows = [{"id": "ok/SKILL.md", "repo": "o/r", "path": "ok/SKILL.md"},
            {"id": "../../secret.md", "repo": "o/r", "path": "dotdot/SKILL.md"},
            {"id": str(secret), "repo": "o/r", "path": "absolute/SKILL.md"},
            {"id": "linked.md", "repo": "o/r", "path": "linked/SKILL.md"}]
    (root / "MANIFEST.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    records, report = load_corpus(root)
    assert [r.id for r in records] == ["ok/SKILL.md"]
    for label in ("o/r/dotdot/SKILL.md", "o/r/absolute/SKILL.md", "o/r/linked/SKILL.md"):
        assert report.reasons_for(label) == ["link_outside"], label


def test_unknown_source_is_reported(tmp_path: Path) -> None:
    other = write(tmp_path / "data.csv", "a,b\n")
    records, report = load_corpus([other, tmp_path / "nowhere"])
    assert records == []
    assert sorted(report.skip_counts()) == ["not_a_source", "unreadable"]


@pytest.mark.shared
def test_shared_corpus_loads_every_skill(shared_corpus: Path) -> None:
    manifest = [json.loads(line) for line in (shared_corpus / "MANIFEST.jsonl").open(encoding="utf-8")]
    skills = {row["id"] for row in manifest if row["kind"] == "skill"}
    records, report = load_corpus(shared_corpus)
    assert {r.id for r in records} == skills
    # The only files left out are reference rows whose SKILL.md the corpus itself dropped as a duplicate.
    orphans = {row["path"] for row in manifest if row["kind"] == "reference" and not row["skill"]}
    assert {i.reason for i in report.skipped} <= {"orphan_reference"}
    assert len(report.skipped) == len(orphans)
    assert report.references_loaded == sum(1 for row in manifest if row["kind"] == "reference") - len(orphans)
    assert all(r.repo and r.commit and r.license and r.path.endswith("SKILL.md") for r in records)


def test_dedupe_keys_are_compact_and_exact_across_merges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Dedupe keys live in a sorted array of 16-byte values once a batch fills: a duplicate of a skill whose
    key was merged long ago is still dropped, distinct keys that differ only in trailing zero bytes stay
    distinct, and a key costs ~16 bytes instead of a Python bytes object in a set (~90)."""
    import sys

    from corpus_tools import ingest

    keys = [bytes([i % 256, i // 256]) + b"\x00" * 14 for i in range(1, 2000)] + [b"\x00" * 16, b"a" * 15 + b"\x00"]
    seen = ingest.SeenKeys(batch=7)
    for key in keys:
        assert key not in seen
        seen.add(key)
    assert all(key in seen for key in keys) and len(seen) == len(keys)
    assert b"a" * 15 not in seen and b"a" * 15 + b"\x01" not in seen and b"\x00" * 15 + b"\x01" not in seen
    many = ingest.SeenKeys()
    for i in range(200_000):
        many.add(i.to_bytes(16, "little"))
    held = many.older.nbytes + sys.getsizeof(many.recent) + sum(map(sys.getsizeof, many.recent))
    assert held / len(many) < 40, held / len(many)
    # through the loader: duplicates of the first skills, read after many merges, are still dropped
    monkeypatch.setattr(ingest, "DEDUPE_BATCH", 3)
    texts = [GOOD_SKILL.format(name=f"s{i}", desc=f"skill {i}", title=f"S{i}") for i in range(20)]
    dump = tmp_path / "dump.jsonl"
    dump.write_text("\n".join(json.dumps({"id": f"x/{i}", "text": t}) for i, t in enumerate(texts + texts[:5]))
                    + "\n", encoding="utf-8")
    records, report = load_corpus([dump])
    assert [r.id for r in records] == [f"x/{i}" for i in range(20)]
    assert report.skip_counts() == {"duplicate": 5}


def test_licence_values_of_front_matter() -> None:
    from corpus_tools.ingest import detect_license, license_value

    assert [license_value(v) for v in ("MIT", "MIT License", "Apache License 2.0", "BSD 3-Clause License",
                                       "Proprietary. LICENSE.txt has complete terms", "Complete terms in LICENSE.txt",
                                       "see the repository", "Unknown", "LICENSE", "internal", "CC0-1.0")] == \
        ["MIT", "MIT", "Apache-2.0", "BSD-3-Clause", "proprietary", "", "", "", "", "", "CC0-1.0"]
    bsd = "Copyright (c) 2020, A. All rights reserved.\n\nRedistribution and use in source and binary forms ..."
    assert detect_license(bsd) == "BSD" and detect_license("Copyright 2026 A. All rights reserved.\n") == "proprietary"
