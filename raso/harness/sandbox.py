"""Run untrusted programs (model-written code, later whole coding agents) behind an OS boundary.

Two layers, each enough to stop the other's known gaps:

* **OS layer: bubblewrap (`bwrap`).** Each run is a fresh process tree in its own user, mount, PID, network, IPC,
  UTS and cgroup namespaces (`--unshare-all --die-with-parent --new-session`; nested user namespaces disabled).
  Its file system is built from nothing: the system (`/usr`, `/bin`, `/lib*`, a few files of `/etc`) and the
  interpreter's prefixes are bound read-only, the run's working directory is the one writable place, `/tmp` and
  `/dev/shm` are private size-capped tmpfs, and nothing else of the host exists inside, so the answers, the run
  directory, home folders and other runs are not reachable by any path. A denied folder that does lie under a
  bound one (data inside site-packages) is covered by an empty read-only tmpfs. The network namespace holds only
  its own loopback. The environment is cleared to a minimal PATH/HOME/LANG. A root caller's runs drop to uid
  65534 (`setpriv`) before bwrap, so they run unprivileged exactly like a normal user's; the process-count rlimit
  then binds (the kernel does not apply it to root). rlimits cap CPU seconds, address space, file size, open
  files, processes and core dumps; a wall-clock timeout kills the whole tree (killing bwrap ends the PID
  namespace). docs/sandbox.md says why bwrap rather than unshare + Landlock + seccomp and what was checked.
* **Interpreter layer** (Python programs only). A bootstrap, started with `-I -S` (no `.pth` file or
  sitecustomize runs first), installs an audit hook (PEP 578) before the program. It refuses file writes outside
  the working directory, file reads outside the working directory and the Python installation (and always inside
  `deny_read`), links, process creation, sockets, ctypes and gc introspection, each with a one-line
  `PermissionError("sandbox: ...")`. The hook is one closure-free function whose state (captured builtins,
  immutable values) sits in its default arguments, so walking from a traceback to its frame finds nothing to
  rewrite; tracing is refused; a str/bytes subclass is copied to plain characters before any check; relative
  paths are resolved against the real current directory. It is a guard with clear messages, not a boundary:
  `os.mknod`, `os.mkfifo` and POSIX shared memory raise no audit event, and a path object can change between
  the check and the system call. tests/test_sandbox_escapes.py holds the attempts; the README's Security section
  lists which get through with this layer alone.

Where bwrap is missing or user namespaces are refused, `isolation_level()` is "unisolated": the probe logs one
loud warning, results carry `isolation=["unisolated", ...]`, and runs are guarded by the interpreter layer and
rlimits only. `RASO_REQUIRE_ISOLATION=1` (or `Sandbox(require_isolation=True)`) turns that into a start error.

Which limit ended a run is always reported (`SandboxResult.limit_hit`): the wall clock from the parent's timer,
CPU time from the exit status (SIGXCPU, the bootstrap's code, or SIGKILL at the hard CPU limit), memory and file
size from the bootstrap's exit codes or the signal (SIGXFSZ), processes from the failed fork.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from raso.harness.tree_limits import TreeLimiter, TreeLimitSupport, tree_limit_support
from raso.safe_files import chown_tree, remove_tree

from . import port_relay

log = logging.getLogger(__name__)

MiB = 1024 * 1024
# Modules a program (or a library it imports: pandas imports ctypes and subprocess) may import but not use: a
# placeholder whose every attribute refuses to run takes their place, so the import succeeds and the capability
# stays closed (subprocess.Popen is refused by the audit hook before it would reach _posixsubprocess).
IMPORTABLE_BUT_REFUSED = ("ctypes", "_posixsubprocess")
# Exit codes that name a limit. 152 and 153 are also what bwrap (128 + signal) and a shell report for a command
# killed by SIGXCPU / SIGXFSZ, so a non-Python command's limits read the same way.
EXIT_CODES = {"memory": 151, "cpu_time": 128 + signal.SIGXCPU, "file_size": 128 + signal.SIGXFSZ}
# How a refused fork (the process limit) shows in stderr: Python, bash, dash.
FORK_REFUSED = ("BlockingIOError: [Errno 11] Resource temporarily unavailable", "fork: Resource temporarily unavailable",
                "fork: retry", "Cannot fork")
REQUIRE_ISOLATION_ENV = "RASO_REQUIRE_ISOLATION"
# How far a run's measured CPU time may trail what the kernel's CPU rlimit saw when it killed a process (the last
# reading of a control group's counter, or of the process-tree watcher's sample, before the process died).
CPU_READING_LAG_S = 0.5
SANDBOX_UID = 65534  # nobody: what a root caller's runs drop to
IsolationLevel = Literal["os", "unisolated"]
# Host paths bound read-only into every run (when they exist), besides the interpreter's prefixes.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_ENTRIES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "mime.types", "alternatives", "passwd",
               "group", "nsswitch.conf", "os-release", "ssl", "ca-certificates")
INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
# This project's packages: no run needs them, and they carry every harness's answers, checks and expected files
# (a regular install puts them in site-packages, which runs see), so every run has them covered, wherever they lie.
PROJECT_PACKAGES = ("raso", "harnesses", "experiments", "corpus_tools")
# Folders of the project's data and caches, named by environment variables (the spreadsheet answers' cache, the
# shared corpus and data sets): covered too, when a run would otherwise see them.
PROJECT_DATA_ENV = ("RASO_SHARED_DIR", "RASO_CACHE_DIR")
DROP_HINT = (f"run raso from a Python that uid {SANDBOX_UID} can read (e.g. `python3 -m venv /opt/raso-venv` from "
             "/usr/bin/python3, not a pyenv or venv under /root) or as a normal user")


class IsolationRequiredError(OSError):
    """OS-level isolation was required (RASO_REQUIRE_ISOLATION=1) but this machine cannot provide it."""


class SandboxLimits(BaseModel):
    """Per-run resource limits. CPU time, resident memory, processes and disk bound the run's whole process tree
    (raso.harness.tree_limits); address space, file size and open files bind each process."""

    cpu_seconds: int = Field(20, ge=1)  # the whole tree's CPU time (and each process's RLIMIT_CPU)
    wall_seconds: float = Field(40.0, gt=0)
    # each process's address space (RLIMIT_AS), and the resident memory of the whole tree together
    memory_bytes: int = Field(1536 * MiB, ge=64 * MiB)
    file_size_bytes: int = Field(64 * MiB, ge=1024)
    disk_bytes: int = Field(512 * MiB, ge=MiB)  # what the run's writable folder may hold in all
    max_processes: int = Field(16, ge=1)  # the tree's processes (a cgroup's pids.max, else RLIMIT_NPROC / watcher)
    max_open_files: int = Field(256, ge=16)
    tmpfs_bytes: int = Field(64 * MiB, ge=MiB)  # each of the run's private /tmp and /dev/shm
    output_chars: int = Field(4000, ge=200)  # stdout / stderr kept (head and tail)


class IsolationSupport(BaseModel):
    """What this machine lets the sandbox use; probed once per process."""

    level: IsolationLevel = "unisolated"
    bwrap: str | None = None
    launcher: list[str] = Field(default_factory=list)  # runs before bwrap: setpriv dropping root to SANDBOX_UID
    run_as: str = ""  # who the sandboxed program runs as, in words
    limits_processes: bool = False  # RLIMIT_NPROC binds (the run's user is not root)
    root_not_dropped: str = ""  # root's runs could not drop to SANDBOX_UID: why (they run as uid 0 in the box)
    tree_limits: str = ""  # how a run's whole process tree is bounded (raso.harness.tree_limits), in words
    bwrap_options: list[str] = Field(default_factory=list)  # optional hardening this bwrap accepted
    notes: list[str] = Field(default_factory=list)


class SandboxResult(BaseModel):
    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    wall_time_s: float = 0.0
    timed_out: bool = False
    # "wall_time" | "cpu_time" | "memory" | "file_size" | "processes" | "disk" | None
    limit_hit: str | None = None
    limit_detail: str = ""  # how the limit was passed, when the run's tree limiter saw it
    limits_mode: str = ""  # how the tree's limits were enforced: cgroup-v2, cgroup-v1 or process-tree
    cpu_time_s: float = 0.0  # CPU time of the whole process tree
    output_file: Path | None = None
    output_error: str | None = None
    isolation_level: IsolationLevel = "unisolated"
    isolation: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        """The program exited with code 0 within its limits."""
        return self.exit_code == 0 and not self.timed_out

    def report_lines(self) -> list[str]:
        """What a program showed, for an agent's observation: its non-empty stdout and stderr, then the error."""
        lines = [f"{name}:\n{text.rstrip()}" for name, text in (("stdout", self.stdout), ("stderr", self.stderr))
                 if text.strip()]
        summary = self.error_summary()
        return lines + ([f"Error: {summary}"] if summary else [])

    def error_summary(self) -> str | None:
        """One clear line for a failed run, None when the program exited cleanly."""
        if self.timed_out:
            return "sandbox: wall-clock time limit exceeded; the program was killed"
        how = f" ({self.limit_detail})" if self.limit_detail else ""
        if self.limit_hit == "cpu_time":
            return f"sandbox: CPU time limit exceeded; the program was killed{how}"
        if self.limit_hit == "memory":
            return f"sandbox: memory limit exceeded{how or ' (MemoryError)'}"
        if self.limit_hit == "file_size":
            return "sandbox: file size limit exceeded (a file grew too large)"
        if self.limit_hit == "processes":
            return f"sandbox: process limit exceeded (too many processes){how}"
        if self.limit_hit == "disk":
            return f"sandbox: disk limit exceeded; the program was killed{how}"
        if self.exit_code == 0:
            return None
        last = [line for line in self.stderr.strip().splitlines() if line.strip()]
        detail = last[-1].strip() if last else "no error output"
        if self.exit_code is not None and self.exit_code < 0:
            return f"sandbox: program killed by signal {-self.exit_code} ({_signal_name(-self.exit_code)}), not by " \
                   f"a sandbox limit: {detail}"
        if self.exit_code is not None and 128 < self.exit_code < 128 + 65:
            # bwrap and shells report a child killed by signal N as 128 + N; a program may also exit so itself
            signum = self.exit_code - 128
            return f"program exited with code {self.exit_code} (as for a process killed by signal {signum}, " \
                   f"{_signal_name(signum)}), not by a sandbox limit: {detail}"
        return f"program exited with code {self.exit_code}: {detail}"


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


# The bootstrap runs in the child before the program. It is trusted code: it applies limits, installs the audit
# hook and then runs the program as __main__.
_BOOTSTRAP = r"""
import errno, json, os, resource, signal, sys


def _setup(cfg):
    def limit(kind, soft, hard=None):
        try:
            resource.setrlimit(kind, (soft, soft if hard is None else hard))
        except (ValueError, OSError):
            pass
    limit(resource.RLIMIT_CPU, cfg["cpu"], cfg["cpu"] + 1)
    limit(resource.RLIMIT_AS, cfg["mem"])
    limit(resource.RLIMIT_FSIZE, cfg["fsize"])
    limit(resource.RLIMIT_NOFILE, cfg["nofile"])
    limit(resource.RLIMIT_CORE, 0)
    if cfg["nproc"]:
        limit(resource.RLIMIT_NPROC, cfg["nproc"])
    cpu_exit, write_fd, exit_now = cfg["exit_codes"]["cpu_time"], os.write, os._exit
    def on_cpu(signum, frame):
        write_fd(2, b"\nsandbox: CPU time limit exceeded\n")
        exit_now(cpu_exit)
    signal.signal(signal.SIGXCPU, on_cpu)

    work = os.path.realpath(cfg["work"])
    read_roots = tuple(os.path.realpath(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix,
                                                      sys.base_exec_prefix, "/usr/share/zoneinfo", *cfg["read_roots"],
                                                      *cfg["site_dirs"]})
    deny_roots = tuple(os.path.realpath(p) for p in cfg["deny_read"])
    return _make_hook(work, read_roots, deny_roots), work


def _make_hook(work, read_roots, deny_roots):
    # The hook is one function with no closure, no helper functions and no global names: all it uses is bound
    # here as default arguments (C functions, builtin types, strings, tuples, frozensets). A program that reaches
    # the hook's frame (from a refused call's traceback) finds only immutable values, and rewriting that frame's
    # locals changes nothing for the next call, which starts from the defaults again. Tracing (which can write
    # into a running frame) is refused. A str or bytes subclass is copied to plain characters first (str.__str__
    # and bytes.__bytes__, unbound), so overriding startswith, split or __str__ changes nothing here; relative
    # paths are resolved against the real current directory, symlinks with os.readlink.
    def hook(event, args, work=work, work_slash=work.rstrip("/") + "/",
             read_roots=tuple((r, r.rstrip("/") + "/") for r in read_roots),
             deny_roots=tuple((r, r.rstrip("/") + "/") for r in deny_roots),
             readable_files=frozenset({"/dev/null", "/dev/urandom", "/dev/random", "/etc/localtime",
                                       "/etc/mime.types"}),
             write_flags=os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND,
             process_events=frozenset({"os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn",
                                       "os.system", "subprocess.Popen", "pty.spawn", "os.startfile", "os.kill",
                                       "os.killpg"}),
             network_events=frozenset({"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
                                       "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
                                       "socket.getnameinfo"}),
             # gc introspection and tracing could reach the program's own frames and objects; links could point
             # out of the working directory.
             refused_events=frozenset({"ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata", "ctypes.addressof",
                                       "gc.get_objects", "gc.get_referrers", "gc.get_referents", "os.symlink",
                                       "os.link", "sys.settrace", "sys.setprofile"}),
             blocked_modules=frozenset({"_posixsubprocess", "_ctypes", "ctypes", "multiprocessing"}),
             mutate_events=frozenset({"os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate",
                                      "os.utime", "shutil.rmtree", "os.chflags", "os.lchflags", "os.setxattr",
                                      "os.removexattr"}),
             read_events=frozenset({"os.chdir", "os.listdir", "os.scandir"}),
             path_like=(str, bytes, os.PathLike), _isinstance=isinstance, _str=str, _bytes=bytes, _int=int,
             _bool=bool, plain_str=str.__str__, plain_bytes=bytes.__bytes__, fspath=os.fspath,
             getcwd=os.getcwd, readlink=os.readlink, fs_encoding=sys.getfilesystemencoding(),
             _PermissionError=PermissionError, _ImportError=ImportError, _OSError=OSError, _ValueError=ValueError):
        if event == "open":
            path, mode, flags = args
            if path is None or _isinstance(path, _int):
                return
            mode = plain_str(mode) if _isinstance(mode, _str) else mode
            writing = (_isinstance(mode, _str) and ("w" in mode or "a" in mode or "x" in mode or "+" in mode)) \
                or _bool((flags or 0) & write_flags)
            checks = ((path, writing),)
        elif event in process_events:
            raise _PermissionError("sandbox: starting or signalling processes is not allowed (%s)" % event)
        elif event in network_events:
            raise _PermissionError("sandbox: network access is not allowed (%s)" % event)
        elif event in refused_events:
            raise _PermissionError("sandbox: %s is not allowed" % event)
        elif event == "import":
            name = plain_str(args[0]) if _isinstance(args[0], _str) else _str(args[0])
            if name in blocked_modules or name.split(".")[0] in blocked_modules:
                raise _ImportError("sandbox: importing %s is not allowed" % name)
            return
        elif event in mutate_events:
            checks = ((args[0], True),) if args and _isinstance(args[0], path_like) else ()
        elif event in read_events:
            checks = ((args[0], False),) if args and _isinstance(args[0], path_like) else ()
        elif event == "os.rename":
            checks = ((args[0], True), (args[1], True))
        else:
            return
        for path, writing in checks:
            path = fspath(path)
            if _isinstance(path, _bytes):
                path = plain_bytes(path).decode(fs_encoding, "surrogateescape")
            path = plain_str(path)
            if not path.startswith("/"):
                path = plain_str(getcwd()) + "/" + path
            # Like os.path.realpath: "..", "." and symlinks resolved left to right.
            parts, pending, hops = [], path.split("/"), 0
            while pending:
                comp = pending.pop(0)
                if comp == "" or comp == ".":
                    continue
                if comp == "..":
                    if parts:
                        parts.pop()
                    continue
                try:
                    target = readlink("/" + "/".join(parts + [comp]))
                except (_OSError, _ValueError):
                    parts.append(comp)
                    continue
                hops += 1
                if hops > 40:
                    raise _PermissionError("sandbox: too many symbolic links in %s" % path)
                if target.startswith("/"):
                    parts = []
                pending = target.split("/") + pending
            real = "/" + "/".join(parts)
            inside_work = real == work or real.startswith(work_slash)
            if writing:
                if real != "/dev/null" and not inside_work:
                    raise _PermissionError("sandbox: writing %s is not allowed (outside the working directory)" % real)
                continue
            if real in readable_files:
                continue
            denied = False
            for root, root_slash in deny_roots:
                if real == root or real.startswith(root_slash):
                    denied = True
            allowed = inside_work
            for root, root_slash in read_roots:
                if real == root or real.startswith(root_slash):
                    allowed = True
            if denied or not allowed:
                raise _PermissionError("sandbox: reading %s is not allowed (outside the working directory)" % real)
    return hook


class _RefusedModule(type(sys)):
    # Stands in sys.modules for a module that may be imported but never used: every attribute is a function that
    # refuses to run. pandas imports ctypes (for a Windows-only message) and subprocess (whose import needs
    # _posixsubprocess.fork_exec) when it starts; with these in place those imports work while the real modules
    # stay out of reach: importing them again, by any route, raises the import event the hook refuses.
    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        qualified = "%s.%s" % (self.__name__, attr)
        def refused(*args, **kwargs):
            raise PermissionError("sandbox: %s is not allowed" % qualified)
        return refused


def _print_traceback():
    try:
        import traceback
        traceback.print_exc()
    except BaseException:
        pass


def _main():
    cfg = json.loads(sys.argv[1])
    hook, work = _setup(cfg)
    for name in cfg["refused_imports"]:
        sys.modules[name] = _RefusedModule(name, "sandbox: a refusing placeholder for %s" % name)
    os.chdir(work)
    sys.argv = [cfg["program"], *cfg["args"]]
    # -S: no .pth file or sitecustomize runs before this guard; site-packages (and a virtual environment's
    # prefix, which `site` would set) are put back here, by name only.
    sys.path[:0] = [work]
    sys.path.extend(cfg["site_dirs"])
    sys.prefix = sys.exec_prefix = cfg["prefix"]
    import runpy
    sys.addaudithook(hook)
    del hook
    # A program that dies of a limit exits with the code the parent reads as that limit.
    codes = cfg["exit_codes"]
    try:
        runpy.run_path(cfg["program"], run_name="__main__")
    except MemoryError:
        _print_traceback()
        os.write(2, b"\nsandbox: memory limit exceeded (MemoryError)\n")
        os._exit(codes["memory"])
    except OSError as exc:
        if exc.errno != errno.EFBIG:
            raise
        _print_traceback()
        os.write(2, ("\nsandbox: file size limit exceeded (%s)\n" % exc).encode())
        os._exit(codes["file_size"])


_main()
"""


# Runs first inside a run that may reach some host loopback ports (raso/harness/port_relay.py, run by its source):
# listens on 127.0.0.1:<port> in the run's own network namespace, passes each connection to the Unix socket
# <dir>/<port>.sock (the host side), then starts the command and exits with its status.
_RELAY = Path(port_relay.__file__).read_text(encoding="utf-8")


class _PortForwarder:
    """Host side of a run's loopback ports: each Unix socket <folder>/<port>.sock leads to 127.0.0.1:<port>, through
    one relay loop with the same per-run connection cap as the relay in the box (the run can reach the socket
    directly too)."""

    def __init__(self, folder: Path, ports: Sequence[int]) -> None:
        self.relay = port_relay.Relay()
        for port in ports:
            path = folder / f"{port}.sock"
            listener = socket.socket(socket.AF_UNIX)
            listener.bind(str(path))
            os.chmod(path, 0o777)  # the run's uid connects to it
            listener.listen(64)
            self.relay.add_listener(listener, socket.AF_INET, ("127.0.0.1", port))
        self.thread = threading.Thread(target=self.relay.run, name="raso-port-forwarder", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.relay.stop()
        self.thread.join(timeout=10)


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _is_under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


@functools.lru_cache(maxsize=8)
def interpreter_layout(python: str) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """(folders the interpreter needs, read-only; its site-packages folders; its sys.prefix) for `python`.

    Asked with `site` on: a virtual environment's prefix and site-packages are set by `site`, which the sandboxed
    program runs without (-S), so the bootstrap puts them back by name."""
    code = ("import json, site, sys\n"
            "print(json.dumps([[sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix],"
            " [p for p in sys.path if p.endswith('-packages')]]))\n")
    out = subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, timeout=60, check=True)
    prefixes, site_dirs = json.loads(out.stdout)
    roots = {os.path.realpath(p) for p in prefixes} | {os.path.abspath(p) for p in prefixes}
    exe = Path(python)
    roots |= {str(exe.absolute().parent), str(exe.resolve().parent)}
    return tuple(sorted(roots)), tuple(site_dirs), prefixes[0]


@functools.lru_cache(maxsize=8)
def base_interpreter(python: str) -> tuple[str, tuple[str, ...]]:
    """(the base interpreter of `python`, the folders it needs): a virtual environment's own Python without the
    environment's site-packages, for code that needs only the standard library (the loopback relay)."""
    code = ("import json, sys\nprint(json.dumps([getattr(sys, '_base_executable', sys.executable),"
            " sys.base_prefix, sys.base_exec_prefix]))\n")
    out = subprocess.run([python, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60, check=True)
    exe, *prefixes = json.loads(out.stdout)
    roots = {os.path.realpath(p) for p in prefixes} | {os.path.abspath(p) for p in prefixes}
    roots |= {str(Path(exe).absolute().parent), str(Path(exe).resolve().parent)}
    return exe, tuple(sorted(roots))


def _minimal_env(home: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": home,
           "TMPDIR": home}
    env.update(extra or {})
    return env


def _bwrap_argv(support: IsolationSupport, *, work: str, argv: Sequence[str], ro_binds: Sequence[str],
                hide: Sequence[str], env: Mapping[str, str], limits: SandboxLimits,
                rw_binds: Sequence[str] = (), moved_binds: Sequence[tuple[str, str]] = ()) -> list[str]:
    """The full command line: launcher, bwrap and its options, then `argv` run in `work`. `moved_binds` are
    (host folder, path inside) pairs bound writable after everything else."""
    assert support.bwrap is not None
    cmd = [*support.launcher, support.bwrap, "--unshare-all", "--unshare-user", *support.bwrap_options,
           "--die-with-parent", "--new-session", "--clearenv"]
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    cmd += ["--proc", "/proc", "--dev", "/dev",
            "--size", str(limits.tmpfs_bytes), "--tmpfs", "/tmp",
            "--size", str(limits.tmpfs_bytes), "--tmpfs", "/dev/shm"]
    sources: list[str] = []
    for folder in SYSTEM_DIRS:
        if os.path.islink(folder):
            cmd += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            cmd += ["--ro-bind", folder, folder]
            sources.append(folder)
    for entry in ETC_ENTRIES:
        path = f"/etc/{entry}"
        if os.path.exists(path):
            cmd += ["--ro-bind", path, path]
            sources.append(path)
    # Deeper mounts go later so they land on top: a bound folder inside a hidden one stays visible, and a
    # hidden folder inside a bound one is covered.
    mounts: list[tuple[int, int, list[str]]] = []
    for path in dict.fromkeys(ro_binds):
        if any(_is_under(path, s) for s in sources):
            continue
        mounts.append((path.count("/"), 0, ["--ro-bind", path, path]))
        sources.append(path)
    for path in (work, *rw_binds):
        mounts.append((path.count("/"), 1, ["--bind", path, path]))
    covered = []
    for path in dict.fromkeys(hide):
        if not any(_is_under(path, s) for s in sources) or path == work:
            continue  # not mounted at all, so nothing to hide
        if os.path.isdir(path):
            mounts.append((path.count("/"), 2, ["--perms", "0555", "--size", "4096", "--tmpfs", path]))
            covered.append(path)
        elif os.path.exists(path):
            mounts.append((path.count("/"), 2, ["--ro-bind", "/dev/null", path]))
    for _, _, option in sorted(mounts, key=lambda m: (m[0], m[1])):
        cmd += option
    for path in covered:
        cmd += ["--remount-ro", path]
    for source, dest in moved_binds:
        cmd += ["--bind", source, dest]
    cmd += ["--chdir", work, "--", *argv]
    return cmd


def _probe(support: IsolationSupport, python: str) -> str | None:
    """Run a tiny program through `support`'s command line; None when it ran contained, else why not."""
    roots = interpreter_layout(python)[0]
    code = ("import os, socket\ns = socket.socket(); s.settimeout(1)\n"
            "try:\n    s.connect(('10.255.255.1', 9))\nexcept OSError as e:\n    print(e.errno, os.getuid())\n")
    tmp = tempfile.mkdtemp(prefix="raso-sandbox-probe-")
    try:
        work = os.path.join(tmp, "work")
        os.mkdir(work)
        if support.launcher:
            os.chmod(tmp, 0o711)
            os.chown(work, SANDBOX_UID, SANDBOX_UID)
        cmd = _bwrap_argv(support, work=work, argv=[python, "-I", "-S", "-c", code], ro_binds=roots, hide=(),
                          env=_minimal_env(work), limits=SandboxLimits())
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=_minimal_env(work))
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{exc}"
        # ENETUNREACH (101): the run's network namespace has no route anywhere.
        if proc.returncode != 0 or not proc.stdout.startswith("101 "):
            return f"rc={proc.returncode}: {(proc.stderr or proc.stdout).strip()[:300]}"
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@functools.lru_cache(maxsize=1)
def isolation_support() -> IsolationSupport:
    """Probe once which OS layer this process may use; warn loudly (once) when there is none."""
    bwrap = shutil.which("bwrap")
    notes: list[str] = []
    if bwrap is None:
        notes.append("bubblewrap (bwrap) is not installed")
    else:
        candidates: list[tuple[list[str], str, bool]] = []
        if os.geteuid() == 0:
            setpriv = shutil.which("setpriv")
            if setpriv:
                candidates.append(([setpriv, f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups",
                                    "--"], f"uid {SANDBOX_UID} (root dropped with setpriv)", True))
            else:
                notes.append("setpriv (util-linux) not found: root runs keep uid 0 without capabilities")
            candidates.append(([], "uid 0 without capabilities (the process rlimit does not bind root)", False))
        else:
            candidates.append(([], f"uid {os.geteuid()} (the caller's)", True))
        for launcher, who, limits_processes in candidates:
            for options in (["--disable-userns"], []):
                support = IsolationSupport(level="os", bwrap=bwrap, launcher=launcher, run_as=who,
                                           limits_processes=limits_processes, bwrap_options=options)
                refused = _probe(support, sys.executable)
                if refused is None:
                    support.notes = notes
                    support.tree_limits = tree_limit_support().describe()
                    if os.geteuid() == 0 and not launcher:
                        support.root_not_dropped = _why_no_drop(sys.executable, notes)
                        log.warning("sandbox: runs stay root (uid 0 without capabilities) instead of dropping to "
                                    "uid %d: %s. The box still holds, but the kernel does not apply the process "
                                    "rlimit to root and a kernel bug reachable from uid 0 in a user namespace is "
                                    "one step closer. To avoid it, %s; %s=1 refuses to run like this.",
                                    SANDBOX_UID, support.root_not_dropped, DROP_HINT, REQUIRE_ISOLATION_ENV)
                    else:
                        log.info("sandbox: OS isolation with bubblewrap, runs as %s", who)
                    return support
                notes.append(f"bwrap {' '.join(launcher[:1] + options)} refused ({refused})".replace("  ", " "))
    support = IsolationSupport(notes=notes, tree_limits=tree_limit_support().describe())
    log.warning("sandbox: NO OS ISOLATION. Model-written code will run guarded only by the in-process audit hook "
                "and rlimits, which a determined program can get around (%s). To isolate it, %s and make sure "
                "user namespaces are allowed; set %s=1 to refuse to run without isolation.",
                "; ".join(notes), INSTALL_HINT, REQUIRE_ISOLATION_ENV)
    return support


def isolation_level() -> IsolationLevel:
    """"os" when runs are behind bubblewrap, "unisolated" when only the in-process guard and rlimits hold."""
    return isolation_support().level


def checked_isolation(required: bool | None = None) -> IsolationSupport:
    """The OS layer, or IsolationRequiredError when it was required (argument, else RASO_REQUIRE_ISOLATION).

    RASO_REQUIRE_ISOLATION=1 also refuses a root caller whose runs cannot drop to an unprivileged uid (an argument
    of True asks for the OS layer only: a harness that cannot work without bwrap)."""
    support = isolation_support()
    strict = _env_flag(REQUIRE_ISOLATION_ENV)
    if required is None:
        required = strict
    if required and support.level != "os":
        why = f"{REQUIRE_ISOLATION_ENV}=1" if strict else "its commands run only behind bubblewrap"
        raise IsolationRequiredError(f"OS-level isolation is required ({why}) but not available "
                                     f"here ({'; '.join(support.notes)}): {INSTALL_HINT}")
    if strict and support.root_not_dropped:
        raise IsolationRequiredError(f"full isolation is required ({REQUIRE_ISOLATION_ENV}=1) but root's runs cannot "
                                     f"drop to uid {SANDBOX_UID} ({support.root_not_dropped}): {DROP_HINT}")
    return support


def _why_no_drop(python: str, notes: Sequence[str]) -> str:
    """Why runs cannot drop to SANDBOX_UID, in words: a folder on the interpreter's path it cannot enter, else
    what the attempt said."""
    for path in (python, os.path.realpath(python)):
        for parent in reversed(Path(path).parents):
            try:
                mode = os.stat(parent).st_mode
            except OSError:
                continue
            if not mode & stat.S_IXOTH:
                return f"the interpreter {path} lies under {parent}, which uid {SANDBOX_UID} cannot enter"
    return "; ".join(notes) or "setpriv is not available"


@functools.lru_cache(maxsize=1)
def project_data_paths() -> tuple[str, ...]:
    """Where this project's packages and data folders are on this machine (site-packages, a source tree or
    both), to be covered in every run. Located without importing anything."""
    found: list[str] = []
    for name in PROJECT_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        found += list(spec.submodule_search_locations or []) if spec is not None else []
    try:  # an installed distribution's packages, even when another copy is first on sys.path (a source checkout)
        dist = importlib.metadata.distribution("raso")
        for file in dist.files or ():
            if file.parts and file.parts[0] in PROJECT_PACKAGES:
                found.append(str(dist.locate_file(file.parts[0])))
    except importlib.metadata.PackageNotFoundError:
        pass
    found += [os.environ[name] for name in PROJECT_DATA_ENV if os.environ.get(name)]
    found.append(str(Path.home() / ".cache" / "raso"))
    paths = [os.path.realpath(p) for p in found] + [os.path.abspath(p) for p in found]
    return tuple(dict.fromkeys(p for p in paths if os.path.exists(p)))


def _read_capped(path: Path, limit: int) -> str:
    """Head and tail of a possibly huge file, never reading more than `limit` characters' worth of bytes."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        if size <= limit:
            return fh.read().decode("utf-8", errors="replace")
        head = fh.read(limit // 2).decode("utf-8", errors="replace")
        fh.seek(size - limit // 2)
        tail = fh.read().decode("utf-8", errors="replace")
    return f"{head}\n... [{size - limit} bytes truncated] ...\n{tail}"


def _file_cap(limits: SandboxLimits) -> int:
    """RLIMIT_FSIZE: no single file may pass the file size limit, nor the run's whole disk limit."""
    return min(limits.file_size_bytes, limits.disk_bytes)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    # the tree is the program's: iterative and through descriptors (a 10,000-deep tree neither recurses nor
    # outgrows PATH_MAX; no link is followed)
    chown_tree(root, uid, gid)


class Sandbox:
    """Runs programs contained; one instance can serve many runs (and threads)."""

    def __init__(self, limits: SandboxLimits | None = None, python: str | None = None,
                 deny_read: Sequence[Path] = (), require_isolation: bool | None = None) -> None:
        self.limits = limits or SandboxLimits()
        self.python = python or sys.executable
        self.support = checked_isolation(require_isolation)
        self.tree_support: TreeLimitSupport = tree_limit_support()
        self.python_roots, self.site_dirs, self.prefix = interpreter_layout(self.python)
        # the project's own packages and data are covered in every run, besides what the caller denies (a data
        # folder holding the interpreter itself is left visible: the run could not start without it)
        project = [p for p in project_data_paths() if not any(_is_under(r, p) for r in self.python_roots)]
        self.deny_read = list(dict.fromkeys([*(str(Path(p).resolve()) for p in deny_read), *project]))
        for root in self.python_roots:
            if any(root == d for d in self.deny_read):
                raise ValueError(f"cannot deny reading {root}: the sandbox's interpreter lives there")

    @property
    def isolation_level(self) -> IsolationLevel:
        return self.support.level

    def run(self, code: str, inputs: Mapping[str, Path] | None = None, args: Sequence[str] = (),
            output_name: str | None = None, output_dest: Path | None = None) -> SandboxResult:
        """Run Python `code` with `args` in a fresh working directory holding copies of `inputs` (name -> source).

        `args` are passed as sys.argv[1:]; relative names refer to the working directory. If `output_name`
        is given and the program created that regular file, it is copied to `output_dest` and reported in
        `output_file`; nothing else leaves the working directory.
        """
        limits = self.limits
        root = Path(tempfile.mkdtemp(prefix="raso-sandbox-"))
        try:
            work = root / "work"
            work.mkdir()
            for name, src in (inputs or {}).items():
                if Path(name).name != name:
                    raise ValueError(f"input name must be a plain file name, got {name!r}")
                shutil.copyfile(src, work / name)
            program = work / "solution.py"
            program.write_text(code, encoding="utf-8")
            cfg = {
                "work": str(work), "program": str(program), "args": list(args),
                "cpu": limits.cpu_seconds, "mem": limits.memory_bytes, "fsize": _file_cap(limits),
                "nofile": limits.max_open_files, "read_roots": list(self.python_roots), "deny_read": self.deny_read,
                "nproc": limits.max_processes if self.support.limits_processes else None,
                "exit_codes": EXIT_CODES, "site_dirs": list(self.site_dirs), "prefix": self.prefix,
                "refused_imports": list(IMPORTABLE_BUT_REFUSED),
            }
            argv = [self.python, "-I", "-S", "-B", "-c", _BOOTSTRAP, json.dumps(cfg)]
            result = self._execute(argv, root, work, ro_binds=self.python_roots, env=_minimal_env(str(work)))
            result.isolation.insert(0, "audit-hook")
            if output_name is not None:
                if result.ok and result.limit_hit is None:
                    self._collect_output(result, work / output_name, output_dest)
                else:  # a partial file from a crashed or killed program is never scored
                    result.output_error = "the program did not finish cleanly, so its output file is not used"
            return result
        finally:
            remove_tree(root)  # iterative: a program's 10,000-deep tree goes too

    def run_command(self, argv: Sequence[str], work_dir: Path, *, ro_binds: Sequence[Path] = (),
                    env: Mapping[str, str] | None = None, loopback_ports: Sequence[int] = (),
                    mounts: Mapping[str, Path] | None = None) -> SandboxResult:
        """Run any command line `argv` in `work_dir` (the one writable folder), with `ro_binds` also visible
        read-only, this sandbox's limits, `deny_read` hidden and a minimal environment plus `env`.

        No network, except that each of `loopback_ports` (1024 and up) on the host's 127.0.0.1 (a model
        endpoint) is reachable at the same address inside: a relay in the run listens there and passes each
        connection through a Unix socket to a host thread that connects to the real port. Nothing else on the
        host or beyond is reachable.

        The command needs the OS layer (IsolationRequiredError otherwise: nothing but bwrap contains a
        non-Python program). A root caller's run is uid 65534: `work_dir` must be reachable by that uid (not
        under a private home such as /root); it is handed to that uid for the run and given back afterwards.

        `mounts` maps absolute paths inside the run to folders under `work_dir`, bound there writable too (a
        Harbor task's verifier expects its files at /app, /tests and /logs/verifier).
        """
        if self.support.level != "os":
            raise IsolationRequiredError(f"running a command needs OS-level isolation: {INSTALL_HINT}")
        work = Path(work_dir).resolve()
        if not work.is_dir():
            raise ValueError(f"work dir {work} is not a folder")
        if self.support.launcher:
            closed = [str(p) for p in work.parents if not os.stat(p).st_mode & stat.S_IXOTH]
            if closed:
                raise ValueError(f"work dir {work} is not reachable by the sandbox's uid {SANDBOX_UID}: "
                                 f"{closed[0]} is not searchable by others")
        extra_mounts: list[tuple[str, str]] = []
        for dest, source in (mounts or {}).items():
            folder = Path(source).resolve()
            if not os.path.isabs(dest) or not folder.is_dir() or not folder.is_relative_to(work):
                raise ValueError(f"mount {dest!r}: the destination must be absolute and the source a folder under "
                                 f"the work dir {work}, got {source}")
            extra_mounts.append((str(folder), os.path.normpath(dest)))
        ports = [int(p) for p in loopback_ports]
        if any(not 1024 <= p <= 65535 for p in ports):
            raise ValueError(f"loopback ports must be between 1024 and 65535, got {ports}")
        limits = self.limits
        prlimit = shutil.which("prlimit") or "/usr/bin/prlimit"
        caps = [prlimit, f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + 1}", f"--as={limits.memory_bytes}",
                f"--fsize={_file_cap(limits)}", f"--nofile={limits.max_open_files}", "--core=0"]
        if self.support.limits_processes:
            caps.append(f"--nproc={limits.max_processes}")
        binds = [str(Path(p).resolve()) for p in ro_binds]
        owner = work.stat()
        root = Path(tempfile.mkdtemp(prefix="raso-sandbox-"))
        forwarder = None
        try:
            command = [*caps, "--", *argv]
            rw_binds: list[str] = []
            if ports:
                sockets = root / "net"
                sockets.mkdir(mode=0o755)
                forwarder = _PortForwarder(sockets, ports)
                rw_binds.append(str(sockets))
                relay_python, relay_roots = base_interpreter(self.python)
                binds += relay_roots  # the relay needs only an interpreter and its standard library
                relay = {"ports": ports, "dir": str(sockets)}
                command = [*caps, "--", relay_python, "-I", "-S", "-c", _RELAY, json.dumps(relay), *argv]
            return self._execute(command, root, work, ro_binds=binds, env=_minimal_env(str(work), env),
                                 rw_binds=rw_binds, network="loopback" if ports else "none", mounts=extra_mounts)
        finally:
            if forwarder is not None:
                forwarder.close()
            remove_tree(root)
            if self.support.launcher:
                _chown_tree(work, owner.st_uid, owner.st_gid)

    def _execute(self, argv: Sequence[str], root: Path, work: Path, *, ro_binds: Sequence[str],
                 env: Mapping[str, str], rw_binds: Sequence[str] = (), network: str = "none",
                 mounts: Sequence[tuple[str, str]] = ()) -> SandboxResult:
        """Run `argv` contained (OS layer where available), wait within the wall clock, and read what it left."""
        limits, support = self.limits, self.support
        if support.level == "os":
            if support.launcher:  # the run's uid must reach and own its working directory
                os.chmod(root, 0o711)
                _chown_tree(work, SANDBOX_UID, SANDBOX_UID)
            cmd = _bwrap_argv(support, work=str(work), argv=argv, ro_binds=ro_binds, hide=self.deny_read, env=env,
                              limits=limits, rw_binds=rw_binds, moved_binds=mounts)
            isolation = ["bwrap", "user-namespace", "pid-namespace",
                         "no-network" if network == "none" else "loopback-ports-only", "read-only-system",
                         "private-tmp", "rlimits"]
        else:
            cmd = list(argv)
            isolation = ["unisolated", "rlimits", "process-group"]
        out_path, err_path = root / "stdout.txt", root / "stderr.txt"
        tree = TreeLimiter(cpu_seconds=limits.cpu_seconds, memory_bytes=limits.memory_bytes,
                           max_processes=limits.max_processes, disk_bytes=limits.disk_bytes,
                           writable=[str(work), *rw_binds], support=self.tree_support)
        isolation.append(f"tree-limits:{tree.mode}")
        start = time.perf_counter()
        tree_cpu = 0.0
        try:
            with out_path.open("wb") as out_fh, err_path.open("wb") as err_fh:
                proc = subprocess.Popen(tree.command(cmd), cwd=work, env=dict(env), stdin=subprocess.DEVNULL,
                                        stdout=out_fh, stderr=err_fh, start_new_session=True, close_fds=True)
                tree.start(proc.pid, functools.partial(_kill_group, proc.pid))
                exit_code, timed_out, tree_cpu = self._wait(proc, limits.wall_seconds)
        finally:
            tree.finish(tree_cpu)
        wall = time.perf_counter() - start
        result = SandboxResult(
            exit_code=None if timed_out else exit_code,
            stdout=_read_capped(out_path, limits.output_chars),
            stderr=_read_capped(err_path, limits.output_chars),
            wall_time_s=round(wall, 3), timed_out=timed_out,
            isolation_level=support.level, isolation=isolation, limits_mode=tree.mode,
            cpu_time_s=round(tree.cpu_used, 3),
        )
        result.limit_hit = self._limit_hit(result, tree)
        if result.limit_hit is not None and result.limit_hit == tree.verdict:
            result.limit_detail = tree.detail
        return result

    @staticmethod
    def _wait(proc: subprocess.Popen, wall_seconds: float) -> tuple[int, bool, float]:
        """(exit code, timed out, CPU seconds of the reaped tree); kills the process group at the wall clock.

        The CPU seconds count what the kernel adds up for reaped children: the whole tree of an unisolated run,
        next to nothing behind bwrap (its PID namespace's init is never reaped by bwrap), where the tree limiter's
        own readings count."""
        deadline = time.monotonic() + wall_seconds
        pause = 0.002
        timed_out = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() >= deadline:
                timed_out = True
                _kill_group(proc.pid)  # bwrap's death ends its PID namespace
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(pause)
            pause = min(pause * 2, 0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)
        _kill_group(proc.pid)  # anything left in the group (the unisolated path has no PID namespace)
        return proc.returncode, timed_out, usage.ru_utime + usage.ru_stime

    def _limit_hit(self, result: SandboxResult, tree: TreeLimiter) -> str | None:
        """Which limit ended the run, from what the sandbox itself saw: its wall clock, its tree limiter, and an
        exit status only where the measured CPU time or the program's own bootstrap confirms it."""
        if result.timed_out:
            return "wall_time"
        if tree.verdict is not None:
            return tree.verdict
        code, err = result.exit_code, result.stderr
        if code == 0:
            return None
        # SIGXCPU comes at the soft limit and SIGKILL at the hard one (a second later, for a program that ignores
        # SIGXCPU): only a limit when the tree did use that much CPU (give or take how far the readings may lag),
        # so an agent's own exit 137 or 152 (or a kill -9 of its own) is reported as what it was
        used_it = tree.cpu_used >= self.limits.cpu_seconds - CPU_READING_LAG_S
        if used_it and (code in (EXIT_CODES["cpu_time"], -signal.SIGXCPU, 128 + signal.SIGKILL, -signal.SIGKILL)
                        or "sandbox: CPU time limit exceeded" in err):
            return "cpu_time"
        if code in (EXIT_CODES["file_size"], -signal.SIGXFSZ) or "File too large" in err:
            return "file_size"
        if code == EXIT_CODES["memory"] or "MemoryError" in err:
            return "memory"
        if any(sign in err for sign in FORK_REFUSED):
            return "processes"
        return None

    def _collect_output(self, result: SandboxResult, produced: Path, dest: Path | None) -> None:
        if not produced.exists() and not produced.is_symlink():
            result.output_error = f"the program did not create the output file {produced.name}"
            return
        if produced.is_symlink() or not produced.is_file():
            result.output_error = f"the output {produced.name} is not a regular file"
            return
        if produced.stat().st_size > self.limits.file_size_bytes:
            result.output_error = f"the output {produced.name} exceeds {self.limits.file_size_bytes} bytes"
            return
        if dest is None:
            result.output_error = "no destination was given for the output file"
            return
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(produced, dest)
        result.output_file = dest
