"""Containment tests for raso.harness.sandbox: each hostile program is stopped with a clear error and leaves no trace."""

from __future__ import annotations

import logging
import os
import tempfile
import uuid
from pathlib import Path

import openpyxl
import psutil
import pytest

import raso.harness.sandbox as sandbox_module
from raso.harness.sandbox import (
    INSTALL_HINT,
    IsolationRequiredError,
    IsolationSupport,
    Sandbox,
    SandboxLimits,
    isolation_level,
    isolation_support,
)

LIMITS = SandboxLimits(cpu_seconds=2, wall_seconds=15, memory_bytes=512 * 1024 * 1024,
                       file_size_bytes=2 * 1024 * 1024, output_chars=1000)


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox(LIMITS)


@pytest.fixture
def workbook(tmp_path: Path) -> Path:
    path = tmp_path / "in.xlsx"
    wb = openpyxl.Workbook()
    wb.active["A1"] = 21
    wb.save(path)
    return path


def run(sandbox: Sandbox, code: str, workbook: Path, tmp_path: Path):
    return sandbox.run(code, {"input.xlsx": workbook}, ["input.xlsx", "output.xlsx"], "output.xlsx",
                       tmp_path / "out" / "output.xlsx")


def test_a_correct_program_produces_the_output_workbook(sandbox, workbook, tmp_path):
    code = ("import sys, openpyxl\nwb = openpyxl.load_workbook(sys.argv[1])\n"
            "wb.active['B1'] = wb.active['A1'].value * 2\nwb.save(sys.argv[2])\nprint('saved')\n")
    res = run(sandbox, code, workbook, tmp_path)
    assert res.ok, res.stderr
    assert res.stdout.strip() == "saved"
    assert res.output_file == tmp_path / "out" / "output.xlsx"
    assert openpyxl.load_workbook(res.output_file).active["B1"].value == 42
    assert res.error_summary() is None


def test_infinite_loop_hits_the_cpu_limit(sandbox, workbook, tmp_path):
    res = run(sandbox, "while True:\n    pass\n", workbook, tmp_path)
    assert not res.ok
    assert res.limit_hit == "cpu_time"  # never None, whichever layer ran it
    assert "CPU time limit exceeded" in res.error_summary()
    assert res.output_file is None


def test_sleeping_program_is_killed_at_the_wall_clock_limit(workbook, tmp_path):
    box = Sandbox(LIMITS.model_copy(update={"wall_seconds": 2.0}))
    res = run(box, "import time\ntime.sleep(60)\n", workbook, tmp_path)
    assert res.timed_out and res.limit_hit == "wall_time"
    assert res.wall_time_s < 15
    assert "wall-clock" in res.error_summary()


def test_memory_bomb_is_stopped(workbook, tmp_path):
    # CPU time to spare: touching 512 MB can cost seconds of (kernel) CPU on a loaded box with fragmented memory,
    # and this case is about which limit a memory bomb meets, not how fast (CI saw 'cpu_time' at 2 s)
    box = Sandbox(LIMITS.model_copy(update={"cpu_seconds": 30, "wall_seconds": 60}))
    res = run(box, "blocks = []\nwhile True:\n    blocks.append(bytearray(64 * 1024 * 1024))\n", workbook, tmp_path)
    assert res.limit_hit == "memory"
    assert "memory limit" in res.error_summary()


def test_fork_bomb_is_refused_and_leaves_no_processes(sandbox, workbook, tmp_path):
    marker = uuid.uuid4().hex
    code = f"# {marker}\nimport os\nwhile True:\n    os.fork()\n"
    res = run(sandbox, code, workbook, tmp_path)
    assert res.exit_code not in (0, None)
    assert "starting or signalling processes is not allowed" in res.error_summary()
    leftovers = [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]
    assert leftovers == []


def test_subprocess_is_refused(sandbox, workbook, tmp_path):
    res = run(sandbox, "import subprocess\nsubprocess.run(['id'])\n", workbook, tmp_path)
    assert res.exit_code == 1
    assert "not allowed" in res.error_summary()


def test_writing_outside_the_working_directory_is_refused(sandbox, workbook, tmp_path):
    target = tmp_path / f"escape-{uuid.uuid4().hex}.txt"
    res = run(sandbox, f"open({str(target)!r}, 'w').write('escaped')\n", workbook, tmp_path)
    assert "writing" in res.error_summary() and "not allowed" in res.error_summary()
    assert not target.exists()


def test_reading_a_file_outside_the_working_directory_is_refused(workbook, tmp_path):
    secret = tmp_path / "secret" / "answer.xlsx"
    secret.parent.mkdir()
    secret.write_text("the answer")
    box = Sandbox(LIMITS, deny_read=[secret.parent])
    res = run(box, f"print(open({str(secret)!r}).read())\n", workbook, tmp_path)
    assert "reading" in res.error_summary() and "not allowed" in res.error_summary()
    assert "the answer" not in res.stdout
    res = run(box, "print(open('/etc/hostname').read())\n", workbook, tmp_path)
    assert "not allowed" in res.error_summary()


def test_network_connection_is_refused(sandbox, workbook, tmp_path):
    code = "import socket\ns = socket.socket()\ns.settimeout(2)\ns.connect(('127.0.0.1', 80))\n"
    res = run(sandbox, code, workbook, tmp_path)
    assert res.exit_code == 1
    assert "network access is not allowed" in res.error_summary()


def test_huge_output_file_hits_the_file_size_limit(sandbox, workbook, tmp_path):
    code = "with open('big.bin', 'wb') as f:\n    while True:\n        f.write(b'x' * 1024 * 1024)\n"
    res = run(sandbox, code, workbook, tmp_path)
    assert res.limit_hit == "file_size"
    assert "file size limit" in res.error_summary()


def test_huge_output_workbook_is_not_read_back(sandbox, workbook, tmp_path):
    code = "import sys\nwith open(sys.argv[2], 'wb') as f:\n    for _ in range(100):\n        f.write(b'x' * 1024 * 1024)\n"
    res = run(sandbox, code, workbook, tmp_path)
    assert res.output_file is None
    assert res.limit_hit == "file_size"


def test_printing_forever_is_cut_and_truncated(sandbox, workbook, tmp_path):
    res = run(sandbox, "while True:\n    print('y' * 1000)\n", workbook, tmp_path)
    assert not res.ok
    assert len(res.stdout) < 2 * LIMITS.output_chars


def test_deleting_the_input_only_deletes_the_copy(sandbox, workbook, tmp_path):
    res = run(sandbox, "import os, sys\nos.remove(sys.argv[1])\n", workbook, tmp_path)
    assert res.exit_code == 0
    assert workbook.exists() and openpyxl.load_workbook(workbook).active["A1"].value == 21
    assert res.output_file is None
    assert "did not create the output file" in res.output_error


def test_output_symlink_to_a_host_file_is_not_read_back(sandbox, workbook, tmp_path):
    code = "import os, sys\nos.symlink('/etc/passwd', sys.argv[2])\n"
    res = run(sandbox, code, workbook, tmp_path)
    assert res.output_file is None
    assert not (tmp_path / "out" / "output.xlsx").exists()


def test_ctypes_is_refused(sandbox, workbook, tmp_path):
    res = run(sandbox, "import ctypes\nctypes.CDLL(None).system(b'id')\n", workbook, tmp_path)
    assert res.exit_code == 1
    assert "not allowed" in res.error_summary()


def test_environment_is_minimal(sandbox, workbook, tmp_path, monkeypatch):
    monkeypatch.setenv("RASO_TEST_SECRET", "hunter2")
    res = run(sandbox, "import os\nprint(sorted(os.environ))\n", workbook, tmp_path)
    assert res.ok
    assert "RASO_TEST_SECRET" not in res.stdout
    assert "HOME" in res.stdout


def test_working_directory_is_removed_afterwards(sandbox, workbook, tmp_path):
    res = run(sandbox, "import os\nprint(os.getcwd())\n", workbook, tmp_path)
    assert res.ok
    assert not Path(res.stdout.strip()).exists()


def test_links_out_of_the_working_directory_are_refused(sandbox, workbook, tmp_path):
    res = run(sandbox, "import os\nos.symlink('/etc', 'etc')\nprint(open('etc/hostname').read())\n", workbook, tmp_path)
    assert "os.symlink is not allowed" in res.error_summary()


def test_rebinding_os_functions_does_not_disable_the_checks(sandbox, workbook, tmp_path):
    code = ("import os, os.path\nos.path.realpath = lambda p, **k: os.getcwd() + '/x'\n"
            "os.path.normpath = lambda p: os.getcwd() + '/x'\n"
            "print(open(os.getcwd() + '/../../../../etc/hostname').read())\n")
    res = run(sandbox, code, workbook, tmp_path)
    assert "reading /etc/hostname is not allowed" in res.error_summary()


def test_gc_introspection_is_refused(sandbox, workbook, tmp_path):
    res = run(sandbox, "import gc\nprint(len(gc.get_objects()))\n", workbook, tmp_path)
    assert "gc.get_objects is not allowed" in res.error_summary()


def test_warnings_and_tracebacks_still_work_inside(sandbox, workbook, tmp_path):
    code = ("import sys, traceback, warnings\nwarnings.warn('careful')\n"
            "try:\n    1 / 0\nexcept ZeroDivisionError:\n    traceback.print_exc()\nprint('fine')\n")
    res = run(sandbox, code, workbook, tmp_path)
    assert res.ok, res.stderr
    assert res.stdout.strip() == "fine"
    assert "UserWarning: careful" in res.stderr and "ZeroDivisionError" in res.stderr


def test_pandas_is_importable_and_reads_only_inside_the_working_directory(sandbox, workbook, tmp_path):
    code = ("import sys, pandas as pd\n"
            "frame = pd.read_excel(sys.argv[1], header=None)\n"
            "print('value', int(frame.iloc[0, 0]))\n"
            "frame.to_excel(sys.argv[2], index=False, header=False)\n"
            "try:\n    pd.read_csv('/etc/passwd')\nexcept PermissionError as exc:\n    print('refused:', exc)\n")
    box = Sandbox(LIMITS.model_copy(update={"cpu_seconds": 20, "wall_seconds": 60}))  # importing pandas takes ~1 s
    res = run(box, code, workbook, tmp_path)
    assert res.ok, res.stderr
    assert "value 21" in res.stdout
    assert "refused: sandbox: reading /etc/passwd is not allowed" in res.stdout
    assert openpyxl.load_workbook(res.output_file).active["A1"].value == 21


@pytest.mark.parametrize("code, refusal", [
    ("import subprocess\nsubprocess.run(['id'])\n", "starting or signalling processes is not allowed"),
    ("import subprocess\nsubprocess._fork_exec(['id'])\n", "_posixsubprocess.fork_exec is not allowed"),
    ("import sys\ndel sys.modules['_posixsubprocess']\nimport _posixsubprocess\n", "importing _posixsubprocess"),
    ("import sys\ndel sys.modules['ctypes']\nimport ctypes\n", "importing ctypes is not allowed"),
    ("import importlib, ctypes\nimportlib.reload(ctypes)\n", "importing _ctypes is not allowed"),
    ("import importlib, _posixsubprocess\nimportlib.reload(_posixsubprocess).fork_exec()\n",
     "_posixsubprocess.fork_exec is not allowed"),
    ("import importlib.machinery, importlib.util\n"
     "importlib.util.module_from_spec(importlib.machinery.PathFinder.find_spec('_ctypes'))\n",
     "importing _ctypes is not allowed"),
])
def test_modules_pandas_imports_are_importable_but_their_capabilities_stay_refused(sandbox, workbook, tmp_path,
                                                                                   code, refusal):
    res = run(sandbox, code, workbook, tmp_path)
    assert res.exit_code == 1
    assert refusal in res.error_summary()


def test_a_run_says_how_it_was_isolated(sandbox, workbook, tmp_path):
    res = run(sandbox, "print('hi')\n", workbook, tmp_path)
    assert res.isolation_level == isolation_level() == sandbox.isolation_level
    assert "audit-hook" in res.isolation
    assert ("bwrap" in res.isolation) == (res.isolation_level == "os")
    assert ("unisolated" in res.isolation) == (res.isolation_level == "unisolated")


def test_without_an_os_layer_the_probe_warns_once_and_says_what_to_install(monkeypatch, caplog):
    real_which = sandbox_module.shutil.which
    monkeypatch.setattr(sandbox_module.shutil, "which", lambda name: None if name == "bwrap" else real_which(name))
    isolation_support.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="raso.harness.sandbox"):
            first, second = isolation_support(), isolation_support()
    finally:
        isolation_support.cache_clear()
    assert first is second and first.level == "unisolated"
    assert first.notes == ["bubblewrap (bwrap) is not installed"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "NO OS ISOLATION" in warnings[0] and INSTALL_HINT in warnings[0] and "RASO_REQUIRE_ISOLATION=1" in warnings[0]


def test_required_isolation_is_a_start_error_where_there_is_none(monkeypatch):
    monkeypatch.setattr(sandbox_module, "isolation_support", lambda: IsolationSupport(notes=["bwrap missing"]))
    with pytest.raises(IsolationRequiredError, match="apt-get install bubblewrap") as required_by_caller:
        Sandbox(LIMITS, require_isolation=True)
    assert "RASO_REQUIRE_ISOLATION" not in str(required_by_caller.value)  # the variable is unset: no false blame
    monkeypatch.setenv("RASO_REQUIRE_ISOLATION", "1")
    with pytest.raises(IsolationRequiredError, match="RASO_REQUIRE_ISOLATION=1.*bwrap missing"):
        Sandbox(LIMITS)
    monkeypatch.setenv("RASO_REQUIRE_ISOLATION", "0")
    assert Sandbox(LIMITS).isolation_level == "unisolated"  # allowed, and marked


def test_root_that_cannot_drop_its_uid_is_warned_at_start(monkeypatch, caplog):
    # root whose interpreter uid 65534 cannot read (a venv from a Python under a 0700 /root): every setpriv launch
    # is refused, the capability-less root launch works
    monkeypatch.setattr(sandbox_module.os, "geteuid", lambda: 0)
    monkeypatch.setattr(sandbox_module.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(sandbox_module, "_probe", lambda support, python: "Permission denied" if support.launcher
                        else None)
    isolation_support.cache_clear()
    try:
        with caplog.at_level(logging.INFO, logger="raso.harness.sandbox"):
            support = isolation_support()
    finally:
        isolation_support.cache_clear()
    assert support.level == "os" and support.launcher == [] and support.root_not_dropped
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "instead of dropping to uid 65534" in warnings[0] and "RASO_REQUIRE_ISOLATION=1 refuses" in warnings[0]
    assert "/opt/raso-venv" in warnings[0]  # how to avoid it


def test_required_isolation_refuses_root_that_cannot_drop_its_uid(monkeypatch):
    weak = IsolationSupport(level="os", bwrap="/usr/bin/bwrap", root_not_dropped="the interpreter lies under /root")
    monkeypatch.setattr(sandbox_module, "isolation_support", lambda: weak)
    monkeypatch.setenv("RASO_REQUIRE_ISOLATION", "1")
    with pytest.raises(IsolationRequiredError, match="cannot drop to uid 65534 .the interpreter lies under /root"):
        Sandbox(LIMITS)
    monkeypatch.setenv("RASO_REQUIRE_ISOLATION", "0")
    assert Sandbox(LIMITS, require_isolation=True).isolation_level == "os"  # a harness needing bwrap still runs


def test_a_harness_refuses_to_start_unisolated_when_isolation_is_required(monkeypatch):
    from raso.api import load_harness
    from raso.errors import ConfigError

    monkeypatch.setattr(sandbox_module, "isolation_support", lambda: IsolationSupport(notes=["bwrap missing"]))
    monkeypatch.setenv("RASO_REQUIRE_ISOLATION", "1")
    with pytest.raises(ConfigError, match="OS-level isolation is required"):
        load_harness("harnesses.officeqa.harness:OfficeQAHarness")


@pytest.fixture
def command_dir():
    # The run's uid (nobody, when the tests run as root) must reach its working directory; pytest's tmp is 0700.
    folder = Path(tempfile.mkdtemp(prefix="raso-command-"))
    os.chmod(folder, 0o755)
    yield folder
    sandbox_module.shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.sandbox_os
@pytest.mark.parametrize("argv, limit", [
    (["/bin/sh", "-c", "while :; do :; done"], "cpu_time"),
    (["/bin/sh", "-c", "trap '' XCPU; while :; do :; done"], "cpu_time"),  # ignores SIGXCPU: SIGKILL at the hard limit
    (["/bin/sh", "-c", "head -c 4000000 /dev/zero > big"], "file_size"),
    (["/bin/sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 3 & done; wait"], "processes"),
    (["/bin/sleep", "60"], "wall_time"),
])
def test_a_command_reports_which_limit_it_hit(command_dir, argv, limit):
    wall = 3 if limit == "wall_time" else 60  # CPU-bound runs end at their CPU limit, however busy the machine
    box = Sandbox(SandboxLimits(cpu_seconds=1, wall_seconds=wall, max_processes=4, file_size_bytes=1024 * 1024))
    assert box.isolation_level == "os", f"bubblewrap is needed: {box.support.notes}"
    res = box.run_command(argv, command_dir)
    # the process limit holds for root that cannot drop to nobody too (the kernel exempts uid 0 from the process
    # rlimit): it is the run's tree that is bounded (tests/test_sandbox_tree_limits.py)
    assert res.limit_hit == limit, (res.exit_code, res.stderr)
    assert res.error_summary().startswith("sandbox:") and "limit exceeded" in res.error_summary()


@pytest.mark.sandbox_os
def test_a_command_reports_the_memory_limit(command_dir):
    box = Sandbox(SandboxLimits(memory_bytes=256 * 1024 * 1024))
    assert box.isolation_level == "os", f"bubblewrap is needed: {box.support.notes}"
    res = box.run_command([box.python, "-I", "-c", "blob = bytearray(1 << 30)"], command_dir, ro_binds=box.python_roots)
    assert res.limit_hit == "memory", (res.exit_code, res.stderr)
    assert "memory limit exceeded" in res.error_summary()


@pytest.mark.sandbox_os
def test_a_command_sees_only_the_system_its_work_dir_and_what_is_bound(command_dir, tmp_path):
    shared = Path(tempfile.mkdtemp(prefix="raso-shared-"))
    os.chmod(shared, 0o755)
    (shared / "notes.txt").write_text("readable\n")
    os.chmod(shared / "notes.txt", 0o644)
    try:
        box = Sandbox(LIMITS)
        assert box.isolation_level == "os", f"bubblewrap is needed: {box.support.notes}"
        script = (f"cat {shared}/notes.txt; echo made > out.txt; echo no > {shared}/x 2>/dev/null || echo ro; "
                  f"ls /; ls {tmp_path} 2>&1 | head -1; echo $HOME")
        res = box.run_command(["/bin/sh", "-c", script], command_dir, ro_binds=[shared], env={"EXTRA": "1"})
        assert res.ok, res.stderr
        lines = res.stdout.splitlines()
        assert lines[:2] == ["readable", "ro"]
        assert "work" not in lines and "root" not in lines and "home" not in lines  # host folders absent
        assert "No such file or directory" in res.stdout  # pytest's tmp does not exist inside
        assert lines[-1] == str(command_dir.resolve())
        assert (command_dir / "out.txt").read_text() == "made\n"
        assert (command_dir / "out.txt").stat().st_uid == os.getuid()  # handed back to its owner
        assert not (shared / "x").exists()
    finally:
        sandbox_module.shutil.rmtree(shared, ignore_errors=True)


@pytest.mark.sandbox_os
def test_a_command_reaches_only_the_loopback_ports_it_was_given(command_dir):
    import socket
    import threading

    def echo_server() -> tuple[socket.socket, list[bytes]]:
        server, seen = socket.socket(), []
        server.bind(("127.0.0.1", 0))
        server.listen(4)

        def serve():
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                data = conn.recv(1024)
                seen.append(data)
                conn.sendall(b"echo:" + data)
                conn.close()
        threading.Thread(target=serve, daemon=True).start()
        return server, seen

    (allowed, allowed_seen), (other, other_seen) = echo_server(), echo_server()
    port, other_port = allowed.getsockname()[1], other.getsockname()[1]
    code = ("import socket\n"
            f"for port in ({port}, {other_port}):\n"
            "    try:\n"
            "        s = socket.create_connection(('127.0.0.1', port), timeout=5)\n"
            "        s.sendall(b'hello'); print(port, s.recv(100).decode())\n"
            "    except OSError as e:\n"
            "        print(port, 'refused', e.errno)\n")
    try:
        box = Sandbox(LIMITS)
        assert box.isolation_level == "os", f"bubblewrap is needed: {box.support.notes}"
        cmd = [box.python, "-I", "-c", code]
        res = box.run_command(cmd, command_dir, ro_binds=box.python_roots, loopback_ports=[port])
        assert res.ok, res.stderr
        assert res.stdout.splitlines() == [f"{port} echo:hello", f"{other_port} refused 111"]
        assert "loopback-ports-only" in res.isolation
        assert allowed_seen == [b"hello"] and other_seen == []
        res = box.run_command(cmd, command_dir, ro_binds=box.python_roots)  # no ports: no network at all
        assert res.stdout.split()[1:3] == ["refused", "111"] and allowed_seen == [b"hello"]
    finally:
        allowed.close()
        other.close()


@pytest.mark.parametrize("code, refusal", [
    ("import os, sys\nos.chdir(sys.prefix)\nopen('planted.pth', 'w')\n", "planted.pth is not allowed"),
    ("class P(str):\n    def startswith(self, *a):\n        return True\n    def split(self, *a):\n        return ['']\n"
     "open(P('/etc/escape.txt'), 'w')\n", "writing /etc/escape.txt is not allowed"),
    ("import sys\nclass M(str):\n    def __str__(self):\n        return 'json'\n"
     "sys.modules.pop('_posixsubprocess')\n__import__(M('_posixsubprocess'))\n",
     "importing _posixsubprocess is not allowed"),
    ("import sys\nsys.settrace(lambda *a: None)\n", "sys.settrace is not allowed"),
    ("try:\n    open('/etc/x', 'w')\nexcept PermissionError as e:\n    tb = e.__traceback__\n"
     "while tb.tb_next:\n    tb = tb.tb_next\n"
     "print(sorted(type(v).__name__ for v in tb.tb_frame.f_locals.values() if hasattr(v, '__closure__')))\n"
     "open('/etc/y', 'w')\n", "writing /etc/y is not allowed"),
])
def test_the_guard_resists_tricks_from_inside_the_interpreter(sandbox, workbook, tmp_path, code, refusal):
    res = run(sandbox, code, workbook, tmp_path)
    assert res.exit_code == 1
    assert refusal in res.error_summary()
    assert "function" not in res.stdout  # the guard's frame holds no Python function whose cells could be rewritten
