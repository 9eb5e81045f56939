"""Test support for the external agent backends: a small WorkspaceTasks test harness (each task: read the word in
input.txt, write its answer into answer.txt; scored by comparing answer.txt with the task's expected word)."""

from __future__ import annotations

from pathlib import Path

from raso.harness.base import Harness, Score, Task, WorkspaceTasks
from raso.skill import Skill

SKILL = Skill(name="Answer Files", description="How to answer in a file",
              body="# Answer files\n\nALWAYS-UPPERCASE-MARKER: write the answer in answer.txt, one word.\n")


class AnswerFileTestHarness(WorkspaceTasks, Harness):
    """A workspace-only test harness (no text environment): the agent must write `expected` into answer.txt."""

    name = "answer-file-test"
    resource_dir = Path(__file__).parent
    max_steps = 4

    def __init__(self, words: tuple[str, ...] = ("blue", "green")) -> None:
        self.words = words

    def splits(self) -> dict[str, list[Task]]:
        tasks = [Task(id=f"t{i}", instruction=f"copy {w}", metadata={"word": w}) for i, w in enumerate(self.words)]
        return {"train": tasks, "val": tasks, "test": tasks}

    def prepare_workspace(self, task: Task, workspace: Path) -> str:
        (workspace / "input.txt").write_text(task.metadata["word"] + "\n", encoding="utf-8")
        return "Read the word in input.txt and write it, alone, into answer.txt."

    def score_workspace(self, task: Task, workspace: Path) -> Score:
        answer = workspace / "answer.txt"
        if not answer.is_file():
            return Score(reward=0.0, info={"reason": "no answer.txt"})
        got = answer.read_text(encoding="utf-8").strip()
        info = {"answer": got}
        probe = workspace / "probe.txt"  # what an isolation probe left in the workspace, for the test to read
        if probe.is_file():
            info["probe"] = probe.read_text(encoding="utf-8", errors="replace")
        return Score(reward=float(got == task.metadata["word"]), info=info)

    @property
    def workspace_description(self) -> str:
        return "The workspace holds input.txt; the answer goes into answer.txt; scored by exact match."

    @property
    def task_description(self) -> str:
        return "Copy a word from input.txt into answer.txt."


#: The outcome each kind of refused model gives a rollout (the same as before the fail-fast change).
REFUSAL_OUTCOME = {"budget": "budget", "unreachable": "infrastructure"}
#: How long a rollout whose model is refused or unreachable may take (issue 37: 265 s and 609 s before). The
#: program's own start is in it: mini-swe-agent's `import litellm` alone took 20 s of wall time at a load of 12.
FAIL_FAST_S = 30.0
#: How long after the refusal the rollout may still run (the program's exit, the scoring, the cleanup).
REFUSAL_TO_END_S = 10.0


def assert_refused_rollout_ends_fast(backend, config, refusal: str, monkeypatch, limits=None) -> None:
    """Run one rollout of `backend` against a model refused as `refusal` and check it failed fast: the outcome it
    always had, one call asked and refused (nothing retried it), the rollout over seconds after the refusal."""
    import time

    from raso.agent.programs.runner import ExternalAgentRunner

    gateway = refusing_gateway(refusal, monkeypatch)
    harness = AnswerFileTestHarness()
    rollout = harness.rollout(harness.tasks("train")[0], [SKILL], ExternalAgentRunner(backend, gateway, config, limits))
    ended = time.time()
    assert rollout.outcome == REFUSAL_OUTCOME[refusal], rollout.error
    [refused] = rollout.metadata["endpoint_errors"]
    assert ended - refused["at"] < REFUSAL_TO_END_S
    # mini-swe-agent retried each refused call 10 times with backoff (265 s a rollout; 609 s when unreachable)
    assert rollout.wall_time_s < FAIL_FAST_S and rollout.metadata["limit_hit"] is None
    assert len(gateway.ledger.records()) == 1  # later calls are refused by the endpoint without the gateway


def refusing_gateway(refusal: str, monkeypatch) -> object:
    """A gateway whose agent model refuses every call: "budget" (the USD budget is spent already) or
    "unreachable" (nothing listens at the model's api_base); the gateway's retry settings are the defaults."""
    from raso.llm.config import GatewayConfig, ModelPrice, RoleConfig
    from raso.llm.gateway import LLMGateway
    from raso.llm.ledger import CallRecord
    from raso.llm.scripted import ScriptedModel

    if refusal == "budget":
        model = ScriptedModel(["never sent"])
        gateway = LLMGateway(GatewayConfig(roles={"agent": RoleConfig(model=model.model)}, budget_usd=1e-9,
                                           prices={model.model: ModelPrice(input=1.0, output=1.0)}))
        gateway.ledger.record(CallRecord(role="agent", stage="earlier", model=model.model, cost_usd=1.0))
        return gateway
    monkeypatch.setenv("RASO_TEST_UNREACHABLE_KEY", "sk-test")
    role = RoleConfig(model="openai/gpt-4o-mini", api_base="http://127.0.0.1:9/v1", api_key_env="RASO_TEST_UNREACHABLE_KEY")
    return LLMGateway(GatewayConfig(roles={"agent": role}))
