"""Errors that stop a run; the CLI maps them to exit status 2 with the message."""

from __future__ import annotations

from raso.errors import RunError


class InfrastructureError(RunError):
    """Model calls kept failing for reasons that are not the skill's or the agent's (rate limit, timeout, 5xx,
    connection, credentials), even after the gateway's retries and the engine's re-runs. The unit of work in
    progress was neither scored nor counted; `raso resume` redoes it once the cause is gone."""


class ModelUnusableError(InfrastructureError):
    """Every rollout of a batch failed because the model could not be used (no API key, server down, the
    `local` extra missing). Nothing of that batch was counted; `raso resume` continues once it is fixed."""


class OptimizerUnavailableError(InfrastructureError):
    """The optimizer model could not be reached or refused the credentials while proposing a candidate. The
    iteration's train rollouts are kept; `raso resume` proposes again instead of burning the iteration."""


class CheckError(RunError):
    """The harness's check could not score some rollouts of a batch (a verifier that wrote no reward, crashed or
    could not import what it needs): their reward means nothing, so the batch was neither scored nor counted.
    Fix the task's check (or remove the task) and `raso resume` the run."""


__all__ = ["CheckError", "InfrastructureError", "ModelUnusableError", "OptimizerUnavailableError"]
