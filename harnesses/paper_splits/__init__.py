"""The RASO paper's train / val / test splits (Table 10) as data: OfficeQA 50/24/172, SpreadsheetBench 80/40/280,
ALFWorld 39/18/134, WebShop 80/40/500.

Where a published task-id manifest exists it is shipped beside this module (`<harness>.json`: the ids per split,
their source and the data they refer to): SkillOpt publishes those of OfficeQA (uids of OfficeQA Full),
SpreadsheetBench (ids of Verified-400) and ALFWorld (game paths of json_2.1.1). WebShop has none, so its paper split
is a documented deterministic rule over WebShop's official split (`sample_split`): test = the official 500 test
goals; train and val = the first 80 / 40 goals of the official train / val goals ordered by
sha256(f"{salt}:{goal id}").

A harness built with `split="paper"` takes its splits from here and refuses demo data (PaperSplitError, naming the
data it needs); every harness says what its data is through `data_label()` ("paper split of <dir>", "demo data
...") so tables and `result.json` can name it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from raso.choices import Split, choices_of

MANIFEST_DIR = Path(__file__).resolve().parent
PAPER_SIZES: dict[str, dict[str, int]] = {
    "officeqa": {"train": 50, "val": 24, "test": 172},
    "spreadsheet": {"train": 80, "val": 40, "test": 280},
    "alfworld": {"train": 39, "val": 18, "test": 134},
    "webshop": {"train": 80, "val": 40, "test": 500},
}
WEBSHOP_SALT = "raso-webshop-paper-split-v1"
SPLIT_CHOICES = ("default", "paper")


class PaperSplitError(ValueError):
    """The paper's split was asked for on data that cannot give it (demo data, or ids missing from the data)."""


def check_split_option(split: str) -> str:
    if split not in SPLIT_CHOICES:
        raise ValueError(f"split must be one of {', '.join(SPLIT_CHOICES)}, not {split!r}")
    return split


def manifest(harness: str) -> dict[str, Any]:
    """The shipped manifest of `harness` (ids per split, `sizes`, `source`, `data`); its sizes are checked
    against the paper's."""
    path = MANIFEST_DIR / f"{harness}.json"
    if not path.is_file():
        raise PaperSplitError(f"no paper split manifest for {harness!r} (harnesses with one: officeqa, "
                              "spreadsheet, alfworld; webshop's split is a rule: sample_split)")
    record = json.loads(path.read_text(encoding="utf-8"))
    sizes = {name: len(record[name]) for name in choices_of(Split)}
    if sizes != PAPER_SIZES[harness]:
        raise PaperSplitError(f"{path} gives {sizes}, not the paper's {PAPER_SIZES[harness]}")
    return record


def manifest_ids(harness: str) -> dict[str, list[str]]:
    record = manifest(harness)
    return {name: [str(i) for i in record[name]] for name in choices_of(Split)}


def select(harness: str, available: Sequence[str], data: str) -> dict[str, list[str]]:
    """The manifest's ids per split, after checking that the data (`available` ids, from folder `data`) holds
    every one of them; PaperSplitError naming how many are missing and what data the manifest refers to."""
    ids = manifest_ids(harness)
    have = set(available)
    missing = [i for name in choices_of(Split) for i in ids[name] if i not in have]
    if missing:
        total = sum(len(ids[name]) for name in choices_of(Split))
        raise PaperSplitError(
            f"{harness}: split='paper' needs {manifest(harness)['data']}; {data} lacks {len(missing)} of the "
            f"{total} tasks of the paper's split (e.g. {', '.join(missing[:3])})")
    return ids


def _rank(salt: str, task_id: str) -> str:
    return hashlib.sha256(f"{salt}:{task_id}".encode()).hexdigest()


def sample_split(official: Mapping[str, Sequence[str]], sizes: Mapping[str, int],
                 salt: str = WEBSHOP_SALT) -> dict[str, list[str]]:
    """The deterministic rule for a benchmark without a published manifest: from each official split, the first
    `sizes[split]` ids ordered by sha256(f"{salt}:{id}") (a split of exactly that size is kept whole, in its
    order). Only the ids and the salt decide; PaperSplitError when an official split is too small."""
    out: dict[str, list[str]] = {}
    for name in choices_of(Split):
        members = list(official.get(name, ()))
        want = sizes[name]
        if len(members) < want:
            raise PaperSplitError(f"the official {name} split has {len(members)} tasks; the paper's split takes {want}")
        out[name] = members if len(members) == want else sorted(members, key=lambda i: _rank(salt, i))[:want]
    return out


def data_label(split: str, data_dir: Path | str | None, *, demo: str | None = None) -> str:
    """How a table names a harness's data: "paper split of <dir>", "<demo>" for shipped demo data, else
    "default split of <dir>"."""
    if demo is not None:
        return demo
    return f"{'paper' if split == 'paper' else 'default'} split of {data_dir}"


def demo_refusal(harness: str, needs: str) -> PaperSplitError:
    return PaperSplitError(f"{harness}: split='paper' refuses the demo data shipped with raso; pass data_dir= with "
                           f"{needs}")


__all__ = ["PAPER_SIZES", "PaperSplitError", "SPLIT_CHOICES", "check_split_option", "data_label", "demo_refusal",
           "manifest", "manifest_ids", "sample_split", "select"]
