"""Every `raso` command line in the README's shell blocks parses as written: its command and sub-command exist,
each flag is one the command takes, each choice is valid, and each harness it names loads by that name (the
README is the contract; a renamed flag must not leave it stale)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from raso.cli.main import build_parser, chosen_parser
from raso.harness.registry import available_harnesses, split_name_argument

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"```(?:bash|sh|shell)\n(.*?)```", re.DOTALL)
PLACEHOLDER = re.compile(r"^[A-Z][A-Z_/.]*$")  # HARNESS, PATH/TO/SKILLS: the reader's own value


def readme_commands() -> list[str]:
    commands = []
    for block in _BLOCK.findall(README.read_text(encoding="utf-8")):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line.strip())
            for part in line.split("&&"):
                match = re.match(r"^(?:[A-Z_]+=\S+\s+)*raso\s+(.*)$", part.strip())
                if match and "..." not in match.group(1):
                    commands.append(match.group(1))
    return commands


COMMANDS = readme_commands()


def test_the_readme_has_the_commands_of_its_three_jobs():
    verbs = {c.split()[0] for c in COMMANDS}
    assert {"optimize", "init", "eval"} <= verbs and len(COMMANDS) >= 20


@pytest.mark.parametrize("command", COMMANDS)
def test_a_readme_command_parses_as_written(command, capsys):
    parser = build_parser()
    argv = shlex.split(command)
    try:
        args, extras = parser.parse_known_args(argv)
    except SystemExit:
        pytest.fail(f"`raso {command}` does not parse: {capsys.readouterr().err.strip()}")
    assert not extras, f"`raso {command}`: {chosen_parser(parser, args).prog} takes no {extras}"
    harness = getattr(args, "harness", None)
    if isinstance(harness, str) and not PLACEHOLDER.match(harness):
        name, _argument = split_name_argument(harness)
        assert name in available_harnesses(), f"`raso {command}`: no harness {name!r}"


PLANNED = [c for c in COMMANDS if c.startswith("optimize ") and not any(PLACEHOLDER.match(w) for w in shlex.split(c))
           and "./" not in c]


def test_some_optimize_lines_are_planned():
    assert len(PLANNED) >= 5


@pytest.mark.parametrize("command", PLANNED)
def test_a_readme_optimize_line_plans_as_written(command, tmp_path, monkeypatch, capsys):
    # --plan resolves and checks the whole configuration (harness, models, executor, agent) and spends nothing
    from raso.cli.main import main as raso_main

    monkeypatch.chdir(tmp_path)
    code = raso_main([*shlex.split(command), "--plan"])
    captured = capsys.readouterr()
    assert code == 0, f"`raso {command} --plan` exited {code}: {captured.err.strip()[-400:]}"
    assert "estimated total" in captured.out and not list(tmp_path.iterdir())  # planning writes nothing
