"""The train / val / test split of OfficeQA questions: the paper's 50 / 24 / 172, stratified over difficulty.

Rule: the split sizes are the paper's proportions of OfficeQA Full's 246 questions (50/246 train, 24/246 val,
rounded; the rest test), so 246 questions give exactly 50 / 24 / 172. Each size is shared out over the
difficulty groups (Pro's questions are "hard"; Full adds "easy") in proportion to the group sizes by largest
remainders, so every split keeps the data's mix (on Full: 27 + 23 train, 13 + 11 val, 93 + 79 test). Inside
a group, questions are ordered by sha256(f"{salt}:{uid}") and cut in that order: only the uids and the salt
decide the split, not file order, platform or Python version.

The split is written to a splits file (JSON: salt, sizes, uids per split); an existing splits file is read
back instead of recomputed, after checking that it names exactly the data's uids.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from harnesses.officeqa.loader import OfficeQADataError, OfficeQAQuestion
from raso.choices import Split, choices_of
from raso.fileio import atomic_write_text

log = logging.getLogger(__name__)

DEFAULT_SALT = "raso-officeqa-split-v1"
PAPER_SIZES = {"train": 50, "val": 24, "test": 172}
PAPER_TOTAL = sum(PAPER_SIZES.values())  # 246, OfficeQA Full


def split_sizes(total: int) -> dict[str, int]:
    """The paper's proportions applied to `total` questions (exact for 246)."""
    train = round(total * PAPER_SIZES["train"] / PAPER_TOTAL)
    val = round(total * PAPER_SIZES["val"] / PAPER_TOTAL)
    return {"train": train, "val": val, "test": total - train - val}


def apportion(count: int, capacities: dict[str, int]) -> dict[str, int]:
    """Share `count` over groups in proportion to their capacities (largest remainder; ties by group name)."""
    total = sum(capacities.values())
    if count > total:
        raise ValueError(f"cannot take {count} from {total}")
    if total == 0:
        return {g: 0 for g in capacities}
    quotas = {g: count * c / total for g, c in capacities.items()}
    shares = {g: min(capacities[g], math.floor(q)) for g, q in quotas.items()}
    order = sorted(capacities, key=lambda g: (-(quotas[g] - math.floor(quotas[g])), g))
    while sum(shares.values()) < count:
        for group in order:
            if sum(shares.values()) < count and shares[group] < capacities[group]:
                shares[group] += 1
    return shares


def _rank(salt: str, uid: str) -> str:
    return hashlib.sha256(f"{salt}:{uid}".encode()).hexdigest()


def split_questions(questions: Sequence[OfficeQAQuestion], salt: str = DEFAULT_SALT) -> dict[str, list[str]]:
    """uids per split (each in the questions' file order)."""
    groups: dict[str, list[OfficeQAQuestion]] = defaultdict(list)
    for question in questions:
        groups[question.difficulty].append(question)
    sizes = split_sizes(len(questions))
    left = {g: len(members) for g, members in groups.items()}
    per_group: dict[str, dict[str, int]] = {}
    for name in ("train", "val"):
        per_group[name] = apportion(sizes[name], left)
        left = {g: left[g] - per_group[name][g] for g in left}
    assignment: dict[str, str] = {}
    for group, members in groups.items():
        ordered = sorted(members, key=lambda q: _rank(salt, q.uid))
        n_train, n_val = per_group["train"][group], per_group["val"][group]
        for i, question in enumerate(ordered):
            assignment[question.uid] = "train" if i < n_train else "val" if i < n_train + n_val else "test"
    return {name: [q.uid for q in questions if assignment[q.uid] == name] for name in choices_of(Split)}


def write_splits(path: Path, splits: dict[str, list[str]], salt: str, source: str) -> Path:
    record = {"salt": salt, "rule": "paper proportions 50/24/172 of 246, stratified by difficulty (splits.py)",
              "source": source, "sizes": {name: len(splits[name]) for name in choices_of(Split)},
              **{name: splits[name] for name in choices_of(Split)}}
    return atomic_write_text(path, json.dumps(record, indent=1) + "\n")


def read_splits(path: Path, uids: Sequence[str]) -> dict[str, list[str]]:
    """A splits file's uids per split; it must cover exactly `uids`, each once."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        splits = {name: [str(u) for u in record[name]] for name in choices_of(Split)}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise OfficeQADataError(f"splits file {path} is not usable ({type(exc).__name__}: {exc}); "
                                "delete it to recompute the split") from exc
    listed = [u for name in choices_of(Split) for u in splits[name]]
    if sorted(listed) != sorted(uids):
        extra, missing = sorted(set(listed) - set(uids)), sorted(set(uids) - set(listed))
        raise OfficeQADataError(f"splits file {path} does not match the questions (unknown uids {extra[:5]}, "
                                f"unassigned uids {missing[:5]}, or a uid listed twice); delete it to recompute")
    return splits


def load_or_make_splits(questions: Sequence[OfficeQAQuestion], splits_file: Path | None, salt: str = DEFAULT_SALT,
                        source: str = "") -> dict[str, list[str]]:
    """Read `splits_file` if it exists, else compute the split and write it there (when a path is given)."""
    uids = [q.uid for q in questions]
    if splits_file is not None and splits_file.is_file():
        return read_splits(splits_file, uids)
    splits = split_questions(questions, salt)
    if splits_file is not None:
        try:
            write_splits(splits_file, splits, salt, source)
        except OSError as exc:  # e.g. a read-only data folder: the split is reproducible, so only warn
            log.warning("officeqa: could not write the splits file %s (%s); pass splits_file= to keep a record",
                        splits_file, exc)
    return splits
