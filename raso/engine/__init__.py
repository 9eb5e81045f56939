"""The optimization engine: configuration, the loop with its validation gate, budgets, run directory,
checkpoints and resume, progress events and the final report (CONTRACTS §9, DESIGN.md §1 and §3)."""

from importlib import import_module
from typing import Any

from .config import ConfigError, OptimizeConfig, build_config, load_resolved, read_config_file

# The loop, report and events pull in litellm and matplotlib (seconds to import): loaded on first use
# (PEP 562) so `raso --help` and config validation stay fast.
_LAZY = {
    "Engine": ".engine", "Hooks": ".engine", "OptimizeResult": ".engine", "RunError": ".engine",
    "resume": ".engine", "run_optimization": ".engine", "Event": ".events", "RichProgress": ".events",
    "write_report": ".report", "RunDir": ".run_dir", "CandidateRecord": ".state", "RunState": ".state",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CandidateRecord",
    "ConfigError",
    "Engine",
    "Event",
    "Hooks",
    "OptimizeConfig",
    "OptimizeResult",
    "RichProgress",
    "RunDir",
    "RunError",
    "RunState",
    "build_config",
    "load_resolved",
    "read_config_file",
    "resume",
    "run_optimization",
    "write_report",
]
