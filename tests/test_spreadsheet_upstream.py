"""The upstream prompt mode (`--harness-arg prompt_mode=upstream`): SpreadsheetBench's own multi-round setting."""

from __future__ import annotations

import pytest

from harnesses.spreadsheet import SpreadsheetHarness
from harnesses.spreadsheet.upstream_env import NO_OUTPUT, extract_code
from raso.harness import Task
from tests.spreadsheet_solutions import CORRECT


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> SpreadsheetHarness:
    return SpreadsheetHarness(prompt_mode="upstream", answer_cache_dir=tmp_path_factory.mktemp("answers"))


def upstream_program(task_id: str) -> str:
    """The hand-written correct program with upstream's file names instead of sys.argv."""
    return (CORRECT[task_id].replace("sys.argv[1]", f"'1_{task_id}_input.xlsx'")
            .replace("sys.argv[2]", f"'1_{task_id}_output.xlsx'"))


def test_first_message_is_the_upstream_template_with_df_head_per_sheet(harness):
    env = harness.make_env(Task(id="37609", instruction=""))
    try:
        obs, info = env.reset()
    finally:
        env.close()
    assert info["cases"] == 3
    fields = ["### instruction", "### spreadsheet_path", "### spreadsheet_content", "### instruction_type",
              "### answer_position", "### output_path"]
    assert [obs.index(f) for f in fields] == sorted(obs.index(f) for f in fields)  # upstream's order
    assert "1_37609_input.xlsx" in obs and "1_37609_output.xlsx" in obs and "\nC2:C11\n" in obs
    assert "Sheet Name: Sheet2" in obs and "-" * 50 in obs
    content = obs[obs.index("### spreadsheet_content"):obs.index("### instruction_type")]
    assert len([line for line in content.splitlines() if line[:1].isdigit()]) == 5  # df.head(5) rows
    assert "up to 5 rounds" in obs
    for absent in ("data_position", "Data position", "test case", "sys.argv"):
        assert absent not in obs


def test_upstream_mode_has_five_turns_and_its_own_texts(harness):
    assert harness.max_steps == 5
    assert "Action: SUBMIT" not in harness.action_instructions and "```python" in harness.action_instructions
    for text in (harness.task_description, harness.harness_description):
        assert "test case" not in text.lower() and len(text) > 200
    assert "output_path" in harness.turn_reminder
    assert SpreadsheetHarness(prompt_mode="upstream", max_steps=3).max_steps == 3
    with pytest.raises(ValueError, match="prompt_mode"):
        SpreadsheetHarness(prompt_mode="verbose")


@pytest.mark.parametrize("reply, code", [
    ("Thought: look.\n```python\nprint(1)\n```\nthen\n```python\nprint(2)\n```", "print(1)"),  # the first block
    ("print(3)", "print(3)"),                                                                  # no block: all of it
    ("```python\nimport sys\nprint(sys.argv", "import sys\nprint(sys.argv"),                  # cut-off reply
])
def test_code_extraction_follows_upstream(harness, reply, code):
    assert extract_code(reply) == code == harness.parse_action(reply)


def test_the_run_ends_when_the_output_exists_and_the_code_is_rerun_on_the_other_cases(harness):
    env = harness.make_env(Task(id="37609", instruction=""))
    env.reset()
    try:
        obs, reward, terminated, _, info = env.step("```python\nimport openpyxl\n"
                                                    "print(openpyxl.load_workbook('1_37609_input.xlsx').sheetnames)\n```")
        assert (reward, terminated) == (0.0, False) and obs == "['Sheet2']"
        obs, _, terminated, _, _ = env.step("x = 1")
        assert not terminated and obs == NO_OUTPUT
        obs, _, terminated, _, _ = env.step("1/0")
        assert not terminated and "ZeroDivisionError" in obs
        obs, reward, terminated, _, info = env.step(f"```python\n{upstream_program('37609')}```")
    finally:
        env.close()
    assert terminated and reward == 1.0 and info["cases_passed"] == 3  # cases 2 and 3 ran with their file names
    assert "'1_37609_output.xlsx'" in info["final_output"]


def test_without_an_output_file_the_last_turn_scores_the_other_cases(harness):
    program = upstream_program("39180")
    env = harness.make_env(Task(id="39180", instruction=""))
    env.reset()
    try:
        for _turn in range(4):
            _, _, terminated, _, _ = env.step("print('looking')")
            assert not terminated
        # The last turn's code crashes on test case 1 only after saving nothing; it still runs on cases 2 and 3.
        guarded = program.replace("wb.save(", "import os\nif any(n.startswith('1_') for n in os.listdir('.')):\n"
                                             "    raise SystemExit(3)\nwb.save(")
        obs, reward, terminated, _, info = env.step(guarded)
    finally:
        env.close()
    assert terminated and reward == 0.0
    assert info["case_results"][0]["passed"] is False and "was not created in 5 turns" in info["case_results"][0]["message"]
    assert [r["passed"] for r in info["case_results"][1:]] == [True, True]
    assert info["soft_score"] == pytest.approx(2 / 3)


def test_a_full_rollout_through_the_agent_in_upstream_mode(harness):
    from raso.agent import AgentConfig, ExecutionAgent
    from raso.llm import GatewayConfig, LLMGateway, RetryConfig
    from raso.llm.scripted import ScriptedModel

    model = ScriptedModel([
        "Thought: look first.\n```python\nimport pandas as pd\nprint(pd.read_excel('1_17251_input.xlsx').shape)\n```",
        f"Thought: solve.\n```python\n{upstream_program('17251')}```",
    ])
    gateway = LLMGateway(GatewayConfig.for_models(target=model.model, retry=RetryConfig(max_attempts=1)))
    agent = ExecutionAgent(gateway, AgentConfig(mode="none"))
    the_task = next(t for split in harness.splits().values() for t in split if t.id == "17251")
    rollout = harness.rollout(the_task, [], agent)
    assert rollout.error is None, rollout.error
    assert rollout.reward == 1.0 and rollout.terminated and len(rollout.trajectory) == 2
    assert rollout.trajectory[0].result.startswith("(")  # pandas ran in the sandbox and printed the shape
    first_prompt = "\n".join(m["content"] for m in model.calls[0])
    assert "### spreadsheet_content" in first_prompt and "5 turns per task" in first_prompt
