"""ALFWorld's ReAct-compatible observation mode (`observation="react"`) beside the SkillOpt-style default, on the
real alfworld/TextWorld engine with the shipped demo games."""

from __future__ import annotations

import re

import pytest

from harnesses.alfworld import AlfworldHarness
from harnesses.alfworld.env import react_observation
from harnesses.alfworld.expert import walkthrough

BANNER = "-= Welcome to TextWorld, ALFRED! =-"


def _play(harness: AlfworldHarness, task, commands: list[str]):
    env = harness.make_env(task)
    try:
        first = env.reset()
        return first, [env.step(c) for c in commands]
    finally:
        env.close()


def test_react_rewrites_observations_as_the_react_notebook():
    first = f"{BANNER}\n\nYou are in the middle of a room. Looking around you, you see a desk 1.\n\nYour task is to: x."
    assert react_observation(first, first=True) == (
        "You are in the middle of a room. Looking around you, you see a desk 1.\nYour task is to: x.")
    assert react_observation("You arrive at loc 7. On the desk 1, you see a pen 2.", first=False) == (
        "On the desk 1, you see a pen 2.")
    assert react_observation("You arrive at desk 1. On the desk 1, you see a pen 2.", first=False) == (
        "You arrive at desk 1. On the desk 1, you see a pen 2.")


def test_the_option_switches_banner_and_command_list():
    default, react = AlfworldHarness(), AlfworldHarness(observation="react")
    task = default.tasks("train")[0]
    (obs_default, info_default), _ = _play(default, task, [])
    (obs_react, info_react), steps = _play(react, task, ["look"])
    assert obs_default.startswith(BANNER) and "\nAvailable actions: " in obs_default
    assert obs_react.startswith("You are in the middle of a room.") and BANNER not in obs_react
    assert "Available actions" not in obs_react and "Available actions" not in steps[0][0]
    assert re.search(r"\.\nYour task is to: ", obs_react)  # paragraphs joined by one newline, as ReAct does
    assert info_react["admissible_commands"] == info_default["admissible_commands"]  # still in info for tools
    assert "Available actions" in default.harness_description and "Available actions" not in react.harness_description
    assert "banner is removed" in react.harness_description and "move (object) to" in react.harness_description
    with pytest.raises(ValueError, match="observation"):
        AlfworldHarness(observation="json")


def test_react_think_is_answered_ok_and_the_walkthrough_still_wins():
    react = AlfworldHarness(observation="react")
    for task in react.tasks("test"):
        commands = walkthrough(react.gamefile(task))
        _, steps = _play(react, task, ["think: first I need to find the object.", *commands])
        obs, reward, terminated, truncated, info = steps[0]
        assert obs == "OK." and reward == 0 and not terminated and info["steps"] == 1
        assert steps[-1][1] == 1.0 and steps[-1][2] and info["admissible_commands"]
        assert steps[-1][4]["steps"] == len(commands) + 1


def test_react_put_phrasing_is_not_in_alfworld_0_4_2_grammar():
    # ReAct's prompts place objects with "put X in/on Y"; alfworld 0.4.2's grammar says "move X to Y".
    react = AlfworldHarness(observation="react")
    played = 0
    for task in [t for ts in react.splits().values() for t in ts]:
        commands = walkthrough(react.gamefile(task))
        moves = [i for i, c in enumerate(commands) if c.startswith("move ")]
        if not moves:
            continue
        i = moves[0]
        obj, target = re.match(r"move (.+) to (.+)", commands[i]).groups()
        put_in, put_on = f"put {obj} in {target}", f"put {obj} on {target}"
        _, steps = _play(react, task, [*commands[:i], put_in, put_on, commands[i]])
        assert [s[0] for s in steps[-3:-1]] == ["Nothing happens.", "Nothing happens."], (task.id, commands[i])
        assert steps[-1][0] != "Nothing happens."  # the same placement in 0.4.2's words works
        played += 1
    assert played >= 5
