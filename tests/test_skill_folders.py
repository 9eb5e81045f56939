"""Skills as folders: files beside SKILL.md load, save and travel unchanged from a skill to its candidates, into
the run directory and through a resume; unsafe folders are refused; the Agent Skills standard is checked."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest
from optimizer_helpers import SpyRetriever, gateway, propose, rollout, router, section
from test_cli_runs import _main, algorithm_reply
from test_engine_support import ToyHarness, named_scripted_model, toy_agent_reply

from raso.api import optimize, resume
from raso.engine import OptimizeConfig, RunDir
from raso.errors import RunError
from raso.optimizer.options import UpdateOptions
from raso.optimizer.rasu import RFSU
from raso.skill import (
    MAX_SKILL_FILE_BYTES,
    MAX_SKILL_FILES,
    Skill,
    SkillParseError,
    conform_to_agent_skills,
    validate_agent_skill,
    validate_agent_skill_folder,
)

REPO = Path(__file__).resolve().parents[1]
FILES = {"scripts/check.py": "print('ok')\n", "references/formulas.md": "# Formulas\nUse SUMIF.\n",
         "assets/template.csv": "a,b\n1,2\n"}
TOY = "test_engine_support:ToyHarness"


EXECUTABLE = ["scripts/check.py"]  # a script the skill's text tells the agent to run


def folder_skill(name: str = "toy-skill", body: str = "LEVEL=1\n") -> Skill:
    return Skill(name=name, description="How to answer toy tasks.", body=body, files=dict(FILES),
                 executable=list(EXECUTABLE), metadata={"license": "MIT"})


def modes(folder: Path) -> dict[str, int]:
    """The permission bits of every file below `folder`, by relative path."""
    return {p.relative_to(folder).as_posix(): p.stat().st_mode & 0o777 for p in folder.rglob("*") if p.is_file()}


def test_a_folder_round_trips_with_its_files(tmp_path: Path) -> None:
    skill = folder_skill()
    folder = skill.save_folder(tmp_path / "toy-skill")
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == sorted(
        ["SKILL.md", *FILES])
    assert Skill.load_folder(folder) == skill  # executables included: the mode is read back from the folder
    assert modes(folder) == {"SKILL.md": 0o644, "scripts/check.py": 0o755, "references/formulas.md": 0o644,
                             "assets/template.csv": 0o644}
    assert Skill.load(folder) == skill  # a folder path reads the folder
    assert Skill.load(folder / "SKILL.md").files == {}  # a SKILL.md path stays the file alone
    assert validate_agent_skill_folder(folder) == []
    # saving again replaces the folder exactly: a file the skill no longer carries is gone
    smaller = skill.model_copy(update={"files": {"scripts/check.py": "print('v2')\n"}, "executable": []})
    smaller.save_folder(folder)
    assert Skill.load_folder(folder).files == {"scripts/check.py": "print('v2')\n"}
    assert not (folder / "references").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["toy-skill"]  # no staging folder left behind


def test_hidden_entries_are_skipped_and_a_skill_md_beside_unrelated_files_does_not_sweep_them_in(
        tmp_path: Path) -> None:
    folder = folder_skill().save_folder(tmp_path / "toy-skill")
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref\n")
    (folder / ".DS_Store").write_bytes(b"\x00\x01")
    assert Skill.load_folder(folder).files == FILES
    # the initial-skill rule: a SKILL.md in a folder named after the skill brings its files ...
    assert Skill.load_with_folder(folder / "SKILL.md").files == FILES
    # ... a SKILL.md anywhere else is read alone
    loose = tmp_path / "project"
    loose.mkdir()
    (loose / "notes.txt").write_text("unrelated\n")
    folder_skill().model_copy(update={"files": {}}).save(loose / "SKILL.md")
    assert Skill.load_with_folder(loose / "SKILL.md").files == {}


@pytest.mark.parametrize("path,message", [
    ("/etc/passwd", "must be relative"),
    ("C:/x.md", "must be relative"),
    ("../outside.md", "would leave the skill folder"),
    ("scripts/../../x.py", "would leave the skill folder"),
    ("scripts//x.py", "would leave the skill folder"),
    ("scripts\\x.py", "use '/'"),
    ("SKILL.md", "the skill document itself"),
    ("skill.md", "the skill document itself"),
    (".env", "hidden files"),
])
def test_unsafe_file_paths_are_refused(path: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Skill(name="s", description="d", body="b\n", files={path: "x"})
    with pytest.raises(SkillParseError, match=message):
        Skill.parse("---\nname: s\ndescription: d\n---\nbody\n", files={path: "x"})


def test_oversized_too_many_binary_and_colliding_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SkillParseError, match="over the limit of .* per file"):
        Skill.parse("---\nname: s\ndescription: d\n---\nb\n", files={"big.md": "x" * (MAX_SKILL_FILE_BYTES + 1)})
    with pytest.raises(SkillParseError, match=f"over the limit of {MAX_SKILL_FILES}"):
        Skill.parse("---\nname: s\ndescription: d\n---\nb\n",
                    files={f"f{i}.md": "x" for i in range(MAX_SKILL_FILES + 1)})
    with pytest.raises(SkillParseError, match="differ only in case"):
        Skill.parse("---\nname: s\ndescription: d\n---\nb\n", files={"a.md": "1", "A.md": "2"})
    with pytest.raises(SkillParseError, match="is also the folder of"):
        Skill.parse("---\nname: s\ndescription: d\n---\nb\n", files={"a": "1", "a/b.md": "2"})

    folder = folder_skill().save_folder(tmp_path / "toy-skill")
    (folder / "assets" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(SkillParseError, match="logo.png: not UTF-8 text; only text files"):
        Skill.load_folder(folder)
    (folder / "assets" / "logo.png").unlink()
    (folder / "assets" / "huge.txt").write_text("x" * (MAX_SKILL_FILE_BYTES + 1))
    with pytest.raises(SkillParseError, match="huge.txt: .* over the limit"):
        Skill.load_folder(folder)


def test_symlinks_in_a_skill_folder_are_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read\n")
    folder = folder_skill().save_folder(tmp_path / "toy-skill")
    os.symlink(secret, folder / "references" / "leak.md")
    with pytest.raises(SkillParseError, match="leak.md: a symbolic link"):
        Skill.load_folder(folder)
    (folder / "references" / "leak.md").unlink()
    os.symlink(tmp_path, folder / "linked-dir")
    with pytest.raises(SkillParseError, match="linked-dir: a symbolic link"):
        Skill.load_folder(folder)


def test_save_folder_refuses_to_replace_a_folder_that_is_not_a_skill(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("years of work\n")
    with pytest.raises(SkillParseError, match="without a SKILL.md; refusing to replace it"):
        folder_skill().save_folder(home)
    assert (home / "thesis.tex").read_text() == "years of work\n"


def test_the_standard_is_checked_in_words() -> None:
    good = folder_skill()
    assert validate_agent_skill(good, folder_name="toy-skill") == []
    bad = Skill(name="Bad--Name-", description="x" * 1025, body="b\n",
                metadata={"compatibility": "y" * 501, "metadata": {"k": 3}, "allowed-tools": ["Bash"], "version": 2})
    problems = validate_agent_skill(bad, folder_name="other")
    assert any("only lowercase letters, digits and single hyphens" in p for p in problems)
    assert any("must match the skill's folder name 'other'" in p for p in problems)
    assert "description: 1025 characters, over the limit of 1024" in problems
    assert "compatibility: 501 characters, over the limit of 500" in problems
    assert "metadata: must map text keys to text values" in problems
    assert "allowed-tools: must be one text of space-separated tool names" in problems
    assert any("'version': not a field of the standard" in p for p in problems)
    assert validate_agent_skill(good.model_copy(update={"name": "a" * 65})) == [
        "name: 65 characters, over the limit of 64"]

    fixed, notes = conform_to_agent_skills(Skill(name="My Great  Skill!!", description="word " * 300, body="b\n"))
    assert fixed.name == "my-great-skill" and len(fixed.description) <= 1024 and fixed.description.endswith("...")
    assert len(notes) == 2 and "became 'my-great-skill'" in notes[0] and "description cut from" in notes[1]
    assert validate_agent_skill(fixed, folder_name=fixed.name) == []


@pytest.mark.parametrize("with_retrieval", [True, False])
def test_a_proposal_keeps_the_parents_files(with_retrieval: bool) -> None:
    gw, _ = gateway(router())
    parent = folder_skill(name="spreadsheet-answers", body="# Steps\n1. Write the answer.\n")
    retriever = SpyRetriever([section(1)]) if with_retrieval else None
    proposal = propose(gw, parent, [rollout(i) for i in range(3)], retriever)
    assert proposal.candidate.body != parent.body  # the model edited the document ...
    assert proposal.candidate.files == FILES  # ... and the files came along unchanged
    assert proposal.candidate.executable == EXECUTABLE


def test_baseline_proposals_keep_the_parents_files() -> None:
    from experiments.baselines.common import skill_from_text

    parent = folder_skill()
    for text in ("just a new body", "---\nname: x\ndescription: y\n---\nnew\n"):
        candidate = skill_from_text(text, fallback=parent)
        assert (candidate.files, candidate.executable) == (FILES, EXECUTABLE)


def _calls_without_files(path: Path) -> list[str]:
    """`Skill(...)`, `Skill.parse(...)` and `draft_to_skill(...)` calls in `path` that pass no `files=` (and are not
    followed by `.with_files_of(parent)`, which carries the files and their modes)."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    carried = {id(node.func.value) for node in ast.walk(tree) if isinstance(node, ast.Call)
               and isinstance(node.func, ast.Attribute) and node.func.attr == "with_files_of"}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or id(node) in carried:
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else (
            f"{func.value.id}.{func.attr}" if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            else "")
        if name in ("Skill", "Skill.parse", "draft_to_skill") and not any(k.arg == "files" for k in node.keywords):
            found.append(f"{path.relative_to(REPO)}:{node.lineno} {name}")
    return found


def test_every_skill_built_from_another_in_the_optimizers_carries_files() -> None:
    """A new place that builds a candidate from its parent must pass the parent's files on; the listed calls
    build a skill from nothing (the initial skill) or parse a model's draft body, never a candidate."""
    from_nothing = {"raso/optimizer/rasi.py draft_to_skill", "raso/optimizer/skills.py Skill.parse"}
    roots = [REPO / "raso" / "optimizer", REPO / "raso" / "engine", REPO / "experiments" / "baselines"]
    calls = [c for root in roots for p in sorted(root.rglob("*.py")) for c in _calls_without_files(p)]
    unexpected = [c for c in calls if f"{c.split(':')[0]} {c.split(' ')[1]}" not in from_nothing]
    assert unexpected == []
    assert len(calls) >= 2  # the scan sees the calls it exempts


@pytest.fixture
def models() -> tuple[str, str]:
    return (named_scripted_model("folders-agent", toy_agent_reply),
            named_scripted_model("folders-optimizer", algorithm_reply))


class StopOnceThenRFSU:
    """The real RFSU, except that its first call stops the run (as a kill would): resume then proposes from the
    skill it reads back from the run directory."""

    def __init__(self) -> None:
        self.calls = 0
        self.rfsu = RFSU(UpdateOptions(method="rfsu"))

    def propose(self, ctx, skill, rollouts):
        self.calls += 1
        if self.calls == 1:
            raise RunError("stopped for the test")
        return self.rfsu.propose(ctx, skill, rollouts)


def test_a_run_keeps_the_folder_form_of_every_skill_and_resume_reads_it_back(tmp_path: Path,
                                                                            models: tuple[str, str]) -> None:
    agent, optimizer = models
    start = folder_skill().save_folder(tmp_path / "start" / "toy-skill")
    config = OptimizeConfig(harness=TOY, models={"target": agent, "optimizer": optimizer},
                            init={"method": str(start)}, update={"method": "rfsu"},
                            schedule={"epochs": 1, "minibatch": 3, "workers": 2, "test": False},
                            run_dir=tmp_path / "run")
    proposer = StopOnceThenRFSU()
    with pytest.raises(RunError, match="stopped for the test"):
        optimize(config=config, harness=ToyHarness(), proposer=proposer)
    rd = RunDir(tmp_path / "run")
    assert Skill.load_folder(rd.skill_folder(0)) == Skill.load_folder(start)
    assert Skill.load(rd.skill_path(0)).files == {} and rd.skill_path(0).read_text() == (start / "SKILL.md").read_text()
    assert validate_agent_skill_folder(rd.best_skill_folders / "toy-skill") == []

    # resume must read s0 from its folder: an edit there shows up in the candidates made after the resume
    edited = rd.skill_folder(0) / "references" / "formulas.md"
    edited.write_text("# Formulas\nEdited while the run was stopped.\n")
    result = resume(rd.root, harness=ToyHarness(), proposer=proposer)
    assert result.finished and proposer.calls == 3  # the stopped proposal again, then the second minibatch
    decisions = read_candidates(rd)
    assert [d["version"] for d in decisions] == [1, 2]
    expected = {**FILES, "references/formulas.md": "# Formulas\nEdited while the run was stopped.\n"}
    for version in (1, 2):
        candidate = Skill.load_folder(rd.skill_folder(version))
        assert candidate.files == expected and candidate.executable == EXECUTABLE  # modes kept in every copy
        assert "LEVEL=" in candidate.body and candidate.body != Skill.load(start).body
        assert rd.skill_path(version).read_text() == (rd.skill_folder(version) / "SKILL.md").read_text()
    best = Skill.load_folder(rd.best_skill_folders / "toy-skill")
    assert best.files == expected and best.to_markdown() == rd.best_skill.read_text()
    assert sorted(p.name for p in rd.best_skill_folders.iterdir()) == ["toy-skill"]


def read_candidates(rd: RunDir) -> list[dict]:
    return [json.loads(line) for line in rd.candidates.read_text().splitlines() if line.strip()]


def test_raso_init_out_a_folder_writes_the_agent_skills_layout(tmp_path: Path, models: tuple[str, str],
                                                                capsys) -> None:
    agent, optimizer = models
    skills_dir = tmp_path / "skills"
    assert _main(["init", "--harness", TOY, "--model", agent, "--optimizer-model", optimizer, "--no-retrieval",
                  "--out", str(skills_dir)]) == 0
    assert sorted(p.name for p in skills_dir.iterdir()) == ["toy-skill", "toy-skill.lessons.json"]
    assert validate_agent_skill_folder(skills_dir / "toy-skill") == []
    assert "LEVEL=1" in Skill.load_folder(skills_dir / "toy-skill").body
    assert json.loads((skills_dir / "toy-skill.lessons.json").read_text())["mode"] == "rfsi"
    assert f"wrote {skills_dir / 'toy-skill' / 'SKILL.md'}" in capsys.readouterr().out

    # an existing file is the skill file --out names, replaced only with --force: a clear error, nothing lost
    taken = tmp_path / "notes"
    taken.write_text("mine\n")
    assert _main(["init", "--harness", TOY, "--model", agent, "--optimizer-model", optimizer, "--no-retrieval",
                  "--out", str(taken)]) == 2
    assert f"{taken} already exists; pass --force" in capsys.readouterr().err and taken.read_text() == "mine\n"


def test_raso_init_normalises_a_name_and_description_outside_the_limits_and_says_so(tmp_path: Path) -> None:
    from raso.cli.init import write_skill

    raw = Skill(name="Toy Skill For Everything", description="very long " * 200, body="LEVEL=1\n")
    path, lessons, notes = write_skill(raw, tmp_path / "skills")
    assert path == tmp_path / "skills" / "toy-skill-for-everything" / "SKILL.md"
    assert lessons == tmp_path / "skills" / "toy-skill-for-everything.lessons.json"
    assert validate_agent_skill_folder(path.parent) == []
    assert any("became 'toy-skill-for-everything'" in n for n in notes)
    assert any("description cut from 2000" in n for n in notes)
    # writing again replaces the skill when forced; a folder whose files the new skill would drop is left alone
    with pytest.raises(SkillParseError, match="toy-skill-for-everything already exists; pass --force"):
        write_skill(raw, tmp_path / "skills")
    assert write_skill(raw, tmp_path / "skills", force=True)[0] == path
    (path.parent / "scripts").mkdir()
    (path.parent / "scripts" / "mine.py").write_text("print('mine')\n")
    with pytest.raises(SkillParseError, match=r"already holds a skill with files .*\(scripts/mine.py\)"):
        write_skill(raw, tmp_path / "skills", force=True)
    assert (path.parent / "scripts" / "mine.py").read_text() == "print('mine')\n"
    # a .md path keeps the old behaviour: that one file, as it is
    path, lessons, notes = write_skill(raw, tmp_path / "SKILL.md")
    assert (path, lessons, notes) == (tmp_path / "SKILL.md", tmp_path / "SKILL.lessons.json", [])
    assert Skill.load(path).name == raw.name and Skill.load(path).description == raw.description.strip()


def test_the_update_prompt_names_the_files_so_the_body_keeps_its_links() -> None:
    from optimizer_helpers import calls_of, user_text

    gw, sm = gateway(router())
    propose(gw, folder_skill(name="spreadsheet-answers"), [rollout(i) for i in range(2)])
    [update] = calls_of(sm, "update")
    assert ("Files beside this SKILL.md, kept unchanged, which its body may refer to: assets/template.csv, "
            "references/formulas.md, scripts/check.py") in user_text(update)
    assert "print('ok')" not in user_text(update)  # names only, never the files' text


def test_a_skill_written_into_an_agents_folder_keeps_its_executables_and_never_writes_through_a_link(
        tmp_path: Path) -> None:
    from raso.agent.programs.runner import _write_skill

    skill = folder_skill()
    assert sorted(_write_skill(skill, tmp_path / "skills" / "toy-skill")) == sorted(FILES)
    assert modes(tmp_path / "skills" / "toy-skill") == {
        "SKILL.md": 0o644, "scripts/check.py": 0o755, "references/formulas.md": 0o644, "assets/template.csv": 0o644}
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    planted = tmp_path / "planted"
    (planted / "scripts").mkdir(parents=True)
    os.symlink(outside, planted / "scripts" / "check.py")  # a link where a skill file goes
    with pytest.raises(OSError):
        _write_skill(skill, planted)
    assert outside.read_text() == "keep me\n"
