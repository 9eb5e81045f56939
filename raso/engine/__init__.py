"""The optimization engine: configuration, the loop with its validation gate, budgets, run directory,
checkpoints and resume, progress events and the final report (CONTRACTS §9, DESIGN.md §1 and §3)."""

from .config import ConfigError, OptimizeConfig, build_config, load_resolved, read_config_file
from .engine import Engine, Hooks, OptimizeResult, RunError, resume, run_optimization
from .events import Event, RichProgress
from .report import write_report
from .run_dir import RunDir
from .state import CandidateRecord, RunState

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
