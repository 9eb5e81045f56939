"""OfficeQAHarness: grounded-reasoning questions over U.S. Treasury Bulletins (databricks/officeqa)."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path
from typing import Any, ClassVar

from harnesses.officeqa.actions import parse_reply
from harnesses.officeqa.corpus import DEFAULT_PAGE_CHARS, Corpus
from harnesses.officeqa.env import OfficeQAEnv
from harnesses.officeqa.loader import CORPUS_SUBDIR, PACKAGED_DATA_DIR, OfficeQADataError, OfficeQAQuestion, load_questions
from harnesses.officeqa.reward import judge
from harnesses.officeqa.splits import DEFAULT_SALT, load_or_make_splits
from harnesses.paper_splits import check_split_option, data_label, demo_refusal, select
from raso.harness import Harness, Score, Task, TextTasks, WorkspaceTasks
from raso.harness.sandbox import Sandbox, SandboxLimits

RESOURCE_DIR = Path(__file__).resolve().parent
PACKAGED_SPLITS_FILE = RESOURCE_DIR / "splits.json"
DOCUMENTS_DIR = "documents"  # the workspace form's copy of the corpus
ANSWER_FILE = "answer.txt"
MAX_ANSWER_FILE_BYTES = 64 * 1024


class OfficeQAHarness(Harness, TextTasks, WorkspaceTasks):
    """Tasks: the shipped synthetic demo set (NOT OfficeQA; see data/README.md), or a user's official download.

    Arguments (all optional, also reachable as `--harness-arg KEY=VALUE`):
      data_dir      a folder in the official layout (officeqa_full.csv, treasury_bulletins_parsed/transformed/)
      subset        "full" (246 questions, default) or "pro" (the 133 hard ones)
      splits_file   where the split is read from, or written to when absent (default: splits.json beside this
                    module for the demo data; <data_dir>/raso_officeqa_splits.json for a user's data)
      tolerance     relative tolerance of numeric answers (default 0.0, the official scorer's default)
      max_steps     actions per question (default 12)
      page_chars, search_k, max_open_pages, max_observation_chars, index_cache_dir   corpus and observations
      cpu_seconds, wall_seconds   sandbox limits per python action
    """

    name: ClassVar[str] = "officeqa"
    resource_dir: ClassVar[Path] = RESOURCE_DIR
    max_steps: int = 12
    max_reply_tokens: int = 512

    def __init__(self, data_dir: str | Path | None = None, subset: str = "full", splits_file: str | Path | None = None,
                 tolerance: float = 0.0, max_steps: int | None = None, split_salt: str = DEFAULT_SALT,
                 page_chars: int = DEFAULT_PAGE_CHARS, search_k: int = 5, max_open_pages: int = 2,
                 max_observation_chars: int = 5000, index_cache_dir: str | Path | None = None,
                 cpu_seconds: int = 10, wall_seconds: float = 20.0, split: str = "default") -> None:
        # resolved, so a relative or linked path to the shipped demo data is recognised (and labelled) as it
        self.data_dir = Path(data_dir).expanduser().resolve() if data_dir is not None else PACKAGED_DATA_DIR
        self.split = check_split_option(split)
        if self.split == "paper" and self.data_dir == PACKAGED_DATA_DIR:
            raise demo_refusal("officeqa", "OfficeQA Full (officeqa_full.csv and its Treasury Bulletin pages, "
                                           "databricks/officeqa on Hugging Face)")
        self.subset = subset
        self.questions = load_questions(self.data_dir, subset)
        if not self.questions:
            raise OfficeQADataError(f"{self.data_dir} holds no {subset} questions")
        self._by_uid = {q.uid: q for q in self.questions}
        if splits_file is not None:
            self.splits_file: Path | None = Path(splits_file).expanduser()
        elif data_dir is None:
            self.splits_file = PACKAGED_SPLITS_FILE
        else:
            self.splits_file = self.data_dir / f"raso_officeqa_splits{'' if subset == 'full' else '_' + subset}.json"
        if not 0.0 <= float(tolerance) <= 1.0:
            raise ValueError(f"tolerance must be between 0 and 1, got {tolerance}")
        self.tolerance = float(tolerance)
        if max_steps is not None:
            self.max_steps = int(max_steps)
        self.split_salt = split_salt
        self.search_k = int(search_k)
        self.max_open_pages = int(max_open_pages)
        self.max_observation_chars = int(max_observation_chars)
        self.corpus = Corpus(self.data_dir / CORPUS_SUBDIR, page_chars=int(page_chars),
                             cache_dir=Path(index_cache_dir).expanduser() if index_cache_dir else None)
        # The answers live in the data folder: python actions may never read it.
        self.sandbox = Sandbox(SandboxLimits(cpu_seconds=cpu_seconds, wall_seconds=wall_seconds),
                               deny_read=[self.data_dir])

    @staticmethod
    def to_task(question: OfficeQAQuestion) -> Task:
        # No answer and no source file in the task: the agent has to find the figures.
        return Task(id=question.uid, instruction=question.question, metadata={"difficulty": question.difficulty})

    @functools.cached_property
    def _splits(self) -> dict[str, list[Task]]:
        source = str(self.data_dir / f"officeqa_{self.subset}.csv")
        if self.data_dir == PACKAGED_DATA_DIR:
            source = "harnesses/officeqa/data/officeqa_full.csv (synthetic demo, not OfficeQA)"
        if self.split == "paper":
            uids = select("officeqa", list(self._by_uid), str(self.data_dir))
        else:
            uids = load_or_make_splits(self.questions, self.splits_file, self.split_salt, source)
        return {name: [self.to_task(self._by_uid[u]) for u in members] for name, members in uids.items()}

    def splits(self) -> dict[str, list[Task]]:
        return {name: list(tasks) for name, tasks in self._splits.items()}

    def data_label(self) -> str:
        demo = "demo data (synthetic OfficeQA-style questions shipped with raso)"
        return data_label(self.split, self.data_dir, demo=demo if self.data_dir == PACKAGED_DATA_DIR else None)

    def question(self, task_id: str) -> OfficeQAQuestion:
        try:
            return self._by_uid[task_id]
        except KeyError:
            raise ValueError(f"task {task_id!r} is not an OfficeQA question in {self.data_dir}") from None

    def make_env(self, task: Task) -> OfficeQAEnv:
        return OfficeQAEnv(self.question(task.id), self.corpus, self.sandbox, tolerance=self.tolerance,
                           max_steps=self.max_steps, search_k=self.search_k, max_open_pages=self.max_open_pages,
                           max_observation_chars=self.max_observation_chars)

    def parse_action(self, reply: str) -> str:
        """The reply's action as `verb[argument]` (rules in actions.py and action_format.md)."""
        return parse_reply(reply)

    # ------------------------------------------------------------------ workspace form (external agents)
    def hidden_paths(self) -> list[Path]:
        return [self.data_dir]  # the questions' answers

    def prepare_workspace(self, task: Task, workspace: Path) -> str:
        """The corpus's documents (text files) under documents/; never the question file or its answers. The
        agent writes its answer to answer.txt."""
        question = self.question(task.id)
        folder = Path(workspace) / DOCUMENTS_DIR
        folder.mkdir()
        for document in self.corpus.documents.values():
            shutil.copyfile(document.path, folder / document.path.name)
        years = sorted(d.year for d in self.corpus.documents.values() if d.year is not None)
        span = f", issues from {years[0]} to {years[-1]}" if years else ""
        return (f"Question: {question.question}\n\n"
                f"The folder {DOCUMENTS_DIR}/ holds {len(self.corpus.documents)} U.S. Treasury Bulletin documents as "
                f"text files named treasury_bulletin_YYYY_MM.txt{span}. Find the figures there, compute the answer, "
                f"and write the final answer alone to {ANSWER_FILE} in the current folder (one "
                "short line: the number with its unit word or % sign as the question asks, or the name; no "
                "explanation).")

    def score_workspace(self, task: Task, workspace: Path) -> Score:
        """answer.txt's text (surrounding white space dropped) judged by reward.py's rules, as `answer[...]` is."""
        question = self.question(task.id)
        path = Path(workspace) / ANSWER_FILE
        if Path(workspace).is_symlink() or path.is_symlink() or not path.is_file():  # never read through a link
            return Score(reward=0.0, soft_score=0.0, info={"error": f"no {ANSWER_FILE} in the workspace"})
        with path.open("rb") as handle:
            text = handle.read(MAX_ANSWER_FILE_BYTES).decode("utf-8", errors="replace")
        answer = text.strip()
        verdict = judge(question.answer, answer, self.tolerance)
        info = {"final_output": answer[:300], "verdict": verdict.reason, "tolerance": self.tolerance}
        if verdict.score < 1.0:
            info["error"] = f"answer not correct ({verdict.reason})"
        return Score(reward=verdict.score, soft_score=verdict.score, info=info)

    @property
    def workspace_description(self) -> str:
        return (RESOURCE_DIR / "workspace_description.md").read_text(encoding="utf-8").strip()

    def describe(self) -> dict[str, Any]:
        return {"data_dir": str(self.data_dir), "subset": self.subset, "questions": len(self.questions),
                "documents": len(self.corpus.documents), "tolerance": self.tolerance,
                "splits_file": str(self.splits_file) if self.splits_file else None,
                "isolation": self.sandbox.support.model_dump()}
