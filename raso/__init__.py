"""RASO: retrieval-augmented skill optimization. Write and improve agent skills (SKILL.md) for a harness, with a
public skill corpus as prior knowledge.

    import raso
    result = raso.optimize("spreadsheet")                       # embedded model, quick defaults
    result = raso.optimize("webshop", model="openai/gpt-4o-mini", epochs=2, run_dir="runs/x")
    init = raso.init_skill("alfworld")                          # zero rollouts (RASI)
    scores = raso.evaluate("alfworld", "SKILL.md", split="test")

The names below load on first use, so `import raso` (and the CLI's --help) stays fast.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, eagerly, for type checkers and IDEs (at run time they load on first use)
    from raso.agent.evaluate import EvalResult as EvalResult
    from raso.api import evaluate as evaluate
    from raso.api import init_skill as init_skill
    from raso.api import optimize as optimize
    from raso.api import plan as plan
    from raso.api import resume as resume
    from raso.engine.config import OptimizeConfig as OptimizeConfig
    from raso.engine.engine import OptimizeResult as OptimizeResult
    from raso.engine.state import TestScore as TestScore
    from raso.errors import ConfigError as ConfigError
    from raso.errors import RunError as RunError
    from raso.harness import Harness as Harness
    from raso.harness import Rollout as Rollout
    from raso.harness import Task as Task
    from raso.harness import TextEnv as TextEnv
    from raso.optimizer.types import InitResult as InitResult
    from raso.optimizer.types import UpdateProposal as UpdateProposal
    from raso.skill import Skill as Skill

_LAZY = {
    "optimize": "raso.api",
    "plan": "raso.api",
    "resume": "raso.api",
    "init_skill": "raso.api",
    "evaluate": "raso.api",
    "Skill": "raso.skill",
    "Harness": "raso.harness",
    "Task": "raso.harness",
    "Rollout": "raso.harness",
    "TextEnv": "raso.harness",
    "OptimizeConfig": "raso.engine.config",
    "ConfigError": "raso.errors",
    "RunError": "raso.errors",
    "OptimizeResult": "raso.engine.engine",
    "TestScore": "raso.engine.state",
    "InitResult": "raso.optimizer.types",
    "UpdateProposal": "raso.optimizer.types",
    "EvalResult": "raso.agent.evaluate",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'raso' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = sorted(_LAZY)
