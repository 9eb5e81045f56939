"""The one place litellm is imported: no network at import, quiet errors, custom providers registered."""

from __future__ import annotations

import os
import threading

# Must precede the import: otherwise litellm fetches its model cost map over the network.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # noqa: E402
from litellm import CustomLLM  # noqa: E402

# litellm prints "Give Feedback / Get Help" banners on every mapped exception; our errors say enough.
litellm.suppress_debug_info = True

_register_lock = threading.Lock()


def register_custom_provider(name: str, handler: CustomLLM) -> None:
    """Route `<name>/...` model strings to `handler` (idempotent)."""
    with _register_lock:
        entries = [e for e in litellm.custom_provider_map if e.get("provider") != name]
        entries.append({"provider": name, "custom_handler": handler})
        litellm.custom_provider_map = entries


__all__ = ["litellm", "CustomLLM", "register_custom_provider"]
