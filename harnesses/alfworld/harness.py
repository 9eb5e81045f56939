"""The ALFWorld harness: household text games (TextWorld engine) as RASO tasks."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from harnesses.alfworld.action_space import alfworld_action_is_valid, alfworld_action_space
from harnesses.alfworld.env import OBSERVATION_MODES, AlfworldEnv
from harnesses.alfworld.games import SHIPPED_DATA_DIR, GameRecord, discover_games, paper_games
from harnesses.paper_splits import check_split_option, data_label, demo_refusal
from raso.harness import Harness, Task, TextEnv, TextTasks
from raso.harness.actions import ActionSpace

RESOURCE_DIR = Path(__file__).resolve().parent


class AlfworldHarness(Harness, TextTasks):
    """ALFWorld text games.

    `data_dir`: a folder laid out like `$ALFWORLD_DATA` (json_2.1.1/...), optionally with a split manifest
    (`skillopt_path_split/`); default: the six demo games shipped with raso (3 train / 1 val / 2 test).
    `max_steps`: actions per game (50, as in ALFWorld evaluations). `show_admissible`: list the admissible
    commands after every observation. `observation`: "skillopt" (default: the game's text, with the admissible
    commands) or "react" (ReAct's setup: banner stripped, no admissible commands, `think: ...` answered "OK.").
    """

    name: ClassVar[str] = "alfworld"
    resource_dir: ClassVar[Path] = RESOURCE_DIR

    def __init__(self, data_dir: str | Path | None = None, *, max_steps: int = 50, show_admissible: bool = True,
                 observation: str = "skillopt", split: str = "default"):
        if observation not in OBSERVATION_MODES:
            raise ValueError(f"observation must be one of {OBSERVATION_MODES}, not {observation!r}")
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.split = check_split_option(split)
        if self.split == "paper" and self._demo:
            raise demo_refusal("alfworld", "ALFWorld's json_2.1.1 games (`alfworld-download`, $ALFWORLD_DATA): "
                                           "39 train, 18 valid_seen and 134 valid_unseen games of the paper's split")
        self.max_steps = max_steps
        self.show_admissible = show_admissible
        self.observation = observation
        self._records: dict[str, list[GameRecord]] | None = None
        self._by_id: dict[str, GameRecord] = {}
        if self.split == "paper":
            self.records()  # data that lacks a game of the paper's split is refused now, not mid-run

    def records(self) -> dict[str, list[GameRecord]]:
        if self._records is None:
            if self.split == "paper" and self.data_dir is not None:  # __init__ refuses a paper split without data
                self._records = paper_games(self.data_dir)
            else:
                self._records = discover_games(self.data_dir)
            self._by_id = {r.id: r for records in self._records.values() for r in records}
        return self._records

    def splits(self) -> dict[str, list[Task]]:
        return {split: [self._task(r) for r in records] for split, records in self.records().items()}

    @property
    def _demo(self) -> bool:
        return self.data_dir is None or self.data_dir.resolve() == SHIPPED_DATA_DIR

    def data_label(self) -> str:
        demo = "demo data (ALFWorld games shipped with raso)"
        return data_label(self.split, self.data_dir, demo=demo if self._demo else None)

    @staticmethod
    def _task(record: GameRecord) -> Task:
        return Task(id=record.id, instruction=f"Your task is to: {record.goal}", metadata={
            "task_type": record.task_type, "gamefile": record.gamefile, "manifest_id": record.manifest_id,
        })

    def gamefile(self, task: Task) -> str:
        self.records()
        record = self._by_id.get(task.id)
        if record is not None:
            return record.gamefile
        if "gamefile" in task.metadata:
            return str(task.metadata["gamefile"])
        raise ValueError(f"task {task.id!r} is not an ALFWorld game of this harness")

    def make_env(self, task: Task) -> TextEnv:
        return AlfworldEnv(self.gamefile(task), max_steps=self.max_steps, show_admissible=self.show_admissible,
                           observation=self.observation)

    def action_space(self, info: Mapping[str, Any]) -> ActionSpace | None:
        return alfworld_action_space(info, allow_think=self.observation == "react")

    def action_is_valid(self, action: str, info: Mapping[str, Any]) -> bool | None:
        return alfworld_action_is_valid(action, info, allow_think=self.observation == "react")

    def _resource(self, filename: str) -> str:
        """The ReAct mode has its own observation and action descriptions (`<name>_react.md`)."""
        if self.observation == "react" and filename in ("harness_description.md", "action_format.md"):
            filename = filename.replace(".md", "_react.md")
        return super()._resource(filename)
