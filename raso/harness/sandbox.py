"""Run an untrusted Python program (model-written code) in a contained child process.

Each run gets its own temporary working directory holding *copies* of the inputs, a fresh interpreter
(`sys.executable -I`, so the same packages, e.g. openpyxl, are importable but no user site or PYTHON* variables
apply), a minimal environment and these layers of containment:

* **OS level.** Resource limits (CPU seconds, address space, file size, open files, no core dumps); a wall-clock
  timeout that kills the whole process group; where permitted, `unshare --mount --net --pid --fork --kill-child`,
  so the program has no network interface (not even 127.0.0.1), every process it starts dies with it, and the
  `deny_read` folders (e.g. a benchmark's answer files) are covered by an empty read-only tmpfs inside the run;
  where a pids cgroup is writable (root), a per-run cgroup caps the number of processes.
* **Interpreter level.** A bootstrap installs an audit hook (PEP 578) before the program runs. It refuses file
  writes outside the working directory, file reads outside the working directory and the Python installation
  (and always inside `deny_read`), symlinks and hard links, process creation (fork, exec, subprocess,
  os.system), sockets, ctypes and gc introspection. A refused operation raises `PermissionError("sandbox: ...")`
  (or ImportError), so the program's stderr says what was refused. `import ctypes` and `import _posixsubprocess`
  themselves succeed (pandas needs them to import) but yield placeholders whose every attribute refuses to run;
  the real modules (and ctypes' C part `_ctypes`) cannot be imported. The hook keeps its state in a closure and
  uses only builtins captured before the program starts, so rebinding `os.path` helpers or builtins does not
  switch it off.

Which OS layers are available is checked once at start-up (`isolation_support()`). Where `unshare` is refused
the sandbox still runs, with a logged warning: network access and file reads are then blocked only by the audit
hook and the wall-clock kill relies on the process group. The audit hook is a strong guard against accidents and
casual escapes, not a security boundary against a determined attacker (e.g. a custom path object whose
`__fspath__` changes between the check and the open); the OS layers are the boundary. Model-written code for
spreadsheets is the threat model here.

The caller gets back exit code, truncated stdout/stderr, timing, which limit was hit, and (copied out of the
working directory, which is then deleted) only the named output file.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

log = logging.getLogger(__name__)

MiB = 1024 * 1024
# Modules a program (or a library it imports: pandas imports ctypes and subprocess) may import but not use: a
# placeholder whose every attribute refuses to run takes their place, so the import succeeds and the capability
# stays closed (subprocess.Popen is refused by the audit hook before it would reach _posixsubprocess).
IMPORTABLE_BUT_REFUSED = ("ctypes", "_posixsubprocess")
_SANDBOX_EXIT_CPU = 152  # the bootstrap's exit code when the CPU-time limit signal arrives


class SandboxLimits(BaseModel):
    """Per-run resource limits."""

    cpu_seconds: int = Field(20, ge=1)
    wall_seconds: float = Field(40.0, gt=0)
    memory_bytes: int = Field(1536 * MiB, ge=64 * MiB)  # RLIMIT_AS: address space, not resident memory
    file_size_bytes: int = Field(64 * MiB, ge=1024)
    max_processes: int = Field(16, ge=1)  # pids cgroup, where writable
    max_open_files: int = Field(256, ge=16)
    output_chars: int = Field(4000, ge=200)  # stdout / stderr kept (head and tail)


class IsolationSupport(BaseModel):
    """What the OS lets this process use; probed once."""

    unshare_prefix: list[str] = Field(default_factory=list)
    network_isolated: bool = False
    pid_namespace: bool = False
    mount_namespace: bool = False  # deny_read folders are also hidden under an empty tmpfs
    mount_bin: str | None = None
    pids_cgroup_root: str | None = None
    notes: list[str] = Field(default_factory=list)


class SandboxResult(BaseModel):
    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    wall_time_s: float = 0.0
    timed_out: bool = False
    limit_hit: str | None = None  # "wall_time" | "cpu_time" | "memory" | "file_size" | "processes" | None
    output_file: Path | None = None
    output_error: str | None = None
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
        if self.limit_hit == "cpu_time":
            return "sandbox: CPU time limit exceeded; the program was killed"
        if self.limit_hit == "memory":
            return "sandbox: memory limit exceeded (MemoryError)"
        if self.limit_hit == "file_size":
            return "sandbox: file size limit exceeded (a file grew too large)"
        if self.exit_code == 0:
            return None
        last = [line for line in self.stderr.strip().splitlines() if line.strip()]
        detail = last[-1].strip() if last else "no error output"
        if self.exit_code is not None and self.exit_code < 0:
            return f"sandbox: program killed by signal {-self.exit_code}: {detail}"
        return f"program exited with code {self.exit_code}: {detail}"


# The bootstrap runs in the child before the program. It is trusted code: it applies limits, joins the pids
# cgroup, installs the audit hook and then runs the program as __main__.
_BOOTSTRAP = r"""
import json, os, resource, signal, sys


def _setup(cfg):
    # Everything the hook needs lives in this closure (no module globals, os functions bound now), so the
    # program cannot rebind what the hook calls.
    def limit(kind, soft, hard=None):
        try:
            resource.setrlimit(kind, (soft, soft if hard is None else hard))
        except (ValueError, OSError):
            pass
    if cfg["cgroup_procs"]:
        try:
            with open(cfg["cgroup_procs"], "w") as fh:
                fh.write(str(os.getpid()))
        except OSError as exc:
            sys.stderr.write("sandbox warning: could not join the pids cgroup: %s\n" % exc)
    for hidden in (cfg["hide"] if cfg["mount_bin"] else []):
        # In the run's own mount namespace: an empty read-only tmpfs over a hidden folder, /dev/null over a file.
        if os.path.isdir(hidden):
            argv = [cfg["mount_bin"], "-t", "tmpfs", "-o", "ro,size=4k,mode=000", "raso-hidden", hidden]
        elif os.path.exists(hidden):
            argv = [cfg["mount_bin"], "--bind", "/dev/null", hidden]
        else:
            continue
        pid = os.fork()
        if pid == 0:
            try:
                devnull = os.open("/dev/null", os.O_WRONLY)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
                os.execv(argv[0], argv)
            finally:
                os._exit(127)
        os.waitpid(pid, 0)
    limit(resource.RLIMIT_CPU, cfg["cpu"], cfg["cpu"] + 1)
    limit(resource.RLIMIT_AS, cfg["mem"])
    limit(resource.RLIMIT_FSIZE, cfg["fsize"])
    limit(resource.RLIMIT_NOFILE, cfg["nofile"])
    limit(resource.RLIMIT_CORE, 0)
    cpu_exit, write_fd, exit_now = cfg["cpu_exit"], os.write, os._exit
    def on_cpu(signum, frame):
        write_fd(2, b"\nsandbox: CPU time limit exceeded\n")
        exit_now(cpu_exit)
    signal.signal(signal.SIGXCPU, on_cpu)

    # Path handling uses only builtins captured here (C functions and str methods), never os.path helpers, whose
    # module globals the program could rebind. Symlinks are resolved with the captured os.readlink.
    _any, _isinstance, _str, _bytes, _int, _bool, _range = any, isinstance, str, bytes, int, bool, range
    _PermissionError, _ImportError, _OSError, _ValueError = PermissionError, ImportError, OSError, ValueError
    readlink, fspath, fs_encoding = os.readlink, os.fspath, sys.getfilesystemencoding()

    def norm(path):  # absolute, without "", "." and ".." parts
        parts = []
        for comp in path.split("/"):
            if comp == ".." and parts:
                parts.pop()
            elif comp not in ("", ".", ".."):
                parts.append(comp)
        return "/" + "/".join(parts)
    def resolve(path):  # like os.path.realpath, for an absolute normalized path
        out = "/"
        pending = path.split("/")[1:]
        hops = 0
        while pending:
            comp = pending.pop(0)
            candidate = norm(out + "/" + comp)
            try:
                target = readlink(candidate)
            except (_OSError, _ValueError):
                out = candidate
                continue
            hops += 1
            if hops > 40:
                raise _PermissionError("sandbox: too many symbolic links in %s" % path)
            base = target if target.startswith("/") else out + "/" + target
            pending = norm(base).split("/")[1:] + pending
            out = "/"
        return out
    def real(path):
        path = fspath(path)
        if _isinstance(path, _bytes):
            path = path.decode(fs_encoding, "surrogateescape")
        return resolve(norm(path if path.startswith("/") else work + "/" + path))

    work = os.path.realpath(cfg["work"])
    read_roots = tuple(os.path.realpath(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix,
                                                      sys.base_exec_prefix, "/usr/share/zoneinfo", *cfg["read_roots"]})
    deny_roots = tuple(os.path.realpath(p) for p in cfg["deny_read"])
    readable_files = frozenset({"/dev/null", "/dev/urandom", "/dev/random", "/etc/localtime", "/etc/mime.types"})
    def under(path, roots):
        return _any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)
    def check_read(path):
        p = real(path)
        if p in readable_files:
            return
        if under(p, deny_roots) or not (under(p, (work,)) or under(p, read_roots)):
            raise _PermissionError("sandbox: reading %s is not allowed (outside the working directory)" % p)
    def check_write(path):
        p = real(path)
        if p != "/dev/null" and not under(p, (work,)):
            raise _PermissionError("sandbox: writing %s is not allowed (outside the working directory)" % p)
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    process_events = frozenset({"os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "os.system",
                                "subprocess.Popen", "pty.spawn", "os.startfile", "os.kill", "os.killpg"})
    network_events = frozenset({"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
                                "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
                                "socket.getnameinfo"})
    # gc introspection could reach this closure; links could point out of the working directory.
    refused_events = frozenset({"ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata", "ctypes.addressof",
                                "gc.get_objects", "gc.get_referrers", "gc.get_referents", "os.symlink", "os.link"})
    blocked_modules = frozenset({"_posixsubprocess", "_ctypes", "ctypes", "multiprocessing"})
    mutate_events = frozenset({"os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate",
                               "os.utime", "shutil.rmtree", "os.chflags", "os.lchflags", "os.setxattr",
                               "os.removexattr"})
    path_like = (str, bytes, os.PathLike)
    def hook(event, args):
        if event == "open":
            path, mode, flags = args
            if path is None or _isinstance(path, _int):
                return
            writing = (_isinstance(mode, _str) and _any(c in mode for c in "wax+")) or _bool((flags or 0) & write_flags)
            (check_write if writing else check_read)(path)
        elif event in process_events:
            raise _PermissionError("sandbox: starting or signalling processes is not allowed (%s)" % event)
        elif event in network_events:
            raise _PermissionError("sandbox: network access is not allowed (%s)" % event)
        elif event in refused_events:
            raise _PermissionError("sandbox: %s is not allowed" % event)
        elif event == "import":
            name = _str(args[0])
            if name in blocked_modules or name.split(".")[0] in blocked_modules:
                raise _ImportError("sandbox: importing %s is not allowed" % name)
        elif event in mutate_events:
            if args and _isinstance(args[0], path_like):
                check_write(args[0])
        elif event == "os.chdir" or event in ("os.listdir", "os.scandir"):
            if args and _isinstance(args[0], path_like):
                check_read(args[0])
        elif event == "os.rename":
            check_write(args[0])
            check_write(args[1])
    return hook, work


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


def _main():
    cfg = json.loads(sys.argv[1])
    hook, work = _setup(cfg)
    for name in cfg["refused_imports"]:
        sys.modules[name] = _RefusedModule(name, "sandbox: a refusing placeholder for %s" % name)
    os.chdir(work)
    sys.argv = [cfg["program"], *cfg["args"]]
    sys.path[:0] = [work]
    import runpy
    sys.addaudithook(hook)
    del hook
    runpy.run_path(cfg["program"], run_name="__main__")


_main()
"""


def _find_pids_cgroup_root() -> str | None:
    """A writable cgroup directory with a pids controller (v1 `pids` hierarchy or a v2 mount), or None."""
    candidates = ["/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
    for root in candidates:
        if not os.path.isdir(root):
            continue
        probe = Path(root) / f"raso-sandbox-probe-{uuid.uuid4().hex[:8]}"
        try:
            probe.mkdir()
        except OSError:
            continue
        try:
            if (probe / "pids.max").exists():
                return root
        finally:
            try:
                probe.rmdir()
            except OSError:
                pass
    return None


@functools.lru_cache(maxsize=1)
def isolation_support() -> IsolationSupport:
    """Probe once which OS isolation this process may use; log a warning for each fallback."""
    support = IsolationSupport()
    unshare = shutil.which("unshare")
    attempts: list[list[str]] = []
    if unshare:
        if os.geteuid() == 0:
            attempts.append([unshare, "--mount", "--net", "--pid", "--fork", "--kill-child", "--"])
            attempts.append([unshare, "--net", "--pid", "--fork", "--kill-child", "--"])
        attempts.append([unshare, "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child", "--"])
        attempts.append([unshare, "--user", "--map-root-user", "--net", "--"])
    probe_code = (
        "import socket\n"
        "s = socket.socket(); s.settimeout(1)\n"
        "try:\n    s.connect(('127.0.0.1', 9))\nexcept OSError as e:\n    print(e.errno)\n"
    )
    for prefix in attempts:
        try:
            proc = subprocess.run([*prefix, sys.executable, "-I", "-c", probe_code], capture_output=True,
                                  text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as exc:
            support.notes.append(f"{' '.join(prefix)} failed: {exc}")
            continue
        # ENETUNREACH (101) proves the child has no usable network interface at all.
        if proc.returncode == 0 and proc.stdout.strip() == "101":
            support.unshare_prefix = prefix
            support.network_isolated = True
            support.pid_namespace = "--pid" in prefix
            support.mount_bin = shutil.which("mount") if "--mount" in prefix else None
            support.mount_namespace = support.mount_bin is not None
            break
        support.notes.append(f"{' '.join(prefix[:-1])} refused (rc={proc.returncode}: {proc.stderr.strip()[:200]})")
    if not support.network_isolated:
        log.warning("sandbox: `unshare --net` is not permitted here; model-written code is kept off the network "
                    "only by the interpreter audit hook (%s)", "; ".join(support.notes) or "unshare not found")
    if not support.pid_namespace:
        log.warning("sandbox: no PID namespace; stray child processes are killed through the process group only")
    support.pids_cgroup_root = _find_pids_cgroup_root() if os.geteuid() == 0 else None
    if support.pids_cgroup_root is None:
        support.notes.append("no writable pids cgroup: process count capped by the audit hook only")
    return support


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


class Sandbox:
    """Runs Python programs contained; one instance can serve many runs (and threads)."""

    def __init__(self, limits: SandboxLimits | None = None, python: str | None = None,
                 deny_read: Sequence[Path] = ()) -> None:
        self.limits = limits or SandboxLimits()
        self.python = python or sys.executable
        self.deny_read = [str(Path(p).resolve()) for p in deny_read]
        self.support = isolation_support()

    def run(self, code: str, inputs: Mapping[str, Path] | None = None, args: Sequence[str] = (),
            output_name: str | None = None, output_dest: Path | None = None) -> SandboxResult:
        """Run `code` with `args` in a fresh working directory holding copies of `inputs` (name -> source).

        `args` are passed as sys.argv[1:]; relative names refer to the working directory. If `output_name`
        is given and the program created that regular file, it is copied to `output_dest` and reported in
        `output_file`; nothing else leaves the working directory.
        """
        limits = self.limits
        root = Path(tempfile.mkdtemp(prefix="raso-sandbox-"))
        cgroup_dir: Path | None = None
        isolation = ["audit-hook", "rlimits", "process-group"]
        try:
            work = root / "work"
            work.mkdir()
            for name, src in (inputs or {}).items():
                if Path(name).name != name:
                    raise ValueError(f"input name must be a plain file name, got {name!r}")
                shutil.copyfile(src, work / name)
            program = work / "solution.py"
            program.write_text(code, encoding="utf-8")
            if self.support.pids_cgroup_root:
                cgroup_dir = Path(self.support.pids_cgroup_root) / f"raso-sandbox-{uuid.uuid4().hex[:12]}"
                try:
                    cgroup_dir.mkdir()
                    (cgroup_dir / "pids.max").write_text(str(limits.max_processes))
                    isolation.append("pids-cgroup")
                except OSError as exc:
                    log.warning("sandbox: could not set up a pids cgroup: %s", exc)
                    cgroup_dir = None
            procs_file = None
            if cgroup_dir is not None:
                procs_file = str(cgroup_dir / ("cgroup.procs" if (cgroup_dir / "cgroup.procs").exists() else "tasks"))
            cfg = {
                "work": str(work), "program": str(program), "args": list(args),
                "cpu": limits.cpu_seconds, "mem": limits.memory_bytes, "fsize": limits.file_size_bytes,
                "nofile": limits.max_open_files, "read_roots": [], "deny_read": self.deny_read,
                "cgroup_procs": procs_file, "cpu_exit": _SANDBOX_EXIT_CPU,
                "hide": self._hideable(work), "mount_bin": self.support.mount_bin,
                "refused_imports": list(IMPORTABLE_BUT_REFUSED),
            }
            if self.support.network_isolated:
                isolation.append("no-network")
            if self.support.pid_namespace:
                isolation.append("pid-namespace")
            if self.support.mount_namespace and cfg["hide"]:
                isolation.append("hidden-paths")
            cmd = [*self.support.unshare_prefix, self.python, "-I", "-c", _BOOTSTRAP, json.dumps(cfg)]
            env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": str(work),
                   "TMPDIR": str(work)}
            out_path, err_path = root / "stdout.txt", root / "stderr.txt"
            start = time.perf_counter()
            timed_out = False
            with out_path.open("wb") as out_fh, err_path.open("wb") as err_fh:
                proc = subprocess.Popen(cmd, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=out_fh,
                                        stderr=err_fh, start_new_session=True, close_fds=True)
                try:
                    proc.wait(timeout=limits.wall_seconds)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    self._kill_group(proc)
                finally:
                    if proc.poll() is None:
                        self._kill_group(proc)
            wall = time.perf_counter() - start
            self._release_cgroup(cgroup_dir)
            cgroup_dir = None
            result = SandboxResult(
                exit_code=None if timed_out else proc.returncode,
                stdout=_read_capped(out_path, limits.output_chars),
                stderr=_read_capped(err_path, limits.output_chars),
                wall_time_s=round(wall, 3), timed_out=timed_out, isolation=isolation,
            )
            result.limit_hit = self._limit_hit(result)
            if output_name is not None:
                if result.ok and result.limit_hit is None:
                    self._collect_output(result, work / output_name, output_dest)
                else:  # a partial file from a crashed or killed program is never scored
                    result.output_error = "the program did not finish cleanly, so its output file is not used"
            return result
        finally:
            self._release_cgroup(cgroup_dir)
            shutil.rmtree(root, ignore_errors=True)

    def _hideable(self, work: Path) -> list[str]:
        """deny_read paths that can be covered in the run's mount namespace without hiding Python or the work dir."""
        if not self.support.mount_namespace:
            return []
        keep = [str(work), sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                str(Path(self.python).resolve().parent)]
        return [d for d in self.deny_read
                if not any(k == d or k.startswith(d.rstrip(os.sep) + os.sep) for k in map(os.path.realpath, keep))]

    @staticmethod
    def _kill_group(proc: subprocess.Popen) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.error("sandbox: process %s did not die after SIGKILL", proc.pid)

    @staticmethod
    def _release_cgroup(cgroup_dir: Path | None) -> None:
        """Kill whatever is left in the run's cgroup and remove it."""
        if cgroup_dir is None or not cgroup_dir.exists():
            return
        procs = cgroup_dir / ("cgroup.procs" if (cgroup_dir / "cgroup.procs").exists() else "tasks")
        for _ in range(50):
            try:
                pids = [int(x) for x in procs.read_text().split()]
            except OSError:
                pids = []
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        try:
            cgroup_dir.rmdir()
        except OSError as exc:
            log.warning("sandbox: could not remove cgroup %s: %s", cgroup_dir, exc)

    @staticmethod
    def _limit_hit(result: SandboxResult) -> str | None:
        if result.timed_out:
            return "wall_time"
        err = result.stderr
        if result.exit_code == _SANDBOX_EXIT_CPU or "sandbox: CPU time limit exceeded" in err \
                or result.exit_code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
            return "cpu_time"
        if result.exit_code == 0:
            return None
        if "MemoryError" in err:
            return "memory"
        if "File too large" in err or "EFBIG" in err:
            return "file_size"
        if "Resource temporarily unavailable" in err and "fork" in err:
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
