"""The run directory (docs/run-directory.md): where every file lives, and writes that a kill never leaves half-done.

Layout::

    config.resolved.json / config.resolved.yaml   the configuration actually used, and the corpus it names
    task_description.md, harness_description.md   T and H as given to every agent role
    SKILL.md                                      the best skill so far (s_t; s* at the end)
    skill/<name>/                                 the same as a skill folder (SKILL.md + its files), ready to copy
                                                  into an agent's skills directory
    skills/skill_v000.md ...                      s0 and every candidate, by version
    skills/skill_v000/ ...                        each as a folder: SKILL.md and the files carried beside it
    candidates.jsonl                              every candidate: val score, current score, accept/reject, why
    lessons.jsonl                                 every lesson with the corpus sections it came from
    proposals/                                    the full init result and every update proposal (JSON)
    trajectories/<batch>/ , <batch>.rollouts.jsonl the rollouts of each batch (train minibatch or val eval)
    ledger.json, ledger.calls.jsonl               gateway usage: aggregated, and one line per model call
    cache/                                        the gateway's response cache (replayed on resume)
    events.jsonl                                  progress events
    checkpoint.json                               the run state, rewritten atomically after each unit of work
    run.lock                                      locked (flock) by the command working in the run; names it
    report.md, report.html, plots/*.png           the final report (markdown; one self-contained page)
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shlex
import sys
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from raso.errors import RunError
from raso.fileio import atomic_write_text

from .config import CORPUS_KEY

#: The file a command locks while it works in a run directory (RunLock).
LOCK_FILE = "run.lock"


def atomic_write_json(path: Path, data: Any) -> Path:
    return atomic_write_text(path, json.dumps(data, indent=1, ensure_ascii=False, default=str) + "\n")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """All complete lines; a torn last line (a kill during an append) is skipped."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def default_run_dir(harness: str, root: Path = Path("runs")) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in harness)[:40]
    return root / f"{safe}-{stamp}"


class RunDir:
    """Paths and writers of one run directory."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._append_lock = threading.Lock()

    # ------------------------------------------------------------------ paths
    @property
    def checkpoint(self) -> Path:
        return self.root / "checkpoint.json"

    @property
    def config_json(self) -> Path:
        return self.root / "config.resolved.json"

    @property
    def config_yaml(self) -> Path:
        return self.root / "config.resolved.yaml"

    @property
    def skills(self) -> Path:
        return self.root / "skills"

    @property
    def best_skill(self) -> Path:
        return self.root / "SKILL.md"

    @property
    def candidates(self) -> Path:
        return self.root / "candidates.jsonl"

    @property
    def lessons(self) -> Path:
        return self.root / "lessons.jsonl"

    @property
    def proposals(self) -> Path:
        return self.root / "proposals"

    @property
    def trajectories(self) -> Path:
        return self.root / "trajectories"

    @property
    def ledger(self) -> Path:
        return self.root / "ledger.json"

    @property
    def ledger_calls(self) -> Path:
        return self.root / "ledger.calls.jsonl"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def plan(self) -> Path:
        """The cost plan made before the run (raso.engine.plan)."""
        return self.root / "plan.json"

    @property
    def report(self) -> Path:
        return self.root / "report.md"

    @property
    def report_html(self) -> Path:
        return self.root / "report.html"

    @property
    def plots(self) -> Path:
        return self.root / "plots"

    @property
    def best_skill_folders(self) -> Path:
        """Holds one folder, named after the best skill, in the Agent Skills layout."""
        return self.root / "skill"

    def skill_path(self, version: int) -> Path:
        return self.skills / f"skill_v{version:03d}.md"

    def skill_folder(self, version: int) -> Path:
        """The version's skill folder: its SKILL.md and the files beside it (the source a resume reads)."""
        return self.skills / f"skill_v{version:03d}"

    def rollouts_path(self, batch: str) -> Path:
        return self.trajectories / f"{batch}.rollouts.jsonl"

    def trajectories_dir(self, batch: str) -> Path:
        return self.trajectories / batch

    # ------------------------------------------------------------------ writers
    def create(self) -> None:
        for folder in (self.root, self.skills, self.proposals, self.trajectories, self.plots):
            folder.mkdir(parents=True, exist_ok=True)

    def exists(self) -> bool:
        return self.checkpoint.exists()

    def write_config(self, config_dict: dict[str, Any], *, corpus: dict[str, Any] | None = None) -> str:
        """config.resolved.json / .yaml; `corpus` (corpus_tools.identity.corpus_record of the configured index) is
        recorded beside the options under the key `corpus`, which reading the config back drops (a record, not an
        option). Returns the digest of what was written (`config_digest`), which the run records in its state so a
        resume can tell an edited file."""
        record = {**config_dict, CORPUS_KEY: corpus} if corpus is not None else config_dict
        atomic_write_json(self.config_json, record)
        atomic_write_text(self.config_yaml, yaml.safe_dump(record, sort_keys=False, allow_unicode=True))
        return config_digest(json.loads(self.config_json.read_text(encoding="utf-8")))

    def config_edit(self, recorded_digest: str | None) -> str | None:
        """What is wrong, in words, when a resolved-config twin no longer holds what the run started with
        (`recorded_digest`, RunState.config_digest); None when both do. A run recorded before digests were
        (`recorded_digest` None) has its two twins compared with each other."""
        digests: dict[Path, str | None] = {}
        for path, parse in ((self.config_json, json.loads), (self.config_yaml, yaml.safe_load)):
            try:
                digests[path] = config_digest(parse(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, yaml.YAMLError):
                digests[path] = None  # missing or unreadable: not what the run wrote
        if recorded_digest is None:
            json_digest, yaml_digest = digests.values()
            if yaml_digest is None or json_digest == yaml_digest:  # nothing recorded to hold the JSON to
                return None
            return (f"{self.config_json} and {self.config_yaml} differ, so one of them was edited after the run "
                    "started; restore the edited one from the other")
        edited = [path for path, digest in digests.items() if digest != recorded_digest]
        if not edited:
            return None
        intact = [path for path in digests if path not in edited]
        twin = f"; its twin {intact[0].name} still holds them" if intact else ""
        return f"{edited[0]} no longer holds the options this run started with (it was edited): restore it{twin}"

    def recorded_corpus(self) -> dict[str, Any] | None:
        """The corpus recorded in config.resolved.json when the run started (None for a run made before runs
        recorded it, or an unreadable file)."""
        try:
            data = json.loads(self.config_json.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        record = data.get(CORPUS_KEY) if isinstance(data, dict) else None
        return record if isinstance(record, dict) else None

    def append_jsonl(self, path: Path, row: dict[str, Any]) -> None:
        """Append one line and flush it to the OS (a SIGKILL cannot lose it after this returns)."""
        line = json.dumps(row, ensure_ascii=False, default=str) + "\n"
        with self._append_lock:
            with path.open("a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()

    def rewrite_jsonl(self, path: Path, rows: Iterable[dict[str, Any]]) -> None:
        atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows))

    def lock(self, operation: str) -> "RunLock":
        """This run directory's lock for `operation` (not yet taken: `with rd.lock("resume"):` or `.acquire()`)."""
        return RunLock(self.root, operation)


def config_digest(record: Any) -> str:
    """A digest of a resolved config's content (the same for its JSON and YAML twins, whatever their layout)."""
    canonical = json.dumps(record, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class RunLock:
    """An OS lock on a run directory: `flock` on its run.lock, held by one command while it works there, so two
    commands never write one run (two resumes would both pay for calls that one ledger cannot count). The kernel
    releases it when the holder's process ends, however it ends (kill -9 included): a stale lock cannot exist.
    The file names the holder (pid, command) for the refusal of a second command; the file itself stays."""

    def __init__(self, root: str | Path, operation: str) -> None:
        self.root = Path(root)
        self.path = self.root / LOCK_FILE
        self.operation = operation
        self._fd: int | None = None

    def acquire(self) -> "RunLock":
        """Take the lock at once, or raise RunError naming the process that holds it (never waits)."""
        try:  # O_NOFOLLOW: a link planted as run.lock is refused, never written through
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise RunError(f"cannot lock the run directory {self.root}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder_text(fd)
            os.close(fd)
            raise RunError(f"{self.root} is in use by {holder}; wait for it to end (or stop it), then run this "
                           "again") from None
        holder_record = {"pid": os.getpid(), "operation": self.operation, "command": _command_line(),
                         "since": datetime.now(UTC).isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(holder_record) + "\n").encode("utf-8"), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)  # the next reader of a held lock never sees a holder that has gone
        finally:
            os.close(fd)  # closing the last descriptor releases the flock

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _command_line() -> str:
    """This process's command as a person typed it: `raso resume runs/x` (also for `python -m raso ...`)."""
    if not sys.argv or not sys.argv[0]:
        return ""
    program = Path(sys.argv[0])
    name = program.parent.name if program.name == "__main__.py" else program.name
    return shlex.join([name, *sys.argv[1:]])


def _holder_text(fd: int) -> str:
    """'pid N (command, since T)' from a held lock file, as far as the holder has written it."""
    try:
        holder = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
        pid = int(holder["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"
    command = holder.get("command") or holder.get("operation") or "raso"
    return f"pid {pid} ({command}, since {holder.get('since', '?')})"
