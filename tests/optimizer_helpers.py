"""Shared helpers for the optimizer tests: a routing scripted model, fake corpus hits, a retriever spy, and a
run context with the initializer / proposer a test names."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from raso.harness import Rollout, Step
from raso.llm import GatewayConfig, LLMGateway
from raso.llm.scripted import ScriptedModel
from raso.optimizer.context import RunContext
from raso.optimizer.options import InitOptions, UpdateOptions
from raso.optimizer.rasi import RASI, RFSI
from raso.optimizer.rasu import RASU, RFSU
from raso.optimizer.types import InitResult, UpdateProposal
from raso.retrieval.retrievers import RetrievalOptions
from raso.skill import Skill

T = "Answer spreadsheet questions by writing the answer into the cell named in the task, then save the workbook."
H = "Tools: read_cell(ref), write_cell(ref, value), save(). Observations are JSON. At most 10 steps. Score: exact match."


@dataclass
class FakeSection:
    id: str
    skill_id: str
    skill_name: str
    heading_path: str
    text: str
    repo: str
    path: str
    commit: str
    license: str = "MIT"


@dataclass
class FakeHit:
    section: FakeSection
    score: float


def section(i: int, text: str | None = None) -> FakeSection:
    return FakeSection(
        id=f"sec-{i}", skill_id=f"skill-{i}", skill_name=f"skill {i}", heading_path=f"skill {i} › Step {i}",
        text=text if text is not None else f"## Step {i}\nUse numpy arrays and skip empty groups ({i}).",
        repo=f"owner{i}/repo{i}", path=f"skills/s{i}/SKILL.md", commit=f"{i:040x}",
    )


@dataclass
class SpyRetriever:
    """Returns fixed sections for every query and records each call."""

    sections: list[FakeSection]
    calls: list[dict[str, Any]] = field(default_factory=list)

    def search(self, query: str, k: int = 5, exclude_repos=(), exclude_skills=()) -> list[FakeHit]:
        self.calls.append({"query": query, "k": k, "exclude_repos": tuple(exclude_repos),
                           "exclude_skills": tuple(exclude_skills)})
        return [FakeHit(s, 10.0 - i) for i, s in enumerate(self.sections[:k])]


def user_text(messages: list[dict[str, Any]]) -> str:
    """The role's prompt: the first user message (a repair attempt appends more messages after it)."""
    return next(m["content"] for m in messages if m["role"] == "user")


def role_of(messages: list[dict[str, Any]]) -> str:
    """Which role a prompt belongs to, from the first line of its template."""
    text = user_text(messages)
    for marker, role in (
        ("Plan an agent skill", "query_init"),
        ("Write one short lesson", "adapt"),
        ("Write an agent skill (SKILL.md)", "skill_init"),
        ("Find out why it lost reward", "gradient"),
        ("Merge failure-mode reports", "merge"),
        ("Improve an agent skill", "update"),
    ):
        if marker in text:
            return role
    raise AssertionError(f"unrecognised prompt: {text[:200]!r}")


DEFAULT_REPLIES: dict[str, Any] = {
    "query_init": {"requirements": [
        {"requirement": "Leave the answer cell empty when no row qualifies.", "query": "empty group missing value"},
        {"requirement": "Save the workbook after writing.", "query": "save file after edit"},
    ]},
    "adapt": {"lesson": "If no row qualifies, leave the target cell blank; never write 0."},
    "skill_init": {"name": "Spreadsheet Answers", "description": "Answer spreadsheet questions into cells.",
                   "body": "# Steps\n1. Read the task.\n2. Write the answer cell.\n3. save()."},
    "gradient": {"gradients": [
        {"failure_mode": "The agent never calls save().", "evidence": "t1", "query": "save workbook"},
    ]},
    "merge": {"gradients": [
        {"failure_mode": "The agent never calls save().", "evidence": "t1, t9", "query": "save workbook"},
    ]},
    "update": {"name": "spreadsheet-answers", "description": "Answer spreadsheet questions; always save.",
               "body": "# Steps\n1. Read the task.\n2. Write the answer cell.\n3. Always call save()."},
}


def router(overrides: dict[str, Any] | None = None) -> Callable[[list[dict[str, Any]]], str]:
    """A scripted-model function answering each role with its reply (a dict -> JSON, a str as-is,
    a callable -> called with the messages)."""
    replies = {**DEFAULT_REPLIES, **(overrides or {})}

    def answer(messages: list[dict[str, Any]]) -> str:
        reply = replies[role_of(messages)]
        if callable(reply):
            reply = reply(messages)
        return reply if isinstance(reply, str) else json.dumps(reply)

    return answer


def gateway(script: Any, profile: dict[str, Any] | None = None) -> tuple[LLMGateway, ScriptedModel]:
    sm = script if isinstance(script, ScriptedModel) else ScriptedModel(script, name="optimizer")
    gw = LLMGateway(GatewayConfig.for_models(target=sm.model, profile=profile))
    return gw, sm


def calls_of(sm: ScriptedModel, role: str) -> list[list[dict[str, Any]]]:
    return [c for c in sm.calls if role_of(c) == role]


def stages(gw: LLMGateway) -> list[str]:
    return [r.stage for r in gw.ledger.records()]


def rollout(i: int, reward: float = 0.0, steps: int = 3, error: str | None = None) -> Rollout:
    return Rollout(
        task_id=f"t{i}", harness="toy", reward=reward, error=error,
        trajectory=[Step(observation=f"obs {i}.{j}", action=f"write_cell('A{j}', {j})") for j in range(steps)],
    )


def context(gw: LLMGateway, retriever: Any = None, *, k: int = 5, **fields: Any) -> RunContext:
    """A run context over T and H: `retriever` (None = none), `k` sections per query, other RunContext fields
    (limits, prompts, exclude_repos, exclude_skills, workers) as given."""
    fields = {name: value for name, value in fields.items() if value is not None}
    return RunContext(gateway=gw, task_description=T, harness_description=H,
                      retriever_factory=(lambda: retriever) if retriever is not None else None,
                      retrieval=RetrievalOptions(k=k), **fields)


def initialize(gw: LLMGateway, retriever: Any = None, *, k: int = 5, num_requirements: int = 5, adapt: bool = True,
               skill_name: str | None = None, **fields: Any) -> InitResult:
    """RASI when a retriever is given, else RFSI, on `context(gw, retriever, k=k, **fields)`."""
    options = InitOptions(method="rasi" if retriever is not None else "rfsi", num_requirements=num_requirements,
                          adapt=adapt)
    step = RASI(options, skill_name=skill_name) if retriever is not None else RFSI(options, skill_name=skill_name)
    return step.init(context(gw, retriever, k=k, **fields))


def propose(gw: LLMGateway, skill: Skill, rollouts: Sequence[Rollout], retriever: Any = None, *, k: int = 5,
            chunk_size: int = 8, adapt: bool = True, failures_only: bool = True, **fields: Any) -> UpdateProposal:
    """RASU when a retriever is given, else RFSU, on `context(gw, retriever, k=k, **fields)`."""
    options = UpdateOptions(method="rasu" if retriever is not None else "rfsu", chunk_size=chunk_size, adapt=adapt,
                            failures_only=failures_only)
    step = RASU(options) if retriever is not None else RFSU(options)
    return step.propose(context(gw, retriever, k=k, **fields), skill, rollouts)
