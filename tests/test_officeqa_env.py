"""The OfficeQA environment on the shipped synthetic demo data: search, open, python, answer, parsing, budget,
and an oracle agent through the real agent loop with a scripted model."""

from __future__ import annotations

import re

import pytest

from harnesses.officeqa import OfficeQAHarness
from harnesses.officeqa.actions import parse_open, parse_reply, parse_search
from harnesses.officeqa.corpus import split_pages
from raso.agent import AgentConfig, ExecutionAgent
from raso.choices import Split, choices_of
from raso.testing import scripted_gateway


@pytest.fixture(scope="module")
def harness() -> OfficeQAHarness:
    return OfficeQAHarness()


def all_tasks(harness):
    return [task for split in choices_of(Split) for task in harness.tasks(split)]


def test_every_shipped_question_scores_one_with_its_gold_answer_and_zero_when_wrong(harness):
    tasks = all_tasks(harness)
    assert len(tasks) == 30
    for task in tasks:
        env = harness.make_env(task)
        env.reset()
        gold = harness.question(task.id).answer
        _, reward, terminated, _, info = env.step(f"answer[{gold}]")
        assert (reward, terminated, info["final_output"]) == (1.0, True, gold), (task.id, info)


def test_a_wrong_unit_or_an_answer_off_by_more_than_the_tolerance_scores_zero(harness):
    def score(uid: str, answer: str, tolerance: float = 0.0) -> float:
        task = next(t for t in all_tasks(harness) if t.id == uid)
        env = OfficeQAHarness(tolerance=tolerance).make_env(task) if tolerance else harness.make_env(task)
        env.reset()
        return env.step(f"answer[{answer}]")[1]

    gold = {t.id: harness.question(t.id).answer for t in all_tasks(harness)}
    assert gold["demo-02"].endswith(" million") and gold["demo-12"].endswith(" billion")
    assert score("demo-02", gold["demo-02"].replace("million", "billion")) == 0.0
    assert score("demo-12", gold["demo-12"].replace("billion", "million")) == 0.0
    value = float(gold["demo-24"])  # a ratio given to three decimals
    assert score("demo-24", f"{value * 1.02:.4f}") == 0.0
    assert score("demo-24", f"{value * 1.02:.4f}", tolerance=0.01) == 0.0  # 2 % off, 1 % allowed
    assert score("demo-24", f"{value * 1.005:.4f}", tolerance=0.01) == 1.0  # 0.5 % off, 1 % allowed
    # The page shows the deficit in accounting parentheses; reading it that way is right.
    assert gold["demo-03"].startswith("-") and score("demo-03", f"({gold['demo-03'][1:]})") == 1.0


def test_search_finds_the_page_and_year_month_filters_narrow_it(harness):
    env = harness.make_env(harness.tasks("test")[0])
    first, _ = env.reset()
    assert harness.tasks("test")[0].instruction in first and "4 U.S. Treasury Bulletin documents" in first
    observation, reward, terminated, _, _ = env.step("search[unemployment trust fund investments]")
    assert reward == 0.0 and not terminated
    assert observation.count("treasury_bulletin_") >= 4 and "Unemployment Trust Fund" in observation
    filtered, *_ = env.step("search[unemployment trust fund investments year=1950-1960 month=december]")
    names = set(re.findall(r"treasury_bulletin_\d{4}_\d{2}", filtered))
    assert names == {"treasury_bulletin_1953_12"} and "in 1950-1960 month 12" in filtered
    nothing, *_ = env.step("search[trust fund year=2001]")
    assert nothing.startswith("No page matches")
    again, _, _, _, info = env.step("search[trust fund year=2001]")
    assert again.startswith("(This is the same action as your previous one") and info["repeated"]
    assert again.endswith(nothing)


def test_open_shows_pages_in_a_range_and_names_close_documents(harness):
    env = harness.make_env(harness.tasks("train")[0])
    env.reset()
    page, *_ = env.step("open[treasury_bulletin_1953_12.txt page 1]")
    assert page.startswith("=== treasury_bulletin_1953_12 (December 1953), page 1 of ")
    assert "SYNTHETIC DEMO DOCUMENT" in page
    both, *_ = env.step("open[treasury_bulletin_1953_12 pages 1-5]")
    assert "page 1 of" in both and "page 2 of" in both and "at most 2 pages per open" in both
    missing, *_ = env.step("open[treasury_bulletin_1953_11]")
    assert "No document named" in missing and "treasury_bulletin_1953_12" in missing
    beyond, *_ = env.step("open[treasury_bulletin_1953_12 page 40]")
    assert "page 40 does not exist" in beyond


def test_python_runs_in_the_sandbox_and_cannot_read_the_answers(harness):
    env = harness.make_env(harness.tasks("train")[0])
    env.reset()
    observation, *_ = env.step("python[(64171 - 63301) / 63301 * 100]")
    assert observation.startswith("Python output:") and "1.374" in observation
    program, *_ = env.step("python[x = sum([1, 2, 3])\nprint(x * 2)]")
    assert "stdout:\n12" in program
    csv_path = harness.data_dir / "officeqa_full.csv"
    refused, *_ = env.step(f"python[print(open({str(csv_path)!r}).read()[:80])]")
    assert "demo-01" not in refused and ("sandbox" in refused or "Error" in refused)


def test_invalid_actions_cost_a_step_and_the_budget_ends_the_episode_with_zero(harness):
    env = OfficeQAHarness(max_steps=2).make_env(harness.tasks("val")[0])
    env.reset()
    observation, reward, terminated, truncated, info = env.step("I think the answer is 5")
    assert observation.startswith("Invalid action") and info["error"] == "invalid action" and not truncated
    observation, reward, terminated, truncated, _ = env.step("search[receipts]")
    assert truncated and not terminated and reward == 0.0 and "budget is spent" in observation
    with pytest.raises(RuntimeError):
        env.step("answer[1]")


def test_observations_are_bounded(harness):
    env = OfficeQAHarness(max_observation_chars=600).make_env(harness.tasks("val")[0])
    env.reset()
    observation, *_ = env.step("open[treasury_bulletin_1979_03 page 1-2]")
    assert len(observation) <= 700 and "cut at" in observation


def test_reply_parsing():
    assert parse_reply("Thought: look.\nAction: search[public debt year=1953]") == "search[public debt year=1953]"
    assert parse_reply("**Action:** answer[[-4839, 1104]]") == "answer[[-4839, 1104]]"
    assert parse_reply("Action: python[x = 3\nprint(x)]") == "python[x = 3\nprint(x)]"
    assert parse_reply("Compute:\n```python\nprint(2 + 2)\n```\nAction: python[]") == "python[print(2 + 2)]"
    assert parse_reply("```python\nprint(1)\n```") == "python[print(1)]"
    assert parse_reply("I will answer.\nanswer[May 1947]") == "answer[May 1947]"
    assert parse_reply("Action: answer[5]\nAction:") == "answer[5]"  # a cut-off final Action line is skipped
    assert parse_reply("no idea") == "no idea"
    request = parse_search("gross debt, year = 1945 to 1947 month=Jun")
    assert (request.query, request.years, request.month) == ("gross debt", (1945, 1947), 6)
    assert parse_search("debt month=13") == "month must be 1-12 or a month name, got '13'"
    assert parse_open("treasury_bulletin_1945_06, p. 3-4") .__dict__ == {
        "document": "treasury_bulletin_1945_06", "first": 3, "last": 4}
    assert parse_open("doc page 0").startswith("page numbers start at 1")


def test_pages_come_from_markers_when_present_else_windows():
    marked = "--- PAGE 3 ---\n\nalpha\n\n--- PAGE 4 ---\n\nbeta\n"
    assert split_pages(marked) == [(3, "alpha"), (4, "beta")]
    text = ("x" * 60 + "\n\n") * 10
    pages = split_pages(text, page_chars=200)
    assert [n for n, _ in pages] == list(range(1, len(pages) + 1)) and len(pages) >= 3
    assert all(len(p) <= 200 for _, p in pages) and "".join(p for _, p in pages).count("x") == 600


def test_an_oracle_agent_scores_one_through_the_agent_loop(harness):
    gold = {t.instruction: harness.question(t.id).answer for t in all_tasks(harness)}

    def oracle(messages):
        prompt = "\n".join(str(m["content"]) for m in messages)
        question = next(q for q in gold if q in prompt)
        return f"Thought: I know it.\nAction: answer[{gold[question]}]"

    gateway, model = scripted_gateway(oracle)
    agent = ExecutionAgent(gateway, AgentConfig(mode="none"))
    rollouts = [harness.rollout(task, [], agent) for task in harness.tasks("val")]
    assert [r.reward for r in rollouts] == [1.0] * len(rollouts) and all(r.terminated for r in rollouts)
    assert harness.harness_description in model.calls[0][0]["content"]


def test_a_search_then_compute_then_answer_episode_through_the_agent_loop(harness):
    task = next(t for t in all_tasks(harness) if t.id == "demo-15")  # percent change of receipts, FY 1944 -> 1945
    replies = ["Thought: find the table.\nAction: search[budget receipts fiscal year 1945 year=1947 month=6]",
               "Action: open[treasury_bulletin_1947_06 page 1]"]
    env = harness.make_env(task)  # read the page first to write the script's arithmetic from it
    env.reset()
    env.step(harness.parse_action(replies[0]))
    page, *_ = env.step(harness.parse_action(replies[1]))
    receipts: dict[str, str] = {}
    for year, value in re.findall(r"\| (194\d) \| ([\d,]+) \|", page):
        receipts.setdefault(year, value)  # the first table on the page is the fiscal-operations summary
    r44, r45 = (int(receipts[y].replace(",", "")) for y in ("1944", "1945"))
    script = replies + [f"Action: python[round(({r45} - {r44}) / {r44} * 100, 2)]",
                        f"Action: answer[{round((r45 - r44) / r44 * 100, 2)}%]"]
    gateway, _ = scripted_gateway(script)
    rollout = harness.rollout(task, [], ExecutionAgent(gateway, AgentConfig(mode="none")))
    assert rollout.error is None and rollout.reward == 1.0 and len(rollout.trajectory) == 4
    assert str(round((r45 - r44) / r44 * 100, 2)) in rollout.trajectory[2].result
