"""Offline evidence as a config: cells from a config file, the flags and --set, their parameters in cell.json (the
folder name is never parsed), and folders of the older name-encoded layout still read. Scripted models only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from experiments.offline_evidence import CELL_FILE, EvidenceCell, cell_name, load_cells, main
from raso.testing import ScriptedModel


def _config(tmp_path: Path, model: ScriptedModel) -> Path:
    path = tmp_path / "evidence.yaml"
    path.write_text(f"harnesses: [webshop]\nmodels: [{model.model}]\nskills: [none]\ngrammar: [true]\nlimit: 1\n"
                    f"max_steps: 2\nharness_options: {{reply_thought: false}}\nout: {tmp_path / 'out'}\n",
                    encoding="utf-8")
    return path


def test_a_config_file_and_set_make_the_cells_and_cell_json_holds_their_parameters(tmp_path: Path) -> None:
    model = ScriptedModel(["Action: search[pants]", "Action: click[back to search]"] * 2)
    config = _config(tmp_path, model)
    assert main(["--config", str(config), "--set", "agent.temperature=0.3"]) == 0
    [folder] = [d for d in (tmp_path / "out").iterdir() if d.is_dir()]
    cell = EvidenceCell.model_validate_json((folder / CELL_FILE).read_text())
    assert (cell.harness, cell.harness_options, cell.model, cell.skill, cell.grammar, cell.limit, cell.max_steps) == (
        "webshop", {"reply_thought": False}, model.model, "none", True, 1, 2)
    assert cell.options == {"agent.temperature": 0.3} and "__" not in folder.name and (folder / "DONE").is_file()
    assert all(p.get("temperature") == 0.3 for p in model.params)  # the --set option reached the agent's calls
    [result] = load_cells(tmp_path / "out")
    assert (result.harness, result.model, result.n) == ("webshop[reply_thought=False]", model.model, 1)
    # another --set is another cell (it used to share the folder and be skipped as done)
    assert main(["--config", str(config), "--set", "agent.temperature=0.1"]) == 0
    assert len([d for d in (tmp_path / "out").iterdir() if d.is_dir()]) == 2 and model.remaining == 0
    # the same parameters again: done already, no call
    assert main(["--config", str(config), "--set", "agent.temperature=0.1"]) == 0
    assert model.remaining == 0


def test_bad_config_values_are_one_line_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "evidence.yaml"
    config.write_text("harnesses: [webshop]\nlimits: 3\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["--config", str(config)])
    assert exc.value.code == 2 and "limits: Extra inputs are not permitted" in capsys.readouterr().err


def test_a_folder_of_the_older_name_encoded_layout_still_reads(tmp_path: Path) -> None:
    model = ScriptedModel(["Action: search[pants]", "Action: click[back to search]"])
    assert main(["--config", str(_config(tmp_path, model))]) == 0
    [folder] = [d for d in (tmp_path / "out").iterdir() if d.is_dir()]
    [new] = load_cells(tmp_path / "out")
    old = tmp_path / "old"
    old.mkdir()
    legacy = old / cell_name("webshop[reply_thought=False]", model.model, "none", True, 2, 1)
    shutil.copytree(folder, legacy)
    (legacy / CELL_FILE).unlink()
    [read] = load_cells(old)
    assert read == new
    assert json.loads((folder / CELL_FILE).read_text())["harness"] == "webshop"
