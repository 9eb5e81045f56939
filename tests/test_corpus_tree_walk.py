"""The folder-tree source streams: skills in sorted-path order, nested skills after their parent and owning
their own subtree, the link rule, and a walk whose memory does not grow with the number of skills."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path

import pytest

from corpus_tools import ingest
from corpus_tools.ingest import IngestReport, iter_corpus, load_corpus
from corpus_tools.sources import SourceOptions


def skill(name: str, extra: str = "") -> str:
    return f"---\nname: {name}\ndescription: The {name} skill\n---\n# {name}\n\n## Steps\n\nDo {name}.{extra}\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def make_skills(root: Path, folders: list[str]) -> None:
    for i, folder in enumerate(folders):
        write(root / folder / "SKILL.md", skill(f"skill-{i}", f" ({folder})"))


def test_skills_come_in_sorted_path_order_with_tricky_names(tmp_path: Path) -> None:
    # "a" is both a skill and a prefix of siblings whose next character sorts below "/" (" ", "-", "."): sorted
    # paths give a, a b, a b/x, a-b, a.b, a/x, ab -- not what a walk that only appends "/" to folder names gives
    # (it would put "a" after "a.b").
    folders = ["a", "a b", "a b/x", "a-b", "a.b", "a/x", "a/x y", "a/x/deep", "ab", "Z", "\u00e9", "e\u0301",
               "\u00e4/x", "\u65e5\u672c", "c/a", "c/a b/x", "c/a.b", "c/a/x", "c/ab", "_u", "~t", "#h"]
    make_skills(tmp_path / "tree", folders)
    records, report = load_corpus(tmp_path / "tree")
    assert [r.path for r in records] == [f"{f}/SKILL.md" for f in sorted(folders)]
    assert report.skills_loaded == len(folders) and not report.skipped


def test_a_skill_at_the_root_keeps_its_place_among_nested_skills(tmp_path: Path) -> None:
    # The root skill's folder is "." in the sort: "-dash" and " space" come before it, "plain" after.
    root = tmp_path / "tree"
    write(root / "SKILL.md", skill("root"))
    write(root / "guide.md", "# Guide\n")
    make_skills(root, ["-dash", " space", "plain", "plain/inner"])
    write(root / "plain" / "notes.md", "# Notes\n")
    records, _ = load_corpus(root)
    assert [r.path for r in records] == [" space/SKILL.md", "-dash/SKILL.md", "SKILL.md", "plain/SKILL.md",
                                         "plain/inner/SKILL.md"]
    by_path = {r.path: r for r in records}
    assert [d.path for d in by_path["SKILL.md"].references] == ["guide.md"]
    assert [d.path for d in by_path["plain/SKILL.md"].references] == ["plain/notes.md"]


def test_nested_skills_follow_their_parent_and_own_their_subtree(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    make_skills(root, ["outer", "outer b", "outer/inner", "outer/x/y/inner2", "outer/inner/deeper"])
    write(root / "outer" / "references" / "a.md", "# A\n")
    write(root / "outer" / "x" / "y" / "z.md", "# Z\n")
    write(root / "outer" / "x" / "a b.md", "# AB\n")
    write(root / "outer" / "LICENSE.md", "MIT\n")
    write(root / "outer" / "inner" / "notes.md", "# Notes\n")
    write(root / "outer" / "inner" / "deep" / "more.md", "# More\n")
    write(root / "outer" / "inner" / "CHANGELOG.md", "# Changes\n")
    write(root / "outer" / "inner" / "deeper" / "own.md", "# Own\n")
    write(root / "outer" / "x" / "y" / "inner2" / "sub" / "ref.md", "# Ref\n")
    write(root / "loose" / "readme.md", "# Loose\n")
    write(root / "top.md", "# Top\n")
    write(root / "outer" / "script.py", "print()\n")

    records, report = load_corpus(root)
    assert [r.path for r in records] == ["outer/SKILL.md", "outer b/SKILL.md", "outer/inner/SKILL.md",
                                         "outer/inner/deeper/SKILL.md", "outer/x/y/inner2/SKILL.md"]
    refs = {r.path: [d.path for d in r.references] for r in records}
    assert refs == {
        "outer/SKILL.md": ["outer/references/a.md", "outer/x/a b.md", "outer/x/y/z.md"],
        "outer b/SKILL.md": [],
        "outer/inner/SKILL.md": ["outer/inner/deep/more.md", "outer/inner/notes.md"],
        "outer/inner/deeper/SKILL.md": ["outer/inner/deeper/own.md"],
        "outer/x/y/inner2/SKILL.md": ["outer/x/y/inner2/sub/ref.md"],
    }
    assert report.reasons_for("outer/LICENSE.md") == ["boilerplate"]
    assert report.reasons_for("outer/inner/CHANGELOG.md") == ["boilerplate"]
    assert report.reasons_for("loose/readme.md") == ["outside_skill"]
    assert report.reasons_for("top.md") == ["outside_skill"]
    assert report.skip_counts() == {"boilerplate": 2, "outside_skill": 2}
    # Every .md file counted once: 5 SKILL.md, 7 references, 2 boilerplate, 2 outside.
    assert report.files_seen == 16 and report.references_loaded == 7


def make_linked_tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    outside = tmp_path / "outside"
    make_skills(root, ["deep/real/skill", "keep"])
    make_skills(outside, ["ext"])
    write(outside / "ext" / "guide.md", "# Guide\n")
    (outside / "ext" / "again").symlink_to(outside, target_is_directory=True)
    # A shallow link to a folder the walk reaches anyway: not followed, so the skill keeps its real path
    # whichever of the two the walk meets first.
    (root / "a-shortcut").symlink_to(root / "deep" / "real", target_is_directory=True)
    (root / "keep" / "up").symlink_to("..", target_is_directory=True)
    # Two links to one folder outside the tree.
    (root / "linked").symlink_to(outside, target_is_directory=True)
    (root / "zz-linked-again").symlink_to(outside / "ext", target_is_directory=True)
    # A link into a folder the walk skips (node_modules) is followed: nothing else reaches it.
    make_skills(root, ["node_modules/pkg"])
    (root / "vendored").symlink_to(root / "node_modules" / "pkg", target_is_directory=True)
    os.symlink("nowhere.md", root / "keep" / "gone.md")
    return root


def test_links_into_the_walked_tree_are_reported_and_links_out_of_it_refused(tmp_path: Path) -> None:
    records, report = load_corpus(make_linked_tree(tmp_path))
    assert [r.path for r in records] == ["deep/real/skill/SKILL.md", "keep/SKILL.md", "vendored/SKILL.md"]
    assert report.reasons_for("a-shortcut") == ["symlink_loop"]
    assert report.reasons_for("keep/up") == ["symlink_loop"]
    assert report.reasons_for("linked") == ["link_outside"]
    assert report.reasons_for("zz-linked-again") == ["link_outside"]
    assert report.reasons_for("keep/gone.md") == ["broken_symlink"]
    assert report.skip_counts() == {"symlink_loop": 2, "link_outside": 2, "broken_symlink": 1}


def test_a_trusted_tree_has_its_outside_folders_followed_once(tmp_path: Path) -> None:
    records, report = load_corpus(make_linked_tree(tmp_path), options=SourceOptions(follow_links_out=True))
    assert [r.path for r in records] == ["deep/real/skill/SKILL.md", "keep/SKILL.md", "linked/ext/SKILL.md",
                                         "vendored/SKILL.md"]
    assert [d.path for d in records[2].references] == ["linked/ext/guide.md"]
    # The first link (in path order) to the outside folder is walked, the second reported.
    assert report.reasons_for("linked/ext/again") == ["symlink_loop"]
    assert report.reasons_for("zz-linked-again") == ["symlink_loop"]
    assert report.skip_counts() == {"symlink_loop": 4, "broken_symlink": 1}


def test_no_file_outside_the_tree_reaches_the_index_through_a_link(tmp_path: Path) -> None:
    # A downloaded checkout whose links point at the machine's secrets: a SKILL.md, a reference, a licence and
    # a .git folder, each a link out of the tree. None of their text may be read into a record.
    secret = "AKIA-SECRET-KEY-0123456789"
    private = tmp_path / "home"
    write(private / "credentials.md", f"# Credentials\n\n## Key\n\n{secret}\n")
    write(private / "LICENSE", "MIT License\n\nPermission is hereby granted, free of charge\n")
    write(private / "git" / "config", '[remote "origin"]\n\turl = https://github.com/victim/private.git\n')
    write(private / "git" / "HEAD", "0123456789abcdef0123456789abcdef01234567\n")
    root = tmp_path / "checkout"
    write(root / "good" / "SKILL.md", skill("good"))
    (root / "good" / "notes.md").symlink_to(private / "credentials.md")
    (root / "good" / "LICENSE").symlink_to(private / "LICENSE")
    (root / "stolen").mkdir()
    (root / "stolen" / "SKILL.md").symlink_to(private / "credentials.md")
    (root / ".git").symlink_to(private / "git", target_is_directory=True)

    records, report = load_corpus(root)
    assert [r.path for r in records] == ["good/SKILL.md"]
    assert records[0].references == [] and secret not in records[0].text
    assert records[0].license == "unknown" and records[0].repo == "local/checkout" and records[0].commit == ""
    assert report.reasons_for("good/notes.md") == ["link_outside"]
    assert report.reasons_for("stolen/SKILL.md") == ["link_outside"]
    assert report.files_seen == 3  # good's SKILL.md, its refused reference, stolen's SKILL.md: each once
    # the report travels with the index: it names the files in the tree, never the machine's paths they lead to
    assert str(private) not in json.dumps(report.to_dict())

    trusted, _ = load_corpus(root, options=SourceOptions(follow_links_out=True))
    assert [r.path for r in trusted] == ["good/SKILL.md", "stolen/SKILL.md"]
    assert trusted[0].license == "MIT" and trusted[0].repo == "victim/private"
    assert trusted[0].commit == "0123456789abcdef0123456789abcdef01234567"


def test_a_fifo_is_never_opened_for_reading(tmp_path: Path) -> None:
    # A reference linked to a FIFO would block a plain read forever: it is reported and the skill kept.
    root = tmp_path / "tree"
    write(root / "s" / "SKILL.md", skill("s"))
    os.mkfifo(tmp_path / "tree" / "pipe")
    (root / "s" / "ref.md").symlink_to(root / "pipe")
    records, report = load_corpus(root)
    assert [r.path for r in records] == ["s/SKILL.md"] and records[0].references == []
    assert report.reasons_for("s/ref.md") == ["not_regular"]


def make_checkout_tree(root: Path, skills: int) -> None:
    """`skills` tiny skills in repos/<owner>/<name>/skills/<id>/, 30 to a repository, 10 owners."""
    for i in range(skills):
        repo = i // 30
        folder = root / "repos" / f"owner{repo % 10}" / f"repo{repo:04d}" / "skills" / f"s{i:05d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "SKILL.md").write_text(skill(f"s{i:05d}"), encoding="utf-8")


def walk_peak_bytes(root: Path) -> tuple[int, int, set[int | None]]:
    """(peak traced bytes while streaming every skill of `root`, skills read, progress totals), holding one record at a time."""
    report = IngestReport()
    totals: set[int | None] = set()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        count = sum(1 for _ in iter_corpus(root, report, progress=lambda done, total: totals.add(total)))
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    return peak, count, totals


def test_the_walk_holds_nothing_per_skill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Dedupe keys are the one per-skill cost a build keeps by design (16 bytes each once merged); merge them
    # often so that they do not hide what the walk holds.
    monkeypatch.setattr(ingest, "DEDUPE_BATCH", 64)
    make_checkout_tree(tmp_path / "small", 300)
    make_checkout_tree(tmp_path / "large", 3000)
    small, n_small, _ = walk_peak_bytes(tmp_path / "small")
    large, n_large, totals = walk_peak_bytes(tmp_path / "large")
    assert (n_small, n_large) == (300, 3000)
    per_skill = (large - small) / (n_large - n_small)
    print(f"walk peak {small} -> {large} bytes: {per_skill:.0f} bytes per skill")
    # Measured: ~850 bytes a skill when the walk listed the whole tree first; ~35 streamed (the 16-byte
    # dedupe keys and the larger listing of repos/<owner>/).
    assert per_skill < 100, f"the walk holds {per_skill:.0f} bytes per skill ({small} -> {large} bytes peak)"
    assert totals == {None}  # a streamed walk has no total up front
