"""SpreadsheetHarness: SpreadsheetBench tasks solved by a model-written openpyxl program, run in a sandbox."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, get_args

from harnesses.paper_splits import check_split_option, data_label, demo_refusal, select
from harnesses.spreadsheet import workspace as workspace_form
from harnesses.spreadsheet.action_space import SPREADSHEET_ACTION_SPACE, spreadsheet_action_is_valid
from harnesses.spreadsheet.actions import parse_reply
from harnesses.spreadsheet.answers import RecalculatedAnswers, default_answer_cache_dir
from harnesses.spreadsheet.env import SpreadsheetEnv
from harnesses.spreadsheet.loader import PACKAGED_DATA_DIR, SpreadsheetTask, load_tasks
from harnesses.spreadsheet.recalc import Recalculator, get_recalculator
from harnesses.spreadsheet.splits import DEFAULT_FRACTIONS, DEFAULT_SALT, split_tasks
from harnesses.spreadsheet.upstream_env import UPSTREAM_DIR, UPSTREAM_MAX_TURNS, UpstreamSpreadsheetEnv, extract_code
from raso.harness import Harness, Score, Task, TextTasks, WorkspaceTasks
from raso.harness.actions import ActionSpace
from raso.harness.sandbox import Sandbox, SandboxLimits

DEFAULT_RECALC = "auto"
PromptMode = Literal["raso", "upstream"]


class SpreadsheetHarness(Harness, TextTasks, WorkspaceTasks):
    """Tasks: the 50 shipped SpreadsheetBench tasks (or any folder in its layout, e.g. Verified-400).

    Arguments (all optional, also reachable as `--harness-arg KEY=VALUE`):
      data_dir      a SpreadsheetBench folder (dataset.json + spreadsheet/); default: the shipped 50 tasks
      recalc        "auto" (default: LibreOffice where installed, else `formulas` with a notice), "libreoffice",
                    "formulas" or "none" (no recalculation; formulas then score as empty)
      prompt_mode   "raso" (default: our richer observations, RUN / SUBMIT) or "upstream" (SpreadsheetBench's
                    own multi-round prompt and loop, see upstream_env.py)
      answer_cache_dir  where recalculated answer workbooks are kept (default ~/.cache/raso/spreadsheet-answers)
      max_steps     actions per task (default 8; upstream mode 5)
      split_salt, split_fractions   the split rule (see splits.py)
      cpu_seconds, wall_seconds, memory_mb   sandbox limits per program run
    """

    name: ClassVar[str] = "spreadsheet"
    resource_dir: ClassVar[Path] = Path(__file__).resolve().parent
    max_steps: int = 8
    max_reply_tokens: int = 1024  # a reply carries a whole program
    prompt_mode: PromptMode = "raso"

    def __init__(self, data_dir: str | Path | None = None, recalc: str = DEFAULT_RECALC, max_steps: int | None = None,
                 split_salt: str = DEFAULT_SALT, split_fractions: tuple[float, float, float] | list[float] = DEFAULT_FRACTIONS,
                 cpu_seconds: int = 20, wall_seconds: float = 40.0, memory_mb: int = 1536, preview_rows: int = 10,
                 prompt_mode: PromptMode = "raso", answer_cache_dir: str | Path | None = None,
                 split: str = "default") -> None:
        if prompt_mode not in get_args(PromptMode):
            raise ValueError(f"unknown prompt_mode {prompt_mode!r}; choose one of {list(get_args(PromptMode))}")
        self.prompt_mode = prompt_mode
        # resolved, so a relative or linked path to the shipped demo data is recognised (and labelled) as it
        self.data_dir = Path(data_dir).expanduser().resolve() if data_dir is not None else PACKAGED_DATA_DIR
        self.split = check_split_option(split)
        if self.split == "paper" and self.data_dir == PACKAGED_DATA_DIR:
            raise demo_refusal("spreadsheet", "SpreadsheetBench Verified-400 (spreadsheetbench_verified_400.tar.gz "
                                              "from KAKA22/SpreadsheetBench on Hugging Face, unpacked)")
        self._tasks = load_tasks(self.data_dir)
        self._by_id = {t.id: t for t in self._tasks}
        # Fails here, with the install command, if the chosen engine is missing.
        self.recalculator: Recalculator | None = None if recalc == "none" else get_recalculator(recalc)
        self.answer_cache_dir = Path(answer_cache_dir) if answer_cache_dir is not None else default_answer_cache_dir()
        self.answer_cache_dir.mkdir(parents=True, exist_ok=True)  # exists, so the sandbox can hide it
        self.answers = RecalculatedAnswers(self.recalculator, self.answer_cache_dir)
        if max_steps is not None:
            self.max_steps = int(max_steps)
        elif prompt_mode == "upstream":
            self.max_steps = UPSTREAM_MAX_TURNS
        self.split_salt = split_salt
        self.split_fractions = tuple(split_fractions)
        self.preview_rows = preview_rows
        limits = SandboxLimits(cpu_seconds=cpu_seconds, wall_seconds=wall_seconds, memory_bytes=memory_mb * 1024 * 1024)
        # The answers live in the data folder and, recalculated, in the cache: the sandbox may never read either,
        # even if they sit inside site-packages.
        self.sandbox = Sandbox(limits, deny_read=[self.data_dir, self.answer_cache_dir])

    @staticmethod
    def to_task(task: SpreadsheetTask) -> Task:
        return Task(id=task.id, instruction=task.instruction, metadata={
            "instruction_type": task.instruction_type, "answer_position": task.answer_position,
            "answer_sheet": task.answer_sheet, "data_position": task.data_position, "cases": len(task.cases),
            "layout": task.layout,
        })

    @functools.cached_property
    def _splits(self) -> dict[str, list[Task]]:
        if self.split == "paper":
            ids = select("spreadsheet", list(self._by_id), str(self.data_dir))
            return {name: [self.to_task(self._by_id[i]) for i in members] for name, members in ids.items()}
        raw = split_tasks(self._tasks, fractions=self.split_fractions, salt=self.split_salt)  # type: ignore[arg-type]
        return {name: [self.to_task(t) for t in tasks] for name, tasks in raw.items()}

    def splits(self) -> dict[str, list[Task]]:
        return {name: list(tasks) for name, tasks in self._splits.items()}

    def data_label(self) -> str:
        demo = "demo data (50 SpreadsheetBench tasks shipped with raso)"
        return data_label(self.split, self.data_dir, demo=demo if self.data_dir == PACKAGED_DATA_DIR else None)

    def spreadsheet_task(self, task_id: str) -> SpreadsheetTask:
        try:
            return self._by_id[task_id]
        except KeyError:
            raise ValueError(f"task {task_id!r} is not in {self.data_dir}") from None

    def make_env(self, task: Task) -> SpreadsheetEnv:
        if self.prompt_mode == "upstream":
            upstream = UpstreamSpreadsheetEnv(self.spreadsheet_task(task.id), self.sandbox, self.recalculator,
                                              answers=self.answers)
            upstream.max_turns = self.max_steps
            return upstream
        return SpreadsheetEnv(self.spreadsheet_task(task.id), self.sandbox, self.recalculator, self.preview_rows,
                              answers=self.answers)

    def _resource(self, filename: str) -> str:
        # The upstream mode has its own T, H, action format and turn reminder (no RUN / SUBMIT, 5 turns).
        if self.prompt_mode == "upstream":
            return (UPSTREAM_DIR / filename).read_text(encoding="utf-8").strip()
        return super()._resource(filename)

    @property
    def turn_reminder(self) -> str | None:
        return self._resource("turn_reminder.md")

    def action_space(self, info: Mapping[str, Any]) -> ActionSpace | None:
        # Upstream mode keeps SpreadsheetBench's own free-form replies.
        return None if self.prompt_mode == "upstream" else SPREADSHEET_ACTION_SPACE

    def action_is_valid(self, action: str, info: Mapping[str, Any]) -> bool | None:
        return None if self.prompt_mode == "upstream" else spreadsheet_action_is_valid(action)

    def parse_action(self, reply: str) -> str:
        """Upstream mode: the code to execute (upstream's rule). Else RUN or SUBMIT plus the program's code
        block, in canonical form (rules in action_format.md)."""
        if self.prompt_mode == "upstream":
            return extract_code(reply)
        return parse_reply(reply).to_action()

    # ------------------------------------------------------------------ workspace form (external agents)
    def hidden_paths(self) -> list[Path]:
        return [self.data_dir, self.answer_cache_dir]  # the answer workbooks and their recalculated copies

    def prepare_workspace(self, task: Task, workspace: Path) -> str:
        """Each test case's input workbook as input_N.xlsx; the agent writes output_N.xlsx (workspace.py)."""
        return workspace_form.prepare(self.spreadsheet_task(task.id), Path(workspace))

    def score_workspace(self, task: Task, workspace: Path) -> Score:
        """The outputs scored as a submitted program's are: recalculated, compared at the answer position."""
        env = SpreadsheetEnv(self.spreadsheet_task(task.id), self.sandbox, self.recalculator, self.preview_rows,
                             answers=self.answers)
        return workspace_form.score(env.task, env, Path(workspace))

    @property
    def workspace_description(self) -> str:
        return (Path(__file__).resolve().parent / "workspace_description.md").read_text(encoding="utf-8").strip()

    def describe(self) -> dict[str, Any]:
        return {"data_dir": str(self.data_dir), "tasks": len(self._tasks), "prompt_mode": self.prompt_mode,
                "recalc": self.recalculator.version if self.recalculator else "none",
                "isolation": self.sandbox.support.model_dump()}
