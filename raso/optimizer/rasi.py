"""RASI (retrieval-augmented skill initialization) and its retrieval-free control RFSI. Zero rollouts.

query-init turns (T, H) into M requirement/query pairs; RASI retrieves K sections per query and adapts
them into one lesson each; skill-init writes s0. RFSI runs the same query-init and the same skill-init
prompt with the lessons block left out. `adapt=False` pastes the raw sections instead of lessons.

Both are initializers (raso.optimizer.steps.Initializer): `init(ctx)` with a raso.optimizer.context.RunContext;
`initializer_for(InitOptions)` builds the one the options name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from raso.choices import InitMode
from raso.llm import StructuredOutputError
from raso.skill import Skill

from . import roles
from .adaptation import Found, gather_lessons
from .options import InitOptions
from .sanitizers import sanitize_draft, sanitizers_for
from .skills import assemble_body, draft_to_skill, fallback_description, fallback_name
from .types import InitResult, Requirement

if TYPE_CHECKING:
    from raso.optimizer.context import RunContext


def _dedupe(requirements: Sequence[Requirement], limit: int) -> list[Requirement]:
    seen: set[str] = set()
    out: list[Requirement] = []
    for req in requirements:
        key = " ".join(req.requirement.lower().split())
        if key and key not in seen:
            seen.add(key)
            out.append(req)
    return out[:limit]


def plan_requirements(ctx: "RunContext", num_requirements: int,
                      given: Sequence[Requirement] | None = None) -> list[Requirement]:
    """query-init: (T, H) -> up to M distinct requirement/query pairs. `given` skips the call and uses those
    pairs (an experiment's RFSI and RASI share one decomposition, so they differ only in the lessons).
    Raises StructuredOutputError when the model's plan is junk."""
    if num_requirements < 1:
        raise ValueError("num_requirements must be at least 1")
    if given is None:
        given = roles.query_init(ctx.gateway, roles.QueryInitInput(
            task_description=ctx.task_description, harness_description=ctx.harness_description,
            num_requirements=num_requirements,
        ), ctx.prompt_limits, prompts=ctx.prompts).requirements
    return _dedupe(given, num_requirements)


def write_initial_skill(ctx: "RunContext", requirements: Sequence[Requirement], found: Found,
                        skill_name: str | None = None) -> Skill:
    """skill-init: (T, H, requirements, lessons) -> s0. An unusable draft falls back to the skill assembled
    from the requirements and lessons, noted in `found.errors` (never silent), as is every repair the optimizer
    model's profile made (raso.optimizer.sanitizers)."""
    sanitizers = sanitizers_for(ctx.gateway)

    def to_skill(draft: roles.SkillDraft) -> Skill:
        draft, repairs = sanitize_draft(draft, sanitizers)
        found.errors.extend(repairs)
        return draft_to_skill(
            draft,
            default_name=skill_name or fallback_name(ctx.task_description),
            default_description=fallback_description(ctx.task_description),
            keep_name=skill_name is not None,
        )

    try:
        return to_skill(roles.skill_init(ctx.gateway, roles.SkillInitInput(
            task_description=ctx.task_description, harness_description=ctx.harness_description,
            requirements=list(requirements), lessons=found.lessons,
        ), ctx.prompt_limits, prompts=ctx.prompts))
    except StructuredOutputError as exc:
        # The requirements and lessons already cost model calls and are sound on their own: keep them as the
        # skill rather than lose the whole init to one unusable draft (small models can run out of tokens
        # mid-JSON, or write a body a sanitizer rejects). The fallback is reported in `errors`, never silent.
        found.errors.append(f"skill_init: the model's draft was unusable ({exc}; its reply began "
                            f"{exc.raw_text[:160]!r}); the skill was assembled from the requirements and lessons "
                            "without it")
        found.assembled_fallback = True
        return to_skill(roles.SkillDraft(body=assemble_body(requirements, found.lessons)))


@dataclass(frozen=True)
class RFSI:
    """Retrieval-free skill initialization: query-init, then skill-init without lessons (never retrieves).
    Of its `options` it reads `num_requirements`.

    `requirements` given: query-init is skipped and these pairs are used. `skill_name` fixes the skill's name
    (None = the model's, else one derived from T). Raises StructuredOutputError when query-init returns junk
    and LLMError when the model cannot be reached."""

    options: InitOptions = field(default_factory=lambda: InitOptions(method="rfsi"))
    requirements: tuple[Requirement, ...] | None = None
    skill_name: str | None = None

    def init(self, ctx: "RunContext") -> InitResult:
        requirements = plan_requirements(ctx, self.options.num_requirements, self.requirements)
        found = Found()
        skill = write_initial_skill(ctx, requirements, found, self.skill_name)
        return InitResult(mode="rfsi", skill=skill, requirements=requirements, errors=found.errors,
                          assembled_fallback=found.assembled_fallback)

    def expected_calls(self) -> float:
        """Model calls of one init, for the cost plan: query-init (unless requirements were given), skill-init."""
        return 1.0 + (self.requirements is None)


@dataclass(frozen=True)
class RASI:
    """Retrieval-augmented skill initialization: query-init, K sections per query from `ctx.retriever()`,
    one adapted lesson per requirement (`options.adapt` off: the raw sections), then skill-init with the lessons.

    A junk lesson is skipped and noted in `errors`; the rest is as RFSI."""

    options: InitOptions = field(default_factory=InitOptions)
    requirements: tuple[Requirement, ...] | None = None
    skill_name: str | None = None

    def init(self, ctx: "RunContext") -> InitResult:
        ctx.retriever()  # an index that cannot be loaded stops the init before any model call is paid for
        requirements = plan_requirements(ctx, self.options.num_requirements, self.requirements)
        found = gather_lessons(ctx, [(r.requirement, r.query) for r in requirements], adapt=self.options.adapt)
        skill = write_initial_skill(ctx, requirements, found, self.skill_name)
        mode: InitMode = "rasi" if self.options.adapt else "rasi-raw"
        return InitResult(mode=mode, skill=skill, requirements=requirements, lessons=found.lessons,
                          retrieved=found.retrieved, errors=found.errors, unsupported=found.unsupported,
                          supported_share=found.supported_share(), assembled_fallback=found.assembled_fallback)

    def expected_calls(self) -> float:
        """Model calls of one init, for the cost plan: query-init (unless requirements were given), an adaptation
        per requirement when adapting, skill-init."""
        requirements = len(self.requirements) if self.requirements is not None else self.options.num_requirements
        return 1.0 + (self.requirements is None) + (requirements if self.options.adapt else 0)


def initializer_for(options: InitOptions, *, requirements: Sequence[Requirement] | None = None) -> RASI | RFSI:
    """The initializer `options` name ('rasi' or 'rfsi'; a SKILL.md file is the engine's to load, not a step).
    `requirements`: a shared decomposition to use instead of query-init."""
    given = tuple(requirements) if requirements is not None else None
    if options.kind == "rasi":
        return RASI(options, requirements=given)
    if options.kind == "rfsi":
        return RFSI(options, requirements=given)
    raise ValueError(f"init method {options.method!r} is a file, not an initialization step")


__all__ = ["RASI", "RFSI", "initializer_for", "plan_requirements", "write_initial_skill"]
