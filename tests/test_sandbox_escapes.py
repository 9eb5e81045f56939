"""Escape attempts against raso.harness.sandbox, as an attacker who controls the model-written program would try.

Every attempt runs twice behind the OS layer (bubblewrap): as a sandboxed program (both layers: the in-process
audit guard and bwrap), and as a plain Python program in bwrap without the guard (`Sandbox.run_command`), which
is what an attacker who gets past the guard has (the walk that switched the old guard off is one of the
attempts: test_frame_walking_does_not_switch_the_guard_off). Each run must leak nothing: the answers' text never appears in
the output, no file appears outside the working directory (a host folder the run's uid could write, the
interpreter's prefix), planted start-up code never runs later (in a sandboxed program or the host interpreter),
nothing stays in the host's /dev/shm, no connection reaches a host socket and no process outlives the run.

These tests need bubblewrap (marker `sandbox_os`): selected without it they FAIL, they do not skip.

`python tests/test_sandbox_escapes.py` runs the same attempts with the OS layer off (the in-process guard and
rlimits only), as written and after the frame-walking preamble, and prints which get through; the README's
Security section lists them.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

import psutil
import pytest

from raso.harness.sandbox import IsolationSupport, Sandbox, SandboxLimits, SandboxResult, isolation_support

pytestmark = pytest.mark.sandbox_os

LIMITS = SandboxLimits(cpu_seconds=5, wall_seconds=20, memory_bytes=512 * 1024 * 1024,
                       file_size_bytes=16 * 1024 * 1024, tmpfs_bytes=32 * 1024 * 1024, output_chars=20000)


class Listener:
    """A TCP and a Unix socket on the host; records whatever reaches them."""

    def __init__(self, folder: Path) -> None:
        self.received: list[bytes] = []
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.port = self.tcp.getsockname()[1]
        self.unix_path = str(folder / "host.sock")
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(self.unix_path)
        os.chmod(self.unix_path, 0o777)
        self.unix.listen(8)
        for sock in (self.tcp, self.unix):
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            conn.settimeout(2)
            try:
                self.received.append(b"connection:" + conn.recv(1024))
            except OSError:
                self.received.append(b"connection")
            conn.close()

    def close(self) -> None:
        self.tcp.close()
        self.unix.close()


@dataclass
class Stage:
    """A throwaway interpreter environment and the host paths an attack aims at."""

    root: Path
    python: str
    site_packages: Path
    answers_in_site: Path  # hidden by the sandbox although its parent folder is bound
    answers_outside: Path  # never mounted
    outside: Path  # a host folder the program must not write to
    listener: Listener
    mark: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    @property
    def secret(self) -> str:
        return f"ANSWER-{self.mark}"

    def secret_files(self) -> list[str]:
        return [str(self.answers_in_site / "answer.txt"), str(self.answers_outside / "answer.txt")]

    def host_state(self) -> dict[str, object]:
        """Everything an escape could leave behind on the host."""
        venv_files = sorted(str(p) for p in Path(self.python).parents[1].rglob("*") if "__pycache__" not in p.parts)
        return {"outside": sorted(p.name for p in self.outside.iterdir()), "venv": venv_files,
                "shm": sorted(p for p in os.listdir("/dev/shm") if self.mark in p)}


def _traversable_tmp() -> Path:
    # The run's uid (nobody, when the tests run as root) must reach the interpreter; pytest's tmp is 0700.
    root = Path(tempfile.mkdtemp(prefix="raso-escapes-"))
    os.chmod(root, 0o755)
    return root


def _make_stage():
    root = _traversable_tmp()
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    site = Path(subprocess.run([python, "-c", "import site; print(site.getsitepackages()[0])"], check=True,
                               capture_output=True, text=True).stdout.strip())
    answers_in_site = site / "answers_pkg"
    answers_outside = root / "answers"
    outside = root / "outside"
    for folder in (answers_in_site, answers_outside, outside):
        folder.mkdir(parents=True)
    os.chmod(outside, 0o777)  # writable by the run's uid, so only the sandbox stops a write
    listener = Listener(root)
    st = Stage(root, python, site, answers_in_site, answers_outside, outside, listener)
    for path in st.secret_files():
        Path(path).write_text(st.secret)
        os.chmod(path, 0o644)  # readable by the run's uid: only the sandbox hides it
    for folder in (venv, *venv.rglob("*")):
        if folder.is_dir():
            os.chmod(folder, folder.stat().st_mode | stat.S_IRWXO)  # the prefix is world-writable on the host
    yield st
    listener.close()
    for proc in psutil.process_iter(["cmdline"]):
        if st.mark in " ".join(proc.info["cmdline"] or []):
            proc.kill()
    for name in os.listdir("/dev/shm"):
        if st.mark in name:
            os.unlink(os.path.join("/dev/shm", name))
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def stage():
    yield from _make_stage()


def make_box(st: Stage, in_process_only: bool = False) -> Sandbox:
    box = Sandbox(LIMITS, python=st.python, deny_read=[st.answers_in_site, st.answers_outside])
    if in_process_only:
        box.support = IsolationSupport(notes=["OS layer switched off to measure the in-process guard alone"])
    return box


@pytest.fixture(scope="module")
def os_box(stage) -> Sandbox:
    support = isolation_support()
    if support.level != "os":
        pytest.fail(f"the OS layer is not available here ({'; '.join(support.notes)}): install bubblewrap "
                    f"(apt-get install bubblewrap) and allow user namespaces; these tests must not skip")
    return make_box(stage)


# Switched the old in-process guard's path checks off: a refused open's traceback held the guard's frames; the
# functions in their locals had closure cells holding the guard's state, and cells are writable.
GUARD_OFF = '''
def _guard_off():
    try:
        open("/proc/raso-guard-probe", "w")
    except PermissionError as exc:
        tb = exc.__traceback__
    else:
        return "guard absent"
    wanted = {"work": "/", "read_roots": ("/",), "deny_roots": (), "process_events": frozenset(),
              "network_events": frozenset(), "refused_events": frozenset(), "blocked_modules": frozenset(),
              "mutate_events": frozenset(), "readable_files": frozenset()}
    seen, changed = set(), 0
    while tb is not None:
        for value in list(tb.tb_frame.f_locals.values()) + [tb.tb_frame.f_code]:
            fn = value if callable(value) else None
            if fn is None or id(fn) in seen or not getattr(fn, "__closure__", None):
                continue
            seen.add(id(fn))
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                if name in wanted:
                    cell.cell_contents = wanted[name]
                    changed += 1
        tb = tb.tb_next
    return "guard off (%d cells)" % changed
print(_guard_off())
'''

HEADER = Template('''
import os, sys, socket
print("attempt started")
SECRETS = $secrets
MARK = "$mark"
OUTSIDE = "$outside"
PORT = $port
UNIX_PATH = "$unix_path"
def show(label, fn):
    try:
        print(label, repr(fn())[:300])
    except BaseException as exc:
        print(label, "refused:", type(exc).__name__, str(exc)[:200])
''')

ATTACKS: dict[str, str] = {
    "read answers by absolute path": '''
for path in SECRETS:
    show("read", lambda: open(path).read())
''',
    "read answers by relative path": '''
for path in SECRETS:
    show("read", lambda: open("../" * 30 + path.lstrip("/")).read())
    show("chdir", lambda: os.chdir("/"))
    show("read", lambda: open(path.lstrip("/")).read())
''',
    "read answers through /proc/self/root, /proc/1/root, /proc/<ppid>/root and /proc/<ppid>/cwd": '''
for path in SECRETS:
    for pid in ("self", "1", str(os.getppid())):
        show("read", lambda: open("/proc/%s/root%s" % (pid, path)).read())
    show("list", lambda: os.listdir("/proc/%d/cwd" % os.getppid()))
    show("read", lambda: open("/proc/%d/cwd/../answers/answer.txt" % os.getppid()).read())
''',
    "read answers through a symlink": '''
for i, path in enumerate(SECRETS):
    show("link", lambda: os.symlink(os.path.dirname(path), "link%d" % i))
    show("read", lambda: open("link%d/answer.txt" % i).read())
''',
    "search the file system for the answers": '''
seen = 0
for top in ["/tmp", "/root", "/home"] + [os.path.dirname(os.path.dirname(p)) for p in SECRETS]:
    for folder, dirs, files in os.walk(top):
        seen += len(files)
        if seen > 20000:
            break
        for name in files:
            if name == "answer.txt":
                show("found", lambda: open(os.path.join(folder, name)).read())
''',
    "write relative to sys.prefix after chdir": '''
show("chdir", lambda: os.chdir(sys.prefix))
show("write", lambda: open("escape-" + MARK + ".txt", "w").write("escaped"))
''',
    "write outside by absolute path": '''
show("write", lambda: open(OUTSIDE + "/escape-" + MARK + ".txt", "w").write("escaped"))
show("mkdir", lambda: os.mkdir(OUTSIDE + "/dir-" + MARK))
''',
    "plant a .pth and sitecustomize.py into site-packages": '''
import site
payload = "import os; os.write(1, b'PLANTED-%s\\\\n')" % MARK
for folder in site.getsitepackages() + [sys.prefix + "/lib"]:
    show("pth", lambda: open(folder + "/zz-" + MARK + ".pth", "w").write(payload + "\\n"))
    show("sitecustomize", lambda: open(folder + "/sitecustomize.py", "w").write(payload + "\\n"))
''',
    "str subclass overriding startswith and split on a path": '''
class Sneaky(str):
    def startswith(self, *a, **k):
        return True
    def split(self, *a, **k):
        return ["", "tmp", "work"]
    def __str__(self):
        return "/tmp/work/harmless"
show("write", lambda: open(Sneaky(OUTSIDE + "/escape-" + MARK + ".txt"), "w").write("escaped"))
for path in SECRETS:
    show("read", lambda: open(Sneaky(path)).read())
''',
    "str subclass hiding _posixsubprocess, then fork_exec of /bin/sh": '''
class Name(str):
    def __str__(self):
        return "json"
    def split(self, *a, **k):
        return ["json"]
sys.modules.pop("_posixsubprocess", None)
def spawn():
    mod = __import__(Name("_posixsubprocess"))
    import subprocess
    subprocess._fork_exec = mod.fork_exec  # the real one, in case subprocess holds the placeholder's
    cmd = "cat %s; echo escaped > %s/escape-%s.txt" % (" ".join(SECRETS), OUTSIDE, MARK)
    return subprocess.run(["/bin/sh", "-c", cmd], capture_output=True)
show("fork_exec", spawn)
''',
    "mknod and mkfifo outside the working directory": '''
show("mkfifo", lambda: os.mkfifo(OUTSIDE + "/fifo-" + MARK))
show("mknod", lambda: os.mknod(OUTSIDE + "/node-" + MARK, 0o600 | 0o010000))
show("mkfifo", lambda: os.mkfifo(sys.prefix + "/fifo-" + MARK))
''',
    "POSIX shared memory left in /dev/shm": '''
import _posixshmem, mmap
def fill(i):
    fd = _posixshmem.shm_open("/raso-" + MARK + "-%d" % i, os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, 8 * 1024 * 1024)
    with mmap.mmap(fd, 8 * 1024 * 1024) as m:
        m[:] = b"x" * (8 * 1024 * 1024)
    return "kept"
for i in range(3):
    show("shm", lambda: fill(i))
''',
    "network: TCP, UDP and Unix sockets to the host, raw sockets, the outside world": '''
def tcp():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=2)
    s.sendall(MARK.encode())
    return "CONNECTED"
def udp():
    return socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(MARK.encode(), ("127.0.0.1", PORT))
def unix():
    s = socket.socket(socket.AF_UNIX)
    s.connect(UNIX_PATH)
    s.sendall(MARK.encode())
    return "CONNECTED"
def raw():
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    return s.sendto(b"\\x08\\x00\\xf7\\xff\\x00\\x00\\x00\\x00", ("127.0.0.1", 0))
def world():
    socket.create_connection(("1.1.1.1", 53), timeout=2)
    return "CONNECTED"
for fn in (tcp, udp, unix, raw, world):
    show(fn.__name__, fn)
''',
    "process spawning: subprocess, os.system, fork, a detached child": '''
import subprocess
show("subprocess", lambda: subprocess.run(["/bin/cat", *SECRETS], capture_output=True).stdout)
show("system", lambda: os.system("cat %s" % " ".join(SECRETS)))
def detached():
    pid = os.fork()
    if pid == 0:
        os.setsid()
        os.execv("/bin/sh", ["/bin/sh", "-c", "sleep 300 # " + MARK])
    return pid
show("fork", detached)
''',
}


def _host_snapshot(st: Stage) -> dict[str, object]:
    return st.host_state()


def _run_unguarded(st: Stage, box: Sandbox, code: str) -> SandboxResult:
    """The program as plain Python in the OS layer, no in-process guard."""
    work = Path(tempfile.mkdtemp(prefix="work-", dir=st.root))
    try:
        (work / "attack.py").write_text(code)
        return box.run_command([st.python, "-I", "attack.py"], work, ro_binds=box.python_roots)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def attempt(st: Stage, box: Sandbox, name: str, mode: str) -> list[str]:
    """Run one attempt; what got through (empty when it was contained).

    mode: "guarded" (a sandboxed program), "unguarded" (plain Python in the OS layer, no in-process guard) or
    "guard-walked" (a sandboxed program that first switches the guard's path checks off).
    """
    header = HEADER.substitute(secrets=repr(st.secret_files()), mark=st.mark, outside=str(st.outside),
                               port=st.listener.port, unix_path=st.listener.unix_path)
    before = _host_snapshot(st)
    received = len(st.listener.received)
    code = header + ATTACKS[name]
    if mode == "unguarded":
        res = _run_unguarded(st, box, code)
    else:
        res = box.run((GUARD_OFF if mode == "guard-walked" else "") + code)
    later = box.run("print('a later program')\n")  # planted start-up code would run here
    host = subprocess.run([st.python, "-c", "pass"], capture_output=True, text=True, timeout=60)  # and here
    leaks = []
    output = res.stdout + res.stderr
    if st.secret in output:
        leaks.append("the answers appeared in the output")
    if "attempt started" not in res.stdout or res.exit_code != 0 or res.limit_hit:
        leaks.append(f"the attempt did not run to its end, so it tested nothing ({res.error_summary()})")
    if f"PLANTED-{st.mark}" in later.stdout + later.stderr:
        leaks.append("planted code ran in a later sandboxed program")
    if f"PLANTED-{st.mark}" in host.stdout + host.stderr:
        leaks.append("planted code ran in the host interpreter")
    after = _host_snapshot(st)
    for key, value in before.items():
        if after[key] != value:
            new = sorted(set(after[key]) - set(value))  # type: ignore[arg-type]
            leaks.append(f"left on the host ({key}): {new[:3]}")
    if len(st.listener.received) > received:
        leaks.append("a connection reached a host socket")
    alive = [p.pid for p in psutil.process_iter(["cmdline"]) if st.mark in " ".join(p.info["cmdline"] or [])]
    if alive:
        leaks.append(f"processes outlived the run: {alive}")
    _clean_up(st, before)
    return leaks


def _clean_up(st: Stage, before: dict[str, object]) -> None:
    """Undo what an escape left, so the next attempt starts from the same host state."""
    for proc in psutil.process_iter(["cmdline"]):
        if st.mark in " ".join(proc.info["cmdline"] or []):
            proc.kill()
    for name in os.listdir("/dev/shm"):
        if st.mark in name:
            os.unlink(os.path.join("/dev/shm", name))
    for path in st.outside.iterdir():
        if path.name not in before["outside"]:  # type: ignore[operator]
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    venv_before = set(before["venv"])  # type: ignore[arg-type]
    venv_root = Path(st.python).parents[1]
    for path in sorted(venv_root.rglob("*"), reverse=True):
        if "__pycache__" not in path.parts and str(path) not in venv_before:
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()


def test_the_os_layer_is_bubblewrap(os_box):
    assert os_box.isolation_level == "os"
    res = os_box.run("print('hello')\n")
    assert res.ok and res.stdout.strip() == "hello"
    assert res.isolation_level == "os" and "bwrap" in res.isolation


def test_frame_walking_does_not_switch_the_guard_off(stage, os_box):
    """The walk that switched the old guard off (rewriting closure cells found through a refused call's
    traceback) finds no state to rewrite: the hook keeps it in default arguments of a function it never exposes."""
    res = os_box.run(GUARD_OFF + "import os\nprint(sorted(os.listdir('/')))\n")
    assert res.stdout.splitlines()[0] == "guard off (0 cells)"
    assert "reading / is not allowed" in res.error_summary()
    walk_and_trace = GUARD_OFF + "import sys\nsys.settrace(lambda *a: None)\n"
    assert "sys.settrace is not allowed" in os_box.run(walk_and_trace).error_summary()


def test_with_the_guard_off_the_host_is_still_out_of_reach(stage, os_box):
    """Why the OS layer exists: a program past the guard sees only the system, the interpreter and its folder."""
    work = Path(tempfile.mkdtemp(prefix="work-", dir=stage.root))
    try:
        (work / "look.py").write_text("import os\nprint(sorted(os.listdir('/')))\n")
        res = os_box.run_command([stage.python, "-I", "look.py"], work, ro_binds=os_box.python_roots)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert res.ok, res.stderr
    listing = res.stdout.splitlines()[-1]
    assert "'usr'" in listing and "'tmp'" in listing
    assert "'work'" not in listing and "'home'" not in listing  # the host's other folders do not exist inside


@pytest.mark.parametrize("mode", ["guarded", "unguarded"])
@pytest.mark.parametrize("name", list(ATTACKS))
def test_escape_attempt_fails_behind_the_os_layer(stage, os_box, name, mode):
    assert attempt(stage, os_box, name, mode) == []


def test_answers_hidden_inside_site_packages_are_covered(stage, os_box):
    code = (f"import os\nprint(os.listdir({str(stage.answers_in_site)!r}))\n"
            f"print(os.path.exists({str(stage.answers_outside)!r}))\n"
            f"print('site-packages', 'answers_pkg' in os.listdir({str(stage.site_packages)!r}))\n")
    work = Path(tempfile.mkdtemp(prefix="work-", dir=stage.root))
    try:
        (work / "look.py").write_text(code)
        res = os_box.run_command([stage.python, "-I", "look.py"], work, ro_binds=os_box.python_roots)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert res.ok, res.stderr
    assert res.stdout.splitlines() == ["[]", "False", "site-packages True"]  # the folder is there, and empty


def main() -> None:
    """Run every attempt with the OS layer off and print which get through (for the README)."""
    fixture = _make_stage()
    st = next(fixture)
    try:
        box = make_box(st, in_process_only=True)
        for name in ATTACKS:
            for mode in ("guarded", "guard-walked"):
                leaks = attempt(st, box, name, mode)
                print(f"{'GETS THROUGH' if leaks else 'contained':13} {mode:12} {name}: {'; '.join(leaks)}")
    finally:
        next(fixture, None)


if __name__ == "__main__":
    main()
