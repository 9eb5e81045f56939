"""The LLM gateway: every model call in RASO goes through `LLMGateway` (docs/design.md §3).

The gateway module imports litellm, which takes seconds; it is loaded on first use (PEP 562) so that
light imports (`raso.llm.config`, the CLI's `--help`) stay fast.
"""

from typing import Any

from .completion import Completion
from .config import DEFAULT_LOCAL_MODEL, GatewayConfig, RetryConfig, RoleConfig
from .errors import (
    BudgetExceededError,
    LLMAuthError,
    LLMContextWindowError,
    LLMError,
    LLMUnavailableError,
    StructuredOutputError,
    failure_kind,
    makes_model_unusable,
)
from .ledger import CallRecord, UsageLedger

_FROM_GATEWAY = ("Gateway", "LLMGateway", "ModelGateway", "is_transient", "supports_schema_mode")


def __getattr__(name: str) -> Any:
    if name in _FROM_GATEWAY:
        from . import gateway

        return getattr(gateway, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BudgetExceededError",
    "failure_kind",
    "DEFAULT_LOCAL_MODEL",
    "CallRecord",
    "Completion",
    "GatewayConfig",
    "LLMAuthError",
    "LLMContextWindowError",
    "LLMError",
    "Gateway",
    "LLMGateway",
    "ModelGateway",
    "LLMUnavailableError",
    "RetryConfig",
    "RoleConfig",
    "StructuredOutputError",
    "UsageLedger",
    "is_transient",
    "makes_model_unusable",
    "supports_schema_mode",
]
