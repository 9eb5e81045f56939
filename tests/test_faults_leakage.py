"""The leakage guard (issue 15): an index records the blocklists it was built with; optimizing a benchmark
harness with an index not blocklisted for that benchmark stops with a message unless --allow-unfiltered-index,
which the report then states. The starter corpus passes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_engine_support import ToyHarness, toy_agent_reply, toy_initializer, toy_proposer

from corpus_tools.blocklist import benchmark_for, index_blocklists
from raso.api import check_index_blocklist, optimize
from raso.engine import OptimizeConfig, RunDir
from raso.errors import ConfigError
from raso.llm.scripted import ScriptedModel


class ToyOfficeQA(ToyHarness):
    """The toy harness under a benchmark's name: what the guard looks at."""

    name = "officeqa"


def _index(tmp_path: Path, blocklists: list[str]) -> Path:
    """The metadata of a saved index as corpus_tools.build writes it (only meta.json is read by the guard)."""
    folder = tmp_path / f"index-{'-'.join(blocklists) or 'none'}"
    folder.mkdir()
    (folder / "meta.json").write_text(json.dumps({"format_version": 1, "blocklists": blocklists}))
    return folder


def _config(tmp_path: Path, **overrides: Any) -> OptimizeConfig:
    agent, optimizer = ScriptedModel(toy_agent_reply, name="agent"), ScriptedModel(["LEVEL=1", "LEVEL=2"], name="opt")
    values = dict(harness="toy", **{"models.target": agent.model, "models.optimizer": optimizer.model,
                                    "schedule.epochs": 1, "schedule.minibatch": 2, "schedule.workers": 2,
                                    "schedule.max_iterations": 1, "schedule.test": False},
                  init="rasi", update="rfsu", run_dir=tmp_path / "run")
    values.update(overrides)
    return OptimizeConfig(**values)


def test_benchmark_names_and_recorded_blocklists(tmp_path: Path) -> None:
    assert benchmark_for("officeqa") == "officeqa" and benchmark_for("WebShop") == "webshop"
    assert benchmark_for("toy") is None
    assert index_blocklists(_index(tmp_path, ["spreadsheet", "webshop"])) == ["spreadsheet", "webshop"]
    sharded = tmp_path / "sharded" / "shard-000"
    sharded.mkdir(parents=True)
    (sharded / "meta.json").write_text(json.dumps({"blocklists": ["all"]}))
    assert "officeqa" in index_blocklists(tmp_path / "sharded")


def test_an_index_without_the_benchmarks_blocklist_is_refused_before_the_run_starts(tmp_path: Path) -> None:
    config = _config(tmp_path, **{"retrieval.index": _index(tmp_path, ["spreadsheet"])})
    with pytest.raises(ConfigError, match=r"built with spreadsheet, not the 'officeqa' blocklist.*"
                                          r"--blocklist officeqa.*--allow-unfiltered-index"):
        optimize(ToyOfficeQA(), config, initializer=toy_initializer, proposer=toy_proposer)
    assert not (tmp_path / "run").exists()
    # a non-benchmark harness, the right blocklist, and the starter corpus all pass
    check_index_blocklist(config, ToyHarness())
    check_index_blocklist(config.updated({"retrieval.index": _index(tmp_path, ["officeqa"])}), ToyOfficeQA())
    check_index_blocklist(config.updated({"retrieval.index": None}), ToyOfficeQA())


def test_allow_unfiltered_index_goes_on_and_the_report_says_so(tmp_path: Path) -> None:
    index = _index(tmp_path, [])
    config = _config(tmp_path, **{"retrieval.index": index, "retrieval.allow_unfiltered_index": True})
    check_index_blocklist(config, ToyOfficeQA())  # allowed
    # the toy initializer never searches, so any retriever stands in for the one built from the index
    optimize(ToyOfficeQA(), config, initializer=toy_initializer, proposer=toy_proposer, retriever=object())
    report = RunDir(config.run_dir).report.read_text()
    assert f"- corpus index: `{index}` (blocklists: none); **--allow-unfiltered-index was given" in report
