"""The shared retrieve-and-adapt pipeline of RASI and RASU.

For each (requirement, query): retrieve the top-K corpus sections, then either adapt them into one
lesson (Cross-Harness Adaptation) or, for the adaptation-off ablation, keep them raw as quoted material.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from raso.llm import StructuredOutputError

from . import roles
from .render import PromptLimits, render_section
from .sanitizers import Context, lesson_rejection, sanitizers_for, words_of
from .types import Lesson, RetrievedSection, SectionRef

if TYPE_CHECKING:
    from raso.optimizer.context import RunContext
    from raso.retrieval.retrievers import SectionSearcher


def to_retrieved(hit: Any) -> RetrievedSection:
    """A corpus_tools.index.Hit (section + score) as a record with provenance."""
    section = hit.section
    return RetrievedSection(
        ref=SectionRef(repo=section.repo, path=section.path, commit=section.commit,
                       heading_path=section.heading_path, section_id=section.id),
        skill_name=section.skill_name,
        text=section.text,
        score=float(hit.score),
        license=getattr(section, "license", "") or "",
    )


def retrieve(
    retriever: "SectionSearcher",
    query: str,
    k: int,
    *,
    exclude_repos: Sequence[str] = (),
    exclude_skills: Sequence[str] = (),
) -> list[RetrievedSection]:
    hits = retriever.search(query, k=k, exclude_repos=tuple(exclude_repos), exclude_skills=tuple(exclude_skills))
    return [to_retrieved(hit) for hit in hits[:k]]


def raw_lesson(requirement: str, sections: Sequence[RetrievedSection], limits: PromptLimits) -> Lesson:
    """Adaptation off: the sections themselves, quoted with provenance, stand in for the lesson."""
    return Lesson(
        requirement=requirement,
        text="\n".join(render_section(s, limits.section_chars) for s in sections),
        sources=[s.ref for s in sections],
        adapted=False,
    )


class EmptyLessonError(ValueError):
    """The adaptation reply was valid JSON but carried no knowledge (it restated the requirement or the prompt)."""


def adapt_lesson(ctx: "RunContext", requirement: str, sections: Sequence[RetrievedSection]) -> Lesson | None:
    """One adaptation call; None when the model answers that no section supports the requirement (then no
    lesson is written). The lesson's requirement and sources come from the inputs, never from the
    model's reply, so text in a section cannot retarget the lesson or forge its provenance."""
    out = roles.adapt(ctx.gateway, roles.AdaptationInput(
        requirement=requirement, task_description=ctx.task_description,
        harness_description=ctx.harness_description, sections=list(sections),
    ), ctx.prompt_limits, prompts=ctx.prompts)
    if not out.supported:
        return None
    reason = None if words_of(out.lesson) else "it has no words"  # an error for every model
    reason = reason or lesson_rejection(out.lesson, sanitizers_for(ctx.gateway), Context(
        requirement=requirement, prompts=ctx.prompts, headings=[s.ref.heading_path for s in sections]))
    if reason is not None:
        raise EmptyLessonError(f"the lesson was dropped because {reason}: {out.lesson.strip()[:120]!r}")
    return Lesson(requirement=requirement, text=out.lesson.strip(), sources=[s.ref for s in sections])


@dataclass(frozen=True)
class Unsupported:
    """The adaptation agent's answer that no retrieved section supports `requirement`."""

    requirement: str


@dataclass
class Found:
    """What retrieve-and-adapt found: lessons (in item order), the sections retrieved per item, and the steps
    that failed and were skipped (a later step may add its own)."""

    lessons: list[Lesson] = field(default_factory=list)
    retrieved: list[list[RetrievedSection]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)  # requirements no retrieved section supported
    adapted_items: int = 0  # items that went through adaptation (0: adaptation off or nothing to adapt)
    assembled_fallback: bool = False  # skill-init's draft was unusable: the skill was assembled without it

    def supported_share(self) -> float | None:
        """The share of adapted items that got a supported lesson (None when nothing was adapted)."""
        return len(self.lessons) / self.adapted_items if self.adapted_items else None


def gather_lessons(ctx: "RunContext", items: Sequence[tuple[str, str]], *, adapt: bool) -> Found:
    """Retrieve (`ctx.retriever()`, `ctx.k` sections, `ctx`'s exclusions) and adapt each (requirement, query)
    pair, with up to `ctx.workers` adaptation calls at a time.

    An item whose query finds nothing gets no lesson, nor does one the adaptation agent says no section supports
    (listed in `unsupported`); an item whose adaptation reply is junk
    (StructuredOutputError, or a lesson that adds nothing) is skipped and reported in `errors`, so one bad
    reply does not sink a whole initialization or update. `adapt=False` keeps the raw sections as the lesson.
    """
    retriever = ctx.retriever()
    retrieved = [
        retrieve(retriever, query, ctx.k, exclude_repos=ctx.exclude_repos, exclude_skills=ctx.exclude_skills)
        for _, query in items
    ]
    take_dropped = getattr(retriever, "take_dropped", None)  # vetting drops (raso.retrieval.vetting), one per line
    vetting = [drop.describe() for drop in take_dropped()] if callable(take_dropped) else []

    def one(index: int) -> Lesson | str | Unsupported | None:
        requirement = items[index][0]
        sections = retrieved[index]
        if not sections:
            return None
        if not adapt:
            return raw_lesson(requirement, sections, ctx.prompt_limits)
        try:
            return adapt_lesson(ctx, requirement, sections) or Unsupported(requirement)
        except (StructuredOutputError, EmptyLessonError) as exc:
            return f"adaptation for requirement {index + 1} ({requirement[:80]!r}) skipped: {exc}"

    if ctx.workers > 1 and adapt and len(items) > 1:
        with ThreadPoolExecutor(max_workers=ctx.workers) as pool:
            results = list(pool.map(one, range(len(items))))
    else:
        results = [one(i) for i in range(len(items))]
    return Found(lessons=[r for r in results if isinstance(r, Lesson)], retrieved=retrieved,
                 errors=vetting + [r for r in results if isinstance(r, str)],
                 unsupported=[r.requirement for r in results if isinstance(r, Unsupported)],
                 adapted_items=sum(1 for r in retrieved if r) if adapt else 0)
