"""Errors that stop a run; the CLI maps them to exit status 2 with the message."""

from __future__ import annotations


class RunError(RuntimeError):
    """A run that cannot start or continue (bad run directory, missing checkpoint, unusable harness, ...)."""


class ModelUnusableError(RunError):
    """Every rollout of a batch failed because the model could not be used (no API key, server down, the
    `local` extra missing). Nothing of that batch was counted; `raso resume` continues once it is fixed."""


__all__ = ["ModelUnusableError", "RunError"]
