"""Views of a run's gateway: what a step or a rollout holds instead of the gateway itself.

`VIEW_METHODS` is the one list of the gateway methods a view passes on. `UnitGateway` (the run's gateway keyed to
one unit of work, raso.engine.replay's resume story) defines each of them; a worker's
`raso.execution.remote.RemoteGateway` defines each of them as a request to the driver, and the driver's server
answers only those. tests/test_gateway_views.py fails when a public method of `LLMGateway` is missing from the
list, or a listed one from either view or from the `ModelGateway` protocol.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

if TYPE_CHECKING:
    from .completion import Completion
    from .config import GatewayConfig, ModelPrice
    from .gateway import Gateway
    from .ledger import UsageLedger
    from .profiles import ModelProfile

T = TypeVar("T", bound=BaseModel)

#: The gateway methods every view offers (each one tags or forwards the call; the rest of a gateway stays its own).
VIEW_METHODS: tuple[str, ...] = ("complete", "structured", "profile", "preflight", "price", "unpriced_models",
                                 "worst_case_cost")


def _join(unit: str, extra: str | None) -> str:
    return unit if not extra else f"{unit}|{extra}"


class UnitGateway:
    """A run's gateway keyed to one unit of work: every model call made through it carries the unit in its cache
    key; the config, ledger, cache and concurrency limit are the parent's own (read through, never copied).

    A wrapper, not a copy: only `VIEW_METHODS` (plus `unit`, `config`, `ledger`) exist on it, and each one that
    calls a model adds the tag. A gateway method not listed is absent (AttributeError), so a new model-calling
    method of LLMGateway cannot be reached untagged."""

    def __init__(self, parent: Gateway, unit: str) -> None:
        self._parent = parent
        self._unit = unit

    @property
    def unit(self) -> str:
        return self._unit

    @property
    def config(self) -> GatewayConfig:
        return self._parent.config

    @property
    def ledger(self) -> UsageLedger:
        return self._parent.ledger

    def profile(self, role: str) -> ModelProfile:
        return self._parent.profile(role)

    def complete(self, role: str, messages: list[dict[str, Any]], *, cache_key_extra: str | None = None,
                 **kwargs: Any) -> Completion:
        return self._parent.complete(role, messages, cache_key_extra=_join(self._unit, cache_key_extra), **kwargs)

    def structured(self, role: str, messages: list[dict[str, Any]], schema: type[T], *,
                   cache_key_extra: str | None = None, **kwargs: Any) -> T:
        return self._parent.structured(role, messages, schema, cache_key_extra=_join(self._unit, cache_key_extra),
                                       **kwargs)

    def preflight(self) -> None:
        self._parent.preflight()  # checks that the models can be used; calls none of them

    def price(self, model: str) -> ModelPrice | None:
        return self._parent.price(model)

    def unpriced_models(self) -> list[str]:
        return self._parent.unpriced_models()

    def worst_case_cost(self, model: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> float:
        return self._parent.worst_case_cost(model, messages, params)


__all__ = ["VIEW_METHODS", "UnitGateway"]
