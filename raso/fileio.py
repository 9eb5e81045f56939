"""Atomic file writes: a killed run leaves the old file or the new one, never half of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write via a temp file in the same folder, fsync, then os.replace."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes 0600; run outputs are meant to be shared and read
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_tree(folder: str | Path, files: dict[str, str], executable: set[str] | frozenset[str] = frozenset()
                      ) -> Path:
    """Make `folder` hold exactly `files` (relative POSIX path -> text; the caller has checked the paths), those
    named in `executable` mode 0755, the others 0644. The tree is built in a hidden sibling folder and renamed
    into place: a kill leaves the old folder or the new one whole, or, between moving the old one aside and the
    new one in, neither (a hidden folder is left behind)."""
    import shutil

    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".tmp", dir=folder.parent))
    aside: Path | None = None
    try:
        staging.chmod(0o755)  # mkdtemp makes 0700; run outputs are meant to be shared and read
        for relative, text in files.items():
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            target.chmod(0o755 if relative in executable else 0o644)
        if folder.exists():
            aside = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".old", dir=folder.parent))
            os.replace(folder, aside / folder.name)
        os.replace(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)
    return folder
