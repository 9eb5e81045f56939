"""No harness's answers, checks or expected files are visible in a run, in any install kind (issue 34, point 1).

A regular (wheel) install puts the project's packages in site-packages, which runs see; an editable install leaves
them in the source tree, which a caller may bind (a command backend's script lies there). The project's package
folders are covered in every run wherever they lie. The wheel test builds the project's wheel, installs it into a
fresh virtual environment and runs the agent-side probe from that install.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

import harnesses
import raso
from raso.harness.sandbox import (
    PROJECT_PACKAGES,
    IsolationSupport,
    Sandbox,
    SandboxLimits,
    _bwrap_argv,
    _minimal_env,
    project_data_paths,
)

REPO = Path(__file__).resolve().parents[1]
# what an agent would want: a check script, an expected output, a check program, a spreadsheet answer
ANSWER_FILES = ("harnesses/tasks/example/sort-numbers/expected.txt", "harnesses/tasks/example/sort-numbers/check.sh",
                "harnesses/tasks/example/adults-json/check.py",
                "harnesses/spreadsheet/data/spreadsheet/57072/1_57072_answer.xlsx")


def test_the_mask_list_holds_the_packages_of_the_source_tree():
    paths = project_data_paths()
    for package in (raso, harnesses):
        assert os.path.realpath(Path(package.__file__).parent) in paths
    assert all(os.path.isabs(p) for p in paths)
    assert set(PROJECT_PACKAGES) >= {"raso", "harnesses", "experiments", "corpus_tools"}


def test_every_sandbox_covers_the_project_packages_even_when_a_caller_binds_the_tree(tmp_path):
    box = Sandbox(SandboxLimits())
    package_dir = os.path.realpath(Path(harnesses.__file__).parent)
    assert package_dir in box.deny_read
    support = IsolationSupport(level="os", bwrap="/usr/bin/bwrap")
    cmd = _bwrap_argv(support, work=str(tmp_path), argv=["true"], ro_binds=[str(REPO.resolve())],
                      hide=box.deny_read, env=_minimal_env(str(tmp_path)), limits=box.limits)
    covered = [cmd[i + 1] for i, part in enumerate(cmd[:-1]) if part == "--tmpfs"]
    assert package_dir in covered
    # the cover comes after the bind of the tree, so it lands on top
    assert cmd.index(str(REPO.resolve())) < cmd.index(package_dir)


PROBE = textwrap.dedent("""
    import json, os, sys, tempfile
    from pathlib import Path
    import harnesses, raso.harness.sandbox as sb
    site = Path(harnesses.__file__).resolve().parents[1]
    files = [str(site / rel) for rel in json.loads(sys.argv[1])]
    work = Path(tempfile.mkdtemp(prefix="raso-probe-")); os.chmod(work, 0o755)
    box = sb.Sandbox(sb.SandboxLimits(wall_seconds=60))
    look = "for f in " + " ".join(files) + "; do head -c 40 $f >/dev/null 2>&1 && echo READ $f; done; " \\
           "find " + str(site / "harnesses") + " -type f 2>/dev/null | head -3"
    # the widest a caller binds: the interpreter's whole prefix (site-packages too), and a loopback port
    shell = box.run_command(["/bin/sh", "-c", look], work, ro_binds=box.python_roots, loopback_ports=[4242])
    code = "import sys\\nfor f in sys.argv[1:]:\\n    try:\\n        open(f, 'rb').read(1); print('READ', f)\\n" \\
           "    except OSError:\\n        pass\\n"
    python = box.run(code, args=files)
    print(json.dumps({"installed_at": str(site), "level": box.isolation_level, "shell": shell.stdout,
                      "shell_err": shell.stderr, "python": python.stdout, "python_err": python.stderr,
                      "exists": [os.path.exists(f) for f in files]}))
""")


@pytest.mark.sandbox_os
def test_a_wheel_install_shows_no_answers_in_the_box():
    root = Path(tempfile.mkdtemp(prefix="raso-wheel-"))
    try:
        os.chmod(root, 0o755)
        # built from a copy of the project's sources: the build writes beside them, and the tree may be read-only
        source = root / "source"
        source.mkdir()
        for name in ("pyproject.toml", "README.md"):
            shutil.copy(REPO / name, source / name)
        for package in PROJECT_PACKAGES:
            shutil.copytree(REPO / package, source / package,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", ".*cache"))
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
        built = subprocess.run([*pip, "wheel", "--no-deps", "-w", str(root / "dist"), str(source)], timeout=600,
                               capture_output=True, text=True)
        assert built.returncode == 0, built.stderr[-3000:]
        wheel = next((root / "dist").glob("raso-*.whl"))
        venv = root / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        python = venv / "bin" / "python"
        site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   check=True, capture_output=True, text=True).stdout.strip())
        subprocess.run([*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)], check=True,
                       timeout=300, capture_output=True)
        # raso's dependencies come from this test's environment, after the wheel's own packages on sys.path
        deps = [p for p in sys.path if p.endswith("site-packages") and Path(p).resolve() != site.resolve()]
        (site / "zz_test_dependencies.pth").write_text("\n".join(deps) + "\n")
        out = subprocess.run([str(python), "-I", "-c", PROBE, json.dumps(ANSWER_FILES)], capture_output=True,
                             text=True, timeout=300, cwd=root, env={**os.environ, "PYTHONPATH": ""})
        assert out.returncode == 0, out.stderr[-3000:]
        seen = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert seen["installed_at"].startswith(str(root)) and seen["level"] == "os"
    assert all(seen["exists"]), "the wheel ships the example answers, so there is something to hide"
    assert "READ" not in seen["shell"], seen
    assert seen["shell"].strip() == "", seen  # the package folder is there, and empty
    assert "READ" not in seen["python"], seen
