"""The LLM gateway: every model call in RASO goes through `LLMGateway` (see CONTRACTS §1)."""

from .config import DEFAULT_LOCAL_MODEL, GatewayConfig, RetryConfig, RoleConfig
from .errors import LLMAuthError, LLMContextWindowError, LLMError, LLMUnavailableError, StructuredOutputError
from .gateway import Completion, LLMGateway, is_transient, supports_schema_mode
from .ledger import CallRecord, UsageLedger

__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "CallRecord",
    "Completion",
    "GatewayConfig",
    "LLMAuthError",
    "LLMContextWindowError",
    "LLMError",
    "LLMGateway",
    "LLMUnavailableError",
    "RetryConfig",
    "RoleConfig",
    "StructuredOutputError",
    "UsageLedger",
    "is_transient",
    "supports_schema_mode",
]
