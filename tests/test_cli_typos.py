"""A mistyped flag, command or choice is answered by the command's own parser with the spelling it was likely
meant to be (raso.cli.main: RasoArgumentParser)."""

from __future__ import annotations

import pytest

from raso.cli.main import main as raso_main


@pytest.mark.parametrize("argv, usage, hint", [
    (["optimize", "--minibach", "3"], "usage: raso optimize", "--minibach: did you mean --minibatch?"),
    (["corpus", "build", "skills", "--out", "idx", "--levls", "1,2"], "usage: raso corpus build", "did you mean --levels?"),
    (["optimise"], "usage: raso", "did you mean 'optimize'?"),
    (["corpus", "biuld", "x"], "usage: raso corpus", "did you mean 'build'?"),
])
def test_a_typo_gets_the_commands_usage_and_a_did_you_mean(argv, usage, hint, capsys):
    with pytest.raises(SystemExit) as exited:
        raso_main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and hint in err and err.startswith(usage), err
    assert "Traceback" not in err


def test_an_unrelated_flag_gets_no_made_up_suggestion(capsys):
    with pytest.raises(SystemExit):
        raso_main(["optimize", "--zzzzqqq"])
    err = capsys.readouterr().err
    assert "unrecognized arguments: --zzzzqqq" in err and "did you mean" not in err


@pytest.mark.parametrize("levels", ["1,x", "0", "7", ","])
def test_bad_heading_levels_are_a_usage_error_naming_the_form(levels, capsys, tmp_path):
    with pytest.raises(SystemExit) as exited:
        raso_main(["corpus", "build", str(tmp_path), "--out", str(tmp_path / "idx"), "--levels", levels])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "give heading levels 1 to 6 separated by commas" in err
    assert "invalid literal" not in err and not (tmp_path / "idx").exists()
