"""Read an OfficeQA data folder laid out as the official Data Access instructions leave it.

    <data_dir>/officeqa_full.csv          (and/or officeqa_pro.csv)
    <data_dir>/treasury_bulletins_parsed/transformed/treasury_bulletin_YYYY_MM.txt
    <data_dir>/treasury_bulletins_parsed/jsons/*.json   (optional; not read)

CSV columns used: uid, question, answer, source_files, difficulty (source_docs is kept as given). The question
files are gated by their owner (so that agents browsing the web cannot reach the answers); nothing is
downloaded here: a missing file raises `OfficeQADataError` naming it and where the official instructions are.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from pydantic import BaseModel, Field

PACKAGED_DATA_DIR = Path(__file__).resolve().parent / "data"
SUBSETS = {"full": "officeqa_full.csv", "pro": "officeqa_pro.csv"}
CORPUS_SUBDIR = Path("treasury_bulletins_parsed") / "transformed"
REQUIRED_COLUMNS = ("uid", "question", "answer", "source_files", "difficulty")
OFFICIAL_INSTRUCTIONS = (
    "OfficeQA's questions and parsed corpus are gated: request access at "
    "https://huggingface.co/datasets/databricks/officeqa, then download them as the 'Data Access' and "
    "'Getting Started' sections of https://github.com/databricks/officeqa describe (snapshot_download with "
    "allow_patterns 'officeqa_full.csv' and 'treasury_bulletins_parsed/transformed/*.txt' into one folder), "
    "and pass that folder as data_dir")
_FILE_NAME = re.compile(r"[\w.-]+\.(?:txt|json|pdf)", re.IGNORECASE)


class OfficeQADataError(ValueError):
    """A data folder or record that cannot be used, with what is missing and where."""


class OfficeQAQuestion(BaseModel):
    uid: str
    question: str
    answer: str
    difficulty: str
    source_files: list[str] = Field(default_factory=list)  # corpus file names (.txt), as the CSV lists them
    source_docs: str = ""


def source_file_names(cell: str) -> list[str]:
    """The file names in a source_files cell (separated by ';', ',', newlines or spaces), as .txt names."""
    names = []
    for name in _FILE_NAME.findall(cell or ""):
        stem = name.rsplit(".", 1)[0]
        if f"{stem}.txt" not in names:
            names.append(f"{stem}.txt")
    return names


def questions_path(data_dir: Path, subset: str) -> Path:
    if subset not in SUBSETS:
        raise OfficeQADataError(f"unknown OfficeQA subset {subset!r}; choose one of {sorted(SUBSETS)}")
    return data_dir / SUBSETS[subset]


def check_layout(data_dir: Path, subset: str) -> None:
    """Raise OfficeQADataError listing every missing part of the official layout."""
    if not data_dir.is_dir():
        raise OfficeQADataError(f"OfficeQA data folder {data_dir} does not exist. {OFFICIAL_INSTRUCTIONS}.")
    missing = []
    csv_path = questions_path(data_dir, subset)
    if not csv_path.is_file():
        missing.append(f"{csv_path.name} (the {subset} question file)")
    corpus = data_dir / CORPUS_SUBDIR
    if not corpus.is_dir() or not any(corpus.glob("*.txt")):
        missing.append(f"{CORPUS_SUBDIR}/*.txt (the parsed Treasury Bulletin text files)")
    if missing:
        raise OfficeQADataError(f"OfficeQA data folder {data_dir} lacks {' and '.join(missing)}. "
                                f"{OFFICIAL_INSTRUCTIONS}.")


def load_questions(data_dir: Path | str = PACKAGED_DATA_DIR, subset: str = "full") -> list[OfficeQAQuestion]:
    """The questions of `subset` in file order; every source file they name must be in the corpus."""
    data_dir = Path(data_dir)
    check_layout(data_dir, subset)
    path = questions_path(data_dir, subset)
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        columns = [c.strip() for c in reader.fieldnames or []]
        lacking = [c for c in REQUIRED_COLUMNS if c not in columns]
        if lacking:
            raise OfficeQADataError(f"{path} lacks the column(s) {lacking}; it has {columns}")
        rows = [{(k or "").strip(): (v or "") for k, v in row.items()} for row in reader]
    questions: list[OfficeQAQuestion] = []
    seen: set[str] = set()
    for line, row in enumerate(rows, start=2):
        uid = row["uid"].strip()
        if not uid or not row["question"].strip() or not row["answer"].strip():
            raise OfficeQADataError(f"{path} line {line}: uid, question and answer must be non-empty")
        if uid in seen:
            raise OfficeQADataError(f"{path} line {line}: duplicate uid {uid!r}")
        seen.add(uid)
        questions.append(OfficeQAQuestion(
            uid=uid, question=row["question"].strip(), answer=row["answer"].strip(),
            difficulty=row["difficulty"].strip().lower() or "unknown",
            source_files=source_file_names(row["source_files"]), source_docs=row.get("source_docs", "").strip()))
    corpus = data_dir / CORPUS_SUBDIR
    absent = sorted({name for q in questions for name in q.source_files if not (corpus / name).is_file()})
    if absent:
        shown = ", ".join(absent[:5]) + (f" and {len(absent) - 5} more" if len(absent) > 5 else "")
        raise OfficeQADataError(f"{len(absent)} source file(s) named in {path.name} are not in {corpus}: {shown}. "
                                f"{OFFICIAL_INSTRUCTIONS}.")
    return questions
