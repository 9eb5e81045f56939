"""The corpus a run or result names: an index folder's identity (its card, corpus_tools.card) or, for no index,
the packaged starter corpus's (corpus_tools.starter), which is labelled a demo. Kept apart from both so that the
card module and the starter module do not import each other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from corpus_tools.card import CorpusIdentity, index_identity
from corpus_tools.starter import starter_identity


def corpus_identity(index_dir: str | Path | None) -> CorpusIdentity:
    """The identity of the corpus in `index_dir`; None means the packaged starter corpus."""
    if index_dir is None:
        return starter_identity()
    return index_identity(index_dir)


def corpus_record(index_dir: str | Path | None) -> dict[str, Any]:
    """`corpus_identity(index_dir).to_dict()` for a run or result to record; an index that cannot be read is
    recorded by its path with the reason (recording never stops a run: loading the index does, where it is used)."""
    try:
        return corpus_identity(index_dir).to_dict()
    except (OSError, ValueError, KeyError) as exc:
        return {"name": str(index_dir), "error": f"{type(exc).__name__}: {exc}", "path": str(index_dir)}


__all__ = ["corpus_identity", "corpus_record"]
