"""Gateway configuration: which model and parameters each role uses, retries, cache, concurrency."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .profiles import check_overrides

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
    refused_attempts: int = Field(default=2, ge=1, description="total attempts when nothing listens at the model's "
                                  "address (connection refused): a server that is down, not busy; the run re-runs "
                                  "such rollouts later or stops resumably, so waiting out every attempt only delays")


#: How a role asks for structured output: `json_schema` sends the schema as OpenAI's json_schema response_format
#: (OpenAI, vLLM, llama.cpp's llama-server, Ollama's /v1), `json_object` sends {"type": "json_object", "schema":
#: ...} (llama-cpp-python's server constrains to that schema; others force some JSON object),
#: `instructions` only describes the schema in the prompt and parses the reply; `auto` uses json_schema where
#: litellm knows the model supports it (and the embedded model's grammar), else instructions. The schema is
#: described in the prompt in every mode, and every reply is validated.
StructuredOutputMode = Literal["auto", "json_schema", "json_object", "instructions"]


class ModelPrice(BaseModel):
    """A model's price in USD per million tokens (registered with litellm; used for cost and the USD budget).
    Accepts {"input": .., "output": ..}, [input, output] or "input,output"."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0.0, description="USD per million prompt tokens")
    output: float = Field(ge=0.0, description="USD per million completion tokens")

    @model_validator(mode="before")
    @classmethod
    def _pair(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",")]
        if isinstance(value, (list, tuple)):
            if len(value) != 2:
                raise ValueError("a price is INPUT,OUTPUT in USD per million tokens")
            return {"input": value[0], "output": value[1]}
        return value

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1_000_000


def check_api_base(value: str | None) -> str | None:
    """A server URL with its scheme and host: without `http://` litellm takes `127.0.0.1:8000/v1` for a path and
    retries a connection error for the whole retry budget."""
    if value is None:
        return None
    url = urlsplit(value.strip())
    if url.scheme not in ("http", "https") or not url.netloc:
        raise ValueError("not a server URL: write it with its scheme and host, e.g. "
                         "http://127.0.0.1:8000/v1")
    return value.strip()


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
    structured_output: StructuredOutputMode = Field(default="auto", description="how structured output is asked "
                                                    "for (see StructuredOutputMode)")
    profile: dict[str, Any] = Field(default_factory=dict, description="overrides of the model profile's fields "
                                    "(raso.llm.profiles.ModelProfile), e.g. {\"sanitizers\": []}")

    @field_validator("profile")
    @classmethod
    def _known_profile_fields(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_overrides(value)

    @field_validator("api_base")
    @classmethod
    def _server_url(cls, value: str | None) -> str | None:
        return check_api_base(value)


class GatewayConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    roles: dict[str, RoleConfig]
    cache_dir: Path | None = Field(default=None, description="opt-in on-disk response cache")
    max_concurrency: int = Field(default=4, ge=1, description="concurrent model calls across threads")
    retry: RetryConfig = Field(default_factory=RetryConfig)
    prices: dict[str, ModelPrice] = Field(default_factory=dict, description="model string -> price; overrides "
                                          "litellm's bundled prices")
    budget_usd: float | None = Field(default=None, gt=0, description="refuse any call whose worst-case cost would "
                                     "take the ledger's spend past this")
    unit_budgets_usd: dict[str, float] = Field(default_factory=dict, description="USD budgets of their own: the "
                                               "calls whose unit tag starts with a key (a run's test evaluation: "
                                               "'test_v') are admitted against its value and not against budget_usd")

    @field_validator("unit_budgets_usd")
    @classmethod
    def _positive_unit_budgets(cls, value: dict[str, float]) -> dict[str, float]:
        bad = {k: v for k, v in value.items() if not k or v <= 0}
        if bad:
            raise ValueError(f"a unit budget needs a non-empty unit prefix and a positive USD amount: {bad}")
        return value
    seed: int | None = Field(default=None, description="seed of every call to an in-process model (the embedded "
                             "one), derived with the call's cache key: the same run reproduces its replies, and "
                             "requests told apart by their tag (repeats, units) get different samples")

    @classmethod
    def for_models(
        cls,
        target: str = DEFAULT_LOCAL_MODEL,
        optimizer: str | None = None,
        *,
        api_base: str | None = None,
        optimizer_api_base: str | None = None,
        structured_output: StructuredOutputMode = "auto",
        optimizer_structured_output: StructuredOutputMode | None = None,
        profile: dict[str, Any] | None = None,
        optimizer_profile: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> "GatewayConfig":
        """Roles `agent` (the target model) and `optimizer` (every RASO role); optimizer defaults to target.
        `profile` / `optimizer_profile` override fields of each model's profile (the optimizer's defaults to
        `profile` when no optimizer model is given)."""
        agent = RoleConfig(model=target, api_base=api_base, structured_output=structured_output,
                           profile=profile or {})
        opt_mode = optimizer_structured_output or (structured_output if optimizer is None else "auto")
        opt_profile = optimizer_profile if optimizer_profile is not None else (profile if optimizer is None else None)
        if optimizer is None:
            opt = RoleConfig(model=target, api_base=api_base, structured_output=opt_mode, profile=opt_profile or {})
        else:
            opt = RoleConfig(model=optimizer, api_base=optimizer_api_base, structured_output=opt_mode,
                             profile=opt_profile or {})
        return cls(roles={"agent": agent, "optimizer": opt}, **kwargs)

    def resolve_role(self, role: str) -> tuple[str, RoleConfig]:
        """The role actually used for `role`: itself if configured, else `optimizer`, else `agent`."""
        for name in (role, *FALLBACK_ROLES):
            if name in self.roles:
                return name, self.roles[name]
        raise KeyError(f"role {role!r} is not configured and no fallback role ({', '.join(FALLBACK_ROLES)}) exists")
