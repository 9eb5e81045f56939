"""RASU (retrieval-augmented skill update) and its retrieval-free control RFSU: one proposal step.

The failed rollouts of s_t are split into chunks; one gradient-and-query call per chunk names failure modes
(textual gradients) with a corpus query each; one merge call consolidates all chunks; RASU retrieves and
adapts each query into a lesson; one skill-update call writes candidate s_{t+1}. RFSU makes no retrieval
and sends the same update prompt without the lessons block. Validation (the accept/reject gate) is the
engine's job.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from raso.choices import UpdateMode
from raso.harness import Rollout
from raso.llm import LLMGateway, StructuredOutputError
from raso.prompts import PromptLibrary
from raso.skill import Skill

from . import roles
from .adaptation import gather_lessons
from .render import PromptLimits, limits_for
from .sanitizers import sanitize_draft, sanitizers_for
from .skills import draft_to_skill
from .types import Gradient, UpdateProposal

if TYPE_CHECKING:
    from raso.retrieval.retrievers import SectionSearcher


def chunked(rollouts: Sequence[Rollout], chunk_size: int) -> list[list[Rollout]]:
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    return [list(rollouts[i:i + chunk_size]) for i in range(0, len(rollouts), chunk_size)]


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


def propose_update(
    gw: LLMGateway,
    *,
    task_description: str,
    harness_description: str,
    skill: Skill,
    rollouts: Sequence[Rollout],
    retriever: "SectionSearcher | None" = None,
    k: int = 5,
    chunk_size: int = 8,
    adapt: bool = True,
    exclude_repos: Sequence[str] = (),
    exclude_skills: Sequence[str] = (),
    limits: PromptLimits | None = None,
    workers: int = 1,
    failures_only: bool = True,
    prompts: PromptLibrary | None = None,
) -> UpdateProposal:
    """Propose s_{t+1} from the rollouts of s_t. `retriever=None` is RFSU; `adapt=False` pastes raw sections.

    As in the paper, gradients come from the failed rollouts (reward < 1) only; `failures_only=False` shows
    the solved ones too. Junk from a gradient call skips that chunk and junk from the merge falls back to the chunk outputs
    (both noted in `errors`); junk from the skill-update call raises StructuredOutputError. When no failure
    mode is found, the proposal is `unchanged` and its candidate is s_t (no update call is made).
    `limits` (prompt and reply budgets) default to `render.limits_for(gw)`, tighter for the embedded model.
    `prompts` is the template library of every call (None = the package defaults; a harness's library lets
    its `prompts/` folder replace any template).
    """
    if not rollouts:
        raise ValueError("propose_update needs at least one rollout")
    if k < 1:
        raise ValueError("k must be at least 1")
    limits = limits or limits_for(gw)
    mode: UpdateMode = "rfsu" if retriever is None else ("rasu" if adapt else "rasu-raw")
    errors: list[str] = []

    shown = [r for r in rollouts if r.reward < 1.0] if failures_only else list(rollouts)
    chunk_gradients: list[list[Gradient]] = []
    for index, chunk in enumerate(chunked(shown, chunk_size)):
        try:
            out = roles.gradient_query(gw, roles.GradientInput(
                task_description=task_description, harness_description=harness_description,
                skill=skill, rollouts=chunk,
            ), limits, prompts=prompts)
            chunk_gradients.append(out.gradients)
        except StructuredOutputError as exc:
            chunk_gradients.append([])
            errors.append(f"gradient for chunk {index + 1} skipped: {exc}")

    pooled = [g for chunk in chunk_gradients for g in chunk]
    if not pooled:
        return UpdateProposal(mode=mode, candidate=skill, chunk_gradients=chunk_gradients, unchanged=True,
                              errors=errors)
    try:
        merged = roles.merge(gw, roles.MergeInput(gradients=pooled), limits, prompts=prompts).gradients
    except StructuredOutputError as exc:
        merged = []
        errors.append(f"merge failed, using the chunk outputs: {exc}")
    gradients = dedupe_gradients(merged or pooled, limits.max_items)

    lessons, retrieved = [], []
    if retriever is not None:
        items = [(g.failure_mode, g.query) for g in gradients if g.query.strip()]
        lessons, retrieved, lesson_errors = gather_lessons(
            gw, items=items, task_description=task_description, harness_description=harness_description,
            retriever=retriever, k=k, adapt=adapt, limits=limits, exclude_repos=exclude_repos,
            exclude_skills=exclude_skills, workers=workers, prompts=prompts,
        )
        errors.extend(lesson_errors)

    draft = roles.skill_update(gw, roles.SkillUpdateInput(
        task_description=task_description, harness_description=harness_description, skill=skill,
        gradients=gradients, lessons=lessons,
    ), limits, prompts=prompts)
    draft, repairs = sanitize_draft(draft, sanitizers_for(gw))
    errors.extend(repairs)
    candidate = draft_to_skill(draft, default_name=skill.name, default_description=skill.description,
                               keep_name=True, metadata=skill.metadata)
    return UpdateProposal(mode=mode, candidate=candidate, gradients=gradients, chunk_gradients=chunk_gradients,
                          lessons=lessons, retrieved=retrieved, errors=errors)
