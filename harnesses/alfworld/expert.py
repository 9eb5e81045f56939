"""Reference policies for ALFWorld games: the expert (stored walkthrough, planner as fallback) and a random
agent. Used by the fidelity tests and the benchmark; they play the game directly, without a model."""

from __future__ import annotations

import random
import time

from pydantic import BaseModel

from harnesses.alfworld.env import AlfworldEnv, start_game
from harnesses.alfworld.games import read_game


class EpisodeResult(BaseModel):
    gamefile: str
    won: bool
    steps: int
    source: str  # "walkthrough" | "planner" | "random"
    reset_s: float
    play_s: float


def walkthrough(gamefile: str) -> list[str]:
    """The expert command sequence stored in the game file."""
    return list(read_game(gamefile).get("walkthrough") or [])


def play_walkthrough(gamefile: str, max_steps: int = 50) -> EpisodeResult:
    env = AlfworldEnv(gamefile, max_steps=max_steps)
    try:
        t0 = time.perf_counter()
        env.reset()
        t1 = time.perf_counter()
        won = False
        for command in walkthrough(gamefile)[:max_steps]:
            _, reward, terminated, truncated, _ = env.step(command)
            won = reward >= 1.0
            if terminated or truncated:
                break
        return EpisodeResult(gamefile=gamefile, won=won, steps=env.steps, source="walkthrough",
                             reset_s=t1 - t0, play_s=time.perf_counter() - t1)
    finally:
        env.close()


def play_planner(gamefile: str, max_steps: int = 50) -> EpisodeResult:
    """Follow TextWorld's planner (`policy_commands`), re-planned after every step (slow on some games)."""
    game = start_game(gamefile, policy_commands=True)
    try:
        t0 = time.perf_counter()
        state = game.reset()
        t1 = time.perf_counter()
        steps, won = 0, False
        while steps < max_steps and state.get("policy_commands"):
            state, _, done = game.step(state["policy_commands"][0])
            steps += 1
            won = bool(state.get("won"))
            if done or won:
                break
        return EpisodeResult(gamefile=gamefile, won=won, steps=steps, source="planner",
                             reset_s=t1 - t0, play_s=time.perf_counter() - t1)
    finally:
        game.close()


def play_expert(gamefile: str, max_steps: int = 50) -> EpisodeResult:
    """The stored walkthrough first; the planner only when the walkthrough does not win."""
    result = play_walkthrough(gamefile, max_steps)
    return result if result.won else play_planner(gamefile, max_steps)


def play_random(gamefile: str, seed: int, max_steps: int = 50) -> EpisodeResult:
    """Pick a uniformly random admissible command at every step."""
    rng = random.Random(seed)
    env = AlfworldEnv(gamefile, max_steps=max_steps)
    try:
        t0 = time.perf_counter()
        _, info = env.reset()
        t1 = time.perf_counter()
        won = False
        while True:
            _, reward, terminated, truncated, info = env.step(rng.choice(info["admissible_commands"]))
            won = reward >= 1.0
            if terminated or truncated:
                break
        return EpisodeResult(gamefile=gamefile, won=won, steps=env.steps, source="random",
                             reset_s=t1 - t0, play_s=time.perf_counter() - t1)
    finally:
        env.close()
