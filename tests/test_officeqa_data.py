"""OfficeQA data: the official layout (a tiny folder made here), clear errors for missing parts, the
50 / 24 / 172 split stratified over difficulty, the splits file, and the shipped synthetic demo data."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from harnesses.officeqa import OfficeQAHarness
from harnesses.officeqa.harness import PACKAGED_SPLITS_FILE
from harnesses.officeqa.loader import CORPUS_SUBDIR, PACKAGED_DATA_DIR, OfficeQADataError, load_questions, source_file_names
from harnesses.officeqa.splits import apportion, split_questions, split_sizes

COLUMNS = ["uid", "question", "answer", "source_docs", "source_files", "difficulty"]
OFFICIAL_URL = "github.com/databricks/officeqa"


def make_official_folder(root: Path, hard: int = 133, easy: int = 113, name: str = "officeqa_full.csv") -> Path:
    """A folder in the official layout: a question CSV and three parsed bulletins (invented text)."""
    corpus = root / CORPUS_SUBDIR
    corpus.mkdir(parents=True)
    files = ["treasury_bulletin_1941_01.txt", "treasury_bulletin_1941_02.txt", "treasury_bulletin_1990_06.txt"]
    for i, file in enumerate(files):
        (corpus / file).write_text(f"Invented page {i}\n\n| Item | Amount |\n| --- | --- |\n| Receipts | {100 + i} |\n",
                                   encoding="utf-8")
    with (root / name).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        for n in range(hard + easy):
            writer.writerow([f"UID{n:04d}", f"Invented question {n}?", str(n), "https://example.org/doc",
                             f"{files[n % 3]}\n{files[(n + 1) % 3]}", "hard" if n < hard else "easy"])
    return root


def test_an_official_folder_of_246_questions_splits_50_24_172_stratified_and_writes_the_splits_file(tmp_path):
    folder = make_official_folder(tmp_path / "officeqa")
    harness = OfficeQAHarness(data_dir=folder)
    splits = harness.splits()
    assert {name: len(tasks) for name, tasks in splits.items()} == {"train": 50, "val": 24, "test": 172}
    mix = {name: Counter(t.metadata["difficulty"] for t in tasks) for name, tasks in splits.items()}
    # largest remainders: train 50*133/246 = 27.03 -> 27 hard + 23 easy; val 24*133/246 = 12.98 -> 13 + 11
    assert mix == {"train": {"hard": 27, "easy": 23}, "val": {"hard": 13, "easy": 11}, "test": {"hard": 93, "easy": 79}}
    ids = [t.id for tasks in splits.values() for t in tasks]
    assert len(set(ids)) == 246
    written = json.loads((folder / "raso_officeqa_splits.json").read_text())
    assert written["sizes"] == {"train": 50, "val": 24, "test": 172}
    assert written["val"] == [t.id for t in splits["val"]]
    # A later run reads the file back, even with another salt (the file wins over recomputation).
    again = OfficeQAHarness(data_dir=folder, split_salt="another salt")
    assert [t.id for t in again.tasks("test")] == [t.id for t in splits["test"]]
    # The task carries neither the answer nor the source files.
    assert set(splits["train"][0].metadata) == {"difficulty"}


def test_the_split_depends_on_the_salt_and_uids_not_on_file_order():
    questions = load_questions(PACKAGED_DATA_DIR)
    one = split_questions(questions, salt="s1")
    reordered = split_questions(list(reversed(questions)), salt="s1")
    assert {k: sorted(v) for k, v in reordered.items()} == {k: sorted(v) for k, v in one.items()}
    assert split_questions(questions, salt="s2") != one


def test_split_sizes_and_apportioning_by_hand():
    assert split_sizes(246) == {"train": 50, "val": 24, "test": 172}
    assert split_sizes(133) == {"train": 27, "val": 13, "test": 93}  # 27.03, 12.98
    assert split_sizes(30) == {"train": 6, "val": 3, "test": 21}  # 6.10, 2.93
    assert apportion(50, {"hard": 133, "easy": 113}) == {"hard": 27, "easy": 23}
    assert apportion(3, {"a": 1, "b": 1, "c": 1}) == {"a": 1, "b": 1, "c": 1}
    assert apportion(1, {"b": 1, "a": 1}) == {"a": 1, "b": 0}  # equal remainders: by name
    with pytest.raises(ValueError):
        apportion(3, {"a": 1})


def test_the_pro_subset_uses_its_own_file_and_splits_file(tmp_path):
    folder = make_official_folder(tmp_path / "oqa", hard=133, easy=0, name="officeqa_pro.csv")
    harness = OfficeQAHarness(data_dir=folder, subset="pro")
    assert {n: len(t) for n, t in harness.splits().items()} == {"train": 27, "val": 13, "test": 93}
    assert (folder / "raso_officeqa_splits_pro.json").is_file()


def test_missing_parts_are_named_with_the_official_instructions(tmp_path):
    with pytest.raises(OfficeQADataError, match=f"does not exist.*{OFFICIAL_URL}"):
        OfficeQAHarness(data_dir=tmp_path / "nowhere")
    tmp_path.joinpath("empty").mkdir()
    with pytest.raises(OfficeQADataError) as caught:
        OfficeQAHarness(data_dir=tmp_path / "empty")
    message = str(caught.value)
    assert "officeqa_full.csv" in message and "treasury_bulletins_parsed/transformed/*.txt" in message
    assert "huggingface.co/datasets/databricks/officeqa" in message and OFFICIAL_URL in message

    folder = make_official_folder(tmp_path / "no_corpus_file", hard=3, easy=3)
    (folder / CORPUS_SUBDIR / "treasury_bulletin_1990_06.txt").unlink()
    with pytest.raises(OfficeQADataError, match=r"source file\(s\) named in officeqa_full.csv are not in .*"
                                                r"treasury_bulletin_1990_06.txt"):
        OfficeQAHarness(data_dir=folder)
    with pytest.raises(OfficeQADataError, match="pro question file"):
        OfficeQAHarness(data_dir=make_official_folder(tmp_path / "full_only", hard=2, easy=2), subset="pro")


def test_bad_rows_and_columns_are_reported(tmp_path):
    folder = make_official_folder(tmp_path / "cols", hard=2, easy=2)
    text = (folder / "officeqa_full.csv").read_text().replace("difficulty", "level", 1)
    (folder / "officeqa_full.csv").write_text(text)
    with pytest.raises(OfficeQADataError, match=r"lacks the column\(s\) \['difficulty'\]"):
        load_questions(folder)
    folder = make_official_folder(tmp_path / "dup", hard=2, easy=2)
    with (folder / "officeqa_full.csv").open("a", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerow(["UID0003", "Again?", "1", "", "treasury_bulletin_1941_01.txt", "easy"])
    with pytest.raises(OfficeQADataError, match="duplicate uid 'UID0003'"):
        load_questions(folder)


def test_a_splits_file_that_does_not_match_the_questions_is_refused(tmp_path):
    folder = make_official_folder(tmp_path / "oqa", hard=4, easy=4)
    splits_file = tmp_path / "splits.json"
    splits_file.write_text(json.dumps({"train": ["UID0000"], "val": [], "test": ["UID9999"]}))
    with pytest.raises(OfficeQADataError, match="does not match the questions.*UID9999"):
        OfficeQAHarness(data_dir=folder, splits_file=splits_file).splits()


def test_an_unwritable_splits_file_only_warns_and_the_split_is_the_same(tmp_path, caplog):
    folder = make_official_folder(tmp_path / "oqa", hard=10, easy=10)
    (tmp_path / "a_file").write_text("not a folder")
    harness = OfficeQAHarness(data_dir=folder, splits_file=tmp_path / "a_file" / "splits.json")
    assert harness.splits() == OfficeQAHarness(data_dir=folder).splits()
    assert "could not write the splits file" in caplog.text


def test_source_file_cells_in_any_separator():
    assert source_file_names("treasury_bulletin_1941_01.txt; treasury_bulletin_1941_02.json\nb_3.pdf") == [
        "treasury_bulletin_1941_01.txt", "treasury_bulletin_1941_02.txt", "b_3.txt"]
    assert source_file_names("") == []


def test_the_shipped_demo_data_is_synthetic_and_its_recorded_split_is_reproduced():
    questions = load_questions(PACKAGED_DATA_DIR)
    assert 20 <= len(questions) <= 30 and {q.difficulty for q in questions} == {"easy", "hard"}
    for path in (PACKAGED_DATA_DIR / CORPUS_SUBDIR).glob("*.txt"):
        assert path.read_text().startswith("SYNTHETIC DEMO DOCUMENT"), path
    assert "NOT OfficeQA" in (PACKAGED_DATA_DIR / "README.md").read_text()
    recorded = json.loads(PACKAGED_SPLITS_FILE.read_text())
    assert split_questions(questions, recorded["salt"]) == {k: recorded[k] for k in ("train", "val", "test")}
    harness = OfficeQAHarness()
    assert [t.id for t in harness.tasks("val")] == recorded["val"]
    assert {n: len(t) for n, t in harness.splits().items()} == {"train": 6, "val": 3, "test": 21}


def test_an_index_cache_folder_keeps_the_bm25_index_for_the_next_run(tmp_path, monkeypatch):
    from corpus_tools.index import SectionIndex

    folder = make_official_folder(tmp_path / "oqa", hard=3, easy=3)
    cache = tmp_path / "cache"
    first = OfficeQAHarness(data_dir=folder, index_cache_dir=cache).corpus
    assert [doc.name for doc, *_ in first.search("receipts", k=1, years=(1990, 1990))] == ["treasury_bulletin_1990_06"]
    saved = list(cache.glob("index-*/meta.json"))
    assert len(saved) == 1

    def no_build(*args, **kwargs):
        raise AssertionError("the cached index should have been loaded")

    monkeypatch.setattr(SectionIndex, "build", no_build)
    second = OfficeQAHarness(data_dir=folder, index_cache_dir=cache).corpus
    assert [doc.name for doc, *_ in second.search("receipts", k=3)] == [doc.name for doc, *_ in first.search("receipts", k=3)]
    # A changed corpus file gets a new index.
    (folder / CORPUS_SUBDIR / "treasury_bulletin_1941_01.txt").write_text("Receipts changed\n")
    monkeypatch.undo()
    OfficeQAHarness(data_dir=folder, index_cache_dir=cache).corpus.search("receipts")
    assert len(list(cache.glob("index-*/meta.json"))) == 2
