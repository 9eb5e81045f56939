"""The spreadsheet harness end to end: observations, actions, hand-written solutions, hostile programs, rollouts.

These tests run real programs in the sandbox and recalculate with the harness's default engine (LibreOffice
where installed, as on CI; otherwise the `formulas` fallback, whose test here hides LibreOffice on purpose).
"""

from __future__ import annotations

import pytest

from harnesses.spreadsheet import SpreadsheetHarness
from harnesses.spreadsheet.actions import parse_reply
from raso.harness import Task, get_harness
from tests.spreadsheet_solutions import CORRECT, SUBTLY_WRONG


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> SpreadsheetHarness:
    return SpreadsheetHarness(answer_cache_dir=tmp_path_factory.mktemp("answers"))


@pytest.fixture(scope="module")
def tight_harness(tmp_path_factory) -> SpreadsheetHarness:
    return SpreadsheetHarness(cpu_seconds=2, wall_seconds=8, memory_mb=512,
                              answer_cache_dir=tmp_path_factory.mktemp("answers"))


def task(task_id: str) -> Task:
    return Task(id=task_id, instruction="")


def submit(harness: SpreadsheetHarness, task_id: str, code: str):
    env = harness.make_env(task(task_id))
    try:
        env.reset()
        return env.step(harness.parse_action(f"Thought: done.\n```python\n{code}```\nAction: SUBMIT"))
    finally:
        env.close()


def test_registered_by_name_with_documented_splits():
    harness = get_harness("spreadsheet")
    assert isinstance(harness, SpreadsheetHarness)
    splits = harness.splits()
    assert {k: len(v) for k, v in splits.items()} == {"train": 20, "val": 10, "test": 20}
    val = harness.tasks("val")[0]
    assert val.instruction and val.metadata["answer_position"] and val.metadata["cases"] == 3
    for text in (harness.task_description, harness.harness_description, harness.action_instructions):
        assert len(text) > 200
    assert "Action: SUBMIT" in harness.action_instructions


def test_first_observation_shows_instruction_workbook_answer_cells_and_contract(harness):
    env = harness.make_env(task("37609"))
    obs, info = env.reset()
    env.close()
    assert info == {"task_id": "37609", "cases": 3}
    assert "I am working with two columns of data" in obs
    assert "Answer position (the cells that are checked): C2:C11" in obs
    assert "Sheets: 'Sheet2' (used range A1:D11" in obs
    assert "A2: 6 | B2: 5 | C2: =IF(OR(A2>=7,B2>=7)" in obs  # formulas with their cached value
    assert "-> '-'" in obs
    assert "sys.argv[1]" in obs and "sys.argv[2]" in obs


@pytest.mark.parametrize("reply, command, code", [
    ("Thought: x\n```python\nprint(1)\n```\nAction: RUN", "RUN", "print(1)"),
    ("```python\nprint(1)\n```\nAction: submit", "SUBMIT", "print(1)"),
    ("```python\nprint(1)\n```", "RUN", "print(1)"),                         # code without a command: RUN
    ("Thought: it works.\nAction: SUBMIT", "SUBMIT", None),                     # submit the last program run
    ("```\nprint(2)\n```\nSUBMIT", "SUBMIT", "print(2)"),                        # bare fence and bare keyword
    ("```python\nprint(1)\n```\n```python\nprint(3)\n```\nAction: RUN", "RUN", "print(3)"),  # last block wins
    ("```python\nx = 'Action: SUBMIT'\n```\nAction: RUN", "RUN", "x = 'Action: SUBMIT'"),  # keywords in code ignored
    ("Action: RUN\n```python\nimport sys\nprint(sys.argv", "RUN", "import sys\nprint(sys.argv"),  # cut-off reply
    ("I am not sure what to do.", "INVALID", None),
])
def test_parse_action_rules(harness, reply, command, code):
    parsed = parse_reply(reply)
    assert (parsed.command, parsed.code) == (command, code)
    assert parse_reply(harness.parse_action(reply)).command == command  # the canonical form parses the same


@pytest.mark.parametrize("task_id", sorted(CORRECT))
def test_hand_written_correct_solution_scores_one(harness, task_id):
    obs, reward, terminated, truncated, info = submit(harness, task_id, CORRECT[task_id])
    assert (reward, terminated, truncated) == (1.0, True, False), obs
    assert info["soft_score"] == 1.0 and info["cases_passed"] == 3
    assert info["final_output"].strip() == CORRECT[task_id].strip()


@pytest.mark.parametrize("task_id", sorted(SUBTLY_WRONG))
def test_subtly_wrong_solution_scores_zero(harness, task_id):
    obs, reward, terminated, _, info = submit(harness, task_id, SUBTLY_WRONG[task_id])
    assert reward == 0.0 and terminated
    assert info["soft_score"] < 1.0
    assert "value difference at" in obs
    if task_id == "39180":  # only test case 2 exposes this bug: partial credit is recorded
        assert info["soft_score"] == pytest.approx(2 / 3)


@pytest.mark.libreoffice
def test_run_reports_stdout_errors_and_the_answer_cells(harness):
    env = harness.make_env(task("37609"))
    env.reset()
    try:
        code = CORRECT["37609"] + "print('rows', wb['Sheet2'].max_row)\n"
        obs, reward, terminated, _, info = env.step(harness.parse_action(f"```python\n{code}```\nAction: RUN"))
        assert (reward, terminated) == (0.0, False)
        assert "exit code 0" in obs and "rows 11" in obs
        assert "C3: =IF(OR(N(A3)>=7,N(B3)>=7),\"e\",\"-\") -> 'e'" in obs  # recalculated before showing
        obs, _, terminated, _, info = env.step(harness.parse_action("```python\nimport sys\n1/0\n```"))
        assert not terminated
        assert "ZeroDivisionError" in obs and "exit code 1" in obs
        assert "ZeroDivisionError" in info["error"]
        # SUBMIT without code submits the last program run: the crashing one, so every case fails.
        obs, reward, terminated, _, info = env.step("Action: SUBMIT")
        assert terminated and reward == 0.0 and info["soft_score"] == 0.0
        assert "ZeroDivisionError" in obs
    finally:
        env.close()


def test_invalid_actions_cost_a_step_and_explain_the_format(harness):
    env = harness.make_env(task("17251"))
    env.reset()
    try:
        obs, reward, terminated, _, _ = env.step(harness.parse_action("I think we should sort the list."))
        assert not terminated and reward == 0.0
        assert "Invalid action" in obs and "Action: RUN" in obs
        obs, _, terminated, _, _ = env.step("SUBMIT")
        assert not terminated and "Nothing to submit yet" in obs and "`Action: SUBMIT`" in obs
        obs, _, terminated, _, _ = env.step("RUN")
        assert not terminated and "Nothing to run yet" in obs and "`Action: RUN`" in obs
    finally:
        env.close()


def test_corrupt_output_workbook_fails_with_a_clear_error(harness):
    code = "import sys\nopen(sys.argv[2], 'wb').write(b'PK\\x03\\x04 not a workbook')\n"
    obs, reward, terminated, _, info = submit(harness, "17251", code)
    assert reward == 0.0 and terminated
    assert "is not a readable .xlsx workbook" in obs


HOSTILE = {
    "infinite loop": ("while True:\n    pass\n", "time limit exceeded"),
    "memory bomb": ("blocks = []\nwhile True:\n    blocks.append(bytearray(64 * 1024 * 1024))\n", "memory limit"),
    "fork bomb": ("import os\nwhile True:\n    os.fork()\n", "starting or signalling processes is not allowed"),
    "write outside": ("open('/tmp/raso-escape.txt', 'w').write('x')\n", "writing /tmp/raso-escape.txt is not allowed"),
    "network": ("import socket\nsocket.create_connection(('127.0.0.1', 80), timeout=2)\n",
                "network access is not allowed"),
    "huge file": ("with open('big.bin', 'wb') as f:\n    while True:\n        f.write(b'x' * 1048576)\n",
                  "file size limit exceeded"),
    "delete input": ("import os, sys\nos.remove(sys.argv[1])\n", "did not create the output file"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_programs_are_contained_and_score_zero(tight_harness, name):
    code, message = HOSTILE[name]
    obs, reward, terminated, _, info = submit(tight_harness, "17251", code)
    assert reward == 0.0 and terminated and info["soft_score"] == 0.0
    assert message in obs, obs
    assert message in info["error"]
    for case in tight_harness.spreadsheet_task("17251").cases:  # the task's own files are untouched
        assert case.input_path.stat().st_size > 0


def test_reading_the_answer_workbook_is_refused(tight_harness):
    answer = tight_harness.spreadsheet_task("17251").cases[0].answer_path
    code = (f"import shutil, sys\nshutil.copyfile({str(answer)!r}, sys.argv[2])\n")
    obs, reward, _, _, info = submit(tight_harness, "17251", code)
    assert reward == 0.0
    assert "is not allowed (outside the working directory)" in obs


@pytest.mark.libreoffice
def test_full_rollout_to_reward_one_with_a_scripted_model_through_the_agent(harness):
    from raso.agent import AgentConfig, ExecutionAgent
    from raso.llm import GatewayConfig, LLMGateway, RetryConfig
    from raso.llm.scripted import ScriptedModel

    model = ScriptedModel([
        f"Thought: write formulas that treat 'U' as 0 with N().\n```python\n{CORRECT['37609']}```\nAction: RUN",
        "Thought: the answer cells look right.\nAction: SUBMIT",
    ])
    gateway = LLMGateway(GatewayConfig.for_models(target=model.model, retry=RetryConfig(max_attempts=1)))
    agent = ExecutionAgent(gateway, AgentConfig(mode="none"))
    the_task = next(t for split in harness.splits().values() for t in split if t.id == "37609")
    rollout = harness.rollout(the_task, [], agent)
    assert rollout.error is None, rollout.error
    assert rollout.reward == 1.0 and rollout.soft_score == 1.0 and rollout.terminated
    assert [s.action.split("\n")[0] for s in rollout.trajectory] == ["RUN", "SUBMIT"]
    assert "-> 'e'" in rollout.trajectory[0].result  # the model saw its recalculated answer cells
    assert "3 of 3 test cases passed" in rollout.trajectory[1].result
    assert rollout.final_output.strip() == CORRECT["37609"].strip()
    first_prompt = "\n".join(m["content"] for m in model.calls[0])
    assert "Answer position (the cells that are checked): C2:C11" in first_prompt
    assert "Action: SUBMIT" in first_prompt  # the action format reached the model


def test_a_dataset_with_a_corrupt_input_workbook_gives_clear_errors(tmp_path):
    import json

    import openpyxl

    folder = tmp_path / "spreadsheet" / "x1"
    folder.mkdir(parents=True)
    (folder / "1_x1_input.xlsx").write_bytes(b"garbage, not a zip")
    answer = openpyxl.Workbook()
    answer.active["A1"] = 2
    answer.save(folder / "1_x1_answer.xlsx")
    (tmp_path / "dataset.json").write_text(json.dumps([{
        "id": "x1", "instruction": "Put 2 in A1.", "instruction_type": "Cell-Level Manipulation",
        "answer_position": "A1", "spreadsheet_path": "spreadsheet/x1"}]))
    harness = SpreadsheetHarness(data_dir=tmp_path, wall_seconds=20)
    env = harness.make_env(task("x1"))
    try:
        obs, _ = env.reset()
        assert "the input workbook cannot be read" in obs and "not a readable .xlsx workbook" in obs
        code = "import sys, openpyxl\nwb = openpyxl.load_workbook(sys.argv[1])\nwb.active['A1'] = 2\nwb.save(sys.argv[2])\n"
        obs, reward, terminated, _, info = env.step(f"```python\n{code}```\nAction: SUBMIT")
        assert terminated and reward == 0.0
        assert "BadZipFile" in obs or "zip" in obs.lower()
    finally:
        env.close()


def dataset_with_one_unreadable_answer(root):
    """A 3-case task whose case 2 answer file is not a workbook (a scoring error in that case only)."""
    import json

    import openpyxl

    folder = root / "spreadsheet" / "x2"
    folder.mkdir(parents=True)
    for n in (1, 2, 3):
        book = openpyxl.Workbook()
        book.active["A1"] = 1
        book.save(folder / f"{n}_x2_input.xlsx")
        book.active["A1"] = 2
        book.save(folder / f"{n}_x2_answer.xlsx")
    (folder / "2_x2_answer.xlsx").write_bytes(b"not a workbook")
    (root / "dataset.json").write_text(json.dumps([{
        "id": "x2", "instruction": "Put 2 in A1.", "instruction_type": "Cell-Level Manipulation",
        "answer_position": "A1", "spreadsheet_path": "spreadsheet/x2"}]))
    return root


def test_a_scoring_error_fails_its_case_only_and_keeps_the_soft_score(tmp_path):
    harness = SpreadsheetHarness(data_dir=dataset_with_one_unreadable_answer(tmp_path / "data"), wall_seconds=20,
                                 answer_cache_dir=tmp_path / "answers")
    code = "import sys, openpyxl\nwb = openpyxl.load_workbook(sys.argv[1])\nwb.active['A1'] = 2\nwb.save(sys.argv[2])\n"
    obs, reward, terminated, _, info = submit(harness, "x2", code)
    assert terminated and reward == 0.0
    assert [r["passed"] for r in info["case_results"]] == [True, False, True]
    assert info["soft_score"] == pytest.approx(2 / 3)
    assert "scoring error: CorruptWorkbookError" in info["case_results"][1]["message"]
    assert "test case 2: FAILED: scoring error" in obs


def test_without_libreoffice_the_harness_falls_back_to_formulas_and_still_scores(monkeypatch, tmp_path):
    from harnesses.spreadsheet.recalc import FormulasRecalc
    from tests.test_spreadsheet_recalc import hide_soffice

    hide_soffice(monkeypatch, tmp_path / "bin")
    newcomer = SpreadsheetHarness(answer_cache_dir=tmp_path / "answers")
    assert isinstance(newcomer.recalculator, FormulasRecalc)
    assert newcomer.describe()["recalc"].startswith("formulas ")
    obs, reward, terminated, _, info = submit(newcomer, "37609", CORRECT["37609"])  # writes Excel formulas
    assert (reward, terminated) == (1.0, True), obs
