"""Gateway configuration: which model and parameters each role uses, retries, cache, concurrency."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

#: The model that runs offline, in-process, from the `local` extra.
DEFAULT_LOCAL_MODEL = "local/qwen2.5-coder-0.5b"

#: Roles are resolved in this order when a requested role is not configured.
FALLBACK_ROLES: tuple[str, ...] = ("optimizer", "agent")


class RetryConfig(BaseModel):
    """Exponential backoff with jitter for transient failures (rate limit, timeout, connection, 5xx)."""

    model_config = ConfigDict(extra="forbid")

    max_attempts: int = Field(default=6, ge=1, description="total attempts, including the first")
    initial_wait_s: float = Field(default=1.0, ge=0.0)
    max_wait_s: float = Field(default=60.0, ge=0.0)
    jitter_s: float = Field(default=1.0, ge=0.0)


class RoleConfig(BaseModel):
    """The model and sampling parameters one role (e.g. `agent`, `optimizer`) calls with."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="any litellm model string: openai/..., anthropic/..., ollama/..., local/..., scripted/...")
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    api_base: str | None = Field(default=None, description="e.g. http://localhost:8000/v1 for a vLLM or llama.cpp server")
    api_key_env: str | None = Field(default=None, description="name of the env var holding the API key, if not the provider default")
    timeout_s: float | None = 600.0
    extra_params: dict[str, Any] = Field(default_factory=dict, description="passed to litellm.completion as-is")
    retry: RetryConfig | None = Field(default=None, description="overrides GatewayConfig.retry for this role")


class GatewayConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    roles: dict[str, RoleConfig]
    cache_dir: Path | None = Field(default=None, description="opt-in on-disk response cache")
    max_concurrency: int = Field(default=4, ge=1, description="concurrent model calls across threads")
    retry: RetryConfig = Field(default_factory=RetryConfig)

    @classmethod
    def for_models(
        cls,
        target: str = DEFAULT_LOCAL_MODEL,
        optimizer: str | None = None,
        *,
        api_base: str | None = None,
        optimizer_api_base: str | None = None,
        **kwargs: Any,
    ) -> "GatewayConfig":
        """Roles `agent` (the target model) and `optimizer` (every RASO role); optimizer defaults to target."""
        agent = RoleConfig(model=target, api_base=api_base)
        if optimizer is None:
            opt = RoleConfig(model=target, api_base=api_base)
        else:
            opt = RoleConfig(model=optimizer, api_base=optimizer_api_base)
        return cls(roles={"agent": agent, "optimizer": opt}, **kwargs)

    def resolve_role(self, role: str) -> tuple[str, RoleConfig]:
        """The role actually used for `role`: itself if configured, else `optimizer`, else `agent`."""
        for name in (role, *FALLBACK_ROLES):
            if name in self.roles:
                return name, self.roles[name]
        raise KeyError(f"role {role!r} is not configured and no fallback role ({', '.join(FALLBACK_ROLES)}) exists")
