"""One ALFWorld game as a RASO text environment, run by the real `alfworld` + TextWorld engine.

The game is loaded straight from its `game.tw-pddl` file with TextWorld and ALFWorld's own wrappers
(`AlfredDemangler` gives objects their ALFWorld names such as "apple 1", `AlfredInfos` records the game file),
exactly as ALFWorld's `AlfredTWEnv` does, but without the traj_data.json / config machinery.
"""

from __future__ import annotations

import threading
from typing import Any

from raso.harness import TextEnv

INSTALL_HINT = (
    "the ALFWorld harness needs the `alfworld` package (ALFWorld 0.4.2 on TextWorld): "
    "pip install 'raso[alfworld]'  (or: pip install alfworld==0.4.2)"
)


def _import_engine():
    """textworld plus ALFWorld's wrappers, imported on first use so that raso works without them."""
    try:
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    except ImportError as exc:  # pragma: no cover - exercised only where alfworld is absent
        raise ImportError(f"{INSTALL_HINT} ({exc})") from exc
    return textworld, AlfredDemangler, AlfredInfos


def start_game(gamefile: str, *, policy_commands: bool = False):
    """A TextWorld environment for one ALFWorld game file (not yet reset)."""
    textworld, AlfredDemangler, AlfredInfos = _import_engine()
    infos = textworld.EnvInfos(
        won=True, lost=True, admissible_commands=True, extras=["gamefile"], policy_commands=policy_commands
    )
    return textworld.start(gamefile, request_infos=infos, wrappers=[AlfredDemangler(shuffle=False), AlfredInfos])


class GamePool:
    """Started TextWorld environments kept for reuse across games.

    Every TextWorld PDDL environment loads its own copy of fast-downward's shared library (33 MB file) and never
    unloads it, so one environment per rollout would grow a long optimization run's memory without bound.
    Reusing an environment (`load` another game file) keeps the number of copies at the peak concurrency.
    """

    def __init__(self, max_idle: int = 8):
        self.max_idle = max_idle
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self.started = 0  # environments created so far (each holds one library copy)

    def acquire(self, gamefile: str):
        with self._lock:
            game = self._idle.pop() if self._idle else None
        if game is not None:
            try:
                game.load(gamefile)
                return game
            except Exception:
                game.close()
                raise
        game = start_game(gamefile)
        with self._lock:
            self.started += 1
        return game

    def release(self, game) -> None:
        with self._lock:
            if len(self._idle) < self.max_idle:
                self._idle.append(game)
                return
        game.close()


GAME_POOL = GamePool()


def normalize_command(action: str) -> str:
    """Forgive formatting only: surrounding quotes/backticks, a final period, case and extra spaces
    (every ALFWorld command is lower case)."""
    command = " ".join((action or "").split()).strip("`'\" ").rstrip(".").strip()
    return command.lower()


def _clean(feedback: str) -> str:
    return (feedback or "").strip()


OBSERVATION_MODES = ("skillopt", "react")


def react_observation(text: str, *, first: bool) -> str:
    """ReAct's ALFWorld observation: the first one loses its banner paragraph ("-= Welcome to TextWorld, ALFRED! =-")
    and its paragraphs are joined by single newlines; a later one loses a leading "You arrive at loc N. "."""
    if first:
        return "\n".join(text.split("\n\n")[1:])
    if text.startswith("You arrive at loc "):
        return text[text.find(". ") + 2:]
    return text


class AlfworldEnv(TextEnv):
    """Text observations, the admissible commands listed after each one, reward 1 when the goal is reached.

    The episode terminates when the game is won (or lost); it is truncated after `max_steps` actions.
    Unknown or impossible commands are passed to the game, which answers "Nothing happens." (as in ALFWorld).

    `observation="skillopt"` (default): the game's text as it is, plus the admissible commands when
    `show_admissible`. `observation="react"`: ReAct's ALFWorld setup (`react_observation`, no admissible commands,
    and a `think: ...` action is answered "OK." without reaching the game; it still uses a step).
    """

    def __init__(self, gamefile: str, max_steps: int = 50, show_admissible: bool = True, *,
                 observation: str = "skillopt"):
        super().__init__()
        if observation not in OBSERVATION_MODES:
            raise ValueError(f"observation must be one of {OBSERVATION_MODES}, not {observation!r}")
        self.gamefile = gamefile
        self.max_steps = max_steps
        self.observation_mode = observation
        self.show_admissible = show_admissible and observation == "skillopt"
        self._game: Any = None  # a TextWorld game (untyped), acquired on the first reset
        self._state: Any = None
        self.steps = 0
        self.done = False

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        if self._game is None:
            self._game = GAME_POOL.acquire(self.gamefile)
        self._state = self._game.reset()
        self.steps = 0
        self.done = False
        text = _clean(self._state.feedback)
        if self.observation_mode == "react":
            text = react_observation(text, first=True)
        return self._observation(text), self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            raise RuntimeError("the episode is over; call reset() to play again")
        command = normalize_command(action)
        self.steps += 1
        thinking = self.observation_mode == "react" and command.startswith("think:")
        game_over = False
        if not thinking:
            self._state, _, game_over = self._game.step(command)
        won = bool(self._state.get("won"))
        terminated = won or bool(game_over)
        truncated = not terminated and self.steps >= self.max_steps
        self.done = terminated or truncated
        if thinking:
            text = "OK."
        elif self.observation_mode == "react":
            text = react_observation(_clean(self._state.feedback), first=False)
        else:
            text = _clean(self._state.feedback)
        if truncated:
            text += f"\n\nThe step budget ({self.max_steps} actions) is spent; the task was not completed."
        info = self._info()
        info["soft_score"] = 1.0 if won else 0.0
        return self._observation(text), 1.0 if won else 0.0, terminated, truncated, info

    @property
    def admissible_commands(self) -> list[str]:
        if self._state is None:
            return []
        return list(self._state.get("admissible_commands") or [])

    def _observation(self, text: str) -> str:
        if not self.show_admissible or self.done:
            return text
        return f"{text}\n\nAvailable actions: " + ", ".join(self.admissible_commands)

    def _info(self) -> dict[str, Any]:
        return {
            "won": bool(self._state.get("won")) if self._state is not None else False,
            "admissible_commands": self.admissible_commands,
            "steps": self.steps,
            "gamefile": self.gamefile,
        }

    def close(self) -> None:
        if self._game is not None:
            GAME_POOL.release(self._game)
            self._game = None
            self._state = None
        super().close()
