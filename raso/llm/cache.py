"""Opt-in on-disk response cache: reruns and resumed experiments make no model calls for seen requests."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from raso.fileio import atomic_write_text


def cache_key(model: str, messages: list[dict[str, Any]], params: dict[str, Any], schema: dict[str, Any] | None) -> str:
    """sha256 over a canonical JSON of everything that determines the reply."""
    payload = json.dumps(
        {"model": model, "messages": messages, "params": params, "schema": schema},
        sort_keys=True,
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class ResponseCache:
    """One JSON file per key under `<dir>/<key[:2]>/<key>.json`; writes are atomic."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return None  # a corrupt entry is a miss; the next put overwrites it

    def put(self, key: str, value: dict[str, Any]) -> None:
        atomic_write_text(self._path(key), json.dumps(value, ensure_ascii=False))
