"""The LLM gateway: every model call in the product goes through `LLMGateway`.

A call names a role; the role's model and parameters come from `GatewayConfig`. Underneath is
`litellm.completion`, wrapped with retries (transient failures only), an optional response cache,
a concurrency limit, structured output (pydantic in, validated instance out) and a usage ledger.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from raso.prompts import PromptLibrary

from . import local, scripted  # noqa: F401  (importing registers the `local/` and `scripted/` providers)
from ._litellm import litellm
from .cache import ResponseCache, cache_key
from .config import GatewayConfig, RetryConfig, RoleConfig
from .errors import LLMAuthError, LLMContextWindowError, LLMError, LLMUnavailableError, StructuredOutputError
from .ledger import CallRecord, UsageLedger
from .structured import parse_structured, repair_prompt, schema_of, with_instructions

T = TypeVar("T", bound=BaseModel)

# Providers implemented in-process: no API key, no cost, their own schema support.
_IN_PROCESS_PROVIDERS = {local.PROVIDER, scripted.PROVIDER}

_PERMANENT_ERRORS: tuple[type[BaseException], ...] = (
    litellm.AuthenticationError,
    litellm.PermissionDeniedError,
    litellm.BadRequestError,  # includes ContextWindowExceededError, UnsupportedParamsError
    litellm.NotFoundError,
    litellm.UnprocessableEntityError,
)
_TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    litellm.RateLimitError,
    litellm.Timeout,
    litellm.APIConnectionError,
    litellm.InternalServerError,
    litellm.ServiceUnavailableError,
    litellm.BadGatewayError,
)


_MISSING_KEY_MARKERS = ("missing credentials", "api_key client option must be set", "no api key", "api key not found")


def _is_missing_credentials(exc: BaseException) -> bool:
    # litellm maps the OpenAI SDK's "Missing credentials" to InternalServerError; it is an auth problem.
    text = str(exc).lower()
    return any(marker in text for marker in _MISSING_KEY_MARKERS)


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: rate limit, timeout, connection trouble, 5xx. Never auth/bad request/context."""
    if isinstance(exc, _PERMANENT_ERRORS) or _is_missing_credentials(exc):
        return False
    if isinstance(exc, _TRANSIENT_ERRORS):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status == 429 or status >= 500)


class Completion(BaseModel):
    """One reply. On a cache hit `cached` is True and tokens/cost are 0 (nothing was spent)."""

    model_config = ConfigDict(frozen=True)

    text: str
    model: str
    role: str
    stage: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cached: bool = False
    retries: int = 0
    finish_reason: str | None = None
    latency_s: float = 0.0


def provider_of(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else ""


def supports_schema_mode(model: str) -> bool:
    """Whether to send the JSON schema as `response_format` (else: instructions in the prompt + parsing)."""
    provider = provider_of(model)
    if provider == local.PROVIDER:
        return True
    if provider == scripted.PROVIDER:
        return False
    try:
        return bool(litellm.supports_response_schema(model=model))
    except Exception:  # unknown model in litellm's map: be conservative
        return False


def response_format_for(model: str, schema: type[BaseModel]) -> dict[str, Any]:
    json_schema = schema_of(schema)
    if provider_of(model) == local.PROVIDER:
        return {"type": "json_object", "schema": json_schema}  # llama-cpp's grammar-constrained JSON mode
    return {"type": "json_schema", "json_schema": {"name": schema.__name__, "schema": json_schema, "strict": False}}


def _api_key_hint(model: str, role_cfg: RoleConfig) -> str:
    if role_cfg.api_key_env:
        return role_cfg.api_key_env
    try:
        missing = litellm.validate_environment(model=model).get("missing_keys") or []
    except Exception:
        missing = []
    if missing:
        return " or ".join(missing)
    provider = provider_of(model) or "OPENAI"
    return f"{provider.upper()}_API_KEY"


class LLMGateway:
    """Thread-safe; share one instance across rollouts so the concurrency limit and ledger are global."""

    def __init__(self, config: GatewayConfig, ledger: UsageLedger | None = None) -> None:
        self.config = config
        self.ledger = ledger if ledger is not None else UsageLedger()
        self.cache = ResponseCache(config.cache_dir) if config.cache_dir is not None else None
        self._semaphore = threading.BoundedSemaphore(config.max_concurrency)
        self._credentials_ok: set[tuple[str, str | None]] = set()

    # ------------------------------------------------------------------ public API
    def complete(
        self,
        role: str,
        messages: list[dict[str, Any]],
        *,
        stage: str = "default",
        response_format: dict[str, Any] | None = None,
        cache_key_extra: str | None = None,
        **params: Any,
    ) -> Completion:
        """One chat completion for `role`. `params` (max_tokens, temperature, stop, ...) override the role's.

        `cache_key_extra` separates otherwise identical requests in the cache (e.g. repeated samples).
        Raises LLMError (LLMAuthError, LLMContextWindowError, LLMUnavailableError) on failure.
        """
        role_name, role_cfg = self._resolve(role)
        call_params = self._call_params(role_cfg, params)
        if response_format is not None:
            call_params["response_format"] = response_format
        return self._complete(role_name, role_cfg, stage, messages, call_params, cache_key_extra)

    def structured(
        self,
        role: str,
        messages: list[dict[str, Any]],
        schema: type[T],
        *,
        stage: str = "default",
        cache_key_extra: str | None = None,
        prompts: PromptLibrary | None = None,
        **params: Any,
    ) -> T:
        """A validated `schema` instance. Invalid output gets one repair attempt that shows the model the
        validation error; then StructuredOutputError carrying the raw text. `prompts` supplies the schema
        instruction and repair templates (None = the package defaults)."""
        role_name, role_cfg = self._resolve(role)
        call_params = self._call_params(role_cfg, params)
        if supports_schema_mode(role_cfg.model):
            call_params["response_format"] = response_format_for(role_cfg.model, schema)
        prompt = with_instructions(messages, schema, prompts=prompts)
        first = self._complete(role_name, role_cfg, stage, prompt, call_params, cache_key_extra)
        try:
            return parse_structured(first.text, schema)
        except ValueError as exc:
            error = str(exc)
        repair = [
            *prompt,
            {"role": "assistant", "content": first.text},
            {"role": "user", "content": repair_prompt(schema, error, prompts=prompts)},
        ]
        second = self._complete(role_name, role_cfg, stage, repair, call_params, cache_key_extra)
        try:
            return parse_structured(second.text, schema)
        except ValueError as exc:
            raise StructuredOutputError(
                f"{role_cfg.model} (role {role_name!r}, stage {stage!r}) did not return a valid "
                f"{schema.__name__} after one repair attempt: {_first_line(str(exc))}"
                + ("; the reply was cut at its token limit (raise max_tokens)" if second.finish_reason == "length" else ""),
                raw_text=second.text,
                validation_error=str(exc),
                model=role_cfg.model,
                role=role_name,
            ) from None

    # ------------------------------------------------------------------ internals
    def _resolve(self, role: str) -> tuple[str, RoleConfig]:
        try:
            return self.config.resolve_role(role)
        except KeyError as exc:
            raise LLMError(str(exc.args[0]), role=role) from None

    @staticmethod
    def _call_params(role_cfg: RoleConfig, overrides: dict[str, Any]) -> dict[str, Any]:
        params: dict[str, Any] = {
            "temperature": role_cfg.temperature,
            "top_p": role_cfg.top_p,
            "max_tokens": role_cfg.max_tokens,
            **role_cfg.extra_params,
            **overrides,
        }
        return {k: v for k, v in params.items() if v is not None}

    def _complete(
        self,
        role: str,
        role_cfg: RoleConfig,
        stage: str,
        messages: list[dict[str, Any]],
        params: dict[str, Any],
        cache_key_extra: str | None,
    ) -> Completion:
        model = role_cfg.model
        key = None
        if self.cache is not None:
            key = cache_key(model, messages, {**params, "api_base": role_cfg.api_base, "extra": cache_key_extra}, None)
            hit = self.cache.get(key)
            if hit is not None and isinstance(hit.get("text"), str):
                self.ledger.record(CallRecord(role=role, stage=stage, model=model, cached=True))
                return Completion(
                    text=hit["text"], model=model, role=role, stage=stage, cached=True,
                    finish_reason=hit.get("finish_reason"),
                )

        if provider_of(model) not in _IN_PROCESS_PROVIDERS:
            self._check_credentials(model, role, role_cfg)
        if provider_of(model) == local.PROVIDER:
            try:
                local.ensure_ready(model)
            except LLMError as exc:
                exc.role = role
                raise
        started = time.perf_counter()
        attempts = 0
        retry_cfg = role_cfg.retry or self.config.retry
        kwargs = self._litellm_kwargs(role_cfg, params)
        try:
            for attempt in self._retrying(retry_cfg):
                with attempt:
                    attempts += 1
                    with self._semaphore:
                        response = litellm.completion(model=model, messages=messages, **kwargs)
        except Exception as exc:
            self.ledger.record(
                CallRecord(role=role, stage=stage, model=model, retries=max(attempts - 1, 0), failed=True,
                           latency_s=time.perf_counter() - started)
            )
            raise self._as_llm_error(exc, model, role, role_cfg, attempts) from exc

        latency = time.perf_counter() - started
        choice = response.choices[0]
        text = getattr(choice.message, "content", None) or ""
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        cost = self._cost(model, response)
        finish_reason = getattr(choice, "finish_reason", None)
        completion = Completion(
            text=text, model=model, role=role, stage=stage, prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens, cost_usd=cost, retries=attempts - 1,
            finish_reason=finish_reason, latency_s=latency,
        )
        self.ledger.record(
            CallRecord(role=role, stage=stage, model=model, prompt_tokens=prompt_tokens,
                       completion_tokens=completion_tokens, cost_usd=cost, retries=attempts - 1, latency_s=latency)
        )
        if self.cache is not None and key is not None:
            self.cache.put(key, {"text": text, "finish_reason": finish_reason, "prompt_tokens": prompt_tokens,
                                 "completion_tokens": completion_tokens, "cost_usd": cost})
        return completion

    def preflight(self) -> None:
        """Check, before any work, that every configured role's model can be used: the embedded model's extra
        is installed and its weights assemble; a hosted model's API key is set. Raises LLMError saying what to
        do. A reachable server is not probed here (the first call's retries handle a slow start)."""
        for role, role_cfg in self.config.roles.items():
            model = role_cfg.model
            provider = provider_of(model)
            if provider == local.PROVIDER:
                local.ensure_ready(model)
            elif provider != scripted.PROVIDER:
                self._check_credentials(model, role, role_cfg)

    def _check_credentials(self, model: str, role: str, role_cfg: RoleConfig) -> None:
        """Fail before any request when litellm knows the provider's key env var is unset."""
        if role_cfg.api_base or (role_cfg.api_key_env and os.environ.get(role_cfg.api_key_env)):
            return  # a self-hosted server, or an explicit key
        if (model, role_cfg.api_key_env) in self._credentials_ok:
            return
        try:
            missing = litellm.validate_environment(model=model).get("missing_keys") or []
        except Exception:
            missing = []
        if missing:
            raise LLMAuthError(
                f"no API key for model {model!r} (role {role!r}): set {_api_key_hint(model, role_cfg)} "
                f"(or point the role at a server with api_base)",
                model=model, role=role,
            )
        self._credentials_ok.add((model, role_cfg.api_key_env))

    @staticmethod
    def _retrying(cfg: RetryConfig) -> Retrying:
        return Retrying(
            stop=stop_after_attempt(cfg.max_attempts),
            wait=wait_exponential_jitter(multiplier=cfg.initial_wait_s, max=cfg.max_wait_s, jitter=cfg.jitter_s),
            retry=retry_if_exception(is_transient),
            reraise=True,
        )

    @staticmethod
    def _litellm_kwargs(role_cfg: RoleConfig, params: dict[str, Any]) -> dict[str, Any]:
        kwargs = dict(params)
        if role_cfg.api_base:
            kwargs["api_base"] = role_cfg.api_base
        if role_cfg.api_key_env and os.environ.get(role_cfg.api_key_env):
            kwargs["api_key"] = os.environ[role_cfg.api_key_env]
        if role_cfg.timeout_s is not None:
            kwargs["timeout"] = role_cfg.timeout_s
        if provider_of(role_cfg.model) not in _IN_PROCESS_PROVIDERS:
            kwargs.setdefault("num_retries", 0)  # retries are ours (counted in the ledger), not litellm's
            kwargs.setdefault("max_retries", 0)  # nor the provider SDK's
            kwargs.setdefault("drop_params", True)  # e.g. temperature on models that reject it
        return kwargs

    @staticmethod
    def _cost(model: str, response: Any) -> float:
        if provider_of(model) in _IN_PROCESS_PROVIDERS:
            return 0.0
        hidden = getattr(response, "_hidden_params", None) or {}
        cost = hidden.get("response_cost")
        if cost is None:
            try:
                cost = litellm.completion_cost(completion_response=response)
            except Exception:  # model not in litellm's price map (e.g. a self-hosted server): unknown = 0
                cost = 0.0
        return float(cost or 0.0)

    @staticmethod
    def _as_llm_error(exc: Exception, model: str, role: str, role_cfg: RoleConfig, attempts: int) -> LLMError:
        detail = _first_line(str(exc))
        if isinstance(exc, LLMError):
            return exc
        if isinstance(exc, (litellm.AuthenticationError, litellm.PermissionDeniedError)) or _is_missing_credentials(exc):
            where = f" at {role_cfg.api_base}" if role_cfg.api_base else ""
            return LLMAuthError(
                f"authentication failed for model {model!r}{where} (role {role!r}): set {_api_key_hint(model, role_cfg)} "
                f"to a valid API key. Provider said: {detail}",
                model=model, role=role,
            )
        if isinstance(exc, litellm.ContextWindowExceededError):
            return LLMContextWindowError(
                f"the prompt does not fit the context window of {model!r} (role {role!r}): {detail}", model=model, role=role
            )
        if is_transient(exc):
            return LLMUnavailableError(
                f"{model!r} (role {role!r}) still failing after {attempts} attempt(s): {type(exc).__name__}: {detail}",
                model=model, role=role,
            )
        return LLMError(f"call to {model!r} (role {role!r}) failed: {type(exc).__name__}: {detail}", model=model, role=role)


def _first_line(text: str, limit: int = 500) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:limit]
