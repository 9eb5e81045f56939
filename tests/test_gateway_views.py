"""The gateway's views: UnitGateway wraps the run's gateway (every public LLMGateway method that reaches a model is
one it defines itself and tags with its unit; nothing else of the gateway is reachable through it by accident), and
a worker's RemoteGateway asks the driver's GatewayServer for the same methods. Both, the server and the
ModelGateway protocol read one list, raso.llm.view.VIEW_METHODS."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from raso.execution.remote import GatewayServer, RemoteGateway
from raso.llm import GatewayConfig, LLMAuthError, LLMError, LLMGateway, RetryConfig, UsageLedger
from raso.llm.gateway import ModelGateway
from raso.llm.scripted import ScriptedModel
from raso.llm.view import VIEW_METHODS, UnitGateway


class Answer(BaseModel):
    text: str


#: how the test calls each model-calling method of LLMGateway (a new one must be added here and to UnitGateway)
CALLS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "complete": (("agent", [{"role": "user", "content": "hi"}]), {"stage": "t"}),
    "structured": (("agent", [{"role": "user", "content": "hi"}], Answer), {"stage": "t"}),
}


def _model_calling_methods() -> set[str]:
    """Public LLMGateway methods from which a call to litellm.completion is reachable (through self.<method>)."""
    tree = ast.parse(Path(inspect.getsourcefile(LLMGateway)).read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "LLMGateway")
    methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
    calls: dict[str, set[str]] = {}
    for name, func in methods.items():
        found = set()
        for node in ast.walk(func):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if node.value.id == "self" and node.attr in methods:
                    found.add(node.attr)
                if node.value.id == "litellm" and node.attr in ("completion", "acompletion", "text_completion"):
                    found.add("<model>")
        calls[name] = found
    reaching = {"<model>"}
    while True:
        more = {name for name, callees in calls.items() if callees & reaching} - reaching
        if not more:
            break
        reaching |= more
    return {name for name in reaching if name in methods and not name.startswith("_")}


def test_every_model_calling_method_of_the_gateway_is_wrapped_and_tagged(tmp_path: Path) -> None:
    methods = _model_calling_methods()
    assert {"complete", "structured"} <= methods
    assert methods == set(CALLS), "a new model-calling gateway method: wrap it in UnitGateway and list it in CALLS"
    assert all(name in vars(UnitGateway) for name in methods)
    assert not hasattr(UnitGateway, "__getattr__")  # nothing reaches the parent except what it defines

    model = ScriptedModel(lambda messages: '{"text": "ok"}')
    gateway = LLMGateway(GatewayConfig.for_models(target=model.model, cache_dir=tmp_path / "cache",
                                                  retry=RetryConfig(max_attempts=1)))
    for name in sorted(methods):
        args, kwargs = CALLS[name]
        before = len(model.calls)
        getattr(UnitGateway(gateway, "iter001/train"), name)(*args, **kwargs)
        first = len(model.calls) - before
        getattr(UnitGateway(gateway, "iter001/train"), name)(*args, **kwargs)  # the same unit: replayed
        assert len(model.calls) - before == first, name
        getattr(UnitGateway(gateway, "iter002/train"), name)(*args, **kwargs)  # another unit: a fresh call
        assert len(model.calls) - before == 2 * first, name


def test_every_public_method_of_the_gateway_is_on_the_wrapper(tmp_path: Path) -> None:
    # a read-only one missing would fail quietly where callers tolerate a stand-in gateway (e.g. the agent's
    # grammar support and the prompt limits read the model profile, and fall back without one)
    public = {name for name, _ in inspect.getmembers(LLMGateway) if not name.startswith("_")}
    assert {"profile", "complete", "structured"} <= public
    assert public <= set(vars(UnitGateway)), sorted(public - set(vars(UnitGateway)))
    gateway = LLMGateway(GatewayConfig.for_models(target=ScriptedModel(["a"]).model, cache_dir=tmp_path))
    unit = UnitGateway(gateway, "u")
    assert unit.profile("agent") is gateway.profile("agent")
    assert unit.worst_case_cost("m", [], {}) == gateway.worst_case_cost("m", [], {})
    assert unit.price(unit.config.roles["agent"].model) == gateway.price(gateway.config.roles["agent"].model)


def test_the_wrapper_reads_the_parents_state_and_never_copies_it(monkeypatch: pytest.MonkeyPatch) -> None:
    model = ScriptedModel(["a"])
    gateway = LLMGateway(GatewayConfig.for_models(target=model.model))
    unit = UnitGateway(UnitGateway(gateway, "outer"), "inner")
    assert unit.config is gateway.config and unit.ledger is gateway.ledger
    gateway.ledger = UsageLedger()  # a later change to the parent is seen
    assert unit.ledger is gateway.ledger and unit.unpriced_models() == gateway.unpriced_models()
    unit.complete("agent", [{"role": "user", "content": "hi"}])
    assert gateway.ledger.totals()["calls"] == 1
    assert not hasattr(unit, "cache") and not hasattr(unit, "_complete")  # the parent's internals stay its own
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    hosted = UnitGateway(LLMGateway(GatewayConfig.for_models(target="openai/gpt-4o-mini")), "u")
    with pytest.raises(LLMAuthError, match="OPENAI_API_KEY"):  # the parent's check, before any call
        hosted.preflight()


def test_one_method_list_is_every_views_surface() -> None:
    public = {name for name, _ in inspect.getmembers(LLMGateway) if not name.startswith("_")}
    assert public == set(VIEW_METHODS), "a new public gateway method: add it to VIEW_METHODS and to both views"
    protocol = {name for name in vars(ModelGateway) if not name.startswith("_")} - {"config"}
    assert protocol == set(VIEW_METHODS)
    for view in (UnitGateway, RemoteGateway):
        missing = [name for name in VIEW_METHODS if not callable(vars(view).get(name))]
        assert not missing, f"{view.__name__} lacks {missing}"


def test_the_remote_view_answers_each_listed_method_as_the_unit_view_does(tmp_path: Path) -> None:
    model = ScriptedModel(lambda messages: '{"text": "ok"}')
    gateway = LLMGateway(GatewayConfig.for_models(target=model.model, cache_dir=tmp_path / "cache",
                                                  retry=RetryConfig(max_attempts=1)))
    role_model = gateway.config.roles["agent"].model
    calls: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
        **CALLS, "profile": (("agent",), {}), "preflight": ((), {}), "price": ((role_model,), {}),
        "unpriced_models": ((), {}), "worst_case_cost": ((role_model, [], {}), {})}
    assert set(calls) == set(VIEW_METHODS)
    server = GatewayServer(gateway)
    try:
        remote, local = server.remote("iter001/train"), UnitGateway(gateway, "iter001/train")
        for name in VIEW_METHODS:
            args, kwargs = calls[name]
            there, here = getattr(remote, name)(*args, **kwargs), getattr(local, name)(*args, **kwargs)
            assert getattr(there, "text", there) == getattr(here, "text", here), name  # a Completion: its text
        # the remote's model calls were the unit's own: the local ones replayed them from the cache
        assert len(model.calls) == 2 and {r.cached for r in gateway.ledger.records()} == {False, True}
        with pytest.raises(LLMError, match="cannot be called from a worker"):
            remote._call("ledger")
    finally:
        server.close()
