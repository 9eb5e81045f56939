"""Adaptation may say NONE (issue 24): the prompt no longer asks for a lesson when no section helps, the schema
lets the model say so, no lesson is written then, and InitResult/UpdateProposal record the share of requirements
with a supported lesson and RASI's assembled fallback."""

from __future__ import annotations

import json

from optimizer_helpers import (
    DEFAULT_REPLIES,
    SpyRetriever,
    calls_of,
    gateway,
    initialize,
    propose,
    rollout,
    router,
    section,
    user_text,
)

from raso.llm.profiles import ALL_SCHEMA_HINTS
from raso.llm.structured import schema_of
from raso.optimizer.roles import adaptation_schema
from raso.optimizer.types import InitResult, UpdateProposal
from raso.skill import Skill

REQUIREMENTS = [r["requirement"] for r in DEFAULT_REPLIES["query_init"]["requirements"]]


def none_for(requirement: str):
    """An adaptation reply that says no section supports `requirement` and writes a lesson for the others."""
    def reply(messages):
        if requirement in user_text(messages):
            return json.dumps({"supported": False, "lesson": ""})
        return json.dumps({"supported": True, "lesson": DEFAULT_REPLIES["adapt"]["lesson"]})
    return reply


def test_the_adaptation_prompt_no_longer_asks_for_a_lesson_when_no_section_helps():
    gw, sm = gateway(router())
    initialize(gw, SpyRetriever([section(1)]), k=1, num_requirements=2)
    prompt = user_text(calls_of(sm, "adapt")[0])
    assert "write it from the requirement and the harness description alone" not in prompt
    assert "supported: false" in prompt
    assert schema_of(adaptation_schema(frozenset(ALL_SCHEMA_HINTS)))["required"] == ["supported", "lesson"]


def test_rasi_writes_no_lesson_for_an_unsupported_requirement_and_records_the_share():
    gw, sm = gateway(router({"adapt": none_for(REQUIREMENTS[1])}))
    init = initialize(gw, SpyRetriever([section(1)]), k=1, num_requirements=2)
    assert [lesson.requirement for lesson in init.lessons] == [REQUIREMENTS[0]]
    assert init.unsupported == [REQUIREMENTS[1]]
    assert init.supported_share == 0.5
    assert not init.errors  # saying NONE is an answer, not a failure
    [skill_init] = calls_of(sm, "skill_init")
    assert user_text(skill_init).count("<lesson ") == 1
    # the record round-trips through init.json
    assert InitResult.from_dict(json.loads(json.dumps(init.to_dict()))).supported_share == 0.5


def test_a_fully_supported_init_has_share_one_and_rfsi_none():
    gw, _ = gateway(router())
    assert initialize(gw, SpyRetriever([section(1)]), k=1, num_requirements=2).supported_share == 1.0
    gw, _ = gateway(router())
    rfsi = initialize(gw, None, num_requirements=2)
    assert rfsi.supported_share is None and rfsi.assembled_fallback is False


def test_rasu_records_unsupported_failure_modes():
    failure = DEFAULT_REPLIES["merge"]["gradients"][0]["failure_mode"]
    gw, _ = gateway(router({"adapt": none_for(failure)}))
    skill = Skill(name="s", description="d", body="# Steps\n1. Read.")
    proposal = propose(gw, skill, [rollout(1), rollout(2)], SpyRetriever([section(1)]), k=1)
    assert proposal.lessons == [] and proposal.unsupported == [failure] and proposal.supported_share == 0.0
    assert UpdateProposal.from_dict(proposal.to_dict()).unsupported == [failure]


def test_the_assembled_fallback_is_counted_in_the_init_result():
    gw, _ = gateway(router({"skill_init": "not json at all"}))
    init = initialize(gw, SpyRetriever([section(1)]), k=1, num_requirements=2)
    assert init.assembled_fallback is True
    gw, _ = gateway(router())
    assert initialize(gw, SpyRetriever([section(1)]), k=1, num_requirements=2).assembled_fallback is False
