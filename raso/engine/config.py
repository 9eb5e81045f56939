"""The optimization run's configuration: one pydantic model, loadable from TOML or YAML, overridable by CLI flags.

Precedence (lowest first): field defaults < the "quick local" defaults (see `resolve_defaults`) < config file
< command-line flags. Unknown keys are errors, so a typo in a config file is reported, not silently ignored.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from raso.agent.executors import BACKENDS, ExecutionOptions
from raso.choices import AgentMode, RetrievalKind, UpdateKind, choices_of
from raso.llm.config import DEFAULT_LOCAL_MODEL, ModelPrice, StructuredOutputMode
from raso.llm.profiles import profile_for
from raso.retrieval.retrievers import RetrievalOptions

from .gate import GateOptions

#: This flat config's field for each dotted key of a model profile's quick schedule (raso.llm.profiles).
_QUICK_FIELDS: dict[str, str] = {
    "schedule.epochs": "epochs", "schedule.minibatch": "minibatch", "schedule.val_limit": "val_limit",
    "schedule.max_iterations": "max_iterations", "schedule.test_limit": "test_limit",
    "init.num_requirements": "num_requirements", "retrieval.k": "k", "budget.rollouts": "budget_rollouts",
    "agent.max_steps": "agent_max_steps", "agent.max_tokens": "agent_max_tokens",
}


def quick_schedule(model: str) -> dict[str, Any]:
    """`model`'s profile's quick schedule under this config's field names (empty for a hosted model)."""
    return {_QUICK_FIELDS[key]: value for key, value in profile_for(model).quick_schedule.items()}


#: Applied when the target model is the embedded one and the user set none of these fields: the embedded model
#: profile's quick schedule (raso.llm.profiles.EMBEDDED_QUICK_SCHEDULE). A harness's task needs
#: (Harness.task_needs) replace the agent's steps and reply tokens.
QUICK_LOCAL_DEFAULTS: dict[str, Any] = quick_schedule(DEFAULT_LOCAL_MODEL)


def cli(*flags: str, **extra: Any) -> dict[str, Any]:
    """Field metadata for the generated CLI (raso.cli.options): the flag spellings to use instead of
    `--field-name`, and `hidden=True` for fields that are not command-line options."""
    return {"cli": {"flags": list(flags), **extra}}


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the source, each bad field and why."""


class OptimizeConfig(BaseModel):
    """Everything that determines an optimization run (docs/design.md §1 and §4)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # what is optimized, for whom
    harness: str = Field(default="spreadsheet", description="registered harness name or 'package.module:Class'")
    harness_options: dict[str, Any] = Field(
        default_factory=dict, description="keyword arguments for the harness constructor",
        json_schema_extra=cli("--harness-arg", metavar="KEY=VALUE"))
    model: str = Field(default=DEFAULT_LOCAL_MODEL, description="target model M (the execution agent), any litellm "
                       "model string")
    optimizer_model: str | None = Field(default=None, description="model for every RASO role; defaults to --model")
    api_base: str | None = Field(default=None, description="OpenAI-compatible server URL for the target model "
                                 "(vLLM, llama.cpp server, ...)")
    optimizer_api_base: str | None = Field(default=None, description="server URL for the optimizer model; defaults "
                                           "to --api-base when no optimizer model is given")
    structured_output: StructuredOutputMode = Field(
        default="auto", description="how the target model is asked for JSON: json_schema (vLLM, llama.cpp server, "
        "Ollama, OpenAI), json_object, instructions (prompt only), auto (json_schema where litellm knows support)")
    optimizer_structured_output: StructuredOutputMode | None = Field(
        default=None, description="the same for the optimizer model; defaults to --structured-output when no "
        "optimizer model is given, else auto")
    prices: dict[str, ModelPrice] = Field(
        default_factory=dict, description="USD per million tokens for models litellm does not price (a vLLM "
        "server, a new model): MODEL=INPUT,OUTPUT", json_schema_extra=cli("--price", metavar="MODEL=IN,OUT"))
    agent_mode: AgentMode = Field(default="full", description="how the agent incorporates the skill",
                                 json_schema_extra=cli("--agent-mode", "--mode"))
    agent_max_steps: int | None = Field(default=None, ge=1, description="environment actions per rollout; "
                                        "None = the harness's", json_schema_extra=cli("--max-steps"))
    agent_max_tokens: int | None = Field(default=None, ge=16, description="reply tokens per agent turn; "
                                         "None = the harness's", json_schema_extra=cli("--max-reply-tokens", "--max-tokens"))

    # algorithm
    init: str = Field(default="rasi", description="'rasi', 'rfsi' or the path of a SKILL.md to start from")
    init_skill_max_chars: int = Field(default=40_000, ge=200, description="longest SKILL.md accepted as the initial "
                                      "skill (it is sent whole in every agent prompt)")
    update: UpdateKind = Field(default="rasu", description="skill update from rollouts (rfsu = without retrieval)")
    adapt: bool = Field(default=True, description="cross-harness adaptation of retrieved sections into lessons; "
                        "off pastes the raw sections (ablation)", json_schema_extra=cli("--adapt", "--no-adapt"))
    retrieval: RetrievalOptions = Field(
        default_factory=RetrievalOptions, description="how corpus sections are retrieved: a kind, or in a config "
        "file a table with the kind's options (raso.retrieval.retrievers.RetrievalOptions)",
        json_schema_extra=cli("--retrieval", choices=list(choices_of(RetrievalKind))))
    index: Path | None = Field(default=None, description="a saved SectionIndex directory; None = the starter corpus")
    allow_unfiltered_index: bool = Field(default=False, description="use an index that was not built with the "
                                         "harness's benchmark blocklist (corpus skills may leak the benchmark; the "
                                         "report says so)")
    k: int = Field(default=5, ge=1, description="sections retrieved per query", json_schema_extra=cli("-k", "--k"))
    num_requirements: int = Field(default=5, ge=1, description="M: requirement-query pairs at initialization")
    chunk_size: int = Field(default=8, ge=1, description="trajectories per gradient call")

    # schedule and budgets
    epochs: int = Field(default=2, ge=1, description="passes over the train split")
    minibatch: int = Field(default=40, ge=1, description="train tasks per iteration")
    max_iterations: int | None = Field(default=None, ge=1, description="stop after this many update iterations")
    train_limit: int | None = Field(default=None, ge=1, description="use only the first N train tasks")
    val_limit: int | None = Field(default=None, ge=1, description="use only the first N val tasks")
    test: bool = Field(default=True, description="at the end, score s0 and the best skill on the test split "
                       "(reported only, never used for selection, not counted in the rollout budget)")
    test_limit: int | None = Field(default=None, ge=1, description="use only the first N test tasks")
    budget_rollouts: int | None = Field(default=None, ge=1, description="train + val rollouts, never exceeded")
    budget_usd: float | None = Field(default=None, gt=0, description="USD budget, checked before each model call "
                                     "with the call's worst case (spend exceeds it by at most one call); every "
                                     "model needs a known price (--price)")
    infra_retries: int = Field(default=2, ge=0, description="times the rollouts of a batch that failed for "
                               "infrastructure reasons (model call failing after the gateway's retries) are re-run "
                               "before the run stops resumably")
    infra_retry_wait_s: float = Field(default=10.0, ge=0.0, description="pause before re-running such rollouts")
    call_attempts: int = Field(default=6, ge=1, description="attempts per model call on transient failures "
                               "(rate limit, timeout, connection, 5xx), with exponential backoff")
    call_retry_max_wait_s: float = Field(default=60.0, ge=0.0, description="longest backoff between two attempts")
    seed: int = Field(default=0, description="seed of the minibatch order and of every embedded-model call")
    workers: int = Field(default=4, ge=1, description="rollouts run in parallel (also the model-call limit)")
    gate: GateOptions = Field(default_factory=GateOptions, description="the validation gate: mode (strict, paired, "
                              "significant), rollouts_per_task, level, val_holdout (raso.engine.gate.GateOptions)")

    execution: ExecutionOptions = Field(
        default_factory=ExecutionOptions, description="where rollouts run: a backend (threads, processes, dask, "
        "ray), or in a config file a table with backend, address, workers, driver_host (raso.agent.executors)",
        json_schema_extra=cli("--execution", choices=list(BACKENDS)))

    # where
    run_dir: Path | None = Field(default=None, description="the run directory; None = runs/<harness>-<UTC time>")
    quick_defaults_applied: list[str] = Field(default_factory=list, description="fields filled by "
                                              "QUICK_LOCAL_DEFAULTS", json_schema_extra=cli(hidden=True))

    @field_validator("init")
    @classmethod
    def _init_kind_or_file(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("must be 'rasi', 'rfsi' or the path of a SKILL.md")
        if value.lower() in ("rasi", "rfsi"):
            return value.lower()
        return value  # a SKILL.md path; its existence is checked when a run starts (build_config)

    @field_validator("retrieval", mode="before")
    @classmethod
    def _retrieval_kind(cls, value: Any) -> Any:
        return {"kind": value} if isinstance(value, str) else value

    @field_validator("execution", mode="before")
    @classmethod
    def _execution_backend(cls, value: Any) -> Any:
        return {"backend": value} if isinstance(value, str) else value

    @field_validator("harness", "model")
    @classmethod
    def _non_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value.strip()

    # ------------------------------------------------------------------ derived
    @property
    def init_kind(self) -> Literal["rasi", "rfsi", "file"]:
        return self.init if self.init in ("rasi", "rfsi") else "file"  # type: ignore[return-value]

    @property
    def needs_retriever(self) -> bool:
        return self.init_kind == "rasi" or self.update == "rasu"

    def resolved_optimizer_model(self) -> str:
        return self.optimizer_model or self.model

    def to_json_dict(self) -> dict[str, Any]:
        return json.loads(self.model_dump_json())


def _format_errors(exc: ValidationError, source: str) -> str:
    lines = [f"invalid configuration in {source}:"]
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ())) or "(top level)"
        msg = err.get("msg", "invalid")
        if err.get("type") == "extra_forbidden":
            known = ", ".join(sorted(OptimizeConfig.model_fields))
            msg = f"unknown option (known options: {known})"
        given = err.get("input")
        shown = "" if err.get("type") in ("extra_forbidden", "missing") else f" (got {given!r})"
        lines.append(f"  - {where}: {msg}{shown}")
    return "\n".join(lines)


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The raw mapping in a .toml, .yaml/.yml or .json config file; ConfigError if unreadable."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text (byte {exc.start} cannot be decoded): give a "
                          ".toml, .yaml or .json file") from None
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            data = tomllib.loads(text)
        elif suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:
            raise ConfigError(f"config file {path}: unknown format {suffix!r} (use .toml, .yaml, .yml or .json)")
    except (tomllib.TOMLDecodeError, yaml.YAMLError, json.JSONDecodeError) as exc:
        raise ConfigError(f"config file {path} is not valid {suffix.lstrip('.').upper()}: {exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: expected a table/mapping of options, got {type(data).__name__}")
    # allow the options under a [optimize] table, so one file can hold other tools' settings too
    if set(data) == {"optimize"} and isinstance(data["optimize"], dict):
        data = data["optimize"]
    return data


def harness_quick_defaults(harness: str) -> dict[str, Any]:
    """The quick-default fields that the harness's task needs (Harness.task_needs) replace; none when its class
    cannot be loaded (the run then reports that error where it builds the harness)."""
    from raso.harness.registry import HarnessLoadError, harness_class

    try:
        needs = harness_class(harness).task_needs
    except (ValueError, TypeError, HarnessLoadError):  # unknown name, not a Harness, import failure
        return {}
    fields = {"agent_max_steps": needs.agent_steps, "agent_max_tokens": needs.reply_tokens}
    return {key: value for key, value in fields.items() if value is not None}


def resolve_defaults(values: dict[str, Any]) -> dict[str, Any]:
    """Fill the target model profile's quick schedule where the user set none of the schedule fields."""
    profile_quick = quick_schedule(str(values.get("model", DEFAULT_LOCAL_MODEL)))
    if not profile_quick:
        return values
    if any(key in values for key in ("epochs", "minibatch", "budget_rollouts", "budget_usd", "max_iterations")):
        return values
    harness = str(values.get("harness", OptimizeConfig.model_fields["harness"].default))
    quick = {**profile_quick, **harness_quick_defaults(harness)}
    out = dict(values)
    applied = [key for key in quick if key not in values]
    for key in applied:
        out[key] = quick[key]
    out["quick_defaults_applied"] = applied
    return out


def build_config(
    file: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    *,
    quick_local_defaults: bool = True,
) -> OptimizeConfig:
    """Config from an optional file plus overrides (CLI flags; None values are ignored). Raises ConfigError."""
    values: dict[str, Any] = read_config_file(file) if file is not None else {}
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    if quick_local_defaults:
        values = resolve_defaults(values)
    source = str(file) if file is not None else "the command-line options"
    try:
        config = OptimizeConfig.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(_format_errors(exc, source)) from None
    if config.init_kind == "file":
        init_path = Path(config.init).expanduser()
        if not init_path.is_file():
            raise ConfigError(
                f"invalid configuration in {source}:\n  - init: is neither 'rasi' nor 'rfsi' and no file exists "
                f"at {config.init!r}"
            )
        config.init = str(init_path.resolve())
    return config


def load_resolved(path: str | Path) -> OptimizeConfig:
    """Reload `config.resolved.json` from a run directory exactly as it was (no defaults re-applied)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read the run's resolved config {path}: {exc}") from None
    try:
        return OptimizeConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_errors(exc, str(path))) from None
