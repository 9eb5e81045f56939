"""Model profiles: what a model can do, resolved once from its model string (docs/model-profiles.md).

A `ModelProfile` says what serves a model (`served_by`), its context size, whether it takes a GBNF grammar and how it
takes a JSON schema, the quick schedule and prompt limits that suit it, which small-model repairs (sanitizers,
raso.optimizer.sanitizers) run on its replies and which small-model tweaks (schema hints, raso.optimizer.roles)
shape the JSON schemas it is sent. Product code reads the profile, never the model's
name: `profile_for` is the one place that looks at a model string to decide what it is.

This module stays light (no litellm at import): the configuration reads quick schedules from it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

#: The provider prefix of the embedded llama.cpp models (raso.llm.local) and of the scripted test models
#: (raso.llm.scripted): `<provider>/<name>`.
EMBEDDED_PROVIDER = "local"
SCRIPTED_PROVIDER = "scripted"

#: What serves a model: litellm (a hosted API or a server), the embedded llama.cpp model, or a scripted test model.
ModelServer = Literal["litellm", "embedded", "scripted"]

#: How a JSON schema reaches the model when a role's structured-output mode is `auto`: OpenAI's json_schema
#: response_format, {"type": "json_object", "schema": ...} (llama.cpp's servers and the embedded backend
#: constrain decoding to it), or only as instructions in the prompt (the model takes no schema).
SchemaMode = Literal["json_schema", "json_object", "instructions"]

#: How a model takes tools and returns tool calls: "native" (the provider's `tools` parameter and structured
#: `tool_calls` in the reply) or "text" (the tools rendered into the prompt, the calls parsed from
#: `<tool_call>{...}</tool_call>` blocks in the reply: raso.llm.tool_text).
ToolCallMode = Literal["native", "text"]

#: The small-model repairs a profile can switch on (implemented in raso.optimizer.sanitizers).
SanitizerName = Literal["repeated_sentences", "runaway_enumeration", "cut_off_ending", "copied_clip_marker",
                        "short_body", "echoed_lesson"]
ALL_SANITIZERS: tuple[SanitizerName, ...] = ("repeated_sentences", "runaway_enumeration", "cut_off_ending",
                                             "copied_clip_marker", "short_body", "echoed_lesson")

#: Small-model tweaks to the optimizer roles' output schemas (applied in raso.optimizer.roles): "closed_lists" puts a
#: maxItems on lists the caller cuts anyway (query-init's M pairs, the gradient step's item limit), so a
#: grammar-constrained model closes the array instead of repeating an item until its token cap; "required_defaults"
#: lists fields that have a default as required (adaptation's `supported` and `lesson`, a skill draft's name and
#: description), so such a model writes them instead of the shortest valid reply; "failure_needs_item" asks the
#: gradient step for at least one failure mode when a rollout of its chunk lost reward (minItems 1), where such a
#: model otherwise answers an empty list. Validation is the same with or without them.
SchemaHint = Literal["closed_lists", "required_defaults", "failure_needs_item"]
ALL_SCHEMA_HINTS: tuple[SchemaHint, ...] = ("closed_lists", "required_defaults", "failure_needs_item")

#: Quick-schedule keys are the configuration's dotted override names.
QUICK_SCHEDULE_KEYS = ("schedule.epochs", "schedule.minibatch", "schedule.val_limit", "schedule.max_iterations",
                       "schedule.test_limit", "init.num_requirements", "retrieval.k", "budget.rollouts",
                       "agent.max_steps", "agent.max_tokens")


class ModelProfile(BaseModel):
    """What one model can do and what suits it. Built by `profile_for`; fields after `served_by` can be overridden."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(description="the model string this profile was resolved for")
    name: str = Field(description="which registry entry it came from: embedded, hosted or scripted")
    served_by: ModelServer = Field(description="what serves the model: litellm (a hosted API or a server), the "
                                   "embedded llama.cpp model, or the scripted test model")
    context_tokens: int | None = Field(default=None, ge=256, description="prompt + reply tokens the model holds "
                                       "(None: unknown)")
    max_output_tokens: int | None = Field(default=None, ge=1, description="the most reply tokens one call may ask "
                                          "for (None: unknown); an agent's max_tokens is capped by it")
    grammar: bool = Field(default=False, description="takes a GBNF `grammar` parameter that constrains the reply")
    structured_output: SchemaMode = Field(default="instructions", description="how a JSON schema is sent when a "
                                          "role's structured_output is auto (instructions: it takes none)")
    tool_calls: ToolCallMode = Field(default="native", description="how the model takes tools: native (the "
                                     "provider's tools parameter) or text (rendered into the prompt, calls parsed "
                                     "from <tool_call> blocks in the reply)")
    quick_schedule: dict[str, Any] = Field(default_factory=dict, description="dotted config keys -> values applied "
                                           "where the user set none (a small schedule that finishes on a CPU)")
    prompt_limits: dict[str, Any] = Field(default_factory=dict, description="PromptLimits fields that replace the "
                                          "defaults (raso.optimizer.render)")
    describe_limits: dict[str, Any] = Field(default_factory=dict, description="DescribeLimits fields that replace "
                                            "the defaults (raso.optimizer.describe)")
    sanitizers: tuple[SanitizerName, ...] = Field(default=(), description="small-model repairs applied to this "
                                                  "model's skill drafts and lessons (raso.optimizer.sanitizers)")
    schema_hints: tuple[SchemaHint, ...] = Field(default=(), description="small-model tweaks to the optimizer "
                                                 "roles' output schemas this model is sent (raso.optimizer.roles)")
    caveat: str = Field(default="", description="what a user should know before relying on this model's writing")

    @property
    def takes_json_schema(self) -> bool:
        return self.structured_output != "instructions"

    def cap_reply_tokens(self, requested: int | None) -> int | None:
        """`requested` reply tokens, lowered to what the model allows (None when neither is known)."""
        limits = [n for n in (requested, self.max_output_tokens) if n is not None]
        return min(limits) if limits else None

    @property
    def in_process(self) -> bool:
        """Served inside this process: no API key, no cost."""
        return self.served_by != "litellm"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping (for config.resolved.json and the report)."""
        return self.model_dump(mode="json")

    def summary(self) -> str:
        """One line for the report (the quick schedule is reported where it was applied)."""
        schema = self.structured_output if self.takes_json_schema else "none (instructions)"
        parts = [f"{self.name} ({self.served_by})", f"context {self.context_tokens or 'unknown'} tokens",
                 f"grammar {'yes' if self.grammar else 'no'}", f"schema {schema}",
                 f"sanitizers {', '.join(self.sanitizers) or 'none'}",
                 f"schema hints {', '.join(self.schema_hints) or 'none'}"]
        return "; ".join(parts)


#: Fields that say what the model is, not what it can do: never overridden.
IDENTITY_FIELDS = ("model", "name", "served_by")


@runtime_checkable
class HasProfiles(Protocol):
    """A gateway that knows its roles' model profiles (raso.llm.gateway.LLMGateway and its views)."""

    def profile(self, role: str) -> ModelProfile: ...


class ProfileError(ValueError):
    """Profile overrides that cannot be used; the message names the field."""


def provider_of(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else ""


def embedded_context_tokens() -> int:
    """The embedded backend's context size (RASO_LOCAL_N_CTX, default 8192)."""
    return int(os.environ.get("RASO_LOCAL_N_CTX", "8192"))


#: Reply-field bounds for the embedded models, at about 3 characters per token (JSON-escaped markdown), so each
#: reply fits its token cap in EMBEDDED_PROMPT_LIMITS: a skill draft (name + description + body) in 640 tokens, a
#: lesson in 200, a requirement or failure-mode list (up to 4 items) in 400. A grammar-constrained small model
#: otherwise keeps writing inside one field until the cap cuts the JSON.
EMBEDDED_FIELD_CHARS: dict[str, int] = {
    "name": 60, "description": 200, "body": 1400,
    "lesson": 500,
    "requirement": 160, "query": 60,
    "failure_mode": 140, "evidence": 60,
}

#: Tighter budgets for an 8k-token context and slow CPU generation: a draft that runs to its cap is unusable
#: anyway, and each capped attempt costs about a minute.
EMBEDDED_PROMPT_LIMITS: dict[str, Any] = {
    "description_chars": 2500, "section_chars": 800, "trajectory_chars_each": 1000, "step_chars": 300,
    "skill_chars": 6000, "max_items": 4, "plan_tokens": 400, "lesson_tokens": 200, "skill_tokens": 640,
    "field_chars": EMBEDDED_FIELD_CHARS,
}

#: What `raso harness describe` shows an 8k-token model of a harness's code.
EMBEDDED_DESCRIBE_LIMITS: dict[str, Any] = {
    "file_chars": 3_000, "total_chars": 9_000, "max_files": 12, "example_tasks": 2, "example_chars": 300,
    "reply_tokens": 700,
}

#: The embedded model's quick schedule: the README's main job must finish offline on a 2-core machine in about
#: 15 minutes. One iteration: s0 on 2 val tasks, a minibatch of 3 train tasks, the candidate on the same 2 val
#: tasks; short agent replies, because a small model's long replies restate the task instead of acting.
EMBEDDED_QUICK_SCHEDULE: dict[str, Any] = {
    "schedule.epochs": 1,
    "schedule.minibatch": 3,
    "schedule.val_limit": 2,
    "schedule.max_iterations": 1,
    "init.num_requirements": 2,
    "retrieval.k": 3,
    "budget.rollouts": 7,
    "agent.max_steps": 3,
    "agent.max_tokens": 256,
    "schedule.test_limit": 2,  # the final test evaluation is capped like val, so the main job keeps its time
}


def _embedded(model: str) -> ModelProfile:
    return ModelProfile(
        model=model, name="embedded", served_by="embedded", context_tokens=embedded_context_tokens(), grammar=True,
        structured_output="json_object", tool_calls="text", quick_schedule=EMBEDDED_QUICK_SCHEDULE,
        prompt_limits=EMBEDDED_PROMPT_LIMITS, describe_limits=EMBEDDED_DESCRIBE_LIMITS, sanitizers=ALL_SANITIZERS,
        schema_hints=ALL_SCHEMA_HINTS,
        caveat="a small model's drafts are rough; a stronger --optimizer-model writes better ones",
    )


def _hosted(model: str) -> ModelProfile:
    """The default for any model litellm serves: its schema support and context size as litellm knows them."""
    from ._litellm import litellm  # slow to import: only when a hosted model is resolved

    try:
        takes_schema = bool(litellm.supports_response_schema(model=model))
    except Exception:  # unknown to litellm's model map: be conservative
        takes_schema = False
    try:
        info = litellm.get_model_info(model=model)
        context, output = info.get("max_input_tokens"), info.get("max_output_tokens")
    except Exception:
        context = output = None
    return ModelProfile(model=model, name="hosted", served_by="litellm",
                        context_tokens=int(context) if context else None,
                        max_output_tokens=int(output) if output else None,
                        structured_output="json_schema" if takes_schema else "instructions")


def _scripted(model: str) -> ModelProfile:
    """A scripted test model stands in for a hosted one: no grammar, schema only as instructions."""
    return ModelProfile(model=model, name="scripted", served_by="scripted")


@functools.lru_cache(maxsize=256)
def _base_profile(model: str) -> ModelProfile:
    provider = provider_of(model)
    if provider == EMBEDDED_PROVIDER:
        return _embedded(model)
    if provider == SCRIPTED_PROVIDER:
        return _scripted(model)
    return _hosted(model)


def check_overrides(overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """`overrides` as a plain dict, or ProfileError naming an unknown or identity field."""
    overrides = dict(overrides or {})
    for key in overrides:
        if key in IDENTITY_FIELDS:
            raise ProfileError(f"model profile field {key!r} says what the model is and cannot be overridden")
        if key not in ModelProfile.model_fields:
            known = ", ".join(k for k in ModelProfile.model_fields if k not in IDENTITY_FIELDS)
            raise ProfileError(f"unknown model profile field {key!r} (known: {known})")
    unknown = set(overrides.get("quick_schedule") or {}) - set(QUICK_SCHEDULE_KEYS)
    if unknown:
        raise ProfileError(f"model profile quick_schedule: unknown key(s) {', '.join(sorted(unknown))} "
                           f"(known: {', '.join(QUICK_SCHEDULE_KEYS)})")
    return overrides


def profile_for(model: str, overrides: Mapping[str, Any] | None = None) -> ModelProfile:
    """The profile of `model`: the embedded profile for `local/...`, the scripted one for `scripted/...`, the hosted
    default for anything else; `overrides` (field -> value) replace whole fields. Raises ProfileError."""
    base = _base_profile(model)
    overrides = check_overrides(overrides)
    if not overrides:
        return base
    try:
        return ModelProfile.model_validate({**base.model_dump(), **overrides})
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ()))
        raise ProfileError(f"model profile override {where}: {err.get('msg', 'invalid')} "
                           f"(got {err.get('input')!r})") from None


__all__ = ["ALL_SANITIZERS", "ALL_SCHEMA_HINTS", "EMBEDDED_FIELD_CHARS", "EMBEDDED_PROMPT_LIMITS",
           "EMBEDDED_QUICK_SCHEDULE", "ModelProfile", "ProfileError", "SanitizerName", "SchemaHint", "SchemaMode",
           "ToolCallMode", "check_overrides", "profile_for"]
