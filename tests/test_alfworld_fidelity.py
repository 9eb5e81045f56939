"""ALFWorld fidelity on the real engine: the expert solves every SkillOpt test game; random play almost never does."""

from __future__ import annotations

import random

import pytest
from conftest import require_shared
from joblib import Parallel, delayed

from harnesses.alfworld import AlfworldHarness
from harnesses.alfworld.expert import play_expert, play_random


@pytest.fixture(scope="module")
def test_games() -> list[str]:
    harness = AlfworldHarness(require_shared("envdata", "alfworld"))
    return [harness.gamefile(t) for t in harness.tasks("test")]


@pytest.mark.shared
@pytest.mark.timeout(3600)  # ~2 min on an idle 2-core machine; 34 min measured at load average 12
def test_expert_solves_all_134_test_games(test_games):
    assert len(test_games) == 134
    results = Parallel(n_jobs=2)(delayed(play_expert)(g, 50) for g in test_games)
    lost = [r.gamefile for r in results if not r.won]
    assert not lost, f"expert failed on {len(lost)} games: {lost[:5]}"
    assert all(1 <= r.steps <= 50 for r in results)


@pytest.mark.shared
def test_random_admissible_commands_almost_never_win(test_games):
    sample = random.Random(0).sample(test_games, 10)
    results = Parallel(n_jobs=2)(delayed(play_random)(g, seed, 50) for seed, g in enumerate(sample))
    assert sum(r.won for r in results) <= 1
    assert all(r.steps == 50 for r in results if not r.won)  # the budget, not a crash, ended them
