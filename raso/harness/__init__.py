"""The harness protocol (base), finding harnesses by name (registry) and the sandbox harnesses run code in."""

from .base import (
    EnvEnd,
    Evidence,
    Harness,
    Rollout,
    RolloutRunner,
    Score,
    Step,
    Task,
    TextEnv,
    TextTasks,
    WorkspaceEnd,
    WorkspaceTasks,
    clamp_reward,
    failed_rollout,
    json_safe,
)
from .registry import (
    ENTRY_POINT_GROUP,
    HarnessInfo,
    HarnessLoadError,
    HarnessNotFoundError,
    available_harnesses,
    describe_harnesses,
    get_harness,
)

__all__ = [
    "ENTRY_POINT_GROUP", "EnvEnd", "Evidence", "Harness", "HarnessInfo", "HarnessLoadError", "HarnessNotFoundError",
    "Rollout", "RolloutRunner", "Score", "Step", "Task", "TextEnv", "TextTasks", "WorkspaceEnd", "WorkspaceTasks",
    "available_harnesses",
    "clamp_reward", "describe_harnesses", "failed_rollout", "get_harness", "json_safe",
]
