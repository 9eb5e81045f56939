"""The `tasks` harness with an external agent: the `command` backend runs a small program in the OS sandbox that
asks the loopback endpoint (a scripted model) and writes the answer file the task names; the task's own check, run
in the sandbox on a copy of the workspace, scores it."""

from __future__ import annotations

import shutil
import sys
import textwrap

import pytest

from harnesses.tasks import TasksHarness
from raso.agent.agent import AgentConfig
from raso.agent.programs.command import CommandOptions, CommandProgram
from raso.agent.programs.runner import ExternalAgentRunner
from raso.llm.config import GatewayConfig, RoleConfig
from raso.llm.gateway import LLMGateway
from raso.llm.scripted import ScriptedModel

pytestmark = pytest.mark.sandbox_os

AGENT = textwrap.dedent('''
    import json, os, pathlib, sys, urllib.request
    instruction = pathlib.Path(sys.argv[1]).read_text()
    body = {"model": os.environ["RASO_MODEL"], "messages": [
        {"role": "user", "content": instruction + "\\nFiles: " + ", ".join(sorted(os.listdir(".")))}]}
    request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=json.dumps(body).encode(), headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                                                 "Content-Type": "application/json"})
    reply = json.load(urllib.request.urlopen(request, timeout=60))
    pathlib.Path("answer.txt").write_text(reply["choices"][0]["message"]["content"])
''')


def write_agent(tmp_path, monkeypatch, text: str, name: str = "agent.py"):
    """The agent program's script under `tmp_path/prog`, rollouts under `tmp_path/rollouts` (RASO_AGENT_ROOT)."""
    root = tmp_path / "rollouts"
    root.mkdir()
    monkeypatch.setenv("RASO_AGENT_ROOT", str(root))
    script = tmp_path / "prog" / name
    script.parent.mkdir()
    script.write_text(text)
    return script


@pytest.fixture
def agent_script(open_tmp_path, monkeypatch):
    return write_agent(open_tmp_path, monkeypatch, AGENT)


@pytest.mark.parametrize("reply, reward", [("7", 1.0), ("6", 0.0)])
def test_a_command_agent_does_an_example_task_scored_by_its_check(agent_script, reply, reward):
    harness = TasksHarness("example")
    task = next(t for t in harness.tasks("train") if t.id == "error-count")
    model = ScriptedModel([reply])
    gateway = LLMGateway(GatewayConfig(roles={"agent": RoleConfig(model=model.model)}, retry={"max_attempts": 1}))
    program = CommandProgram(CommandOptions(template=f"{sys.executable} {agent_script} {{instruction_file}}"))
    rollout = harness.rollout(task, [], ExternalAgentRunner(program, gateway, AgentConfig()))
    assert rollout.outcome == "ok", rollout.error
    assert rollout.reward == reward
    sent = model.calls[0][-1]["content"]
    assert "Count the entries whose level is ERROR" in sent and "server.log" in sent  # the workspace's file
    assert "check.sh" not in sent  # the check never reaches the agent's workspace


PEEK = textwrap.dedent('''
    import pathlib, sys
    check = pathlib.Path(sys.argv[1]) / "error-count" / "check.sh"
    try:
        print("READ " + check.read_text()[:40])
    except OSError as exc:
        print("hidden", type(exc).__name__)
''')


def test_a_tasks_folder_under_a_bound_folder_is_hidden_from_the_agent(open_tmp_path, monkeypatch):
    tmp_path = open_tmp_path
    # the user's tasks folder lies beside the agent's script, whose folder the command backend binds read-only
    root = tmp_path / "rollouts"
    root.mkdir()
    monkeypatch.setenv("RASO_AGENT_ROOT", str(root))
    prog = tmp_path / "prog"
    shutil.copytree(TasksHarness("example").folder, prog / "tasks")
    (prog / "peek.py").write_text(PEEK)
    harness = TasksHarness(str(prog / "tasks"))
    task = next(t for t in harness.tasks("train") if t.id == "error-count")
    gateway = LLMGateway(GatewayConfig(roles={"agent": RoleConfig(model=ScriptedModel([]).model)}))
    backend = CommandProgram(CommandOptions(template=f"{sys.executable} {prog}/peek.py {prog}/tasks"))
    assert prog / "peek.py" in backend.read_only_paths() or prog in backend.read_only_paths()
    rollout = harness.rollout(task, [], ExternalAgentRunner(backend, gateway, AgentConfig()))
    assert rollout.final_output is not None and rollout.final_output.startswith("hidden"), rollout.final_output


APP_AGENT = textwrap.dedent('''
    import os, pathlib
    # what a Harbor task's reference solution does: absolute paths under the task's WORKDIR
    words = pathlib.Path("/app/notes.txt").read_text().split()
    pathlib.Path("/app/count.txt").write_text(str(len(words)))
    pathlib.Path("/app/where.txt").write_text(os.getcwd())
''')


def test_an_external_agent_finds_a_harbor_tasks_files_at_its_workdir(open_tmp_path, monkeypatch):
    script = write_agent(open_tmp_path, monkeypatch, APP_AGENT, "app_agent.py")
    harness = TasksHarness("example")
    task = next(t for s in harness.splits().values() for t in s if t.id == "harbor-word-count")
    assert harness.workspace_path(task) == "/app"
    gateway = LLMGateway(GatewayConfig(roles={"agent": RoleConfig(model=ScriptedModel(["unused"]).model)},
                                       retry={"max_attempts": 1}))
    program = CommandProgram(CommandOptions(template=f"{sys.executable} {script}"))
    rollout = harness.rollout(task, [], ExternalAgentRunner(program, gateway, AgentConfig()))
    assert rollout.outcome == "ok", rollout.error
    assert rollout.reward == 1.0  # the verifier read /app/count.txt, which the agent wrote at /app
