"""The paper's splits as data (issue 24): shipped manifests and WebShop's rule give exactly the paper's sizes,
`split="paper"` refuses demo data with a clear error naming the data it needs, and every harness names its data."""

from __future__ import annotations

import json

import pytest

from harnesses.alfworld.harness import AlfworldHarness
from harnesses.officeqa.harness import OfficeQAHarness
from harnesses.paper_splits import PAPER_SIZES, PaperSplitError, manifest, sample_split
from harnesses.spreadsheet.harness import SpreadsheetHarness
from harnesses.webshop.harness import WebShopHarness, split_goals

SIZES = {"train": 80, "val": 40, "test": 500}


@pytest.mark.parametrize("harness, sizes", [("officeqa", (50, 24, 172)), ("spreadsheet", (80, 40, 280)),
                                            ("alfworld", (39, 18, 134))])
def test_the_shipped_manifests_give_the_papers_sizes(harness, sizes):
    record = manifest(harness)
    assert tuple(len(record[name]) for name in ("train", "val", "test")) == sizes
    ids = record["train"] + record["val"] + record["test"]
    assert len(set(ids)) == len(ids)  # disjoint splits, no id twice
    assert "lz-tool-skillopt" in record["source"]


def test_webshops_rule_gives_80_40_500_of_the_official_split_deterministically():
    goals = [f"g{i}" for i in range(12087)]  # official WebShop: 10,587 train, 1,000 val, 500 test goals
    official = {"test": goals[:500], "val": goals[500:1500], "train": goals[1500:]}
    split = sample_split(official, SIZES)
    assert {name: len(ids) for name, ids in split.items()} == SIZES == PAPER_SIZES["webshop"]
    assert split["test"] == official["test"]  # the official test set, whole
    assert set(split["train"]) <= set(official["train"]) and set(split["val"]) <= set(official["val"])
    reordered = sample_split({name: list(reversed(ids)) for name, ids in official.items()}, SIZES)
    assert reordered["train"] == split["train"] and reordered["val"] == split["val"]  # only ids and salt decide
    assert sample_split(official, SIZES, salt="other")["train"] != split["train"]  # the salt decides
    with pytest.raises(PaperSplitError, match="has 30 tasks"):
        sample_split({"train": goals[:30], "val": goals[30:80], "test": goals[80:580]}, SIZES)


def test_webshop_official_cut_then_rule():
    # the harness applies the rule to WebShop's own official cut (split_goals), so the paper's test set is WebShop's
    class G:
        def __init__(self, i):
            self.id = f"g{i}"
    goals = [G(i) for i in range(2000)]
    official = split_goals(goals, seed=233)
    assert [len(official[n]) for n in ("train", "val", "test")] == [500, 1000, 500]
    split = sample_split({n: [g.id for g in gs] for n, gs in official.items()}, SIZES)
    assert [len(split[n]) for n in ("train", "val", "test")] == [80, 40, 500]


def test_alfworld_paper_split_on_the_shared_games(shared_envdata):
    data = shared_envdata / "alfworld"
    harness = AlfworldHarness(data_dir=data, split="paper")
    splits = harness.splits()
    assert {name: len(tasks) for name, tasks in splits.items()} == {"train": 39, "val": 18, "test": 134}
    # the shared folder's own SkillOpt manifest names the same games
    published = json.loads((data / "skillopt_path_split" / "test" / "items.json").read_text())
    assert [t.id for t in splits["test"]] == ["/".join(item["gamefile"].split("/")[1:4]) for item in published]
    assert harness.data_label() == f"paper split of {data}"


def test_paper_split_refuses_the_demo_data_and_names_what_it_needs():
    with pytest.raises(PaperSplitError, match="demo data.*json_2.1.1"):
        AlfworldHarness(split="paper")
    with pytest.raises(PaperSplitError, match="demo data.*Verified-400"):
        SpreadsheetHarness(split="paper")
    with pytest.raises(PaperSplitError, match="demo data.*OfficeQA Full"):
        OfficeQAHarness(split="paper")
    with pytest.raises(PaperSplitError, match="demo data.*official"):
        WebShopHarness(split="paper")
    with pytest.raises(ValueError, match="split must be one of default, paper"):
        AlfworldHarness(split="papers")


def test_paper_split_refuses_data_that_lacks_the_papers_tasks(shared_envdata):
    with pytest.raises(PaperSplitError, match=r"Verified-400.*lacks 381 of the 400 tasks"):
        SpreadsheetHarness(data_dir=shared_envdata / "spreadsheetbench" / "test_set_50", split="paper",
                           recalc="none").splits()


def test_every_harness_names_its_data(shared_envdata):
    assert AlfworldHarness().data_label().startswith("demo data")
    assert SpreadsheetHarness(recalc="none").data_label().startswith("demo data")
    assert OfficeQAHarness().data_label().startswith("demo data")
    assert WebShopHarness().data_label().startswith("demo data")
    data = shared_envdata / "alfworld"
    assert AlfworldHarness(data_dir=data).data_label() == f"default split of {data}"


def test_a_path_to_the_shipped_data_is_labelled_demo_however_it_is_spelt(tmp_path, monkeypatch):
    import shutil

    from harnesses.officeqa.loader import PACKAGED_DATA_DIR as OFFICEQA_DATA
    from harnesses.spreadsheet.loader import PACKAGED_DATA_DIR as SPREADSHEET_DATA
    from harnesses.webshop.catalog import DATA_DIR as WEBSHOP_DATA

    monkeypatch.chdir(OFFICEQA_DATA.parent)  # a relative data_dir, as a config file would give it
    assert OfficeQAHarness(data_dir="data").data_label().startswith("demo data")
    monkeypatch.chdir(SPREADSHEET_DATA.parent)
    assert SpreadsheetHarness(data_dir="./data", recalc="none").data_label().startswith("demo data")
    assert WebShopHarness(data_dir=WEBSHOP_DATA).data_label().startswith("demo data")
    # other files are not the demo; WebShop's "paper" split is a seeded rule at the paper's sizes, and says so
    copy = shutil.copytree(WEBSHOP_DATA, tmp_path / "webshop")
    own = WebShopHarness(data_dir=copy)
    assert own.data_label() == f"default split of {copy.resolve()}"
    own.split = "paper"  # (the paper split itself refuses a catalog this small; only its label is checked here)
    assert own.data_label() == f"paper-size seeded split of {copy.resolve()} (the paper's sizes, not its task ids)"
