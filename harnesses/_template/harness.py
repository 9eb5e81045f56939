"""Template harness: the agent reads a short document and answers one question about it.

A harness fixes what the agent can do (its commands), what it sees (observations), how many actions it gets and
how it is scored. Replace the document/answer game below with your environment; keep the shape:

* `splits()` returns disjoint train / val / test task lists (here read from `tasks.json`);
* `make_env(task)` returns a fresh `TextEnv` whose `reset()` gives the first observation and whose
  `step(action)` returns `(observation, reward in [0, 1], terminated, truncated, info)`;
* `task_description.md` (T), `harness_description.md` (H) and `action_format.md` describe it to the agent and
  to RASO's optimizer; keep them true to this code (`raso harness describe` drafts them from it);
* optionally `action_space(info)` declares the valid actions in a state (models that can be constrained then
  write only those), and `task_needs` the agent steps and reply tokens one task needs (raso.harness.actions).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from raso.choices import Split, choices_of
from raso.harness import Harness, Task, TextEnv, TextTasks
from raso.harness.actions import Action, ActionSpace, FreeText

RESOURCE_DIR = Path(__file__).resolve().parent
TASKS_FILE = RESOURCE_DIR / "tasks.json"
COMMANDS = "read, answer <text>"


class TaskRow(BaseModel):
    """One task in the tasks file."""

    id: str
    split: Split
    question: str
    document: str
    answer: str


_TASK_ROWS = TypeAdapter(list[TaskRow])


def load_splits(path: Path) -> dict[str, list[Task]]:
    """Tasks by split from a JSON list of task rows; a malformed row is an error that names the file and the row."""
    try:
        rows = _TASK_ROWS.validate_json(path.read_bytes())
    except ValidationError as exc:
        raise ValueError(f"{path}: not a list of task rows: {exc}") from None
    splits: dict[str, list[Task]] = {split: [] for split in choices_of(Split)}
    for row in rows:
        splits[row.split].append(Task(id=row.id, instruction=row.question,
                                      metadata={"document": row.document, "answer": row.answer}))
    return splits


def normalize(text: str) -> str:
    """Case, surrounding quotes, a final period and extra spaces do not count against an answer."""
    return " ".join(text.strip().strip("\"'").rstrip(".").lower().split())


class TemplateEnv(TextEnv):
    """One task. `read` shows the document; `answer <text>` ends the episode: reward 1 if it matches."""

    def __init__(self, task: Task) -> None:
        self.task = task

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        return f"Question: {self.task.instruction}\nCommands: {COMMANDS}", {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        command, _, argument = action.strip().partition(" ")
        command = command.lower()
        if command == "read":
            return f"Document:\n{self.task.metadata['document']}", 0.0, False, False, {}
        if command == "answer":
            if not argument.strip():
                return "The answer is empty: write `answer <text>`.", 0.0, False, False, {}
            correct = normalize(argument) == normalize(str(self.task.metadata["answer"]))
            reward = 1.0 if correct else 0.0
            return ("Correct." if correct else "Wrong answer."), reward, True, False, {"soft_score": reward}
        return f"Unknown command {command!r}. Commands: {COMMANDS}", 0.0, False, False, {}


class TemplateHarness(Harness, TextTasks):
    """Document questions from `tasks_file` (default: the small `tasks.json` beside this module)."""

    name: ClassVar[str] = "template"
    resource_dir: ClassVar[Path] = RESOURCE_DIR
    max_steps = 4
    max_reply_tokens = 256

    def __init__(self, tasks_file: str | Path = TASKS_FILE) -> None:
        self.tasks_file = Path(tasks_file)
        self._splits: dict[str, list[Task]] | None = None

    def splits(self) -> dict[str, list[Task]]:
        if self._splits is None:
            self._splits = load_splits(self.tasks_file)
        return self._splits

    def make_env(self, task: Task) -> TemplateEnv:
        return TemplateEnv(task)

    def action_space(self, info: Mapping[str, Any]) -> ActionSpace:
        """Every state takes the same two commands: `read`, or `answer` with up to 200 characters of text."""
        return ActionSpace((Action.exact("read"), Action.of("answer ", FreeText(200))))
