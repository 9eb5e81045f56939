"""Where agent programs are installed and how: each program's pinned package (`AgentProgram.package`) goes into its
own folder under the raso cache (`$RASO_CACHE_DIR/agents/<name>`, else `~/.cache/raso/agents/<name>`), never
into raso's own environment: a PyPI package into a virtual environment there, an npm package into an npm prefix
there. The folder must be readable by the sandboxed program (it is bound read-only into each rollout)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel


class PackageSpec(BaseModel):
    manager: str  # "pypi" | "npm"
    requirement: str  # what the manager installs, pinned: "mini-swe-agent==2.4.6", "@openai/codex@0.1.2"


def parse_package(package: str) -> PackageSpec:
    """`pypi:NAME==VERSION` or `npm:NAME@VERSION` as a spec; ValueError for anything else."""
    manager, _, requirement = package.partition(":")
    if manager not in ("pypi", "npm") or not requirement:
        raise ValueError(f"agent package {package!r} is not 'pypi:NAME==VERSION' or 'npm:NAME@VERSION'")
    return PackageSpec(manager=manager, requirement=requirement)


def agents_dir() -> Path:
    """The folder holding every installed agent program."""
    if os.environ.get("RASO_CACHE_DIR"):
        return Path(os.environ["RASO_CACHE_DIR"]).expanduser() / "agents"
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "raso" / "agents"


def install_dir(name: str) -> Path:
    """The install folder of program `name`."""
    return agents_dir() / name


def venv_python(name: str) -> Path:
    return install_dir(name) / "bin" / "python"


def base_python_prefix(venv: Path) -> Path | None:
    """The interpreter installation a virtual environment's python links to (the sandbox must show it too)."""
    cfg = venv / "pyvenv.cfg"
    try:
        for line in cfg.read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home":
                return Path(value.strip()).resolve().parent
    except OSError:
        return None
    return None


def install_command(name: str, package: str) -> list[list[str]]:
    """The commands that install `package` for program `name` (run in order)."""
    spec = parse_package(package)
    target = install_dir(name)
    if spec.manager == "pypi":
        python = venv_python(name)
        return [[sys.executable, "-m", "venv", str(target)],
                [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", spec.requirement]]
    return [["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", str(target), spec.requirement]]


def install(name: str, package: str) -> Path:
    """Install `package` for program `name`; returns the install folder. Raises RuntimeError with the failing
    command's last output lines."""
    target = install_dir(name)
    target.parent.mkdir(parents=True, exist_ok=True)
    for command in install_command(name, package):
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
            raise RuntimeError(f"installing {package} failed: {' '.join(command)} exited {done.returncode}\n{tail}")
    _open_to_sandbox(target)
    return target


def _open_to_sandbox(target: Path) -> None:
    """Make the install folder readable and searchable by others (a sandboxed run may be another uid)."""
    for root, dirs, files in os.walk(target):
        for entry in dirs:
            path = Path(root) / entry
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o555)
        for entry in files:
            path = Path(root) / entry
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o444)
    target.chmod(target.stat().st_mode | 0o555)


__all__ = ["PackageSpec", "agents_dir", "base_python_prefix", "install", "install_command", "install_dir",
           "parse_package", "venv_python"]
