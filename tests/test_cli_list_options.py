"""`raso options [SECTION]`: every dotted option of the run configuration, generated from the config models, and
`raso optimize --help` pointing to it (and showing the gate)."""

from __future__ import annotations

import json

import pytest

from raso.cli import main as raso_main
from raso.cli.list_options import option_docs
from raso.engine.config import OptimizeConfig, option_keys


def test_every_option_that_set_takes_is_listed_with_its_default() -> None:
    listed = {doc.key: doc for doc in option_docs()}
    hidden = {"format_version", "quick_defaults_applied", "models.profile", "models.optimizer_profile"}
    assert set(listed) == set(option_keys()) - hidden
    defaults = OptimizeConfig()
    for key in ("schedule.epochs", "agent.max_steps", "budget.call_attempts", "gate.level"):
        value = defaults.get(key)
        assert listed[key].default == ("none" if value is None else json.dumps(value))
    assert listed["agent.max_steps"].default == "none" and listed["schedule.epochs"].default == "2"


def test_a_section_lists_its_options_with_type_choices_flag_and_description(capsys: pytest.CaptureFixture[str]) -> None:
    assert raso_main(["options", "gate"]) == 0
    out = capsys.readouterr().out
    assert 'gate.mode  (choice; default "strict")  flag --gate' in out
    assert "    choices: strict, paired, significant" in out
    assert "gate.level  (float; default 0.05)" in out and "significance level" in out
    assert "agent." not in out and "schedule." not in out


def test_json_output_and_a_dotted_prefix(capsys: pytest.CaptureFixture[str]) -> None:
    assert raso_main(["options", "retrieval.dreamer", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(row["key"].startswith("retrieval.dreamer.") for row in rows)
    assert {"key", "type", "default", "choices", "flags", "description"} <= set(rows[0])


def test_an_unknown_section_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert raso_main(["options", "gates"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["raso options: no option or section 'gates' (sections: agent, budget, execution, gate, init, "
                   "limits, models, program, retrieval, schedule, update)"]


def test_optimize_help_shows_the_gate_and_points_to_raso_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        raso_main(["optimize", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--gate {strict,paired,significant}" in out
    assert "`raso options [SECTION]` lists every option" in out
