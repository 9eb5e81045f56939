"""The RASO agent roles. Each role is one function: a pydantic input, a `.md` prompt template
(`prompts/optimizer_*.md`, read through `raso.prompts`), one structured gateway call (role "optimizer", its
own stage name), a pydantic output.

`*_messages(inp, limits)` builds the exact messages a role sends, so tests and run logs can inspect them.
Every role takes `prompts`, the PromptLibrary to read templates from (None = the package defaults; a
harness's library lets its `prompts/` folder replace any of them).

Small-model tweaks to the output schemas (a maxItems on lists, defaulted fields listed as required, a failure mode
asked for when a rollout lost reward) are sent only to a model whose profile names them
(raso.llm.profiles.SchemaHint, read by `schema_hints_for`); validation is the same for every model.

Every template starts with the shared context (task description, harness description, then the current skill
where there is one) and states its instruction after it: calls of different roles then share a long prompt
prefix, which the embedded model's KV-state cache and hosted providers' prompt caches reuse.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from raso.harness import Rollout
from raso.llm.errors import LLMError
from raso.llm.gateway import Gateway
from raso.llm.profiles import HasProfiles, SchemaHint
from raso.prompts import DEFAULT_PROMPTS, PromptLibrary
from raso.skill import Skill

from .render import (
    PromptLimits,
    numbered,
    render_description,
    render_gradients,
    render_items,
    render_lessons_block,
    render_sections,
    render_skill,
    render_trajectories,
)
from .types import Gradient, Lesson, Requirement, RetrievedSection

OPTIMIZER_ROLE = "optimizer"
SYSTEM_TEMPLATE = "optimizer_system.md"
QUERY_INIT_TEMPLATE = "optimizer_query_init.md"
ADAPTATION_TEMPLATE = "optimizer_adaptation.md"
SKILL_INIT_TEMPLATE = "optimizer_skill_init.md"
GRADIENT_TEMPLATE = "optimizer_gradient_query.md"
MERGE_TEMPLATE = "optimizer_merge.md"
SKILL_UPDATE_TEMPLATE = "optimizer_skill_update.md"

Messages = list[dict[str, Any]]

MAX_LESSON_CHARS = 1000

STAGE_QUERY_INIT = "rasi.query_init"
STAGE_ADAPT = "adapt"
STAGE_SKILL_INIT = "rasi.skill_init"
STAGE_GRADIENT = "rasu.gradient"
STAGE_MERGE = "rasu.merge"
STAGE_UPDATE = "rasu.update"


def _messages(prompts: PromptLibrary | None, name: str, **values: str) -> Messages:
    prompts = prompts or DEFAULT_PROMPTS
    return [
        {"role": "system", "content": prompts.render(SYSTEM_TEMPLATE).strip()},
        {"role": "user", "content": prompts.render(name, **values).strip()},
    ]


def _tokens(limit: int, limits: PromptLimits | None = None) -> dict[str, Any]:
    """The reply's token cap and, for models that get field bounds (limits.field_chars), those bounds."""
    params: dict[str, Any] = {"max_tokens": limit}
    if limits is not None and limits.field_chars:
        params["field_chars"] = limits.field_chars
    return params


def schema_hints_for(gateway: object, role: str = OPTIMIZER_ROLE) -> frozenset[SchemaHint]:
    """The schema hints `role`'s model profile names (none for a gateway stand-in without profiles)."""
    if not isinstance(gateway, HasProfiles):
        return frozenset()
    try:
        return frozenset(gateway.profile(role).schema_hints)
    except (AttributeError, LLMError):  # no such role
        return frozenset()


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_description: str
    harness_description: str


# ---------------------------------------------------------------------------------------------- query-init
class QueryInitInput(_Input):
    num_requirements: int = Field(ge=1)


class QueryInitOutput(BaseModel):
    requirements: list[Requirement] = Field(min_length=1)


@cache
def query_init_schema(num_requirements: int, closed: bool = False) -> type[QueryInitOutput]:
    """The output schema asking for at least M pairs. `closed` (the "closed_lists" hint) also caps the array at M
    (maxItems): a grammar-constrained model (llama.cpp JSON mode) then stops after M, where a small model otherwise
    repeats one pair until its token cap cuts the JSON. Validation still accepts more, which the caller cuts off."""
    extra: dict[str, Any] | None = {"maxItems": num_requirements} if closed else None
    return create_model(
        "QueryInitOutput", __base__=QueryInitOutput,
        requirements=(list[Requirement], Field(min_length=num_requirements, json_schema_extra=extra)),
    )


def query_init_messages(inp: QueryInitInput, limits: PromptLimits, *, prompts: PromptLibrary | None = None) -> Messages:
    return _messages(
        prompts, QUERY_INIT_TEMPLATE,
        task_description=render_description(inp.task_description, limits),
        harness_description=render_description(inp.harness_description, limits),
        num_requirements=str(inp.num_requirements),
    )


def query_init(
    gw: Gateway, inp: QueryInitInput, limits: PromptLimits, *, prompts: PromptLibrary | None = None
) -> QueryInitOutput:
    """(T, H) -> M requirement/query pairs."""
    return gw.structured(OPTIMIZER_ROLE, query_init_messages(inp, limits, prompts=prompts),
                         query_init_schema(inp.num_requirements, "closed_lists" in schema_hints_for(gw)),
                         prompts=prompts, stage=STAGE_QUERY_INIT, **_tokens(limits.plan_tokens, limits))


# ---------------------------------------------------------------------------------------------- adaptation
class AdaptationInput(_Input):
    requirement: str
    sections: list[RetrievedSection]


# Output schemas carry no docstring: pydantic would put it into the JSON schema, and a small model copies it.
class AdaptationOutput(BaseModel):
    # Only the text: which requirement a lesson serves is fixed by the caller, never by the model.
    # `supported` false says no retrieved section supports the requirement: then no lesson is written (the
    # RASI - RFSI difference must come from the corpus, not from the model elaborating on the requirement).
    # A reply without `supported` is read as a lesson.

    supported: bool = True
    # The cap stops a small model from copying the whole prompt into the lesson; no field description either:
    # a small model may return it verbatim as the lesson.
    lesson: str = Field(default="", max_length=MAX_LESSON_CHARS)

    @model_validator(mode="after")
    def _a_supported_lesson_has_text(self) -> "AdaptationOutput":
        if self.supported and not self.lesson.strip():
            raise ValueError("a supported lesson needs text (say supported: false when no section helps)")
        return self


class _AdaptationOutputAllAsked(AdaptationOutput):
    # "required_defaults": both fields are asked for (a grammar-constrained model decides first, then writes).
    model_config = ConfigDict(json_schema_extra={"required": ["supported", "lesson"]})


def adaptation_schema(hints: frozenset[SchemaHint] = frozenset()) -> type[AdaptationOutput]:
    """The adaptation step's output schema for a model with these schema hints."""
    return _AdaptationOutputAllAsked if "required_defaults" in hints else AdaptationOutput


def adaptation_messages(
    inp: AdaptationInput, limits: PromptLimits, *, prompts: PromptLibrary | None = None
) -> Messages:
    return _messages(
        prompts, ADAPTATION_TEMPLATE,
        requirement=" ".join(inp.requirement.split()),
        task_description=render_description(inp.task_description, limits),
        harness_description=render_description(inp.harness_description, limits),
        sections=render_sections(inp.sections, limits.section_chars),
    )


def adapt(
    gw: Gateway, inp: AdaptationInput, limits: PromptLimits, *, prompts: PromptLibrary | None = None
) -> AdaptationOutput:
    """Cross-Harness Adaptation: (c, T, H, K sections) -> one lesson."""
    return gw.structured(OPTIMIZER_ROLE, adaptation_messages(inp, limits, prompts=prompts),
                         adaptation_schema(schema_hints_for(gw)),
                         prompts=prompts, stage=STAGE_ADAPT, **_tokens(limits.lesson_tokens, limits))


# ---------------------------------------------------------------------------------------------- skill drafts
class SkillDraft(BaseModel):
    # An agent skill as the model writes it; raso.optimizer.skills.draft_to_skill turns it into a valid Skill.
    # A missing name or description still validates and is filled in deterministically.

    name: str = Field(default="", description="short lowercase-hyphenated name")
    description: str = Field(default="", description="one sentence: what the skill does and when to use it")
    body: str = Field(min_length=1, description="the markdown body of the skill")


class _SkillDraftAllAsked(SkillDraft):
    # "required_defaults": all three are asked for (a grammar-constrained model must write them).
    model_config = ConfigDict(json_schema_extra={"required": ["name", "description", "body"]})


def skill_draft_schema(hints: frozenset[SchemaHint] = frozenset()) -> type[SkillDraft]:
    """The skill-writing steps' output schema for a model with these schema hints."""
    return _SkillDraftAllAsked if "required_defaults" in hints else SkillDraft


class SkillInitInput(_Input):
    requirements: list[Requirement]
    lessons: list[Lesson] = Field(default_factory=list)


def skill_init_messages(inp: SkillInitInput, limits: PromptLimits, *, prompts: PromptLibrary | None = None) -> Messages:
    return _messages(
        prompts, SKILL_INIT_TEMPLATE,
        task_description=render_description(inp.task_description, limits),
        harness_description=render_description(inp.harness_description, limits),
        requirements=numbered(r.requirement for r in inp.requirements),
        lessons_block=render_lessons_block(inp.lessons, purpose="requirement"),
    )


def skill_init(
    gw: Gateway, inp: SkillInitInput, limits: PromptLimits, *, prompts: PromptLibrary | None = None
) -> SkillDraft:
    """(T, H, requirements, lessons) -> s0. Without lessons (RFSI) the lessons block is simply absent."""
    return gw.structured(OPTIMIZER_ROLE, skill_init_messages(inp, limits, prompts=prompts),
                         skill_draft_schema(schema_hints_for(gw)),
                         prompts=prompts, stage=STAGE_SKILL_INIT, **_tokens(limits.skill_tokens, limits))


# ---------------------------------------------------------------------------------------------- gradient-and-query
class GradientInput(_Input):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    skill: Skill
    rollouts: list[Rollout] = Field(min_length=1)


class GradientSet(BaseModel):
    gradients: list[Gradient] = Field(default_factory=list)


@cache
def gradient_schema(max_items: int, lost_reward: bool, hints: frozenset[SchemaHint] = frozenset()) -> type[GradientSet]:
    """The gradient step's output schema. "closed_lists" caps the list at `max_items` (maxItems; the caller cuts
    there anyway). With "failure_needs_item", when a rollout of the chunk lost reward, the schema asks for at least
    one failure mode (minItems): a grammar-constrained model (llama.cpp JSON mode) otherwise takes the shortest
    valid reply, an empty list, for failed rollouts. Validation accepts an empty list for every model (a hosted
    model may judge that no change to the skill would help)."""
    extra: dict[str, Any] = {**({"maxItems": max_items} if "closed_lists" in hints else {}),
                             **({"minItems": 1} if lost_reward and "failure_needs_item" in hints else {})}
    return create_model("GradientSet", __base__=GradientSet,
                        gradients=(list[Gradient], Field(default_factory=list, json_schema_extra=extra)))


def gradient_messages(inp: GradientInput, limits: PromptLimits, *, prompts: PromptLibrary | None = None) -> Messages:
    return _messages(
        prompts, GRADIENT_TEMPLATE,
        task_description=render_description(inp.task_description, limits),
        harness_description=render_description(inp.harness_description, limits),
        skill=render_skill(inp.skill, limits),
        trajectories=render_trajectories(inp.rollouts, limits),
        max_items=str(limits.max_items),
    )


def gradient_query(
    gw: Gateway, inp: GradientInput, limits: PromptLimits, *, prompts: PromptLibrary | None = None
) -> GradientSet:
    """(T, H, s_t, one chunk of trajectories) -> failure modes with retrieval queries."""
    schema = gradient_schema(limits.max_items, any(r.reward < 1.0 for r in inp.rollouts), schema_hints_for(gw))
    out = gw.structured(OPTIMIZER_ROLE, gradient_messages(inp, limits, prompts=prompts), schema,
                        prompts=prompts, stage=STAGE_GRADIENT, **_tokens(limits.plan_tokens, limits))
    return GradientSet(gradients=out.gradients[: limits.max_items])


# ---------------------------------------------------------------------------------------------- merge
class MergeInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gradients: list[Gradient] = Field(min_length=1)


def merge_messages(inp: MergeInput, limits: PromptLimits, *, prompts: PromptLibrary | None = None) -> Messages:
    return _messages(prompts, MERGE_TEMPLATE, items=render_items(inp.gradients), max_items=str(limits.max_items))


def merge(
    gw: Gateway, inp: MergeInput, limits: PromptLimits, *, prompts: PromptLibrary | None = None
) -> GradientSet:
    """All chunk outputs -> one consolidated set (same failure mode merged, redundant queries dropped)."""
    out = gw.structured(OPTIMIZER_ROLE, merge_messages(inp, limits, prompts=prompts), GradientSet,
                        prompts=prompts, stage=STAGE_MERGE, **_tokens(limits.plan_tokens, limits))
    return GradientSet(gradients=out.gradients[: limits.max_items])


# ---------------------------------------------------------------------------------------------- skill-update
class SkillUpdateInput(_Input):
    skill: Skill
    gradients: list[Gradient] = Field(min_length=1)
    lessons: list[Lesson] = Field(default_factory=list)


def skill_update_messages(
    inp: SkillUpdateInput, limits: PromptLimits, *, prompts: PromptLibrary | None = None
) -> Messages:
    return _messages(
        prompts, SKILL_UPDATE_TEMPLATE,
        task_description=render_description(inp.task_description, limits),
        harness_description=render_description(inp.harness_description, limits),
        skill=render_skill(inp.skill, limits),
        gradients=render_gradients(inp.gradients),
        lessons_block=render_lessons_block(inp.lessons, purpose="failure mode"),
    )


def skill_update(
    gw: Gateway, inp: SkillUpdateInput, limits: PromptLimits, *, prompts: PromptLibrary | None = None
) -> SkillDraft:
    """(s_t, gradients, lessons) -> s_{t+1}. Without lessons (RFSU) the lessons block is simply absent."""
    return gw.structured(OPTIMIZER_ROLE, skill_update_messages(inp, limits, prompts=prompts),
                         skill_draft_schema(schema_hints_for(gw)),
                         prompts=prompts, stage=STAGE_UPDATE, **_tokens(limits.skill_tokens, limits))
