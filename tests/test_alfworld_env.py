"""ALFWorld harness: game discovery, splits, and the environment on the real alfworld/TextWorld engine."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import require_shared

from harnesses.alfworld import AlfworldHarness
from harnesses.alfworld.env import GAME_POOL, AlfworldEnv
from harnesses.alfworld.expert import play_walkthrough, walkthrough
from harnesses.alfworld.games import TASK_TYPES, GameDataError, discover_games
from raso.harness import get_harness


@pytest.fixture(scope="module")
def demo() -> AlfworldHarness:
    return AlfworldHarness()


def test_shipped_demo_games_are_split_and_typed(demo):
    splits = demo.splits()
    assert {k: len(v) for k, v in splits.items()} == {"train": 3, "val": 1, "test": 2}
    tasks = [t for ts in splits.values() for t in ts]
    assert len({t.id for t in tasks}) == 6
    assert {t.metadata["task_type"] for t in tasks} == set(TASK_TYPES[:6])
    for task in tasks:
        assert task.instruction.startswith("Your task is to: ") and task.instruction.endswith(".")
        assert Path(task.metadata["gamefile"]).is_file()


def test_entry_point_and_descriptions(demo):
    h = get_harness("alfworld", max_steps=20)
    assert isinstance(h, AlfworldHarness) and h.max_steps == 20
    assert f"{demo.max_steps} actions" in demo.harness_description
    assert "Action:" in demo.action_instructions


def test_reset_shows_goal_and_admissible_commands(demo):
    task = demo.tasks("train")[0]
    env = demo.make_env(task)
    try:
        obs, info = env.reset()
        assert task.instruction in obs
        commands = info["admissible_commands"]
        assert "look" in commands and "inventory" in commands and any(c.startswith("go to ") for c in commands)
        assert obs.endswith("Available actions: " + ", ".join(commands))
        obs, reward, terminated, truncated, info = env.step("dance wildly")
        assert obs.startswith("Nothing happens.") and reward == 0 and not (terminated or truncated)
    finally:
        env.close()


def test_walkthrough_wins_every_demo_game_with_reward_one(demo):
    started = GAME_POOL.started
    for task in [t for ts in demo.splits().values() for t in ts]:
        env = demo.make_env(task)
        try:
            env.reset()
            commands = walkthrough(demo.gamefile(task))
            for i, command in enumerate(commands):
                obs, reward, terminated, truncated, info = env.step(command)
                if i < len(commands) - 1:
                    assert reward == 0 and not terminated, (task.id, command)
            assert reward == 1.0 and terminated and info["won"] and info["soft_score"] == 1.0, task.id
            assert "Available actions" not in obs  # nothing to do after the end
        finally:
            env.close()
    # played one after another, the six games reuse one pooled TextWorld environment (one library copy)
    assert GAME_POOL.started - started <= 1


def test_step_budget_truncates(demo):
    env = AlfworldEnv(demo.gamefile(demo.tasks("val")[0]), max_steps=3)
    try:
        env.reset()
        results = [env.step("look") for _ in range(3)]
        assert [r[3] for r in results] == [False, False, True] and all(r[1] == 0 for r in results)
        assert "step budget (3 actions)" in results[-1][0]
        with pytest.raises(RuntimeError):
            env.step("look")
        env.reset()  # a fresh episode after the budget ran out
        assert env.steps == 0 and not env.done
    finally:
        env.close()


def test_admissible_list_can_be_hidden(demo):
    h = AlfworldHarness(show_admissible=False)
    env = h.make_env(h.tasks("test")[0])
    try:
        obs, info = env.reset()
        assert "Available actions" not in obs and info["admissible_commands"]
    finally:
        env.close()


def test_skillopt_split_of_the_shared_games():
    data = require_shared("envdata", "alfworld")
    splits = AlfworldHarness(data).splits()
    assert {k: len(v) for k, v in splits.items()} == {"train": 39, "val": 18, "test": 134}
    manifest = json.loads((data / "skillopt_path_split" / "test" / "items.json").read_text())
    assert [t.metadata["manifest_id"] for t in splits["test"]] == [i["id"] for i in manifest]
    assert [t.metadata["task_type"] for t in splits["test"]] == [i["task_type"] for i in manifest]
    assert all(t.id.startswith("valid_unseen/") for t in splits["test"])
    assert all(t.id.startswith("valid_seen/") for t in splits["val"])


def _link_game(src_gamefile: Path, root: Path, split_folder: str) -> Path:
    game_dir = root / "json_2.1.1" / split_folder / src_gamefile.parent.parent.name / src_gamefile.parent.name
    game_dir.mkdir(parents=True)
    os.symlink(src_gamefile, game_dir / "game.tw-pddl")
    return game_dir


def test_a_full_alfworld_data_folder_without_manifest(tmp_path):
    """$ALFWORLD_DATA layout: splits are train / valid_seen / valid_unseen; unsolvable games are skipped."""
    data = require_shared("envdata", "alfworld")
    games = sorted((data / "json_2.1.1" / "valid_unseen").glob("*/*/game.tw-pddl"))[:3]
    _link_game(games[0], tmp_path, "train")
    _link_game(games[1], tmp_path, "valid_seen")
    _link_game(games[2], tmp_path, "valid_unseen")
    unsolvable = json.loads(games[0].read_text())
    unsolvable["solvable"] = False
    bad_dir = tmp_path / "json_2.1.1" / "train" / "pick_and_place_simple-X-None-Y-1" / "trial_1"
    bad_dir.mkdir(parents=True)
    (bad_dir / "game.tw-pddl").write_text(json.dumps(unsolvable))
    splits = AlfworldHarness(tmp_path).splits()
    assert {k: len(v) for k, v in splits.items()} == {"train": 1, "val": 1, "test": 1}
    assert splits["test"][0].id == f"valid_unseen/{games[2].parent.parent.name}/{games[2].parent.name}"
    assert play_walkthrough(splits["test"][0].metadata["gamefile"]).won


def test_bad_data_gives_clear_errors(tmp_path):
    with pytest.raises(GameDataError, match="not found"):
        discover_games(tmp_path / "nowhere")
    with pytest.raises(GameDataError, match="no ALFWorld games"):
        discover_games(tmp_path)
    bad = tmp_path / "json_2.1.1" / "valid_unseen" / "pick_and_place_simple-A-None-B-1" / "trial_1"
    bad.mkdir(parents=True)
    (bad / "game.tw-pddl").write_text("{truncated")
    with pytest.raises(GameDataError, match="not valid JSON"):
        discover_games(tmp_path)


def test_commands_are_normalised_for_formatting_only():
    from harnesses.alfworld.env import normalize_command

    assert normalize_command("  `Go to  Cabinet 1.` ") == "go to cabinet 1"
    assert normalize_command('"take apple 1 from countertop 2"') == "take apple 1 from countertop 2"
    assert normalize_command("put apple in fridge please") == "put apple in fridge please"  # no rewriting


def test_parse_action_skips_a_trailing_empty_action(demo):
    reply = "Thought: go.\nAction: go to cabinet 1.\nThought: then open it.\nAction: open cabinet 1\nAction:"
    assert demo.parse_action(reply) == "open cabinet 1"
    assert demo.parse_action("Action: look") == "look"
