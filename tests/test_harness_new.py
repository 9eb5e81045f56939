"""The harness template (harnesses/_template) and `raso harness new`, which copies it under a new name."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

import pytest

from raso.agent import AgentConfig, ExecutionAgent
from raso.cli import harness as harness_cmd
from raso.harness import get_harness
from raso.testing import scripted_gateway


def run_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="raso")
    harness_cmd.register(parser.add_subparsers())
    args = parser.parse_args(list(argv))
    return int(args.func(args))


def run_own_tests(module_name: str) -> list[str]:
    """Call every test function of a harness package's test_harness.py; returns their names."""
    module = importlib.import_module(module_name)
    names = sorted(name for name in vars(module) if name.startswith("test_"))
    for name in names:
        getattr(module, name)()
    return names


def test_the_template_passes_its_own_tests() -> None:
    assert len(run_own_tests("harnesses._template.test_harness")) == 3


def test_new_scaffolds_a_package_that_loads_by_target_and_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("harness", "new", "quiz_desk", "--dir", str(tmp_path)) == 0
    package = tmp_path / "quiz_desk"
    names = sorted(p.name for p in package.iterdir())
    assert names == ["README.md", "__init__.py", "action_format.md", "entry_point.toml", "harness.py",
                     "harness_description.md", "task_description.md", "tasks.json", "test_harness.py"]
    for path in package.glob("*.py"):
        assert "TemplateHarness" not in path.read_text() and "TemplateEnv" not in path.read_text(), path
    snippet = '[project.entry-points."raso.harnesses"]\nquiz_desk = "quiz_desk:QuizDeskHarness"\n'
    assert (package / "entry_point.toml").read_text() == snippet
    out = capsys.readouterr().out
    assert snippet in out and "Next steps" in out
    # not importable from a console script until installed: the hint puts its folder on the path
    assert f"PYTHONPATH={tmp_path.resolve()} raso harness describe quiz_desk:QuizDeskHarness" in out
    readme = (package / "README.md").read_text()
    assert f"PYTHONPATH={tmp_path.resolve()} raso harnesses quiz_desk:QuizDeskHarness" in readme

    monkeypatch.syspath_prepend(str(tmp_path))
    harness = get_harness("quiz_desk:QuizDeskHarness")
    assert type(harness).__name__ == "QuizDeskHarness" and harness.name == "quiz_desk"
    assert Path(harness.resource_dir) == package.resolve()
    task = harness.tasks("val")[0]
    gw, model = scripted_gateway(["Action: read", f"Action: answer {task.metadata['answer']}"])
    rollout = harness.rollout(task, [], ExecutionAgent(gw, AgentConfig(mode="none")))
    assert rollout.reward == 1.0 and rollout.harness == "quiz_desk" and len(model.calls) == 2
    assert len(run_own_tests("quiz_desk.test_harness")) == 3  # the copied tests pass on the renamed code


def test_new_inside_a_package_folder_gives_the_dotted_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "myproject").mkdir()
    (tmp_path / "myproject" / "__init__.py").write_text("")
    assert run_cli("harness", "new", "shop2", "--dir", str(tmp_path / "myproject")) == 0
    target = 'shop2 = "myproject.shop2:Shop2Harness"'
    assert target in (tmp_path / "myproject" / "shop2" / "entry_point.toml").read_text()
    monkeypatch.syspath_prepend(str(tmp_path))
    assert get_harness("myproject.shop2:Shop2Harness").name == "shop2"


def test_new_never_overwrites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "harness.py").write_text("# mine\n")
    assert run_cli("harness", "new", "taken", "--dir", str(tmp_path)) == 2
    assert "already exists" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "taken").iterdir()] == ["harness.py"]
    assert (tmp_path / "taken" / "harness.py").read_text() == "# mine\n"


@pytest.mark.parametrize("name", ["My-Shop", "1shop", "class", "_private", "shop!"])
def test_new_rejects_a_bad_name_and_writes_nothing(name: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("harness", "new", name, "--dir", str(tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: bad harness name {name!r}") and "e.g. '" in err
    assert list(tmp_path.iterdir()) == []


def test_new_rejects_a_registered_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("harness", "new", "spreadsheet", "--dir", str(tmp_path)) == 2
    assert "already registered (harnesses.spreadsheet:SpreadsheetHarness)" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_right_after_new_the_package_loads_by_its_bare_name_from_its_folder(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # the README's `raso harness new my_env` then `raso harness describe my_env`, before any install
    import sys

    from raso.harness.registry import HarnessNotFoundError, harness_class

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the fallback appends the folder; undone after the test
    assert run_cli("harness", "new", "desk_here") == 0
    cls = harness_class("desk_here")
    assert cls.__name__ == "DeskHereHarness" and cls.__module__.startswith("desk_here")
    with pytest.raises(HarnessNotFoundError, match=r"unknown harness 'toi'; did you mean 'toy'\?"):
        harness_class("toi")
    monkeypatch.chdir(tmp_path / "desk_here")  # elsewhere the bare name is unknown again
    with pytest.raises(HarnessNotFoundError, match="unknown harness 'elsewhere'"):
        harness_class("elsewhere")
