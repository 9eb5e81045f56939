"""What both baselines need: a skill from free text an optimizer wrote, and a rollout rendered as feedback."""

from __future__ import annotations

from raso.harness import Rollout
from raso.optimizer.render import PromptLimits, render_trajectory
from raso.skill import Skill, SkillParseError

#: Characters of one rendered trajectory shown to a baseline's reflection/critique model.
TRAJECTORY_CHARS = 3000


def skill_from_text(text: str, *, fallback: Skill) -> Skill:
    """`text` read as a SKILL.md; text without usable front matter becomes the body of `fallback`'s name and
    description (optimizers often return only the body). Empty text keeps `fallback` unchanged."""
    text = (text or "").strip()
    if not text:
        return fallback
    try:
        return Skill.parse(text, source="optimizer output")
    except SkillParseError:
        return Skill(name=fallback.name, description=fallback.description, body=text + "\n",
                     metadata=dict(fallback.metadata))


def rollout_feedback(rollout: Rollout, *, chars: int = TRAJECTORY_CHARS, limits: PromptLimits | None = None) -> str:
    """The rollout as quoted data (reward, error, first observation, final steps) within `chars` characters."""
    return render_trajectory(rollout, chars, limits or PromptLimits())


def score_feedback(rollout: Rollout) -> str:
    """One line on how the rollout scored: what the harness's reward says, plus the error if it crashed."""
    verdict = "solved" if rollout.success else ("partly solved" if rollout.reward > 0 else "failed")
    line = f"reward {rollout.reward:g} ({verdict})"
    if rollout.soft_score is not None:
        line += f", partial score {rollout.soft_score:g}"
    if rollout.truncated:
        line += ", stopped by the step or time limit"
    if rollout.error:
        line += f"; error: {rollout.error.splitlines()[0][:300]}"
    return line
