"""The LLM gateway: every model call in the product goes through `LLMGateway`.

A call names a role; the role's model and parameters come from `GatewayConfig`. Underneath is
`litellm.completion`, wrapped with retries (transient failures only), an optional response cache,
a concurrency limit, structured output (pydantic in, validated instance out) and a usage ledger.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, stop_any, wait_exponential_jitter
from tenacity.stop import stop_base

from raso.prompts import PromptLibrary

from . import local, scripted  # noqa: F401  (importing registers the `local/` and `scripted/` providers)
from ._litellm import litellm
from .cache import ResponseCache, cache_key
from .completion import Completion
from .config import GatewayConfig, ModelPrice, RetryConfig, RoleConfig, StructuredOutputMode
from .errors import (
    BudgetExceededError,
    LLMAuthError,
    LLMContextWindowError,
    LLMError,
    LLMUnavailableError,
    StructuredOutputError,
)
from .ledger import CallRecord, UsageLedger
from .profiles import ModelProfile, profile_for, provider_of
from .structured import bound_strings, parse_structured, repair_prompt, schema_of, with_instructions
from .tool_text import messages_with_tools, parse_tool_calls

T = TypeVar("T", bound=BaseModel)

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


_REFUSED_MARKERS = ("connection refused", "errno 111", "econnrefused")


def is_connection_refused(exc: BaseException) -> bool:
    """Whether nothing listened at the model's address: a ConnectionRefusedError anywhere in the exception's chain,
    or its text as litellm passes it on."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError) or any(m in str(current).lower() for m in _REFUSED_MARKERS):
            return True
        current = current.__cause__ or current.__context__
    return False


class _StopWhenRefused(stop_base):
    """A tenacity stop: after `attempts` attempts whose last failed with a refused connection."""

    def __init__(self, attempts: int) -> None:
        self.attempts = attempts

    def __call__(self, retry_state: RetryCallState) -> bool:
        outcome = retry_state.outcome
        error = outcome.exception() if outcome is not None and outcome.failed else None
        return error is not None and retry_state.attempt_number >= self.attempts and is_connection_refused(error)


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: rate limit, timeout, connection trouble, 5xx. Never auth/bad request/context."""
    if isinstance(exc, _PERMANENT_ERRORS) or _is_missing_credentials(exc):
        return False
    status = getattr(exc, "status_code", None)
    if status in (501, 505):  # a server that does not implement this API (a plain web server): retrying cannot help
        return False
    if isinstance(exc, _TRANSIENT_ERRORS):
        return True
    return isinstance(status, int) and (status == 429 or status >= 500)


def supports_schema_mode(model: str) -> bool:
    """Whether `model`'s profile takes a JSON schema as `response_format` (else: instructions in the prompt +
    parsing)."""
    return profile_for(model).takes_json_schema


def structured_mode(model: str, mode: StructuredOutputMode = "auto",
                    profile: ModelProfile | None = None) -> StructuredOutputMode:
    """The structured-output mode a role's setting means for `model` (`auto`: what its profile takes)."""
    if mode != "auto":
        return mode
    return (profile or profile_for(model)).structured_output


def response_format_for(model: str, schema: type[BaseModel], mode: StructuredOutputMode = "auto",
                        json_schema: dict[str, Any] | None = None,
                        profile: ModelProfile | None = None) -> dict[str, Any] | None:
    """The `response_format` for a structured call in `mode` (None: instructions only); `json_schema` replaces
    the schema's own (e.g. with length bounds). `profile` resolves `auto` (None: the model's own profile)."""
    mode = structured_mode(model, mode, profile)
    if mode == "instructions":
        return None
    json_schema = json_schema if json_schema is not None else schema_of(schema)
    if mode == "json_object":
        # llama.cpp's servers (llama-server, llama-cpp-python's) constrain the reply to the schema given here;
        # a server that only knows plain JSON mode ignores it
        return {"type": "json_object", "schema": json_schema}
    return {"type": "json_schema", "json_schema": {"name": schema.__name__, "schema": json_schema, "strict": False}}


_FREE = ModelPrice(input=0.0, output=0.0)


def price_of(model: str, prices: dict[str, ModelPrice] | None = None) -> ModelPrice | None:
    """What `model` costs: the configured price, zero for the in-process providers, else litellm's bundled
    price; None when nobody knows (its cost would silently read $0)."""
    if prices and model in prices:
        return prices[model]
    if profile_for(model).in_process:
        return _FREE
    try:
        info = litellm.get_model_info(model=model)
    except Exception:
        return None
    inp, out = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if inp is None or out is None:
        return None
    return ModelPrice(input=float(inp) * 1_000_000, output=float(out) * 1_000_000)


def register_prices(prices: dict[str, ModelPrice]) -> None:
    """Tell litellm the configured prices, so its own cost functions agree with ours."""
    for model, price in prices.items():
        try:
            per_input_token = price.input / 1_000_000
            # A --price gives input and output only; cached prompt tokens are priced as input (never as free, and
            # litellm warns about a custom model without cache prices otherwise).
            litellm.register_model({model: {
                "input_cost_per_token": per_input_token, "output_cost_per_token": price.output / 1_000_000,
                "cache_read_input_token_cost": per_input_token, "cache_creation_input_token_cost": per_input_token,
                "litellm_provider": provider_of(model) or "openai", "mode": "chat"}})
        except Exception:  # litellm refusing an entry must not stop a run: our own cost path uses the table
            pass


def call_seed(run_seed: int, key: str) -> int:
    """The sampling seed of one in-process call: from the run's seed and the call's cache key, so a rerun samples
    the same text and two requests with different tags (repeats, units) sample independently. 31 bits: llama.cpp
    reads the seed as uint32 and 0xFFFFFFFF means "random"."""
    digest = hashlib.sha256(f"{run_seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


#: Completion tokens assumed by the budget's worst-case estimate when neither the call nor litellm's model
#: information gives a limit.
DEFAULT_WORST_CASE_COMPLETION_TOKENS = 8192


#: The key sent to a server given by api_base when no key is set: keyless local servers ignore it.
KEYLESS_SERVER_KEY = "no-key-set"


def _missing_keys(model: str) -> list[str]:
    """The API-key variables litellm finds unset for `model`. A server address (`OLLAMA_API_BASE`) is not a key:
    Ollama's default address needs none, and a wrong address is a connection error that names it."""
    try:
        missing = litellm.validate_environment(model=model).get("missing_keys") or []
    except Exception:  # a provider litellm cannot check: leave the key to it
        return []
    return [name for name in missing if not str(name).endswith("_API_BASE")]


def _check_provider(model: str, role: str) -> None:
    """LLMError before any work when litellm knows no provider for `model` (`foo/bar`): the first call would fail
    the same way, after a run directory exists."""
    try:
        litellm.get_llm_provider(model)
    except Exception:  # noqa: BLE001 - litellm raises its BadRequestError, with a banner
        custom = {str(entry.get("provider")) for entry in litellm.custom_provider_map}
        if provider_of(model) in custom:
            return
        raise LLMError(f"model {model!r} (role {role!r}): litellm knows no provider {provider_of(model) or model!r}; "
                       "write it as PROVIDER/MODEL (openai/..., anthropic/..., ollama/..., local/...; a server given "
                       "by --api-base is openai/NAME)", model=model, role=role) from None


def _key_missing(model: str) -> bool:
    """Whether litellm finds no API key for `model` in the environment."""
    return bool(_missing_keys(model))


def _api_key_hint(model: str, role_cfg: RoleConfig) -> str:
    if role_cfg.api_key_env:
        return role_cfg.api_key_env
    missing = _missing_keys(model)
    if missing:
        return " or ".join(missing)
    provider = provider_of(model) or "OPENAI"
    return f"{provider.upper()}_API_KEY"


class ModelGateway(Protocol):
    """What the execution agent uses of a gateway: model calls and profiles. A worker's
    raso.execution.remote.RemoteGateway has this much (its calls are made by the driver's gateway)."""

    @property
    def config(self) -> GatewayConfig: ...

    def profile(self, role: str) -> ModelProfile: ...

    def complete(self, role: str, messages: list[dict[str, Any]], *, cache_key_extra: str | None = None,
                 **params: Any) -> Completion: ...

    def structured(self, role: str, messages: list[dict[str, Any]], schema: type[T], *,
                   cache_key_extra: str | None = None, **params: Any) -> T: ...

    def preflight(self) -> None: ...

    def price(self, model: str) -> ModelPrice | None: ...

    def unpriced_models(self) -> list[str]: ...

    def worst_case_cost(self, model: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> float: ...


class Gateway(ModelGateway, Protocol):
    """What the optimizer and the engine use of a gateway: an `LLMGateway`, or a view of one that tags its calls
    with a unit of work (raso.llm.view.UnitGateway)."""

    @property
    def ledger(self) -> UsageLedger: ...


class LLMGateway:
    """Thread-safe; share one instance across rollouts so the concurrency limit and ledger are global."""

    def __init__(self, config: GatewayConfig, ledger: UsageLedger | None = None) -> None:
        self.config = config
        self.ledger = ledger if ledger is not None else UsageLedger()
        self.cache = ResponseCache(config.cache_dir) if config.cache_dir is not None else None
        self._semaphore = threading.BoundedSemaphore(config.max_concurrency)
        self._credentials_ok: set[tuple[str, str | None]] = set()
        self._budget_lock = threading.Lock()
        # worst-case cost of the calls in flight per budget scope ("" = budget_usd, else a unit_budgets_usd prefix);
        # a USD budget counts them as spent
        self._reserved_usd: dict[str, float] = {}
        self._profiles: dict[str, ModelProfile] = {}
        if config.prices:
            register_prices(config.prices)

    # ------------------------------------------------------------------ public API
    def profile(self, role: str) -> ModelProfile:
        """The model profile of `role`'s model with the role's overrides, resolved once per role."""
        role_name, role_cfg = self._resolve(role)
        found = self._profiles.get(role_name)
        if found is None:
            found = self._profiles[role_name] = profile_for(role_cfg.model, role_cfg.profile)
        return found

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
        tools_as_text = False
        if self.profile(role_name).tool_calls == "text" and (call_params.get("tools") or _has_tool_turns(messages)):
            # the model takes no tools parameter: the tools go into the prompt, the calls come back as text
            messages = messages_with_tools(messages, call_params.pop("tools", None))
            call_params.pop("tool_choice", None)
            tools_as_text = True
        completion = self._complete(role_name, role_cfg, stage, messages, call_params, cache_key_extra)
        if tools_as_text:
            text, calls = parse_tool_calls(completion.text)
            if calls:
                completion = completion.model_copy(update={"text": text, "tool_calls": calls,
                                                           "finish_reason": "tool_calls"})
        return completion

    def structured(
        self,
        role: str,
        messages: list[dict[str, Any]],
        schema: type[T],
        *,
        stage: str = "default",
        cache_key_extra: str | None = None,
        prompts: PromptLibrary | None = None,
        field_chars: Mapping[str, int] | None = None,
        **params: Any,
    ) -> T:
        """A validated `schema` instance. Invalid output gets one repair attempt that shows the model the
        validation error; then StructuredOutputError carrying the raw text. `prompts` supplies the schema
        instruction and repair templates (None = the package defaults). `field_chars` bounds the named string
        fields in the schema shown and sent (structured.bound_strings), so a model that follows the schema
        finishes the object within its token cap."""
        role_name, role_cfg = self._resolve(role)
        call_params = self._call_params(role_cfg, params)
        json_schema = bound_strings(schema_of(schema), field_chars) if field_chars else None
        response_format = response_format_for(role_cfg.model, schema, role_cfg.structured_output, json_schema,
                                              self.profile(role_name))
        if response_format is not None:
            call_params["response_format"] = response_format
        prompt = with_instructions(messages, schema, prompts=prompts, json_schema=json_schema)
        first = self._complete(role_name, role_cfg, stage, prompt, call_params, cache_key_extra)
        try:
            return parse_structured(first.text, schema)
        except ValueError as exc:
            error = str(exc)
        repair = [
            *prompt,
            {"role": "assistant", "content": first.text},
            {"role": "user", "content": repair_prompt(schema, error, prompts=prompts, json_schema=json_schema)},
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
        profile = self.profile(role)
        if self.cache is not None or (self.config.seed is not None and profile.in_process):
            key = cache_key(model, messages, {**params, "api_base": role_cfg.api_base, "extra": cache_key_extra}, None)
        if self.cache is not None and key is not None:
            hit = self.cache.get(key)
            if hit is not None and isinstance(hit.get("text"), str):
                self._record_replay(hit, CallRecord(role=role, stage=stage, model=model, cached=True,
                                                    unit=cache_key_extra))
                return Completion(
                    text=hit["text"], model=model, role=role, stage=stage, cached=True,
                    finish_reason=hit.get("finish_reason"), tool_calls=hit.get("tool_calls") or None,
                )

        if not profile.in_process:
            self._check_credentials(model, role, role_cfg)
        elif self.config.seed is not None and key is not None and "seed" not in params:
            params = {**params, "seed": call_seed(self.config.seed, key)}
        if profile.served_by == "embedded":
            try:
                local.ensure_ready(model)
            except LLMError as exc:
                exc.role = role
                raise
        started = time.perf_counter()
        attempts = 0
        retry_cfg = role_cfg.retry or self.config.retry
        kwargs = self._litellm_kwargs(role_cfg, params, profile.in_process, model)
        reserved = self._reserve_budget(model, role, messages, params, cache_key_extra)
        try:
            for attempt in self._retrying(retry_cfg):
                with attempt:
                    attempts += 1
                    with self._semaphore:
                        response = litellm.completion(model=model, messages=messages, **kwargs)
        except Exception as exc:
            self.ledger.record(
                CallRecord(role=role, stage=stage, model=model, retries=max(attempts - 1, 0), failed=True,
                           latency_s=time.perf_counter() - started, unit=cache_key_extra)
            )
            self._release_budget(reserved)
            raise self._as_llm_error(exc, model, role, role_cfg, attempts) from exc

        latency = time.perf_counter() - started
        choice = response.choices[0]
        text = getattr(choice.message, "content", None) or ""
        tool_calls = _tool_calls_of(choice.message)
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        priced = self._cost(model, response, prompt_tokens, completion_tokens)
        cost = priced or 0.0
        finish_reason = getattr(choice, "finish_reason", None)
        completion = Completion(
            text=text, model=model, role=role, stage=stage, prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens, cost_usd=cost, retries=attempts - 1,
            finish_reason=finish_reason, latency_s=latency, tool_calls=tool_calls,
        )
        record = CallRecord(role=role, stage=stage, model=model, prompt_tokens=prompt_tokens,
                            completion_tokens=completion_tokens, cost_usd=cost, retries=attempts - 1,
                            latency_s=latency, unpriced=priced is None, call_id=uuid.uuid4().hex,
                            unit=cache_key_extra)
        try:
            # The replayable reply is stored before the call is billed, and carries its own bill: a kill between
            # the two leaves a reply that the resumed run replays and bills then (_record_replay), never a billed
            # call that must be paid for again.
            if self.cache is not None and key is not None:
                self.cache.put(key, {"text": text, "finish_reason": finish_reason, "tool_calls": tool_calls,
                                     "prompt_tokens": prompt_tokens,
                                     "completion_tokens": completion_tokens, "cost_usd": cost,
                                     "bill": record.model_dump(mode="json")})
            self.ledger.record(record)
        finally:
            self._release_budget(reserved)
        return completion

    def _record_replay(self, hit: dict[str, Any], replay: CallRecord) -> None:
        """Book a cache hit: free, unless the ledger keeps the bills of its own cache and this reply's bill never
        reached it (the process that paid for it was killed in between): then the original bill is booked once."""
        bill = hit.get("bill")
        if self.ledger.books_unbilled_replays and isinstance(bill, dict) and bill.get("call_id"):
            try:
                original = CallRecord.model_validate(bill)
            except ValueError:
                original = None
            if original is not None and self.ledger.book_once(original):
                return
        self.ledger.record(replay)

    def preflight(self) -> None:
        """Check, before any work, that every configured role's model can be used: the embedded model's extra
        is installed and its weights assemble; a hosted model's API key is set. Raises LLMError saying what to
        do. A reachable server is not probed here (the first call's retries handle a slow start)."""
        for role, role_cfg in self.config.roles.items():
            served_by = self.profile(role).served_by
            if served_by == "embedded":
                local.ensure_ready(role_cfg.model)
            elif served_by == "litellm":
                _check_provider(role_cfg.model, role)
                self._check_credentials(role_cfg.model, role, role_cfg)

    def _check_credentials(self, model: str, role: str, role_cfg: RoleConfig) -> None:
        """Fail before any request when litellm knows the provider's key env var is unset."""
        if role_cfg.api_base or (role_cfg.api_key_env and os.environ.get(role_cfg.api_key_env)):
            return  # a self-hosted server, or an explicit key
        if (model, role_cfg.api_key_env) in self._credentials_ok:
            return
        if _missing_keys(model):
            raise LLMAuthError(
                f"no API key for model {model!r} (role {role!r}): set {_api_key_hint(model, role_cfg)} "
                f"(or point the role at a server with api_base)",
                model=model, role=role,
            )
        self._credentials_ok.add((model, role_cfg.api_key_env))

    @staticmethod
    def _retrying(cfg: RetryConfig) -> Retrying:
        return Retrying(
            stop=stop_any(stop_after_attempt(cfg.max_attempts), _StopWhenRefused(cfg.refused_attempts)),
            wait=wait_exponential_jitter(multiplier=cfg.initial_wait_s, max=cfg.max_wait_s, jitter=cfg.jitter_s),
            retry=retry_if_exception(is_transient),
            reraise=True,
        )

    @staticmethod
    def _litellm_kwargs(role_cfg: RoleConfig, params: dict[str, Any], in_process: bool,
                       model: str = "") -> dict[str, Any]:
        kwargs = dict(params)
        if role_cfg.api_base:
            kwargs["api_base"] = role_cfg.api_base
        if role_cfg.api_key_env and os.environ.get(role_cfg.api_key_env):
            kwargs["api_key"] = os.environ[role_cfg.api_key_env]
        elif role_cfg.api_base and not in_process and _key_missing(model):
            # A local server (llama.cpp, vLLM, Ollama) often takes no key, but the OpenAI client refuses to send a
            # request without one; a server that does want a key answers 401, reported as an auth failure.
            kwargs["api_key"] = KEYLESS_SERVER_KEY
        if role_cfg.timeout_s is not None:
            kwargs["timeout"] = role_cfg.timeout_s
        if not in_process:
            kwargs.setdefault("num_retries", 0)  # retries are ours (counted in the ledger), not litellm's
            kwargs.setdefault("max_retries", 0)  # nor the provider SDK's
            kwargs.setdefault("drop_params", True)  # e.g. temperature on models that reject it
        return kwargs

    def price(self, model: str) -> ModelPrice | None:
        return price_of(model, self.config.prices)

    def unpriced_models(self) -> list[str]:
        """The configured roles' models whose cost nobody knows (a USD budget cannot be enforced on them)."""
        return sorted({r.model for r in self.config.roles.values() if self.price(r.model) is None})

    def _cost(self, model: str, response: Any, prompt_tokens: int, completion_tokens: int) -> float | None:
        """The call's cost in USD; None when the model has no known price (never silently 0)."""
        if model in self.config.prices:
            return self.config.prices[model].cost(prompt_tokens, completion_tokens)
        if profile_for(model).in_process:
            return 0.0
        hidden = getattr(response, "_hidden_params", None) or {}
        cost = hidden.get("response_cost")
        if cost is None:
            try:
                cost = litellm.completion_cost(completion_response=response)
            except Exception:  # not in litellm's price map (e.g. a self-hosted server) and no configured price
                price = self.price(model)
                return price.cost(prompt_tokens, completion_tokens) if price is not None else None
        return float(cost or 0.0)

    def worst_case_cost(self, model: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> float:
        """An upper bound of one call's cost: the prompt's tokens as counted for the model, the completion at
        max_tokens (or the model's output limit)."""
        price = self.price(model)
        if price is None or (price.input == 0 and price.output == 0):
            return 0.0
        try:
            prompt_tokens = int(litellm.token_counter(model=model, messages=messages))
        except Exception:  # no tokenizer for this model: characters bound the token count from above
            prompt_tokens = sum(len(str(m.get("content") or "")) for m in messages)
        max_tokens = params.get("max_tokens")
        if max_tokens is None:
            try:
                max_tokens = litellm.get_model_info(model=model).get("max_output_tokens")
            except Exception:
                max_tokens = None
        return price.cost(prompt_tokens, int(max_tokens or DEFAULT_WORST_CASE_COMPLETION_TOKENS))

    def _budget_scope(self, unit: str | None) -> tuple[str, float | None]:
        """(scope, limit) of the USD budget a call tagged `unit` is admitted against: the unit budget whose prefix
        its tag starts with, else budget_usd, which covers every call outside the unit budgets."""
        head = (unit or "").split("|", 1)[0]
        scoped = self.config.unit_budgets_usd
        prefix = next((p for p in scoped if head.startswith(p)), None)
        return (prefix, scoped[prefix]) if prefix is not None else ("", self.config.budget_usd)

    def _spent_in_scope(self, scope: str) -> float:
        if scope:
            return self.ledger.cost_of_units(scope)
        return self.ledger.priced_cost() - sum(
            self.ledger.cost_of_units(p) for p in self.config.unit_budgets_usd)

    def _reserve_budget(self, model: str, role: str, messages: list[dict[str, Any]], params: dict[str, Any],
                        unit: str | None = None) -> tuple[str, float]:
        """Refuse the call (BudgetExceededError) once the spend so far plus the worst cases of the calls in flight
        reach the USD budget of the call's scope (`_budget_scope`); else hold this call's worst case until it is
        booked. So the spend passes the budget by at most the last admitted call (its cost is bounded by its
        max_tokens), and a run whose real cost is under the budget is never stopped by worst-case estimates of
        calls it does not make."""
        scope, budget = self._budget_scope(unit)
        if budget is None:
            return scope, 0.0
        estimate = self.worst_case_cost(model, messages, params)
        with self._budget_lock:
            spent = self._spent_in_scope(scope)
            held = self._reserved_usd.get(scope, 0.0)
            if spent + held >= budget:
                which = f"USD budget of the {scope!r} units" if scope else "USD budget"
                raise BudgetExceededError(
                    f"{which} reached: ${spent:.4f} spent and ${held:.4f} held by calls in flight "
                    f"of the ${budget:.4f} budget; a call to {model!r} (role {role!r}) was refused",
                    model=model, role=role)
            self._reserved_usd[scope] = held + estimate
        return scope, estimate

    def _release_budget(self, reserved: tuple[str, float]) -> None:
        scope, amount = reserved
        if amount:
            with self._budget_lock:
                self._reserved_usd[scope] = max(self._reserved_usd.get(scope, 0.0) - amount, 0.0)

    @staticmethod
    def _as_llm_error(exc: Exception, model: str, role: str, role_cfg: RoleConfig, attempts: int) -> LLMError:
        detail = _first_line(str(exc))
        if isinstance(exc, LLMError):
            return exc
        where = f" at {role_cfg.api_base}" if role_cfg.api_base else ""  # the server a user can check
        if isinstance(exc, (litellm.AuthenticationError, litellm.PermissionDeniedError)) or _is_missing_credentials(exc):
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
                f"{model!r}{where} (role {role!r}) still failing after {attempts} attempt(s): {type(exc).__name__}: "
                f"{detail}",
                model=model, role=role,
            )
        return LLMError(f"call to {model!r}{where} (role {role!r}) failed: {type(exc).__name__}: {detail}", model=model,
                        role=role)


def _has_tool_turns(messages: list[dict[str, Any]]) -> bool:
    return any(m.get("role") == "tool" or m.get("tool_calls") for m in messages)


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _tool_calls_of(message: Any) -> list[dict[str, Any]] | None:
    """A reply message's native tool calls as {"id", "name", "arguments" (JSON text)}; None when it has none."""
    calls = getattr(message, "tool_calls", None) or []
    out: list[dict[str, Any]] = []
    for call in calls:
        function = getattr(call, "function", None)
        if function is None and isinstance(call, dict):
            function = call.get("function")
        name = _field(function, "name") if function is not None else None
        if not name:
            continue
        arguments = _field(function, "arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments if arguments is not None else {})
        call_id = _field(call, "id") or f"call_{uuid.uuid4().hex[:12]}"
        out.append({"id": str(call_id), "name": str(name), "arguments": arguments})
    return out or None


def _first_line(text: str, limit: int = 500) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:limit]
