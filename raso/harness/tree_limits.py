"""Limits for a run's whole process tree (CPU time, resident memory, processes, disk of its writable folders).

rlimits bind one process each: four processes under `cpu_seconds=3` use 12 CPU seconds, six under a 1 GiB address
space hold 3 GiB, and the kernel exempts root from the process limit. A run's tree is therefore bounded as a whole,
in the strongest mode the host allows (`tree_limit_support()`, probed once):

* "cgroup-v2" / "cgroup-v1": a fresh control group per run (created where this process may create one: a
  delegated cgroup v2 subtree with the memory and pids controllers, or writable v1 memory, pids and cpuacct
  hierarchies, e.g. as root). The run's first process joins it before anything else starts, so every descendant
  is inside. The kernel enforces memory (`memory.max` / `memory.limit_in_bytes`, swap included where it can) and
  processes (`pids.max`: a fork past it fails); a watcher reads the group's CPU time and stops the tree when it
  passes `cpu_seconds`.
* "process-tree" (weaker, reported as such): no control group is allowed here. A watcher samples the run's
  descendants from /proc every 0.1 s and stops the tree when their summed CPU time (their own and their reaped
  children's), summed resident memory or count passes the limit. Anything shorter than a sample between two
  samples is unseen, and children a process lets the kernel reap for it (SIGCHLD ignored) are not summed; the
  per-process rlimits still hold, and a process count per uid (RLIMIT_NPROC) binds where the run is not root.

In every mode the run's writable folders are measured (sizes of regular files, links not followed, at most
`MAX_WALK_ENTRIES` entries) and the tree is stopped when they hold more than `disk_bytes`; no single file may
grow past that either (RLIMIT_FSIZE).
"""

from __future__ import annotations

import functools
import logging
import os
import shlex
import signal
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)

TreeLimitMode = Literal["cgroup-v2", "cgroup-v1", "process-tree"]
SAMPLE_SECONDS = 0.1  # how often the watcher looks at CPU, memory and processes
DISK_SAMPLE_SECONDS = 0.5  # the least time between two measurements of the writable folders
MAX_WALK_ENTRIES = 200_000  # a writable folder with more entries counts as over its disk limit
# Processes of the sandbox itself inside a run's tree (the launcher's bwrap, its PID-namespace init, the loopback
# relay): the process limit is for the program's own.
SANDBOX_PROCESSES = 3
V1_CONTROLLERS = ("memory", "pids", "cpuacct")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class TreeLimitSupport:
    """Where this process can make a control group per run, or that it cannot (mode "process-tree")."""

    mode: TreeLimitMode
    parents: tuple[str, ...] = ()  # v2: one folder; v1: one per controller in V1_CONTROLLERS order
    note: str = ""

    def describe(self) -> str:
        if self.mode == "process-tree":
            return ("process-tree watcher (no control group may be created here: CPU, memory and process count "
                    "sampled every 0.1 s, weaker than a cgroup)")
        return f"{self.mode} per run under {', '.join(self.parents)}"


def _own_cgroups() -> dict[str, str]:
    """controller (or "" for cgroup v2) -> this process's cgroup path, from /proc/self/cgroup."""
    found: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in (parts[1].split(",") if parts[1] else [""]):
            found[controller] = parts[2]
    return found


def _cgroup_mounts() -> dict[str, str]:
    """controller (or "" for cgroup v2) -> mount point, from /proc/self/mountinfo."""
    mounts: dict[str, str] = {}
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return mounts
    for line in lines:
        head, _, tail = line.partition(" - ")
        fields, extra = head.split(), tail.split()
        if len(fields) < 5 or len(extra) < 3 or fields[3] != "/":
            continue  # a bind of a sub-folder of a hierarchy does not show our cgroup paths as they are
        if extra[0] == "cgroup2":
            mounts.setdefault("", fields[4])
        elif extra[0] == "cgroup":
            for option in extra[2].split(","):
                mounts.setdefault(option, fields[4])
    return mounts


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _read(path: str) -> str:
    with open(path) as fh:
        return fh.read()


def _try_child(parents: Sequence[str], setup: Sequence[tuple[int, str, str]]) -> str | None:
    """Create and remove a probe child under each parent, writing each (parent index, file, value); None when
    that all worked, else why not."""
    made: list[str] = []
    name = f"raso-probe-{uuid.uuid4().hex[:8]}"
    try:
        for parent in parents:
            child = os.path.join(parent, name)
            os.mkdir(child)
            made.append(child)
        for index, filename, value in setup:
            _write(os.path.join(made[index], filename), value)
        return None
    except OSError as exc:
        return f"{exc.strerror or exc} ({exc.filename or ''})"
    finally:
        for child in made:
            try:
                os.rmdir(child)
            except OSError:
                pass


def _probe_v2(mounts: dict[str, str], own: dict[str, str]) -> TreeLimitSupport | str:
    if "" not in mounts or "" not in own:
        return "no cgroup v2 hierarchy"
    # our own group (delegated to us, e.g. a systemd service with Delegate=yes), else the hierarchy's root, whose
    # controllers systemd enables for its children and where root may make a group
    reasons = []
    for parent in dict.fromkeys([os.path.normpath(mounts[""] + "/" + own[""].lstrip("/")), mounts[""]]):
        found = _probe_v2_under(parent)
        if isinstance(found, TreeLimitSupport):
            return found
        reasons.append(found)
    return "; ".join(reasons)


def _probe_v2_under(parent: str) -> TreeLimitSupport | str:
    try:
        enabled = _read(os.path.join(parent, "cgroup.subtree_control")).split()
        available = _read(os.path.join(parent, "cgroup.controllers")).split()
    except OSError as exc:
        return f"cgroup v2 at {parent} unreadable ({exc.strerror})"
    missing = [c for c in ("memory", "pids") if c not in enabled]
    if missing:
        if any(c not in available for c in missing):
            return f"cgroup v2 at {parent} lacks the {'/'.join(missing)} controller"
        try:  # fails (EBUSY) where the group holds processes itself: only a delegated, empty parent works
            _write(os.path.join(parent, "cgroup.subtree_control"), " ".join(f"+{c}" for c in missing))
        except OSError as exc:
            return f"cgroup v2 at {parent}: cannot enable {'/'.join(missing)} ({exc.strerror})"
    refused = _try_child([parent], [(0, "memory.max", str(1 << 30)), (0, "pids.max", "64")])
    if refused:
        return f"cgroup v2 at {parent}: {refused}"
    return TreeLimitSupport("cgroup-v2", (parent,))


def _probe_v1(mounts: dict[str, str], own: dict[str, str]) -> TreeLimitSupport | str:
    parents = []
    for controller in V1_CONTROLLERS:
        if controller not in mounts or controller not in own:
            return f"no cgroup v1 {controller} hierarchy"
        parents.append(os.path.normpath(mounts[controller] + "/" + own[controller].lstrip("/")))
    refused = _try_child(parents, [(0, "memory.limit_in_bytes", str(1 << 30)), (1, "pids.max", "64")])
    if refused:
        return f"cgroup v1: {refused}"
    return TreeLimitSupport("cgroup-v1", tuple(parents))


@functools.lru_cache(maxsize=1)
def tree_limit_support() -> TreeLimitSupport:
    """The strongest way this process can bound a run's whole process tree; probed once, logged once."""
    mounts, own = _cgroup_mounts(), _own_cgroups()
    reasons = []
    for probe in (_probe_v2, _probe_v1):
        found = probe(mounts, own)
        if isinstance(found, TreeLimitSupport):
            log.info("sandbox: limits per run with %s", found.describe())
            return found
        reasons.append(found)
    support = TreeLimitSupport("process-tree", note="; ".join(reasons))
    log.warning("sandbox: no control group can be made here (%s): a run's CPU, memory and process count are "
                "bounded by a process-tree watcher that samples every %.1f s, weaker than a cgroup (a delegated "
                "cgroup v2 subtree, or running as root, gives the kernel-enforced mode)", support.note,
                SAMPLE_SECONDS)
    return support


def _proc_stat(pid: int) -> tuple[int, float, int] | None:
    """(parent pid, CPU seconds of the process and its reaped children, resident bytes), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2:].split()  # after the command name, which may hold spaces and parentheses
    # fields[0] is the state (stat field 3): ppid is field 4, utime..cstime 14-17, rss 24
    ticks = sum(int(v) for v in fields[11:15])
    return int(fields[1]), ticks / CLOCK_TICKS, int(fields[21]) * PAGE_SIZE


def process_tree(root_pid: int) -> dict[int, tuple[float, int]]:
    """pid -> (CPU seconds incl. reaped children, resident bytes) for `root_pid` and every descendant."""
    stats: dict[int, tuple[int, float, int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (info := _proc_stat(int(entry))) is not None:
            stats[int(entry)] = info
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    tree: dict[int, tuple[float, int]] = {}
    todo = [root_pid] if root_pid in stats else []
    while todo:
        pid = todo.pop()
        if pid in tree:
            continue
        tree[pid] = stats[pid][1:]
        todo.extend(children.get(pid, ()))
    return tree


def folder_bytes(folders: Sequence[str], budget: int = MAX_WALK_ENTRIES) -> int | None:
    """Bytes held by regular files under `folders` (links not followed); None past `budget` entries."""
    total, seen = 0, 0
    todo = list(folders)
    while todo:
        try:
            with os.scandir(todo.pop()) as it:
                for entry in it:
                    seen += 1
                    if seen > budget:
                        return None
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            todo.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            total += entry.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        continue
        except OSError:
            continue
    return total


@dataclass
class TreeLimiter:
    """Bounds one run's process tree; `command()` wraps its argv, `start()` watches it, `finish()` reports."""

    cpu_seconds: float
    memory_bytes: int
    max_processes: int
    disk_bytes: int
    writable: Sequence[str]
    support: TreeLimitSupport = field(default_factory=tree_limit_support)
    verdict: str | None = None  # the limit the watcher stopped the tree for
    detail: str = ""
    cpu_used: float = 0.0
    peak_processes: int = 0
    groups: list[str] = field(default_factory=list)
    _pid: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def mode(self) -> TreeLimitMode:
        return self.support.mode

    def __post_init__(self) -> None:
        if self.mode == "process-tree":
            return
        name = f"raso-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        try:
            for parent in self.support.parents:
                os.mkdir(os.path.join(parent, name))
                self.groups.append(os.path.join(parent, name))
            pids_max = str(self.max_processes + SANDBOX_PROCESSES)
            if self.mode == "cgroup-v2":
                group = self.groups[0]
                _write(f"{group}/memory.max", str(self.memory_bytes))
                _optional_write(f"{group}/memory.swap.max", "0")
                _write(f"{group}/pids.max", pids_max)
            else:
                memory, pids, _ = self.groups
                _write(f"{memory}/memory.limit_in_bytes", str(self.memory_bytes))
                _optional_write(f"{memory}/memory.memsw.limit_in_bytes", str(self.memory_bytes))
                _write(f"{pids}/pids.max", pids_max)
        except OSError as exc:  # the probe worked, so this is the host changing under us: never run unbounded
            self._remove_groups()
            raise OSError(f"sandbox: cannot make the run's control group ({exc})") from None

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` started so that its first process is already in the run's group (a shell joins, then execs)."""
        if not self.groups:
            return list(argv)
        # every join must work before the program starts: a run outside its group would be unbounded
        joins = " && ".join(f"echo $$ > {shlex.quote(g + '/cgroup.procs')}" for g in self.groups)
        return ["/bin/sh", "-c", f"{joins} && exec \"$@\"", "sh", *argv]

    def start(self, pid: int, stop_tree: Callable[[], None]) -> None:
        self._pid = pid
        self._thread = threading.Thread(target=self._watch, args=(stop_tree,), daemon=True)
        self._thread.start()

    def _watch(self, stop_tree: Callable[[], None]) -> None:
        next_disk = 0.0
        while not self._stop.wait(SAMPLE_SECONDS):
            verdict = self._sample()
            if verdict is None and time.monotonic() >= next_disk:
                began = time.monotonic()
                held = folder_bytes(self.writable)
                # a folder that takes long to measure is measured less often (at most a tenth of the time)
                next_disk = time.monotonic() + max(DISK_SAMPLE_SECONDS, 10 * (time.monotonic() - began))
                if held is None:
                    verdict = "disk", f"the writable folders hold more than {MAX_WALK_ENTRIES} entries"
                elif held > self.disk_bytes:
                    verdict = "disk", f"the writable folders hold {held} bytes, more than {self.disk_bytes}"
            if verdict is not None:
                self.verdict, self.detail = verdict
                stop_tree()
                self.kill_all()
                return

    def _sample(self) -> tuple[str, str] | None:
        if self.mode == "process-tree":
            tree = process_tree(self._pid)
            if not tree:
                return None
            self.cpu_used = max(self.cpu_used, sum(cpu for cpu, _ in tree.values()))
            resident = sum(rss for _, rss in tree.values())
            self.peak_processes = max(self.peak_processes, len(tree))
            if resident > self.memory_bytes:
                return "memory", f"the run's processes held {resident} bytes together, more than {self.memory_bytes}"
            if len(tree) > self.max_processes + SANDBOX_PROCESSES:
                return "processes", f"the run had {len(tree) - SANDBOX_PROCESSES} processes, more than " \
                                    f"{self.max_processes}"
        else:
            self._read_group()
            if self._oom_kills() > 0:
                return "memory", f"the run's processes together reached {self.memory_bytes} bytes (a process " \
                                 "was killed by the kernel)"
        if self.cpu_used > self.cpu_seconds:
            return "cpu_time", f"the run's processes used {self.cpu_used:.1f} CPU seconds together, more than " \
                               f"{self.cpu_seconds}"
        return None

    def _read_group(self) -> None:
        try:
            if self.mode == "cgroup-v2":
                usage = _read(f"{self.groups[0]}/cpu.stat").split()
                self.cpu_used = int(usage[usage.index("usage_usec") + 1]) / 1e6
                self.peak_processes = max(self.peak_processes, int(_read(f"{self.groups[0]}/pids.current")))
            else:
                self.cpu_used = int(_read(f"{self.groups[2]}/cpuacct.usage")) / 1e9
                self.peak_processes = max(self.peak_processes, int(_read(f"{self.groups[1]}/pids.current")))
        except (OSError, ValueError, IndexError):
            pass

    def _oom_kills(self) -> int:
        path = f"{self.groups[0]}/{'memory.events' if self.mode == 'cgroup-v2' else 'memory.oom_control'}"
        try:
            words = _read(path).split()
            return int(words[words.index("oom_kill") + 1])
        except (OSError, ValueError, IndexError):
            return 0

    def _pids_refused(self) -> int:
        group = self.groups[0] if self.mode == "cgroup-v2" else self.groups[1]
        try:
            words = _read(f"{group}/pids.events").split()
            return int(words[words.index("max") + 1])
        except (OSError, ValueError, IndexError):
            return 0

    def kill_all(self) -> None:
        """SIGKILL every process of the run that is still there (its group's, or its tree's)."""
        if self.groups:
            for _ in range(3):
                pids = self._group_pids()
                if not pids:
                    return
                for pid in pids:
                    _kill(pid)
                time.sleep(0.01)
        elif self._pid:
            for pid in process_tree(self._pid):
                if pid != self._pid:
                    _kill(pid)

    def _group_pids(self) -> list[int]:
        try:
            return [int(p) for p in _read(f"{self.groups[-1]}/cgroup.procs").split()]
        except (OSError, ValueError):
            return []

    def finish(self, tree_cpu_seconds: float) -> None:
        """Stop watching, take the last readings (`tree_cpu_seconds`: the run's reaped tree from wait4), check the
        writable folders once more, end what is left of the tree and remove its group."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.cpu_used = max(self.cpu_used, tree_cpu_seconds)
        if self.groups:
            self._read_group()
            if self.verdict is None and self._oom_kills() > 0:
                self.verdict, self.detail = "memory", f"the run's processes together reached {self.memory_bytes} " \
                                                      "bytes (a process was killed by the kernel)"
            if self.verdict is None and self._pids_refused() > 0:
                self.verdict, self.detail = "processes", f"a fork past {self.max_processes} processes was refused"
        if self.verdict is None:
            held = folder_bytes(self.writable)
            if held is None or held > self.disk_bytes:
                self.verdict, self.detail = "disk", f"the writable folders hold more than {self.disk_bytes} bytes"
        self.kill_all()
        self._remove_groups()

    def _remove_groups(self) -> None:
        for group in self.groups:
            for _ in range(50):  # a killed process leaves its group a moment after it is reaped
                try:
                    os.rmdir(group)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
            else:
                log.warning("sandbox: could not remove the control group %s", group)
        self.groups = []


def _optional_write(path: str, value: str) -> None:
    if os.path.exists(path):
        try:
            _write(path, value)
        except OSError:
            pass


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


__all__ = ["MAX_WALK_ENTRIES", "TreeLimitMode", "TreeLimitSupport", "TreeLimiter", "folder_bytes", "process_tree",
           "tree_limit_support"]
