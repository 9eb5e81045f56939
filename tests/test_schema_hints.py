"""Small-model schema tweaks sit behind the model profile (`ModelProfile.schema_hints`), as the sanitizers do: the
embedded model is sent closed lists, defaulted fields listed as required and a failure mode asked for after a lost
reward; a hosted model is sent the plain schemas; validation is the same for both."""

from __future__ import annotations

from typing import Any, get_args

import pytest

from raso.harness import Rollout
from raso.llm import DEFAULT_LOCAL_MODEL
from raso.llm.profiles import ALL_SCHEMA_HINTS, ModelProfile, SchemaHint, profile_for
from raso.llm.structured import schema_of
from raso.optimizer import roles
from raso.optimizer.render import PromptLimits
from raso.optimizer.types import Gradient, Requirement
from raso.skill import Skill

HOSTED = "openai/gpt-4o-mini"
PAIR = {"requirement": "Buy the product", "query": "buy now"}
GRADIENT = {"failure_mode": "it never clicked Buy Now", "evidence": "t0", "query": "checkout"}
REPLIES: dict[str, dict[str, Any]] = {
    roles.STAGE_QUERY_INIT: {"requirements": [PAIR, PAIR]},
    roles.STAGE_ADAPT: {"supported": True, "lesson": "Click Buy Now after choosing the options."},
    roles.STAGE_SKILL_INIT: {"name": "s", "description": "d", "body": "Click Buy Now."},
    roles.STAGE_GRADIENT: {"gradients": [GRADIENT]},
    roles.STAGE_UPDATE: {"name": "s", "description": "d", "body": "Click Buy Now."},
}


class RecordingGateway:
    """A gateway stand-in whose optimizer has `model`'s profile: records the JSON schema each role is sent (keyed
    by stage) and answers with a fixed valid reply."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.sent: dict[str, dict[str, Any]] = {}

    def profile(self, role: str) -> ModelProfile:
        return profile_for(self.model)

    def structured(self, role: str, messages: Any, schema: Any, *, stage: str, **kwargs: Any) -> Any:
        self.sent[stage] = schema_of(schema)
        return schema.model_validate(REPLIES[stage])


def _every_role(gw: RecordingGateway) -> dict[str, dict[str, Any]]:
    limits = PromptLimits()
    skill = Skill(name="s", description="d", body="b")
    lost = [Rollout(task_id="t0", harness="toy", reward=0.0)]
    base = {"task_description": "T", "harness_description": "H"}
    roles.query_init(gw, roles.QueryInitInput(**base, num_requirements=2), limits)
    roles.adapt(gw, roles.AdaptationInput(**base, requirement="r", sections=[]), limits)
    roles.skill_init(gw, roles.SkillInitInput(**base, requirements=[Requirement(**PAIR)]), limits)
    roles.gradient_query(gw, roles.GradientInput(**base, skill=skill, rollouts=lost), limits)
    roles.skill_update(gw, roles.SkillUpdateInput(**base, skill=skill, gradients=[Gradient(**GRADIENT)]),
                       limits)
    return gw.sent


def test_the_embedded_profile_names_every_schema_hint_and_a_hosted_one_none() -> None:
    assert profile_for(DEFAULT_LOCAL_MODEL).schema_hints == ALL_SCHEMA_HINTS
    assert set(ALL_SCHEMA_HINTS) == set(get_args(SchemaHint))
    assert profile_for(HOSTED).schema_hints == () and profile_for("scripted/x").schema_hints == ()
    assert "schema hints closed_lists" in profile_for(DEFAULT_LOCAL_MODEL).summary()


def test_the_embedded_model_is_sent_the_small_model_tweaks() -> None:
    sent = _every_role(RecordingGateway(DEFAULT_LOCAL_MODEL))
    assert sent[roles.STAGE_QUERY_INIT]["properties"]["requirements"]["maxItems"] == 2
    assert sent[roles.STAGE_ADAPT]["required"] == ["supported", "lesson"]
    assert sent[roles.STAGE_SKILL_INIT]["required"] == sent[roles.STAGE_UPDATE]["required"] == [
        "name", "description", "body"]
    gradients = sent[roles.STAGE_GRADIENT]["properties"]["gradients"]
    assert (gradients["minItems"], gradients["maxItems"]) == (1, PromptLimits().max_items)


def test_a_hosted_model_is_sent_the_plain_schemas() -> None:
    sent = _every_role(RecordingGateway(HOSTED))
    requirements = sent[roles.STAGE_QUERY_INIT]["properties"]["requirements"]
    assert "maxItems" not in requirements and requirements["minItems"] == 2  # asking for M pairs is the role's own
    assert "required" not in sent[roles.STAGE_ADAPT]
    assert sent[roles.STAGE_SKILL_INIT]["required"] == sent[roles.STAGE_UPDATE]["required"] == ["body"]
    gradients = sent[roles.STAGE_GRADIENT]["properties"]["gradients"]
    assert "minItems" not in gradients and "maxItems" not in gradients


def test_a_profile_override_switches_the_hints_and_rejects_an_unknown_one() -> None:
    only_closed = profile_for(HOSTED, {"schema_hints": ["closed_lists"]})
    assert only_closed.schema_hints == ("closed_lists",)
    with pytest.raises(ValueError, match="schema_hints"):
        profile_for(HOSTED, {"schema_hints": ["bigger_fonts"]})


@pytest.mark.parametrize("hints", [frozenset(), frozenset(ALL_SCHEMA_HINTS)])
def test_validation_is_the_same_with_or_without_the_hints(hints: frozenset[SchemaHint]) -> None:
    three = roles.query_init_schema(2, "closed_lists" in hints).model_validate({"requirements": [PAIR] * 3})
    assert len(three.requirements) == 3  # more than M still validates (the caller cuts)
    with pytest.raises(ValueError):
        roles.query_init_schema(2, "closed_lists" in hints).model_validate({"requirements": [PAIR]})
    assert roles.gradient_schema(4, True, hints).model_validate({"gradients": []}).gradients == []
    assert roles.adaptation_schema(hints).model_validate({"lesson": "Do it."}).supported
    assert roles.skill_draft_schema(hints).model_validate({"body": "Do it."}).name == ""
