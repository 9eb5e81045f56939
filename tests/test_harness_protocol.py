"""The harness protocol: resources, action parsing, rollout guard, Rollout files, registry lookup."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from raso import harness as harness_mod
from raso.harness import (
    HarnessLoadError,
    HarnessNotFoundError,
    Rollout,
    Step,
    Task,
    available_harnesses,
    clamp_reward,
    describe_harnesses,
    get_harness,
    json_safe,
)
from raso.skill import Skill
from raso.testing import CountingHarness

TOY = "raso.testing.toy:CountingHarness"


@pytest.fixture
def toy_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register the toy harness (and a broken one) in the entry-point group, as a user's package would."""
    real = importlib.metadata.entry_points

    def fake(**kwargs: object):
        if kwargs.get("group") == harness_mod.ENTRY_POINT_GROUP:
            return [
                importlib.metadata.EntryPoint(name="toy", value=TOY, group=harness_mod.ENTRY_POINT_GROUP),
                importlib.metadata.EntryPoint(name="broken", value="no_such_pkg_xyz.mod:Thing",
                                              group=harness_mod.ENTRY_POINT_GROUP),
            ]
        return real(**kwargs)

    monkeypatch.setattr(harness_mod.registry.importlib.metadata, "entry_points", fake)


def test_descriptions_come_from_the_resource_files() -> None:
    h = CountingHarness()
    assert h.task_description == "Count from 1 to a target number, saying one number per action."
    assert h.harness_description.startswith("A counting game.")
    assert "Action: <number>" in h.action_instructions


def test_parse_action_takes_the_last_action_line() -> None:
    h = CountingHarness()
    assert h.parse_action("Thought: first\nAction: 1\nThought: no, wait\naction :  2  ") == "2"
    assert h.parse_action("just 5") == "just 5"
    assert h.parse_action("Action: 3\nThought: and then\nAction:") == "3"  # a bare trailing "Action:" is skipped


def test_splits_and_unknown_split() -> None:
    h = CountingHarness(n_tasks=6)
    assert [len(h.tasks(s)) for s in ("train", "val", "test")] == [3, 3, 6]
    with pytest.raises(ValueError, match="no split 'dev'"):
        h.tasks("dev")


def test_rollout_guard_turns_an_agent_crash_into_reward_zero() -> None:
    class CrashingAgent:
        def run(self, harness, task, skills):
            raise KeyError("agent bug")

    task = CountingHarness().tasks("test")[0]
    skill = Skill(name="s", description="d", body="b")
    rollout = CountingHarness().rollout(task, [skill], CrashingAgent())
    assert rollout.reward == 0.0 and rollout.task_id == task.id and rollout.harness == "toy"
    assert rollout.error.startswith("KeyError: 'agent bug'") and "Traceback" in rollout.error
    assert rollout.skill_names == ["s"]


def test_rollout_file_round_trip(tmp_path: Path) -> None:
    rollout = Rollout(
        task_id="a/b", harness="h", reward=0.5, soft_score=0.25,
        trajectory=[Step(observation="o", action="a", reply="r", reward=0.5, info={"k": [1, 2]}, result="next")],
        error=None, prompt_tokens=3, completion_tokens=4, cost_usd=0.01, wall_time_s=1.5, skill_names=["s"],
        metadata={"stop_reason": "terminated"}, terminated=True, env_steps=1, skills_loaded=["s"], mode="progressive",
    )
    path = rollout.save(tmp_path / "deep" / "r.json")
    assert json.loads(path.read_text())["trajectory"][0]["result"] == "next"
    assert Rollout.load(path) == rollout
    assert not list(path.parent.glob("*.tmp"))


def test_rollout_reward_must_be_in_unit_interval() -> None:
    with pytest.raises(ValidationError):
        Rollout(task_id="t", harness="h", reward=1.5)
    assert clamp_reward(1.5) == 1.0 and clamp_reward(-2) == 0.0 and clamp_reward(float("nan")) == 0.0
    assert clamp_reward("junk") == 0.0 and clamp_reward("0.25") == 0.25


def test_json_safe_makes_any_info_serialisable() -> None:
    class Weird:
        def __repr__(self) -> str:
            return "<weird>"

    safe = json_safe({"a": Weird(), "b": (1, 2.5, float("inf")), 3: Path("/x"), "long": "y" * 50}, max_chars=10)
    assert json.loads(json.dumps(safe)) == {"a": "<weird>", "b": [1, 2.5, None], "3": "/x",
                                            "long": "y" * 10 + "... [40 chars cut]"}


def test_get_harness_by_module_class_target() -> None:
    h = get_harness(TOY, n_tasks=2)
    assert isinstance(h, CountingHarness) and len(h.tasks("test")) == 2


def test_get_harness_by_entry_point_name(toy_registered: None) -> None:
    assert available_harnesses() == {"toy": TOY, "broken": "no_such_pkg_xyz.mod:Thing"}
    h = get_harness("toy", n_tasks=3)
    assert isinstance(h, CountingHarness) and len(h.tasks("test")) == 3


def test_unknown_harness_name_gives_a_clear_error(toy_registered: None) -> None:
    with pytest.raises(HarnessNotFoundError, match=r"unknown harness 'nope'; registered harnesses: broken, toy"):
        get_harness("nope")
    with pytest.raises(ValueError):  # HarnessNotFoundError is a ValueError, as before
        get_harness("nope")
    with pytest.raises(HarnessNotFoundError, match="has no attribute 'Missing'"):
        get_harness("raso.testing.toy:Missing")
    with pytest.raises(TypeError, match="not a raso.harness.Harness subclass"):
        get_harness("raso.testing.toy:CountingEnv")


def test_harness_with_missing_dependency_names_the_cause(toy_registered: None) -> None:
    with pytest.raises(HarnessLoadError, match="no_such_pkg_xyz") as info:
        get_harness("broken")
    assert isinstance(info.value, ImportError)


def test_describe_harnesses_tolerates_a_broken_one(toy_registered: None) -> None:
    rows = {row.name: row for row in describe_harnesses()}
    assert rows["toy"].loaded and rows["toy"].split_sizes == {"train": 2, "val": 2, "test": 4}
    assert rows["toy"].max_steps == CountingHarness.max_steps
    assert not rows["broken"].loaded and "ModuleNotFoundError" in rows["broken"].error
    assert "no_such_pkg_xyz" in rows["broken"].error


def test_task_round_trips_through_json() -> None:
    task = Task(id="x", instruction="do", metadata={"n": 1})
    assert Task.model_validate_json(task.model_dump_json()) == task


def test_atomic_write_replaces_whole_file_and_is_readable_by_others(tmp_path):
    import stat

    from raso.fileio import atomic_write_text

    target = tmp_path / "out" / "skill.md"
    atomic_write_text(target, "first")
    atomic_write_text(target, "second version")
    assert target.read_text() == "second version"
    assert stat.S_IMODE(target.stat().st_mode) & 0o044 == 0o044
    assert [p.name for p in target.parent.iterdir()] == ["skill.md"]  # no temp file left behind
