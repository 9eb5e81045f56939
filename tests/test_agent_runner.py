"""The external agent runner with the `command` backend running a small real program in the OS sandbox: the
program reads its instruction and installed skill, asks the loopback endpoint (a scripted model behind the gateway),
and writes the answer file; the harness's scorer scores it. Also the defined outcomes of a crash, a timeout, an
unreachable model, a refused budget and a harness without a workspace form."""

from __future__ import annotations

import sys
import textwrap

import pytest
from agent_program_support import SKILL, AnswerFileTestHarness

from raso.agent.agent import AgentConfig
from raso.agent.programs.base import ProgramOptions
from raso.agent.programs.command import CommandOptions, CommandProgram
from raso.agent.programs.runner import ExternalAgentRunner
from raso.harness import Evidence, Score, Task, WorkspaceEnd
from raso.llm.config import GatewayConfig, ModelPrice, RoleConfig
from raso.llm.gateway import LLMGateway
from raso.llm.scripted import ScriptedModel

pytestmark = pytest.mark.sandbox_os

AGENT = textwrap.dedent('''
    import json, os, pathlib, sys, urllib.error, urllib.request
    instruction = pathlib.Path(sys.argv[1]).read_text()
    skills = sorted(pathlib.Path(os.environ["RASO_SKILLS_DIR"]).glob("*/SKILL.md"))
    skill_text = "\\n".join(p.read_text() for p in skills)
    try:
        (pathlib.Path(__file__).parent.parent / "secret" / "answers.txt").read_text()
        print("SECRET READ")
    except OSError as exc:
        print("secret unreadable:", type(exc).__name__)
    body = {"model": os.environ["RASO_MODEL"], "messages": [
        {"role": "system", "content": skill_text},
        {"role": "user", "content": instruction + "\\n" + pathlib.Path("input.txt").read_text()}]}
    request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=json.dumps(body).encode(), headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                                                 "Content-Type": "application/json"})
    try:
        reply = json.load(urllib.request.urlopen(request, timeout=60))
    except urllib.error.HTTPError as exc:
        print("model error", exc.code, exc.read().decode()[:300])
        sys.exit(4)
    pathlib.Path("answer.txt").write_text(reply["choices"][0]["message"]["content"])
    print("wrote", os.getcwd())
    sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
''')


@pytest.fixture
def agent_root(open_tmp_path, monkeypatch):
    root = open_tmp_path / "rollouts"
    root.mkdir()
    monkeypatch.setenv("RASO_AGENT_ROOT", str(root))
    return root


@pytest.fixture
def program(open_tmp_path):
    tmp_path = open_tmp_path
    script = tmp_path / "prog" / "agent.py"
    script.parent.mkdir()
    script.write_text(AGENT)
    secret = tmp_path / "secret" / "answers.txt"
    secret.parent.mkdir()
    secret.write_text("the answers")
    return script, secret


def _runner(model_or_role, template: str, **config) -> tuple[ExternalAgentRunner, LLMGateway]:
    role = model_or_role if isinstance(model_or_role, RoleConfig) else RoleConfig(model=model_or_role.model)
    prices = config.pop("prices", {})
    budget = config.pop("budget_usd", None)
    gateway = LLMGateway(GatewayConfig(roles={"agent": role}, prices=prices, budget_usd=budget,
                                       retry={"max_attempts": 1}))
    agent_config = AgentConfig(**config)
    return ExternalAgentRunner(CommandProgram(CommandOptions(template=template)), gateway, agent_config), gateway


def test_command_agent_solves_a_task_through_the_endpoint(agent_root, program):
    script, secret = program
    assert secret.is_file()  # it exists on the host; the agent must not see it
    model = ScriptedModel(["blue"])
    runner, gateway = _runner(model, f"{sys.executable} {script} {{instruction_file}}")
    harness = AnswerFileTestHarness()
    task = harness.tasks("train")[0]
    rollout = harness.rollout(task, [SKILL], runner)
    assert rollout.outcome == "ok", rollout.error
    assert rollout.reward == 1.0 and rollout.metadata["score_info"] == {"answer": "blue"}
    # the skill reached the model, through the installed SKILL.md
    sent = model.calls[0]
    assert "ALWAYS-UPPERCASE-MARKER" in sent[0]["content"] and "name: Answer Files" in sent[0]["content"]
    assert "input.txt" in sent[1]["content"] and "blue" in sent[1]["content"]
    # isolation: the file next to the program's own folder was not there; it started in the workspace
    assert "secret unreadable" in rollout.final_output and "SECRET READ" not in rollout.final_output
    assert rollout.final_output.rstrip().endswith("/workspace")
    assert "loopback-ports-only" in rollout.metadata["isolation"]
    # accounting from the endpoint session, and in the gateway's ledger
    assert rollout.model_calls == 1 and rollout.completion_tokens == 1
    assert gateway.ledger.totals()["calls"] == 1
    # the transcript: the model call as a step, then the scorer's verdict
    assert rollout.trajectory[0].reply == "blue" and rollout.trajectory[-1].kind == "score"
    assert rollout.skill_names == ["Answer Files"] and rollout.metadata["program"] == "command"
    assert list(agent_root.iterdir()) == []  # nothing left behind


class JudgingAnswerFileHarness(AnswerFileTestHarness):
    """The answer-file harness with its own scorer (`Harness.score`): it records the evidence and gives the opposite
    of the workspace form's verdict, so a reward that bypassed the core scorer shows."""

    def __init__(self) -> None:
        super().__init__()
        self.evidence: list[WorkspaceEnd] = []

    def score(self, task: Task, evidence: Evidence) -> Score:
        assert isinstance(evidence, WorkspaceEnd)
        self.evidence.append(evidence)
        verdict = self.score_workspace(task, evidence.workspace)  # read while the rollout's folder still exists
        return Score(reward=1.0 - verdict.reward, soft_score=0.75, info={"judged": verdict.info})


def test_the_external_runner_takes_the_reward_from_the_harness_scorer(agent_root, program):
    script, _ = program
    runner, _ = _runner(ScriptedModel(["blue"]), f"{sys.executable} {script} {{instruction_file}}")
    harness = JudgingAnswerFileHarness()
    rollout = harness.rollout(harness.tasks("train")[0], [SKILL], runner)
    assert rollout.outcome == "ok", rollout.error
    [evidence] = harness.evidence
    assert evidence.workspace.name == "workspace" and not evidence.workspace.exists()  # cleaned up afterwards
    assert (rollout.reward, rollout.soft_score) == (0.0, 0.75)  # the core scorer's verdict on a right answer
    assert rollout.metadata["score_info"] == {"judged": {"answer": "blue"}}


def test_crash_after_a_model_call_is_the_agents_own_result(agent_root, program):
    script, _ = program
    runner, _ = _runner(ScriptedModel(["green"]), f"{sys.executable} {script} {{instruction_file}} 3")
    harness = AnswerFileTestHarness()
    rollout = harness.rollout(harness.tasks("train")[1], [SKILL], runner)
    assert rollout.outcome == "agent_error" and "exited 3" in rollout.error
    assert rollout.reward == 1.0  # the scorer's verdict on what it left, crash or not
    assert rollout.metadata["exit_code"] == 3


@pytest.mark.parametrize("status", [137, 152])
def test_an_agents_own_exit_status_is_not_reported_as_a_cpu_limit(agent_root, program, status):
    # 137 and 152 are what bwrap reports for SIGKILL and SIGXCPU: the agent exited so itself, far below its CPU limit
    script, _ = program
    runner, _ = _runner(ScriptedModel(["green"]), f"{sys.executable} {script} {{instruction_file}} {status}")
    harness = AnswerFileTestHarness()
    rollout = harness.rollout(harness.tasks("train")[1], [SKILL], runner)
    assert rollout.metadata["limit_hit"] is None and not rollout.truncated
    assert rollout.outcome == "agent_error" and f"exited {status}" in rollout.error
    assert "not by a sandbox limit" in rollout.error and "cpu_time" not in rollout.error
    assert rollout.metadata["limits_mode"] in ("cgroup-v2", "cgroup-v1", "process-tree")


def test_program_that_cannot_start_is_unusable(agent_root):
    runner, _ = _runner(ScriptedModel([]), "/bin/sh -c 'exit 7'")
    harness = AnswerFileTestHarness()
    rollout = harness.rollout(harness.tasks("train")[0], [SKILL], runner)
    assert rollout.outcome == "unusable" and "exited 7 before any model call" in rollout.error
    assert rollout.reward == 0.0 and not rollout.counts


def test_timeout_is_reported_and_the_tree_killed(agent_root):
    runner, _ = _runner(ScriptedModel([]), "/bin/sh -c 'sleep 60'", max_wall_s=2)
    harness = AnswerFileTestHarness()
    rollout = harness.rollout(harness.tasks("train")[0], [], runner)
    assert rollout.metadata["limit_hit"] == "wall_time" and rollout.truncated
    assert rollout.outcome == "agent_error" and "wall_time" in rollout.error
    assert rollout.wall_time_s < 30 and rollout.metadata["score_info"] == {"reason": "no answer.txt"}
    assert list(agent_root.iterdir()) == []


def test_unreachable_model_is_infrastructure(agent_root, program, monkeypatch):
    script, _ = program
    monkeypatch.setenv("RASO_TEST_RUNNER_KEY", "sk-test")
    role = RoleConfig(model="openai/gpt-4o-mini", api_base="http://127.0.0.1:9/v1", api_key_env="RASO_TEST_RUNNER_KEY")
    runner, _ = _runner(role, f"{sys.executable} {script} {{instruction_file}}")
    harness = AnswerFileTestHarness()
    rollout = harness.rollout(harness.tasks("train")[0], [SKILL], runner)
    assert rollout.outcome == "infrastructure" and "LLMUnavailableError" in rollout.error
    assert not rollout.counts and rollout.metadata["exit_code"] == 4


def test_budget_refusal_is_budget(agent_root, program):
    script, _ = program
    model = ScriptedModel(["blue"])
    runner, _ = _runner(model, f"{sys.executable} {script} {{instruction_file}}", budget_usd=1e-9,
                        prices={model.model: ModelPrice(input=1.0, output=1.0)})
    runner.gateway.ledger.record(__import__("raso.llm.ledger", fromlist=["CallRecord"]).CallRecord(
        role="agent", stage="earlier", model=model.model, cost_usd=1.0))  # the budget is spent already
    harness = AnswerFileTestHarness()
    rollout = harness.rollout(harness.tasks("train")[0], [SKILL], runner)
    assert rollout.outcome == "budget" and "USD budget reached" in rollout.error
    assert model.calls == []


def test_harness_without_workspace_form_is_refused_clearly(agent_root):
    from raso.harness.base import Task
    from raso.harness.registry import get_harness

    runner, _ = _runner(ScriptedModel([]), "/bin/true")
    harness = get_harness("alfworld")
    task = Task(id="x", instruction="x")
    rollout = runner.run(harness, task, [SKILL])
    assert rollout.outcome == "unusable"
    assert "has no workspace form (WorkspaceTasks)" in rollout.error and "'alfworld'" in rollout.error


def test_missing_command_is_unusable(agent_root):
    runner = ExternalAgentRunner(CommandProgram(), None, AgentConfig())
    harness = AnswerFileTestHarness()
    rollout = runner.run(harness, harness.tasks("train")[0], [])
    assert rollout.outcome == "unusable" and "set program.command.template" in rollout.error


def test_bad_placeholder_is_a_clear_error():
    with pytest.raises(ValueError, match=r"unknown placeholder \{workdir\}"):
        CommandOptions(template="agent {workdir}")
    with pytest.raises(ValueError, match="inside the rollout's home"):
        CommandOptions(template="agent", skills_dir="../x")
    with pytest.raises(TypeError, match="takes CommandOptions"):  # a program is built from its own options model
        CommandProgram(ProgramOptions())


def test_skill_files_travel_with_the_skill(tmp_path):
    from raso.agent.programs.runner import _write_skill

    skill = SKILL.model_copy(update={"files": {"references/notes.md": "more", "scripts/run.sh": "echo hi\n"}})
    written = _write_skill(skill, tmp_path / "answer-files")
    assert sorted(written) == ["references/notes.md", "scripts/run.sh"]
    assert (tmp_path / "answer-files" / "references" / "notes.md").read_text() == "more"
    assert (tmp_path / "answer-files" / "SKILL.md").read_text().startswith("---\nname: Answer Files")
    # a path leaving the folder is never written, even from a skill built without validation
    unchecked = SKILL.model_copy(update={"files": {"../escape.md": "no"}})
    assert _write_skill(unchecked, tmp_path / "other") == [] and not (tmp_path / "escape.md").exists()


def test_skills_with_the_same_name_get_their_own_folders():
    from raso.agent.programs.runner import _folder_names

    other = SKILL.model_copy(update={"body": "other"})
    assert _folder_names([SKILL, other, SKILL]) == ["answer-files", "answer-files-2", "answer-files-3"]
