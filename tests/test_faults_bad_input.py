"""Bad input gets a one-line error and loses nothing (issue 23): an undecodable config file, an oversized initial
skill, an index whose files do not match its recorded counts and sizes, a checkpoint naming tasks the harness
does not have."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_corpus_index import sec
from test_engine_support import ToyHarness, named_scripted_model, toy_agent_reply

import raso
from corpus_tools.index import IndexIntegrityError, SectionIndex
from corpus_tools.index_build import write_index
from raso.cli.main import main
from raso.engine.config import build_config
from raso.errors import ConfigError, RunError


@pytest.mark.parametrize("suffix", [".toml", ".yaml", ".json"])
def test_a_binary_config_file_is_a_one_line_error(tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / f"config{suffix}"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe binary")
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        build_config(path)
    assert main(["optimize", "--harness", "toy", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "is not UTF-8 text" in err and "Traceback" not in err


def test_an_oversized_initial_skill_is_refused_with_its_size(tmp_path: Path) -> None:
    skill = tmp_path / "SKILL.md"
    skill.write_text("---\nname: big\ndescription: A big skill.\n---\n\n" + "Do the task carefully. " * 3000)
    with pytest.raises(ConfigError, match=r"69,0\d\d characters, over the limit of 40,000"):
        raso.optimize("toy", init=str(skill), run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()  # refused before anything was written
    roomy = build_config(overrides={"harness": "toy", "init": str(skill), "init.skill_max_chars": 80_000})
    assert roomy.init.skill_max_chars == 80_000


def _sections() -> list:
    return [sec(i, text, repo) for i, (text, repo) in enumerate([
        ("Use openpyxl to load a workbook and merge cells in a sheet.", "acme/excel"),
        ("Pandas can read_excel and to_excel for tabular data frames.", "other/data"),
        ("Plan the task as a checklist before acting; verify each step.", "other/plan"),
        ("Search the shop for products, compare prices, then add to cart.", "shop/web"),
    ])]


def _saved_index(tmp_path: Path, streaming: bool) -> Path:
    directory = tmp_path / ("streamed" if streaming else "saved")
    if streaming:
        write_index(_sections(), directory)
    else:
        SectionIndex.build(_sections()).save(directory)
    assert SectionIndex.load(directory).search("merge cells", k=2)  # sound before it is damaged
    return directory


@pytest.mark.parametrize("streaming", [False, True])
def test_a_truncated_vocabulary_is_refused_on_load(tmp_path: Path, streaming: bool) -> None:
    directory = _saved_index(tmp_path, streaming)
    vocab = directory / "vocab.txt"
    vocab.write_text("\n".join(vocab.read_text().split("\n")[:5]))
    with pytest.raises(IndexIntegrityError, match=r"vocab.txt has \d+ bytes, its meta.json recorded"):
        SectionIndex.load(directory)


def test_an_index_without_recorded_sizes_is_checked_by_its_counts(tmp_path: Path) -> None:
    directory = _saved_index(tmp_path, False)
    meta = json.loads((directory / "meta.json").read_text())
    del meta["file_bytes"]  # as written before sizes were recorded
    (directory / "meta.json").write_text(json.dumps(meta))
    (directory / "vocab.txt").write_text("\n".join((directory / "vocab.txt").read_text().split("\n")[:5]))
    with pytest.raises(IndexIntegrityError, match=r"it has 5 terms \(vocab.txt\), its meta.json recorded"):
        SectionIndex.load(directory)


def test_a_truncated_array_is_refused_on_load(tmp_path: Path) -> None:
    directory = _saved_index(tmp_path, False)
    meta = json.loads((directory / "meta.json").read_text())
    del meta["file_bytes"]
    (directory / "meta.json").write_text(json.dumps(meta))
    postings = np.load(directory / "postings.npy")
    np.save(directory / "postings.npy", postings[: len(postings) // 2])
    with pytest.raises(IndexIntegrityError, match="postings"):
        SectionIndex.load(directory)


def test_optimize_on_a_damaged_index_stops_before_paying(tmp_path: Path) -> None:
    directory = _saved_index(tmp_path, False)
    (directory / "vocab.txt").write_text("x")
    agent = named_scripted_model("bad-index-agent", toy_agent_reply)
    optimizer = named_scripted_model("bad-index-optimizer", lambda messages: "unused")
    with pytest.raises(RunError, match="is damaged"):
        raso.optimize(ToyHarness(), **{"models.target": agent, "models.optimizer": optimizer,
                                       "retrieval.index": directory, "retrieval.allow_unfiltered_index": True},
                      init="rasi", run_dir=tmp_path / "run")
    assert json.loads((tmp_path / "run" / "ledger.json").read_text())["totals"]["calls"] == 0


def test_a_checkpoint_naming_unknown_tasks_is_refused_before_anything_is_rewritten(tmp_path: Path) -> None:
    agent = named_scripted_model("unknown-task-agent", toy_agent_reply)
    optimizer = named_scripted_model("unknown-task-optimizer", lambda messages: "LEVEL=1")
    from test_engine_support import toy_initializer, toy_proposer

    run_dir = tmp_path / "run"
    raso.optimize(ToyHarness(), **{"models.target": agent, "models.optimizer": optimizer, "schedule.epochs": 1,
                                   "schedule.minibatch": 2, "schedule.workers": 1,
                                   "schedule.max_iterations": 1, "schedule.test": False}, init="rfsi", update="rfsu", run_dir=run_dir,
                  initializer=toy_initializer, proposer=toy_proposer)
    checkpoint = run_dir / "checkpoint.json"
    state = json.loads(checkpoint.read_text())
    state.update(phase="iterate", finished_at=None, stop_reason=None,
                 pending={"iteration": 2, "epoch": 0, "batch_index": 1, "task_ids": ["t1", "gone-1", "gone-2"]})
    checkpoint.write_text(json.dumps(state))
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    with pytest.raises(RunError, match=r"names 2 train task\(s\) that harness 'toy' does not have \('gone-1', 'gone-2'\)"):
        raso.resume(run_dir, harness=ToyHarness(), initializer=toy_initializer, proposer=toy_proposer)
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before
    shutil.rmtree(run_dir)
