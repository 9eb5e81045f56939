"""RASU (retrieval-augmented skill update) and its retrieval-free control RFSU: one proposal step.

The failed rollouts of s_t are split into chunks; one gradient-and-query call per chunk names failure modes
(textual gradients) with a corpus query each; one merge call consolidates all chunks; RASU retrieves and
adapts each query into a lesson; one skill-update call writes candidate s_{t+1}. RFSU makes no retrieval
and sends the same update prompt without the lessons block. Validation (the accept/reject gate) is the
engine's job.

Both are proposers (raso.optimizer.steps.Proposer): `propose(ctx, skill, rollouts)` with a
raso.optimizer.context.RunContext; `proposer_for(UpdateOptions)` builds the one the options name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from raso.choices import UpdateMode
from raso.harness import Rollout
from raso.llm import StructuredOutputError
from raso.skill import Skill

from . import roles
from .adaptation import Found, gather_lessons
from .options import UpdateOptions
from .sanitizers import sanitize_draft, sanitizers_for
from .skills import draft_to_skill
from .types import Gradient, UpdateProposal

if TYPE_CHECKING:
    from raso.optimizer.context import RunContext


def chunked(rollouts: Sequence[Rollout], chunk_size: int) -> list[list[Rollout]]:
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    return [list(rollouts[i:i + chunk_size]) for i in range(0, len(rollouts), chunk_size)]


def _chunks(rollouts: int, chunk_size: int) -> int:
    """Gradient calls for `rollouts` rollouts (at least one, as the plan counts a minibatch)."""
    return max(math.ceil(rollouts / chunk_size), 1)


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def dedupe_gradients(gradients: Sequence[Gradient], limit: int) -> list[Gradient]:
    """Deterministic clean-up after the merge: drop repeated failure modes, blank repeated queries."""
    seen_modes: set[str] = set()
    seen_queries: set[str] = set()
    out: list[Gradient] = []
    for g in gradients:
        mode = _norm(g.failure_mode)
        if not mode or mode in seen_modes:
            continue
        seen_modes.add(mode)
        query = _norm(g.query)
        if query in seen_queries:
            g = g.model_copy(update={"query": ""})
        elif query:
            seen_queries.add(query)
        out.append(g)
    return out[:limit]


@dataclass
class Diagnosis:
    """The failure modes found in a minibatch: per chunk before the merge, and merged and deduplicated."""

    chunk_gradients: list[list[Gradient]]
    gradients: list[Gradient]
    errors: list[str]


def diagnose(ctx: "RunContext", skill: Skill, rollouts: Sequence[Rollout], chunk_size: int) -> Diagnosis:
    """One gradient-and-query call per chunk of `rollouts`, then one merge call. Junk from a gradient call skips
    that chunk and junk from the merge falls back to the chunk outputs (both noted in `errors`)."""
    errors: list[str] = []
    limits = ctx.prompt_limits
    chunk_gradients: list[list[Gradient]] = []
    for index, chunk in enumerate(chunked(rollouts, chunk_size)):
        try:
            out = roles.gradient_query(ctx.gateway, roles.GradientInput(
                task_description=ctx.task_description, harness_description=ctx.harness_description,
                skill=skill, rollouts=chunk,
            ), limits, prompts=ctx.prompts)
            chunk_gradients.append(out.gradients)
        except StructuredOutputError as exc:
            chunk_gradients.append([])
            errors.append(f"gradient for chunk {index + 1} skipped: {exc}")
    pooled = [g for chunk in chunk_gradients for g in chunk]
    if not pooled:
        return Diagnosis(chunk_gradients=chunk_gradients, gradients=[], errors=errors)
    try:
        merged = roles.merge(ctx.gateway, roles.MergeInput(gradients=pooled), limits, prompts=ctx.prompts).gradients
    except StructuredOutputError as exc:
        merged = []
        errors.append(f"merge failed, using the chunk outputs: {exc}")
    return Diagnosis(chunk_gradients=chunk_gradients, gradients=dedupe_gradients(merged or pooled, limits.max_items),
                     errors=errors)


def rewrite_skill(ctx: "RunContext", skill: Skill, gradients: Sequence[Gradient], found: Found) -> Skill:
    """skill-update: (s_t, gradients, lessons) -> candidate s_{t+1}, keeping the skill's name, metadata and files.
    Junk from the model raises StructuredOutputError; the optimizer model profile's repairs are noted in
    `found.errors`."""
    draft = roles.skill_update(ctx.gateway, roles.SkillUpdateInput(
        task_description=ctx.task_description, harness_description=ctx.harness_description, skill=skill,
        gradients=list(gradients), lessons=found.lessons,
    ), ctx.prompt_limits, prompts=ctx.prompts)
    draft, repairs = sanitize_draft(draft, sanitizers_for(ctx.gateway))
    found.errors.extend(repairs)
    return draft_to_skill(draft, default_name=skill.name, default_description=skill.description,
                          keep_name=True, metadata=skill.metadata).with_files_of(skill)


def shown_rollouts(rollouts: Sequence[Rollout], failures_only: bool) -> list[Rollout]:
    """The rollouts the gradient calls see: as in the paper, the failed ones (reward < 1) only, unless
    `failures_only` is off."""
    if not rollouts:
        raise ValueError("a proposal needs at least one rollout")
    return [r for r in rollouts if r.reward < 1.0] if failures_only else list(rollouts)


@dataclass(frozen=True)
class RFSU:
    """Retrieval-free skill update: gradients from the failed rollouts, merged, then skill-update without
    lessons (never retrieves). When no failure mode is found the proposal is `unchanged`, its candidate is s_t
    and no update call is made. Of its `options` it reads `chunk_size` and `failures_only`."""

    options: UpdateOptions = field(default_factory=lambda: UpdateOptions(method="rfsu"))

    def propose(self, ctx: "RunContext", skill: Skill, rollouts: Sequence[Rollout]) -> UpdateProposal:
        options = self.options
        diagnosis = diagnose(ctx, skill, shown_rollouts(rollouts, options.failures_only), options.chunk_size)
        found = Found(errors=diagnosis.errors)
        return _proposal(ctx, "rfsu", skill, diagnosis, found)

    def expected_calls(self, train_rollouts: int, failure_modes: int) -> float:
        """Model calls of one proposal at most, for the cost plan: a gradient call per chunk, merge, skill-update."""
        return float(_chunks(train_rollouts, self.options.chunk_size) + 2)


@dataclass(frozen=True)
class RASU:
    """Retrieval-augmented skill update: as RFSU, plus K sections from `ctx.retriever()` for each failure
    mode's query, adapted into one lesson each (`options.adapt` off: the raw sections) that the update call sees."""

    options: UpdateOptions = field(default_factory=UpdateOptions)

    def propose(self, ctx: "RunContext", skill: Skill, rollouts: Sequence[Rollout]) -> UpdateProposal:
        options = self.options
        diagnosis = diagnose(ctx, skill, shown_rollouts(rollouts, options.failures_only), options.chunk_size)
        mode: UpdateMode = "rasu" if options.adapt else "rasu-raw"
        if not diagnosis.gradients:
            return _proposal(ctx, mode, skill, diagnosis, Found(errors=diagnosis.errors))
        items = [(g.failure_mode, g.query) for g in diagnosis.gradients if g.query.strip()]
        found = gather_lessons(ctx, items, adapt=options.adapt)
        found.errors[:0] = diagnosis.errors
        return _proposal(ctx, mode, skill, diagnosis, found)

    def expected_calls(self, train_rollouts: int, failure_modes: int) -> float:
        """As RFSU's, plus an adapted lesson per failure mode when adapting."""
        adapted = failure_modes if self.options.adapt else 0
        return float(_chunks(train_rollouts, self.options.chunk_size) + 2 + adapted)


def _proposal(ctx: "RunContext", mode: UpdateMode, skill: Skill, diagnosis: Diagnosis, found: Found) -> UpdateProposal:
    if not diagnosis.gradients:
        return UpdateProposal(mode=mode, candidate=skill, chunk_gradients=diagnosis.chunk_gradients, unchanged=True,
                              errors=found.errors)
    candidate = rewrite_skill(ctx, skill, diagnosis.gradients, found)
    return UpdateProposal(mode=mode, candidate=candidate, gradients=diagnosis.gradients,
                          chunk_gradients=diagnosis.chunk_gradients, lessons=found.lessons,
                          retrieved=found.retrieved, errors=found.errors, unsupported=found.unsupported,
                          supported_share=found.supported_share())


def proposer_for(options: UpdateOptions) -> RASU | RFSU:
    """The proposer `options` name."""
    return RASU(options) if options.method == "rasu" else RFSU(options)


__all__ = ["RASU", "RFSU", "Diagnosis", "chunked", "dedupe_gradients", "diagnose", "proposer_for", "rewrite_skill",
           "shown_rollouts"]
