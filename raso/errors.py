"""The errors every layer may raise: a base module, so a harness (harnesses/*) or an optimizer step raises them
without importing the engine that reports them. The CLI maps both to exit status 2 with the message."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the source, each bad field and why."""


class RunError(RuntimeError):
    """A run that cannot start or continue (bad run directory, missing checkpoint, unusable harness, ...)."""


__all__ = ["ConfigError", "RunError"]
