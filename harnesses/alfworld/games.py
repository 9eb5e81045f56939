"""Finding ALFWorld games on disk and splitting them into train / val / test.

A data folder is laid out like `$ALFWORLD_DATA` after `alfworld-download`:
    <data_dir>/json_2.1.1/{train,valid_seen,valid_unseen}/<task folder>/<trial>/game.tw-pddl
Splits come from a path manifest when the folder has one (`skillopt_path_split/` as in the SkillOpt paper, or
`raso_split/` for the demo games shipped with raso): `<manifest>/{train,val,test}/items.json`, each item with a
`gamefile` relative to the data folder. Without a manifest the standard ALFWorld folders are the splits:
train = json_2.1.1/train, val = valid_seen (in-distribution), test = valid_unseen (out-of-distribution).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import BaseModel

SHIPPED_DATA_DIR = Path(__file__).resolve().parent / "data"
MANIFEST_DIRS = ("skillopt_path_split", "raso_split")
STANDARD_SPLIT_DIRS = {"train": "train", "val": "valid_seen", "test": "valid_unseen"}
TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
    "pick_and_place_with_movable_recep",
)
_TASK_TEXT = re.compile(r'"task"\s*:\s*\[\s*\{\s*"rhs"\s*:\s*"Your task is to:\s*(.*?)"', re.DOTALL)


class GameDataError(ValueError):
    """The ALFWorld data folder or a game file is missing or unreadable."""


class GameRecord(BaseModel):
    """One ALFWorld game: where its file is and what kind of task it poses."""

    id: str  # "<split folder>/<task folder>/<trial>", stable across machines
    gamefile: str  # absolute path of game.tw-pddl
    task_type: str
    goal: str  # the goal sentence the game states at the start ("put a clean bowl in cabinet.")
    manifest_id: str | None = None


def task_type_of(game_dir: Path) -> str:
    """The task type is the prefix of the task folder name (e.g. pick_two_obj_and_place-Book-None-Desk-302)."""
    return game_dir.parent.name.split("-", 1)[0]


def read_game(gamefile: Path | str) -> dict:
    try:
        return json.loads(Path(gamefile).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GameDataError(f"ALFWorld game file not found: {gamefile}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise GameDataError(f"ALFWorld game file {gamefile} is not valid JSON: {exc}") from exc


def game_goal(game: dict) -> str:
    match = _TASK_TEXT.search(game.get("grammar", ""))
    return match.group(1).strip() if match else ""


def record_for(gamefile: Path, manifest_id: str | None = None) -> GameRecord:
    gamefile = Path(gamefile).resolve()
    game = read_game(gamefile)
    game_dir = gamefile.parent
    return GameRecord(
        id=f"{game_dir.parent.parent.name}/{game_dir.parent.name}/{game_dir.name}",
        gamefile=str(gamefile),
        task_type=task_type_of(game_dir),
        goal=game_goal(game),
        manifest_id=manifest_id,
    )


def _from_manifest(data_dir: Path, manifest: Path) -> dict[str, list[GameRecord]]:
    splits: dict[str, list[GameRecord]] = {}
    for split in ("train", "val", "test"):
        items_path = manifest / split / "items.json"
        if not items_path.is_file():
            raise GameDataError(f"split manifest {manifest} has no {split}/items.json")
        items = json.loads(items_path.read_text(encoding="utf-8"))
        splits[split] = [record_for(data_dir / item["gamefile"], item.get("id")) for item in items]
    return splits


def _scan(data_dir: Path) -> dict[str, list[GameRecord]]:
    root = data_dir / "json_2.1.1" if (data_dir / "json_2.1.1").is_dir() else data_dir
    splits: dict[str, list[GameRecord]] = {}
    for split, folder in STANDARD_SPLIT_DIRS.items():
        records = []
        for gamefile in sorted((root / folder).glob("*/*/game.tw-pddl")):
            text = gamefile.read_text(encoding="utf-8")
            if re.search(r'"solvable"\s*:\s*false', text):
                continue  # ALFWorld itself skips the games its expert could not solve
            if "movable" in gamefile.parent.parent.name or "Sliced" in gamefile.parent.parent.name:
                continue  # not supported by ALFWorld's text environment either
            records.append(record_for(gamefile))
        splits[split] = records
    if not any(splits.values()):
        raise GameDataError(
            f"no ALFWorld games under {root}: expected json_2.1.1/{{train,valid_seen,valid_unseen}}/<task>/<trial>/"
            "game.tw-pddl (run `alfworld-download` and pass $ALFWORLD_DATA)"
        )
    return splits


def discover_games(data_dir: Path | str | None = None) -> dict[str, list[GameRecord]]:
    """Train / val / test game records of a data folder (default: the demo games shipped with raso)."""
    data_dir = Path(data_dir) if data_dir is not None else SHIPPED_DATA_DIR
    if not data_dir.is_dir():
        raise GameDataError(f"ALFWorld data folder not found: {data_dir}")
    for name in MANIFEST_DIRS:
        if (data_dir / name).is_dir():
            return _from_manifest(data_dir, data_dir / name)
    return _scan(data_dir)


def paper_games(data_dir: Path | str) -> dict[str, list[GameRecord]]:
    """The paper's 39 / 18 / 134 games (SkillOpt's manifest, shipped in harnesses/paper_splits/alfworld.json) found
    in `data_dir` (laid out as $ALFWORLD_DATA, or its json_2.1.1 folder itself); PaperSplitError naming what is
    missing."""
    from harnesses.paper_splits import select

    data_dir = Path(data_dir)
    root = data_dir / "json_2.1.1" if (data_dir / "json_2.1.1").is_dir() else data_dir
    if not root.is_dir():
        raise GameDataError(f"ALFWorld data folder not found: {data_dir}")
    available = [f"{p.parent.parent.parent.name}/{p.parent.parent.name}/{p.parent.name}"
                 for p in root.glob("*/*/*/game.tw-pddl")]
    ids = select("alfworld", available, str(data_dir))
    return {split: [record_for(root / game_id / "game.tw-pddl") for game_id in ids[split]]
            for split in ("train", "val", "test")}
