"""The states whose reply grammars tests/test_action_space.py compares with the ones written before harnesses
declared action spaces (tests/fixtures/reply_grammars_before_action_spaces.json). Only harness and env calls
here, so the same cases run against the code of both versions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

ALFWORLD_INFO = {"admissible_commands": ["go to fridge 1", "look", "take apple 1 from countertop 1", "inventory"]}
ODD_COMMANDS = {"admissible_commands": ['say "hi"', "", "path a\\b", "look", "look", "tab\there"]}


def _webshop_states(observation: str) -> dict[str, dict[str, Any]]:
    from harnesses.webshop import WebShopHarness

    harness = WebShopHarness(observation=observation)
    env = harness.make_env(harness.tasks("val")[0])
    _, search = env.reset()
    _, _, _, _, results = env.step("search[yoga pants]")
    asin = next(a for a in results["available_actions"] if a.startswith("click[b0"))
    _, _, _, _, item = env.step(asin)
    return {"search": search, "results": results, "item": item}


def cases() -> Iterator[tuple[str, Any, dict[str, Any], set[str]]]:
    """(case name, harness, info, avoid) for every harness with a grammar and the states that matter."""
    from harnesses.alfworld import AlfworldHarness
    from harnesses.spreadsheet import SpreadsheetHarness
    from harnesses.webshop import WebShopHarness

    for observation in ("annotated", "text"):
        states = _webshop_states(observation)
        for thought in (True, False):
            harness = WebShopHarness(observation=observation, reply_thought=thought)
            for page, info in states.items():
                clicks = [a for a in info["available_actions"] if a.startswith("click[")]
                avoids = {"none": set(), "search": {"search[yoga pants]"}, "first": set(clicks[:1]),
                          "upper": {c.upper() for c in clicks[:2]}, "all": set(clicks)}
                for avoid_name, avoid in avoids.items():
                    yield f"webshop/{observation}/thought={thought}/{page}/avoid={avoid_name}", harness, info, avoid
    for observation in ("skillopt", "react"):
        harness = AlfworldHarness(observation=observation)
        commands = ALFWORLD_INFO["admissible_commands"]
        avoids = {"none": set(), "one": {"Go to fridge 1"}, "quoted": {"`go to fridge 1.`"},
                  "all": set(commands), "three": set(commands[:3])}
        for avoid_name, avoid in avoids.items():
            yield f"alfworld/{observation}/avoid={avoid_name}", harness, ALFWORLD_INFO, avoid
        yield f"alfworld/{observation}/odd", harness, ODD_COMMANDS, set()
        yield f"alfworld/{observation}/odd/avoid", harness, ODD_COMMANDS, {"look", 'say "hi"', "path a\\b"}
        yield f"alfworld/{observation}/empty", harness, {"admissible_commands": []}, set()
        yield f"alfworld/{observation}/no-info", harness, {}, set()
    for mode in ("raso", "upstream"):
        harness = SpreadsheetHarness(recalc="none", prompt_mode=mode)
        yield f"spreadsheet/{mode}", harness, {}, set()
        yield f"spreadsheet/{mode}/avoid", harness, {}, {"SUBMIT", "RUN"}
