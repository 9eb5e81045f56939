"""Deterministic train / val / test split of SpreadsheetBench tasks.

Rule: group tasks by `instruction_type` (Cell-Level / Sheet-Level Manipulation); inside each group order them by
sha256(f"{salt}:{task_id}") and cut the ordered list by the fractions (default 40 % / 20 % / 40 %, rounded down
for train and val, the rest to test). Only the task ids and the salt decide the split, so it does not depend
on file order, platform or Python version, and adding tasks to a dataset moves few existing ones.

On the 50 shipped tasks (25 per type) this gives 20 train / 10 val / 20 test, 10 / 5 / 10 of each type;
`splits.json` beside this module records that result and a test checks the function still reproduces it.
(The paper's 80 / 40 / 280 split is over SpreadsheetBench Verified-400, which is not shipped here.)
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Sequence

from harnesses.spreadsheet.loader import SpreadsheetTask
from raso.choices import Split, choices_of

DEFAULT_SALT = "raso-spreadsheetbench-split-v1"
DEFAULT_FRACTIONS = (0.4, 0.2, 0.4)


def _rank(salt: str, task_id: str) -> str:
    return hashlib.sha256(f"{salt}:{task_id}".encode()).hexdigest()


def split_tasks(tasks: Sequence[SpreadsheetTask], fractions: tuple[float, float, float] = DEFAULT_FRACTIONS,
                salt: str = DEFAULT_SALT) -> dict[str, list[SpreadsheetTask]]:
    """Stratified, seeded-hash split; each split keeps the tasks' original file order."""
    if len(fractions) != 3 or any(f < 0 for f in fractions) or not math.isclose(sum(fractions), 1.0):
        raise ValueError(f"fractions must be three non-negative numbers summing to 1, got {fractions}")
    groups: dict[str, list[SpreadsheetTask]] = defaultdict(list)
    for task in tasks:
        groups[task.instruction_type].append(task)
    assignment: dict[str, str] = {}
    for group in groups.values():
        ordered = sorted(group, key=lambda t: _rank(salt, t.id))
        n_train = math.floor(len(ordered) * fractions[0])
        n_val = math.floor(len(ordered) * fractions[1])
        for i, task in enumerate(ordered):
            assignment[task.id] = "train" if i < n_train else "val" if i < n_train + n_val else "test"
    return {name: [t for t in tasks if assignment[t.id] == name] for name in choices_of(Split)}
