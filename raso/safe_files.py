"""Host-side reads, copies and removals of files that an agent or a task folder controls.

An agent can leave anything in its workspace: a symbolic link to /root (or the workspace itself replaced by one),
a FIFO, a tree thousands of folders deep, a sparse file of a terabyte; a task folder is someone else's download.
Every function here opens each entry relative to its parent folder's descriptor with O_NOFOLLOW, so a link is
never followed (a link inside a tree is left out, a linked top is refused); special files (FIFOs, devices,
sockets) are skipped without being opened; sizes, file counts and depth are checked before bytes are read and
while they are read; walks are loops over an explicit stack, never Python recursion.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MiB = 1024 * 1024
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # O_NONBLOCK: a FIFO swapped in never blocks
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1024 * 1024


class UnsafePathError(ValueError):
    """A path or tree refused: a symbolic link, a special file, or over a limit; the message names it and why."""


@dataclass(frozen=True)
class TreeLimits:
    """Bounds on one tree read or copied on the host."""

    max_bytes: int = 256 * MiB  # all regular files together
    max_file_bytes: int = 256 * MiB  # one file
    max_entries: int = 20_000  # files and folders together
    max_depth: int = 64  # folders below the top; deeper ones are left out


def kind_of(mode: int) -> str:
    """An entry's kind in words, for messages."""
    if stat.S_ISLNK(mode):
        return "symbolic link"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISDIR(mode):
        return "folder"
    return "regular file" if stat.S_ISREG(mode) else "special file"


def open_folder(path: str | Path) -> int:
    """A descriptor of the folder `path`; UnsafePathError when it is a symbolic link or not a folder. Only the last
    component is checked: the folders above it are the caller's (a run folder, a tasks folder a user named)."""
    try:
        before = os.lstat(path)
    except OSError as exc:
        raise UnsafePathError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISDIR(before.st_mode):
        raise UnsafePathError(f"{path}: a {kind_of(before.st_mode)}, not a folder (links are not followed)")
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError as exc:
        raise UnsafePathError(f"{path}: cannot be opened as a folder ({exc.strerror or exc})") from None
    after = os.fstat(fd)
    if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):  # swapped between the two looks
        os.close(fd)
        raise UnsafePathError(f"{path}: changed while being opened")
    return fd


def _read_fd(fd: int, limit: int, what: str) -> bytes:
    """Up to `limit` bytes of the open regular file `fd`; UnsafePathError when it holds more (a file growing while
    read, or lying in its size, is still cut at the limit)."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > limit:
            raise UnsafePathError(f"{what}: over the limit of {limit:,} bytes")
        chunks.append(chunk)


def _copy_fd(source_fd: int, dest_fd: int, limit: int, what: str) -> int:
    """Stream the open file `source_fd` into `dest_fd`, at most `limit` bytes (UnsafePathError past it); returns the
    bytes copied. Memory stays at one chunk whatever the size."""
    total = 0
    while True:
        chunk = os.read(source_fd, min(_CHUNK, limit + 1 - total))
        if not chunk:
            return total
        total += len(chunk)
        if total > limit:
            raise UnsafePathError(f"{what}: over the limit of {limit:,} bytes")
        view = memoryview(chunk)
        while view:
            view = view[os.write(dest_fd, view):]


def _open_regular(name: str | Path, dir_fd: int | None, what: str) -> tuple[int, os.stat_result]:
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(f"{what}: a symbolic link (links are not followed)") from None
        raise UnsafePathError(f"{what}: cannot be read ({exc.strerror or exc})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UnsafePathError(f"{what}: a {kind_of(info.st_mode)}, not a regular file")
    return fd, info


def _open_source(path: str | Path, within: str | Path | None) -> tuple[int, os.stat_result, str]:
    """Open the regular file `path` (with `within`: the name `path` directly inside the folder `within`, whose own
    link is refused too, so a workspace swapped for a link reads nothing); its descriptor, stat and label."""
    label = str(path) if within is None else f"{within}/{path}"
    if within is not None and (os.sep in str(path) or str(path) in ("", ".", "..")):
        raise UnsafePathError(f"{label}: not a name inside {within}")
    folder = open_folder(within) if within is not None else None
    try:
        try:
            mode = os.stat(path, dir_fd=folder, follow_symlinks=False).st_mode
        except OSError as exc:
            raise UnsafePathError(f"{label}: cannot be read ({exc.strerror or exc})") from None
        if not stat.S_ISREG(mode):  # checked before opening: a FIFO is never opened
            raise UnsafePathError(f"{label}: a {kind_of(mode)}, not a regular file (links are not followed)")
        fd, info = _open_regular(path, folder, label)
    finally:
        if folder is not None:
            os.close(folder)
    return fd, info, label


def read_bytes(path: str | Path, max_bytes: int, within: str | Path | None = None) -> bytes:
    """The bytes of the regular file `path` (or of the name `path` in the folder `within`), at most `max_bytes`;
    UnsafePathError for a symbolic link, a special file (never opened: it could block), a file over the limit, or
    one that cannot be read."""
    fd, info, label = _open_source(path, within)
    try:
        if info.st_size > max_bytes:
            raise UnsafePathError(f"{label}: {info.st_size:,} bytes, over the limit of {max_bytes:,} bytes")
        return _read_fd(fd, max_bytes, label)
    finally:
        os.close(fd)


def copy_file(source: str | Path, dest: str | Path, max_bytes: int, within: str | Path | None = None) -> int:
    """Copy the regular file `source` (or the name `source` in the folder `within`) to `dest` (replaced if it is a
    regular file; a link there is refused, never written through), at most `max_bytes`; returns the bytes copied.
    UnsafePathError as for `read_bytes`; a copy cut at the limit is removed."""
    fd, info, label = _open_source(source, within)
    try:
        if info.st_size > max_bytes:
            raise UnsafePathError(f"{label}: {info.st_size:,} bytes, over the limit of {max_bytes:,} bytes")
        try:
            out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                          0o755 if info.st_mode & 0o111 else 0o644)
        except OSError as exc:
            raise UnsafePathError(f"{dest}: cannot be written ({exc.strerror or exc})") from None
        try:
            return _copy_fd(fd, out, max_bytes, label)
        except BaseException:
            os.unlink(dest)
            raise
        finally:
            os.close(out)
    finally:
        os.close(fd)


def read_text(path: str | Path, max_bytes: int) -> str:
    """`read_bytes` decoded as UTF-8 (UnicodeDecodeError as Python raises it)."""
    return read_bytes(path, max_bytes).decode("utf-8")


@dataclass(frozen=True)
class Entry:
    """One entry met by `walk_tree`: its path relative to the top (POSIX), its lstat, its folder's descriptor (valid
    during the callback) and its depth (1 = directly in the top folder)."""

    relative: str
    name: str
    info: os.stat_result
    dir_fd: int
    depth: int


def walk_tree(top_fd: int, on_entry: Callable[[Entry, Any], Any], top_payload: Any = None,
              release: Callable[[Any], None] | None = None, max_depth: int = TreeLimits.max_depth) -> None:
    """Visit every entry under the open folder `top_fd` in sorted pre-order, without recursion or following links.
    `on_entry(entry, payload of its folder)` is called for each; for a folder, what it returns is the payload of
    that folder's entries (None: the folder is not entered). Folders deeper than `max_depth` are never entered,
    so at most `max_depth` descriptors of the walk (and of payloads, which `release` closes) are open at once."""
    frames: list[tuple[int, Any, str, int, list[str]]] = [(top_fd, top_payload, "", 0,
                                                          sorted(os.listdir(top_fd), reverse=True))]
    try:
        while frames:
            fd, payload, relative, depth, names = frames[-1]
            if not names:
                frames.pop()
                if fd != top_fd:
                    os.close(fd)
                    if release is not None:
                        release(payload)
                continue
            name = names.pop()
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            entry = Entry(f"{relative}/{name}" if relative else name, name, info, fd, depth + 1)
            child_payload = on_entry(entry, payload)
            if not stat.S_ISDIR(info.st_mode) or child_payload is None or depth + 1 > max_depth:
                if child_payload is not None and stat.S_ISDIR(info.st_mode) and release is not None:
                    release(child_payload)
                continue
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:  # unreadable, or swapped for a link since the stat: not entered
                if release is not None:
                    release(child_payload)
                continue
            try:
                names_below = sorted(os.listdir(child), reverse=True)
            except OSError:
                os.close(child)
                if release is not None:
                    release(child_payload)
                continue
            frames.append((child, child_payload, entry.relative, depth + 1, names_below))
    finally:
        for fd, payload, _relative, _depth, _names in frames:
            if fd != top_fd:
                os.close(fd)
                if release is not None:
                    release(payload)


def copy_tree(source: str | Path, dest: str | Path, limits: TreeLimits = TreeLimits()) -> list[str]:
    """Copy the regular files and folders of `source` into `dest` (created if missing); returns what was left out,
    each as "relative/path (why)": symbolic links (a link could point anywhere on this machine), special files,
    unreadable entries and folders deeper than `limits.max_depth`. UnsafePathError when `source` itself is a link or
    not a folder, or the tree is over `limits.max_bytes`, `max_file_bytes` or `max_entries`. A file keeps its
    executable bit, nothing else of its mode (never a 0600 turned readable: new files are 0644 or 0755)."""
    left_out: list[str] = []
    totals = {"bytes": 0, "entries": 0}
    source_fd = open_folder(source)
    try:
        os.makedirs(dest, mode=0o755, exist_ok=True)
        dest_fd = open_folder(dest)
    except BaseException:
        os.close(source_fd)
        raise

    def on_entry(entry: Entry, dest_dir: int) -> int | None:
        mode = entry.info.st_mode
        totals["entries"] += 1
        if totals["entries"] > limits.max_entries:
            raise UnsafePathError(f"{source}: more than {limits.max_entries:,} files and folders")
        if stat.S_ISDIR(mode):
            if entry.depth > limits.max_depth:
                left_out.append(f"{entry.relative} (deeper than {limits.max_depth} folders)")
                return None
            try:
                os.mkdir(entry.name, 0o755, dir_fd=dest_dir)
                return os.open(entry.name, _DIR_FLAGS, dir_fd=dest_dir)
            except OSError as exc:
                left_out.append(f"{entry.relative} ({exc.strerror or exc})")
                return None
        if not stat.S_ISREG(mode):
            left_out.append(f"{entry.relative} ({kind_of(mode)})")
            return None
        what = f"{source}/{entry.relative}"
        if entry.info.st_size > limits.max_file_bytes:
            raise UnsafePathError(f"{what}: {entry.info.st_size:,} bytes, over the limit of "
                                  f"{limits.max_file_bytes:,} per file")
        if totals["bytes"] + entry.info.st_size > limits.max_bytes:
            raise UnsafePathError(f"{source}: over the limit of {limits.max_bytes // MiB:,} MB in all")
        try:
            fd, info = _open_regular(entry.name, entry.dir_fd, what)
        except UnsafePathError as exc:
            left_out.append(f"{entry.relative} ({str(exc).removeprefix(what + ': ')})")
            return None
        try:
            out = os.open(entry.name, _NEW_FILE_FLAGS, 0o755 if info.st_mode & 0o111 else 0o644, dir_fd=dest_dir)
            try:
                room = min(limits.max_file_bytes, limits.max_bytes - totals["bytes"])
                totals["bytes"] += _copy_fd(fd, out, room, what)
            finally:
                os.close(out)
        finally:
            os.close(fd)
        return None

    try:
        walk_tree(source_fd, on_entry, dest_fd, release=os.close, max_depth=limits.max_depth)
    finally:
        os.close(source_fd)
        os.close(dest_fd)
    return left_out


def tree_problems(folder: str | Path, limits: TreeLimits = TreeLimits(), skip: tuple[str, ...] = ()) -> list[str]:
    """Why the tree `folder` cannot be used as given (a folder of someone else's files about to be copied): each
    symbolic link, special file, folder deeper than `limits.max_depth` and file over the size limits, one line
    each (empty when it is fine). A linked or missing top is one problem; entries of the top named in `skip` (never
    read) are not looked at."""
    try:
        top = open_folder(folder)
    except UnsafePathError as exc:
        return [str(exc)]
    problems: list[str] = []
    totals = {"bytes": 0, "entries": 0}

    def on_entry(entry: Entry, _payload: object) -> bool | None:
        mode = entry.info.st_mode
        if entry.depth == 1 and entry.name in skip:
            return None
        totals["entries"] += 1
        if totals["entries"] == limits.max_entries + 1:
            problems.append(f"{folder}: more than {limits.max_entries:,} files and folders")
        if stat.S_ISDIR(mode):
            if entry.depth > limits.max_depth:
                problems.append(f"{folder}/{entry.relative}: deeper than {limits.max_depth} folders")
                return None
            return True
        if not stat.S_ISREG(mode):
            problems.append(f"{folder}/{entry.relative}: a {kind_of(mode)} (only regular files and folders are "
                            "copied; links are not followed)")
            return None
        if entry.info.st_size > limits.max_file_bytes:
            problems.append(f"{folder}/{entry.relative}: {entry.info.st_size:,} bytes, over the limit of "
                            f"{limits.max_file_bytes:,} per file")
        totals["bytes"] += entry.info.st_size
        return None

    try:
        walk_tree(top, on_entry, max_depth=limits.max_depth)
    finally:
        os.close(top)
    if totals["bytes"] > limits.max_bytes:
        problems.append(f"{folder}: {totals['bytes']:,} bytes in all, over the limit of {limits.max_bytes:,}")
    return problems


def list_files(folder: str | Path, limit: int, max_depth: int = TreeLimits.max_depth) -> tuple[list[str], bool]:
    """The relative paths of the regular files under `folder` (sorted, at most `limit`; links not followed) and
    whether there were more. An unreadable or linked top lists nothing."""
    found: list[str] = []
    more = False
    try:
        top = open_folder(folder)
    except UnsafePathError:
        return [], False

    class _Enough(Exception):
        pass

    def on_entry(entry: Entry, _payload: object) -> bool | None:
        nonlocal more
        if stat.S_ISDIR(entry.info.st_mode):
            return True
        if stat.S_ISREG(entry.info.st_mode):
            if len(found) >= limit:
                more = True
                raise _Enough
            found.append(entry.relative)
        return None

    try:
        walk_tree(top, on_entry, max_depth=max_depth)
    except _Enough:
        pass
    finally:
        os.close(top)
    return found, more


def chown_tree(path: str | Path, uid: int, gid: int, max_depth: int = TreeLimits.max_depth) -> None:
    """Give `path` and everything under it (to `max_depth` folders) to `uid`:`gid`, changing links themselves,
    never what they point at; each entry is changed through its folder's descriptor, so no path is followed."""
    top = open_folder(path)
    try:
        os.chown(top, uid, gid)

        def on_entry(entry: Entry, _payload: object) -> bool | None:
            try:
                os.chown(entry.name, uid, gid, dir_fd=entry.dir_fd, follow_symlinks=False)
            except OSError as exc:
                log.debug("chown %s/%s: %s", path, entry.relative, exc)
            return True if stat.S_ISDIR(entry.info.st_mode) else None

        walk_tree(top, on_entry, max_depth=max_depth)
    finally:
        os.close(top)


def remove_tree(path: str | Path) -> bool:
    """Delete `path` (a folder with everything in it, a file or a link) without following links, without recursion
    and without failing: a folder's sub-folders are emptied by moving their entries up into it (so no path grows
    long and no descriptor stays open per level: a tree 100,000 folders deep is removed like a flat one), then
    removed. Returns whether `path` is gone; what could not be removed is logged."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return True
    except OSError as exc:
        log.warning("cannot remove %s: %s", path, exc)
        return False
    if not stat.S_ISDIR(mode):
        try:
            os.unlink(path)
            return True
        except OSError as exc:
            log.warning("cannot remove %s: %s", path, exc)
            return False
    try:
        top = open_folder(path)
    except UnsafePathError as exc:
        log.warning("cannot remove %s: %s", path, exc)
        return False
    counter = 0
    try:
        progress = True
        while progress:
            progress = False
            for name in os.listdir(top):
                try:
                    info = os.stat(name, dir_fd=top, follow_symlinks=False)
                    if not stat.S_ISDIR(info.st_mode):
                        os.unlink(name, dir_fd=top)
                        progress = True
                        continue
                    child = os.open(name, _DIR_FLAGS, dir_fd=top)
                    try:
                        try:
                            os.fchmod(child, 0o700)  # a folder the agent made read-only (ours to change)
                        except OSError:
                            pass
                        for inner in os.listdir(child):
                            while True:  # a fresh name in the top folder (an existing one is never replaced)
                                counter += 1
                                moved = f".raso-rm-{counter}"
                                try:
                                    os.stat(moved, dir_fd=top, follow_symlinks=False)
                                except FileNotFoundError:
                                    break
                            os.rename(inner, moved, src_dir_fd=child, dst_dir_fd=top)
                            progress = True
                    finally:
                        os.close(child)
                    os.rmdir(name, dir_fd=top)
                    progress = True
                except OSError as exc:
                    log.debug("removing %s/%s: %s", path, name, exc)
    finally:
        os.close(top)
    try:
        os.rmdir(path)
        return True
    except OSError as exc:
        log.warning("cannot remove %s completely: %s", path, exc)
        return False


__all__ = ["Entry", "MiB", "TreeLimits", "UnsafePathError", "chown_tree", "copy_file", "copy_tree", "kind_of",
           "list_files", "open_folder", "read_bytes", "read_text", "remove_tree", "tree_problems", "walk_tree"]
