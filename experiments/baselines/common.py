"""What both baselines need: a skill from free text an optimizer wrote, and a rollout rendered as feedback."""

from __future__ import annotations

from raso.harness import Rollout
from raso.optimizer.render import PromptLimits, render_description, render_trajectory, shown_error
from raso.skill import Skill, SkillParseError


def skill_from_text(text: str, *, fallback: Skill) -> Skill:
    """`text` read as a SKILL.md; text without usable front matter becomes the body of `fallback`'s name and
    description (optimizers often return only the body). Empty text keeps `fallback` unchanged. The optimizer
    edits the document only: `fallback`'s files (those beside its SKILL.md) are carried into the result."""
    text = (text or "").strip()
    if not text:
        return fallback
    try:
        return Skill.parse(text, source="optimizer output").with_files_of(fallback)
    except SkillParseError:
        return Skill(name=fallback.name, description=fallback.description, body=text + "\n",
                     metadata=dict(fallback.metadata)).with_files_of(fallback)


def rollout_feedback(rollout: Rollout, limits: PromptLimits | None = None) -> str:
    """The rollout as quoted data (reward, error, first observation, final steps) within the same per-trajectory
    budget RASU's gradient chunks get (`limits.trajectory_chars_each`), so every reflection sees as much of it."""
    limits = limits or PromptLimits()
    return render_trajectory(rollout, limits.trajectory_chars_each, limits)


def task_and_harness(task_description: str, harness_description: str, limits: PromptLimits | None = None) -> str:
    """The task description T and harness description H as RASO's roles show them (clipped, neutralised, in the
    same tags), for a baseline's reflection prompt: every method then knows the harness equally well."""
    limits = limits or PromptLimits()
    return (f"<task_description>\n{render_description(task_description, limits)}\n</task_description>\n\n"
            f"<harness_description>\n{render_description(harness_description, limits)}\n</harness_description>")


def score_feedback(rollout: Rollout) -> str:
    """One line on how the rollout scored: what the harness's reward says, plus the error if it crashed."""
    verdict = "solved" if rollout.success else ("partly solved" if rollout.reward > 0 else "failed")
    line = f"reward {rollout.reward:g} ({verdict})"
    if rollout.soft_score is not None:
        line += f", partial score {rollout.soft_score:g}"
    if rollout.truncated:
        line += ", stopped by the step or time limit"
    error = shown_error(rollout)
    if error:
        line += f"; error: {error.splitlines()[0][:300]}"
    return line
