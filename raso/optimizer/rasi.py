"""RASI (retrieval-augmented skill initialization) and its retrieval-free control RFSI. Zero rollouts.

query-init turns (T, H) into M requirement/query pairs; RASI retrieves K sections per query and adapts
them into one lesson each; skill-init writes s0. RFSI runs the same query-init and the same skill-init
prompt with the lessons block left out. `adapt=False` pastes the raw sections instead of lessons.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from raso.choices import InitMode
from raso.llm import LLMGateway, StructuredOutputError
from raso.prompts import PromptLibrary
from raso.skill import Skill

from . import roles
from .adaptation import gather_lessons
from .render import PromptLimits, limits_for
from .sanitizers import sanitize_draft, sanitizers_for
from .skills import assemble_body, draft_to_skill, fallback_description, fallback_name
from .types import InitResult, Requirement

if TYPE_CHECKING:
    from raso.retrieval.retrievers import SectionSearcher


def _dedupe(requirements: Sequence[Requirement], limit: int) -> list[Requirement]:
    seen: set[str] = set()
    out: list[Requirement] = []
    for req in requirements:
        key = " ".join(req.requirement.lower().split())
        if key and key not in seen:
            seen.add(key)
            out.append(req)
    return out[:limit]


def initialize_skill(
    gw: LLMGateway,
    *,
    task_description: str,
    harness_description: str,
    retriever: "SectionSearcher | None" = None,
    k: int = 5,
    num_requirements: int = 5,
    adapt: bool = True,
    skill_name: str | None = None,
    exclude_repos: Sequence[str] = (),
    exclude_skills: Sequence[str] = (),
    limits: PromptLimits | None = None,
    workers: int = 1,
    requirements: Sequence[Requirement] | None = None,
    prompts: PromptLibrary | None = None,
) -> InitResult:
    """Write the initial skill s0. `retriever=None` is RFSI; `adapt=False` is RASI without adaptation.

    `limits` (prompt and reply budgets) default to `render.limits_for(gw)`, tighter for the embedded model.
    `prompts` is the template library of every call (None = the package defaults; a harness's library lets
    its `prompts/` folder replace any template).
    Raises StructuredOutputError when query-init or skill-init return junk (a junk lesson is only skipped
    and noted in `errors`) and LLMError when the model cannot be reached.

    `requirements` given: query-init is skipped and these pairs are used (an experiment's RFSI and RASI share
    one decomposition, so they differ only in the lessons).
    """
    if num_requirements < 1:
        raise ValueError("num_requirements must be at least 1")
    if k < 1:
        raise ValueError("k must be at least 1")
    limits = limits or limits_for(gw)
    if requirements is None:
        plan = roles.query_init(gw, roles.QueryInitInput(
            task_description=task_description, harness_description=harness_description,
            num_requirements=num_requirements,
        ), limits, prompts=prompts)
        requirements = plan.requirements
    requirements = _dedupe(requirements, num_requirements)

    mode: InitMode = "rfsi"
    lessons, retrieved, errors = [], [], []
    if retriever is not None:
        mode = "rasi" if adapt else "rasi-raw"
        lessons, retrieved, errors = gather_lessons(
            gw, items=[(r.requirement, r.query) for r in requirements], task_description=task_description,
            harness_description=harness_description, retriever=retriever, k=k, adapt=adapt, limits=limits,
            exclude_repos=exclude_repos, exclude_skills=exclude_skills, workers=workers, prompts=prompts,
        )

    sanitizers = sanitizers_for(gw)

    def to_skill(draft: roles.SkillDraft) -> Skill:
        draft, repairs = sanitize_draft(draft, sanitizers)
        errors.extend(repairs)
        return draft_to_skill(
            draft,
            default_name=skill_name or fallback_name(task_description),
            default_description=fallback_description(task_description),
            keep_name=skill_name is not None,
        )

    try:
        skill = to_skill(roles.skill_init(gw, roles.SkillInitInput(
            task_description=task_description, harness_description=harness_description,
            requirements=requirements, lessons=lessons,
        ), limits, prompts=prompts))
    except StructuredOutputError as exc:
        # The requirements and lessons already cost model calls and are sound on their own: keep them as the
        # skill rather than lose the whole init to one unusable draft (small models can run out of tokens
        # mid-JSON, or write a body a sanitizer rejects). The fallback is reported in `errors`, never silent.
        errors.append(f"skill_init: the model's draft was unusable ({exc}; its reply began "
                      f"{exc.raw_text[:160]!r}); the skill was assembled from the requirements and lessons without it")
        skill = to_skill(roles.SkillDraft(body=assemble_body(requirements, lessons)))
    return InitResult(mode=mode, skill=skill, requirements=requirements, lessons=lessons, retrieved=retrieved,
                      errors=errors)
