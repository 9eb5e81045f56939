"""Errors raised by the LLM gateway. Everything the gateway raises is an `LLMError`."""

from __future__ import annotations

from raso.choices import FailureKind


class LLMError(RuntimeError):
    """A model call failed; the message says which model/role and what to do about it."""

    def __init__(self, message: str, *, model: str | None = None, role: str | None = None) -> None:
        super().__init__(message)
        self.model = model
        self.role = role


class LLMAuthError(LLMError):
    """The provider rejected the credentials (never retried)."""


class LLMContextWindowError(LLMError):
    """The prompt does not fit the model's context window (never retried)."""


class LLMUnavailableError(LLMError):
    """Transient failures persisted through every retry attempt."""


class StructuredOutputError(LLMError):
    """The model's reply did not validate against the requested schema, even after one repair attempt."""

    def __init__(
        self,
        message: str,
        *,
        raw_text: str,
        validation_error: str,
        model: str | None = None,
        role: str | None = None,
    ) -> None:
        super().__init__(message, model=model, role=role)
        self.raw_text = raw_text
        self.validation_error = validation_error


class BudgetExceededError(LLMError):
    """The USD budget refused a call before it was made: its worst-case cost (prompt tokens known, completion at
    max_tokens) would take the spend past the budget. Never retried; the run stops at its budget."""


def failure_kind(exc: BaseException) -> FailureKind:
    """Classify an exception that ended a rollout or an optimizer step (see raso.choices.FailureKind)."""
    if isinstance(exc, BudgetExceededError):
        return "budget"
    if isinstance(exc, LLMUnavailableError):
        return "infrastructure"
    if makes_model_unusable(exc):
        return "unusable"
    return "agent_error"


def makes_model_unusable(exc: BaseException) -> bool:
    """Whether `exc` means the model cannot be used at all (credentials, an outage that outlasted every retry,
    a missing extra), as opposed to one bad reply (junk output, a context overflow)."""
    return isinstance(exc, (LLMAuthError, LLMUnavailableError)) or type(exc) is LLMError
