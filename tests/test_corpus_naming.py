"""Every run, result and table names its corpus (issue 35): the run's config.resolved.*, report.md and report.html;
each experiment cell's result.json, its shared s0's init.json and the table's notes; the starter corpus is named
as the demo it is. And the experiment guards: split=paper refuses the starter corpus unless allowed, a dry run
refuses an index that does not exist, and the corpus-fraction sweep draws nested subsamples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_html_support import make_run
from test_experiments_support import overrides, scripted_models

from corpus_tools.identity import corpus_identity
from experiments.config import load_experiment
from experiments.results import read_results
from experiments.runner import preflight, run_experiment
from raso.engine.config import build_config, load_resolved
from raso.errors import ConfigError

CONFIGS = Path(__file__).resolve().parent.parent / "experiments" / "configs"
SMALL = {"schedule.epochs": 1, "schedule.minibatch": 3, "schedule.workers": 2, "init.num_requirements": 2, "retrieval.k": 2}


@pytest.fixture(scope="module")
def starter_label() -> str:
    label = corpus_identity(None).label()
    assert label.startswith("starter corpus, ") and label.endswith(" skills, demo")
    return label


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("naming") / "run")


def test_a_run_records_and_reports_its_corpus(run_dir: Path, starter_label: str) -> None:
    resolved = json.loads((run_dir / "config.resolved.json").read_text(encoding="utf-8"))
    starter = corpus_identity(None)
    assert resolved["corpus"]["name"] == "starter corpus" and resolved["corpus"]["demo"] is True
    assert resolved["corpus"]["skills"] == starter.skills and resolved["corpus"]["digest"] == starter.digest
    assert "corpus:" in (run_dir / "config.resolved.yaml").read_text(encoding="utf-8")
    report = (run_dir / "report.md").read_text(encoding="utf-8")
    assert f"- corpus: {starter_label}" in report
    assert starter_label in (run_dir / "report.html").read_text(encoding="utf-8")


def test_a_resolved_config_with_its_corpus_reads_back_as_options(run_dir: Path) -> None:
    # resume reads the JSON; a user may pass the YAML back as a config file: the corpus record is not an option
    assert load_resolved(run_dir / "config.resolved.json").retrieval.index is None
    assert build_config(run_dir / "config.resolved.yaml").harness.endswith("ToyHarness")


def test_every_cell_result_and_the_table_name_the_corpus(tmp_path: Path, starter_label: str) -> None:
    agent, optimizer = scripted_models()
    values = overrides(tmp_path, agent, optimizer, seeds=[0], methods=["rfsi", "rasi"], optimize=SMALL)
    summary = run_experiment(CONFIGS / "init_table.yaml", values)
    assert summary.failed == []
    root = Path(summary.results_dir)
    results = read_results(root)
    assert len(results) == 2
    for result in results:  # a cell whose corpus is unnamed fails here
        assert result.corpus.get("name") == "starter corpus" and result.corpus.get("digest"), result.cell
        assert result.corpus_label == starter_label
        on_disk = json.loads((root / "cells" / result.cell / "result.json").read_text(encoding="utf-8"))
        assert on_disk["corpus"]["skills"] == corpus_identity(None).skills
    init = json.loads(next((root / "shared").glob("*/seed0/rasi-*/init.json")).read_text(encoding="utf-8"))
    assert init["corpus"]["name"] == "starter corpus" and init["retrieval"]["index"] == "starter corpus"
    table = (root / "init.md").read_text(encoding="utf-8")
    assert "Corpus:" in table and f"- every cell: {starter_label}" in table
    assert "Starter corpus, not the paper's corpus" in table
    assert starter_label in (root / "cells.csv").read_text(encoding="utf-8")
    assert json.loads((root / "init.json").read_text(encoding="utf-8"))["demo_corpus"] is True


def test_an_old_result_without_a_corpus_is_labelled_not_recorded() -> None:
    from experiments.results import CellResult

    old = CellResult.from_dict({"cell": "c", "method": "rasi", "label": "RASI", "harness": "h", "seed": 0})
    assert old.corpus_label.startswith("corpus not recorded") and not old.demo_corpus


def _paper_config(**extra) -> object:
    values = {"harnesses": [{"name": "spreadsheet", "options": {"split": "paper"}}], "methods": ["rfsi", "rasi"],
              **extra}
    return load_experiment(CONFIGS / "init_table.yaml", values)


def test_split_paper_refuses_the_starter_corpus_unless_allowed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="split=paper refuses the starter corpus"):
        preflight(_paper_config())
    preflight(_paper_config(allow_starter_corpus=True))
    preflight(_paper_config(methods=["none", "rfsi"]))  # no method retrieves: the corpus plays no part
    from corpus_tools.index import SectionIndex
    from corpus_tools.starter import starter_index

    index = SectionIndex.build(list(starter_index().iter_sections())[:40]).save(tmp_path / "index")
    preflight(_paper_config(optimize={"retrieval": {"index": str(index)}}))


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from raso.cli.main import main

    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_dry_run_refuses_a_missing_index_and_names_the_corpus(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                   starter_label: str) -> None:
    base = ["experiment", "run", str(CONFIGS / "init_table.yaml"), "--dry-run", "--harness",
            "raso.testing.toy:CountingHarness", "--seeds", "0"]
    code, out, err = _cli(base + ["--set", f"retrieval.index={tmp_path / 'missing'}"], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "does not exist" in err and "raso corpus build" in err
    code, out, err = _cli(base, capsys)
    assert code == 0, err
    assert f"corpus:\n  {starter_label}" in out
    paper = ["experiment", "run", str(CONFIGS / "init_table.yaml"), "--dry-run", "--harness", "spreadsheet",
             "--harness-arg", "spreadsheet.split=paper", "--seeds", "0"]
    code, out, err = _cli(paper, capsys)
    assert code == 2 and err.count("\n") == 1 and "split=paper refuses the starter corpus" in err
    assert "--allow-starter-corpus" in err


def test_corpus_fractions_are_nested_subsamples_with_their_sizes(tmp_path: Path) -> None:
    from corpus_tools.index import SectionIndex
    from corpus_tools.starter import starter_index
    from experiments.artifacts import SharedArtifacts
    from raso.engine.config import OptimizeConfig

    index = SectionIndex.build(starter_index().iter_sections()).save(tmp_path / "index")
    cfg = OptimizeConfig(retrieval={"index": index})
    shared = SharedArtifacts(tmp_path / "shared")
    base_skills = set(SectionIndex.load(index).skills)
    kept: dict[tuple[float, int], set[str]] = {}
    for seed in (0, 1):
        for fraction in (0.01, 0.1, 0.3):
            path = shared.index_path(cfg, fraction, seed)
            assert path is not None
            kept[fraction, seed] = set(SectionIndex.load(path).skills)
            sizes = json.loads(path.with_name(f"{path.name}.json").read_text(encoding="utf-8"))
            assert sizes["skills"] == len(kept[fraction, seed]) == max(1, round(fraction * len(base_skills)))
            assert sizes["of_skills"] == len(base_skills) and sizes["nested"] is True
            identity = corpus_identity(path)
            assert identity.skills == sizes["skills"] and f"nested {fraction:g} subsample (seed {seed})" in identity.name
            assert identity.name.startswith("index") and not identity.demo
        assert kept[0.01, seed] <= kept[0.1, seed] <= kept[0.3, seed] <= base_skills
    assert kept[0.3, 0] != kept[0.3, 1]  # each seed draws its own nested chain
