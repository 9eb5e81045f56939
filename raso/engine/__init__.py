"""The optimization engine: configuration, the loop with its validation gate, budgets, run directory,
checkpoints and resume, progress events and the final report (docs/design.md §1 and §4)."""

from importlib import import_module
from typing import Any

from .config import OptimizeConfig, build_config, load_resolved, read_config_file
from .errors import CheckError, InfrastructureError, ModelUnusableError, OptimizerUnavailableError

# The loop, report and events pull in litellm and matplotlib (seconds to import): loaded on first use
# (PEP 562) so `raso --help` and config validation stay fast.
_LAZY = {
    "Engine": ".engine", "OptimizeResult": ".engine", "start_run": ".engine", "continue_run": ".engine",
    "load_state": ".engine", "Event": ".events", "RichProgress": ".events", "write_report": ".report",
    "RunDir": ".run_dir", "CandidateRecord": ".state", "RunState": ".state", "TestScore": ".state",
    "RunComponents": ".protocols", "LoopStrategies": ".loop", "Schedule": ".schedule",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CandidateRecord",
    "CheckError",
    "Engine",
    "Event",
    "InfrastructureError",
    "LoopStrategies",
    "ModelUnusableError",
    "OptimizeConfig",
    "OptimizeResult",
    "OptimizerUnavailableError",
    "RichProgress",
    "RunComponents",
    "RunDir",
    "RunState",
    "Schedule",
    "TestScore",
    "build_config",
    "continue_run",
    "load_resolved",
    "load_state",
    "read_config_file",
    "start_run",
    "write_report",
]
