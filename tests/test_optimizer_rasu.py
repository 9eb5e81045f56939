"""RASU / RFSU with a scripted model: chunking, merge, retrieval, prompts, junk handling."""

from __future__ import annotations

import json
import math

import pytest
from optimizer_helpers import (
    DEFAULT_REPLIES,
    SpyRetriever,
    calls_of,
    gateway,
    propose,
    rollout,
    router,
    section,
    stages,
    user_text,
)

from raso.harness import Rollout, Step
from raso.llm import StructuredOutputError
from raso.optimizer.rasu import dedupe_gradients
from raso.optimizer.render import PromptLimits, render_lessons_block, render_trajectory
from raso.optimizer.types import Gradient, SectionRef, UpdateProposal
from raso.skill import Skill

SKILL = Skill(name="spreadsheet-answers", description="Answer spreadsheet questions.",
              body="# Steps\n1. Write the answer.\n", metadata={"version": 3})


def run_update(retriever=None, n=5, chunk_size=8, overrides=None, **kw):
    gw, sm = gateway(router(overrides))
    prop = propose(gw, SKILL, [rollout(i) for i in range(n)], retriever, k=2, chunk_size=chunk_size, **kw)
    return prop, gw, sm


@pytest.mark.parametrize("n,chunk_size", [(19, 8), (16, 8), (1, 8), (5, 2)])
def test_chunking_makes_one_gradient_call_per_chunk_and_one_merge(n, chunk_size):
    prop, gw, sm = run_update(SpyRetriever([section(1)]), n=n, chunk_size=chunk_size)
    assert stages(gw).count("rasu.gradient") == math.ceil(n / chunk_size)
    assert stages(gw).count("rasu.merge") == 1
    assert stages(gw).count("rasu.update") == 1
    assert len(prop.chunk_gradients) == math.ceil(n / chunk_size)
    # Each chunk's prompt shows exactly its own rollouts.
    shown = [user_text(c).count("<trajectory ") for c in calls_of(sm, "gradient")]
    assert shown == [min(chunk_size, n - i * chunk_size) for i in range(len(shown))]
    assert sum(shown) == n


def test_the_merge_sees_every_chunk_output():
    def gradient(messages):
        first_task = user_text(messages).split('<trajectory task="', 1)[1].split('"', 1)[0]
        return json.dumps({"gradients": [{"failure_mode": f"mode from {first_task}", "evidence": first_task,
                                          "query": f"q {first_task}"}]})
    prop, _, sm = run_update(None, n=10, chunk_size=4, overrides={"gradient": gradient})
    [merge_call] = calls_of(sm, "merge")
    for task in ("t0", "t4", "t8"):
        assert f"failure_mode: mode from {task}" in user_text(merge_call)
    assert prop.gradients == [Gradient(**g) for g in DEFAULT_REPLIES["merge"]["gradients"]]


def test_rfsu_makes_no_retrieval_calls_and_sends_the_rasu_update_prompt_minus_lessons(monkeypatch):
    from raso.optimizer import adaptation

    searches: list[str] = []
    real_retrieve = adaptation.retrieve

    def spy_retrieve(retriever, query, k, **kw):  # every corpus search of the pipeline passes here
        searches.append(query)
        return real_retrieve(retriever, query, k, **kw)

    monkeypatch.setattr(adaptation, "retrieve", spy_retrieve)
    spy = SpyRetriever([section(1), section(2)])
    rasu, _, rasu_model = run_update(spy)
    assert searches == ["save workbook"] and [c["query"] for c in spy.calls] == ["save workbook"]
    searches.clear()
    rfsu, gw, rfsu_model = run_update(None)
    assert searches == []
    assert "adapt" not in stages(gw)
    assert (rasu.mode, rfsu.mode) == ("rasu", "rfsu")
    assert rfsu.lessons == [] and rfsu.gradients == rasu.gradients
    [rasu_call] = calls_of(rasu_model, "update")
    [rfsu_call] = calls_of(rfsu_model, "update")
    block = render_lessons_block(rasu.lessons, purpose="failure mode")
    assert block and user_text(rasu_call).replace(block, "", 1) == user_text(rfsu_call)
    assert "lesson" not in user_text(rfsu_call).lower()
    assert "The agent never calls save(). (evidence: t1, t9)" in user_text(rfsu_call)


def test_rasu_lessons_target_the_failure_mode_and_carry_provenance():
    sections = [section(1), section(2)]
    prop, gw, sm = run_update(SpyRetriever(sections))
    [lesson] = prop.lessons
    assert lesson.requirement == "The agent never calls save()."
    assert lesson.sources == [SectionRef(repo=s.repo, path=s.path, commit=s.commit, heading_path=s.heading_path,
                                         section_id=s.id) for s in sections]
    adapt_prompt = user_text(calls_of(sm, "adapt")[0])
    assert "Requirement (the lesson must address only this): The agent never calls save()." in adapt_prompt
    assert stages(gw) == ["rasu.gradient", "rasu.merge", "adapt", "rasu.update"]
    assert UpdateProposal.from_dict(json.loads(json.dumps(prop.to_dict()))) == prop


def test_the_candidate_keeps_the_skill_identity_and_is_valid():
    prop, _, _ = run_update(None, overrides={"update": {"name": "Renamed", "description": "",
                                                        "body": "1. Always call save()."}})
    assert prop.candidate.name == SKILL.name
    assert prop.candidate.description == SKILL.description
    assert prop.candidate.metadata == {"version": 3}
    assert Skill.parse(prop.candidate.to_markdown()).body == "1. Always call save().\n"
    assert not prop.unchanged


def test_adaptation_off_pastes_raw_sections_into_the_update_prompt():
    sections = [section(1), section(2)]
    prop, gw, sm = run_update(SpyRetriever(sections), adapt=False)
    assert prop.mode == "rasu-raw" and "adapt" not in stages(gw)
    prompt = user_text(calls_of(sm, "update")[0])
    assert all(s.text in prompt and f'<section id="{s.id}"' in prompt for s in sections)


def test_no_failure_mode_means_an_unchanged_proposal_without_update_call():
    prop, gw, _ = run_update(None, overrides={"gradient": {"gradients": []}})
    assert prop.unchanged and prop.candidate == SKILL
    assert stages(gw) == ["rasu.gradient"]


def test_a_junk_chunk_is_skipped_and_reported():
    def gradient(messages):
        return "garbage" if '<trajectory task="t0"' in user_text(messages) else json.dumps(
            DEFAULT_REPLIES["gradient"])
    prop, gw, _ = run_update(None, n=4, chunk_size=2, overrides={"gradient": gradient})
    assert prop.chunk_gradients[0] == [] and len(prop.chunk_gradients[1]) == 1
    assert len(prop.errors) == 1 and "chunk 1" in prop.errors[0]
    assert stages(gw).count("rasu.gradient") == 3  # two chunks, one repair attempt for the junk one
    assert not prop.unchanged


def test_a_junk_merge_falls_back_to_the_deduplicated_chunk_outputs():
    prop, _, _ = run_update(None, n=16, chunk_size=8, overrides={"merge": "nope"})
    assert prop.gradients == [Gradient(**DEFAULT_REPLIES["gradient"]["gradients"][0])]
    assert "merge failed" in prop.errors[0]


def test_junk_from_the_update_call_raises():
    with pytest.raises(StructuredOutputError):
        run_update(None, overrides={"update": "```\nnot json\n```"})


def test_dedupe_drops_repeated_failure_modes_and_blanks_repeated_queries():
    gs = [Gradient(failure_mode="A fails.", query="save file"), Gradient(failure_mode="a  FAILS.", query="x"),
          Gradient(failure_mode="B fails.", query="Save  File"), Gradient(failure_mode="C fails.", query="other")]
    out = dedupe_gradients(gs, limit=10)
    assert [(g.failure_mode, g.query) for g in out] == [("A fails.", "save file"), ("B fails.", ""),
                                                        ("C fails.", "other")]
    assert len(dedupe_gradients(gs, limit=2)) == 2


def test_trajectories_are_truncated_to_the_budget_showing_reward_error_and_final_steps():
    steps = [Step(observation=f"observation {j} " + "x" * 400, action=f"action-{j}") for j in range(59)]
    steps.append(Step(observation="observation 59", action="action-59", result="x" * 900 + "SUBMIT: 0/3 cells right"))
    r = Rollout(task_id="long", harness="toy", reward=0.0, soft_score=0.25, trajectory=steps,
                error="Traceback ...\n" + "frame\n" * 300 + "ValueError: bad cell")
    limits = PromptLimits(step_chars=200)
    text = render_trajectory(r, 3000, limits)
    assert len(text) < 3000 + 300
    assert text.startswith('<trajectory task="long" reward="0" soft_score="0.25">')
    assert "ValueError: bad cell" in text  # the end of the error is kept
    assert "[step 60]" in text and "action-59" in text  # the final step is shown
    assert "[step 2]" not in text and "omitted)" in text
    assert "observation 0" in text  # the first observation (the task) is shown
    assert "SUBMIT: 0/3 cells right" in text  # the end of the final result is kept
    assert "result: observation 59" in text  # a step without a recorded result shows the next observation


def test_the_gradient_prompt_is_bounded_by_the_chunk_size_times_the_per_trajectory_budget():
    big = [Rollout(task_id=f"t{i}", harness="toy", reward=0.0,
                   trajectory=[Step(observation="o" * 5000, action="a" * 3000) for _ in range(30)])
           for i in range(8)]
    gw, sm = gateway(router())
    propose(gw, SKILL, big, chunk_size=8)
    prompt = user_text(calls_of(sm, "gradient")[0])
    assert prompt.count("<trajectory ") == 8
    # each trajectory gets its own budget (equal information whatever the chunk size); a small-context model's
    # profile sets a smaller one, so the chunk size times that budget is what bounds the prompt
    each = PromptLimits().trajectory_chars_each
    assert len(prompt) < 8 * (each + 100) + 4000  # trajectories + template, descriptions, skill and schema


def test_default_limits_are_tighter_for_the_embedded_optimizer_model():
    from raso.llm import GatewayConfig, LLMGateway
    from raso.optimizer.render import limits_for

    local = limits_for(LLMGateway(GatewayConfig.for_models(target="local/qwen2.5-coder-0.5b")))
    remote = limits_for(LLMGateway(GatewayConfig.for_models(target="local/qwen2.5-coder-0.5b",
                                                            optimizer="openai/gpt-4o-mini")))
    assert remote == PromptLimits()
    assert local.section_chars < remote.section_chars and local.trajectory_chars_each < remote.trajectory_chars_each
    assert local.skill_tokens is not None


def test_gradients_come_from_failed_rollouts_only_unless_asked():
    rollouts = [rollout(0, 1.0), rollout(1, 0.0), rollout(2, 1.0), rollout(3, 0.5)]
    gw, sm = gateway(router())
    propose(gw, SKILL, rollouts, chunk_size=1)
    shown = [user_text(c).split('<trajectory task="', 1)[1].split('"', 1)[0] for c in calls_of(sm, "gradient")]
    assert shown == ["t1", "t3"]
    gw, sm = gateway(router())
    propose(gw, SKILL, rollouts, chunk_size=8, failures_only=False)
    assert [user_text(c).count("<trajectory ") for c in calls_of(sm, "gradient")] == [4]


def test_all_solved_means_no_model_call_and_an_unchanged_proposal():
    gw, _ = gateway(router())
    prop = propose(gw, SKILL, [rollout(i, 1.0) for i in range(5)])
    assert prop.unchanged and prop.candidate == SKILL and stages(gw) == []


def test_gradient_and_update_prompts_open_with_the_same_task_harness_and_skill_block():
    _, _, sm = run_update(SpyRetriever([section(1), section(2)]), n=3)
    [gradient] = calls_of(sm, "gradient")
    [update] = calls_of(sm, "update")
    shared = user_text(gradient)[: user_text(gradient).index("</current_skill>") + len("</current_skill>")]
    assert shared.startswith("<task_description>") and SKILL.body.strip() in shared
    assert user_text(update).startswith(shared)
