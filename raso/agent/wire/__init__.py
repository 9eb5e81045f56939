"""Wire formats the loopback model endpoint speaks (raso.agent.endpoint): each turns an agent program's request
into one chat request for raso's gateway and the gateway's reply back into that program's format.

`FORMATS` maps a format's name to its class. A format module in this package decorates its class with `register`
and is named in `_MODULES` (imported here when present). A format may set `base_path` (a ClassVar str, default ""):
what `EndpointSession.base_url(name)` adds to the session's URL, e.g. "/v1" for clients that append
"/chat/completions" to their base URL.
"""

from __future__ import annotations

import importlib

from .base import ChatReply, ChatRequest, ToolCall, WireFormat

FORMATS: dict[str, type[WireFormat]] = {}

#: the format modules of this package, in the order they register (module names, not wire format names)
_MODULES = [f"{__name__}.{module}" for module in ("openai_chat", "anthropic", "responses")]


def register(cls: type[WireFormat]) -> type[WireFormat]:
    """Add a wire format class to FORMATS under its `name` (a class decorator)."""
    FORMATS[cls.name] = cls
    return cls


for _module in _MODULES:
    try:
        importlib.import_module(_module)
    except ModuleNotFoundError as exc:  # a format not written (yet); any other import error is a bug and raises
        if exc.name != _module:
            raise

__all__ = ["FORMATS", "ChatReply", "ChatRequest", "ToolCall", "WireFormat", "register"]
