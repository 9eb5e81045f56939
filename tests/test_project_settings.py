"""The checks the project relies on cover all of it: mypy type-checks every top-level Python package of the
repository (harnesses and experiments included), and pytest refuses a marker that is not declared (a mistyped
`@pytest.mark.sandbox_os` would otherwise run, or be deselected, silently)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _top_level_packages() -> set[str]:
    return {path.parent.name for path in ROOT.glob("*/__init__.py")}


def test_mypy_checks_every_top_level_package() -> None:
    mypy = SETTINGS["tool"]["mypy"]
    assert _top_level_packages() == {"raso", "corpus_tools", "harnesses", "experiments"}
    assert set(mypy["packages"]) == _top_level_packages()
    silenced = {module for override in mypy.get("overrides", []) if override.get("follow_imports") == "silent"
                for module in override["module"]}
    assert not silenced, f"followed but not reported: {silenced}"


def test_pytest_refuses_undeclared_markers() -> None:
    pytest_settings = SETTINGS["tool"]["pytest"]["ini_options"]
    assert "--strict-markers" in pytest_settings["addopts"]
    declared = {line.split(":", 1)[0] for line in pytest_settings["markers"]}
    assert {"shared", "embedded", "sandbox_os", "agents"} <= declared
