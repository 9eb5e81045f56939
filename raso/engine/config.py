"""The optimization run's configuration: one nested pydantic model (format 2), loadable from TOML, YAML or JSON,
overridable by dotted keys (`--set agent.max_steps=8`, `raso.optimize(..., **{"schedule.epochs": 1})`) and the
CLI flags generated from its fields (raso.cli.options).

Each section is the options model of the code that reads it: `agent` is the execution agent's AgentConfig,
`program` the agent program's (an external one's sandbox limits and each registered program's own options),
`execution` the rollout executor's, `retrieval` the retriever's options, `init`/`update` the initializer's and
proposer's, `limits` the prompt budgets; `models`, `schedule` and `budget` are read by the gateway and the engine.
A new option is declared in its section's model and read where that section is used; nothing else changes.

Precedence (lowest first): field defaults < the model's quick schedule (each field it names that nothing else
sets; see `resolve_defaults`) < config file < overrides. Unknown keys are errors, so a typo is reported, not
silently ignored. Format-1 (flat) files and run directories are converted once by `raso migrate` (raso.cli.migrate).
"""

from __future__ import annotations

import copy
import datetime
import difflib
import json
import os
import tomllib
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from raso.agent.agent import AgentConfig
from raso.agent.programs.config import ProgramConfig
from raso.errors import ConfigError
from raso.execution.options import ExecutionOptions
from raso.llm.config import DEFAULT_LOCAL_MODEL, ModelPrice, StructuredOutputMode, check_api_base
from raso.llm.profiles import ProfileError, check_overrides, profile_for
from raso.optimizer.options import InitOptions, UpdateOptions
from raso.optimizer.render import PromptLimits
from raso.retrieval.retrievers import RetrievalOptions

from .gate import GateOptions

#: The embedded model profile's quick schedule (raso.llm.profiles): dotted keys filled, one by one, where neither
#: the config file nor the overrides set them, so the README's main job finishes offline in about 15 minutes.
#: A harness's task needs (Harness.task_needs) replace the agent's steps and reply tokens.
QUICK_LOCAL_DEFAULTS: dict[str, Any] = dict(profile_for(DEFAULT_LOCAL_MODEL).quick_schedule)

#: The run configuration's format: 2 = nested sections (1, flat names, is converted by `raso migrate`).
FORMAT_VERSION: Literal[2] = 2


def cli(*flags: str, **extra: Any) -> dict[str, Any]:
    """Field metadata for the generated CLI (raso.cli.options): the flag spellings to use instead of
    `--field-name`, and `hidden=True` for fields that are not command-line options. On a section field:
    `flags={leaf: [spellings]}` gives its leaves flags, `flag_all=True` gives every leaf `--leaf-name`,
    `also={leaf: [dotted keys]}` makes a leaf's flag set other keys too."""
    return {"cli": {"flags": list(flags), **extra}} if flags else {"cli": dict(extra)}


class ModelsConfig(BaseModel):
    """Which models run and how they are reached."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    target: str = Field(default=DEFAULT_LOCAL_MODEL, description="target model M (the execution agent), any litellm "
                        "model string", json_schema_extra=cli("--model"))
    optimizer: str | None = Field(default=None, description="model for every RASO role; defaults to --model",
                                  json_schema_extra=cli("--optimizer-model"))
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
    profile: dict[str, Any] | None = Field(default=None, description="overrides of the target model's profile "
                                           "fields (raso.llm.profiles.ModelProfile), e.g. {\"sanitizers\": []}",
                                           json_schema_extra=cli(hidden=True))
    optimizer_profile: dict[str, Any] | None = Field(default=None, description="the same for the optimizer model; "
                                                     "defaults to `profile` when no optimizer model is given",
                                                     json_schema_extra=cli(hidden=True))

    @field_validator("target")
    @classmethod
    def _non_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value.strip()

    @field_validator("profile", "optimizer_profile")
    @classmethod
    def _known_profile_fields(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if value is None else check_overrides(value)

    @field_validator("api_base", "optimizer_api_base")
    @classmethod
    def _server_url(cls, value: str | None) -> str | None:
        return check_api_base(value)

    def resolved_optimizer(self) -> str:
        return self.optimizer or self.target


class RetrievalSection(RetrievalOptions):
    """The retriever (RetrievalOptions: a kind, k and the kind's options) and the index it searches."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    index: Path | None = Field(default=None, description="a saved SectionIndex directory; None = the starter corpus",
                               json_schema_extra=cli("--index"))
    allow_unfiltered_index: bool = Field(default=False, description="use an index that was not built with the "
                                         "harness's benchmark blocklist (corpus skills may leak the benchmark; the "
                                         "report says so)", json_schema_extra=cli("--allow-unfiltered-index"))

    def retriever_options(self) -> RetrievalOptions:
        """The retriever's own options (its kind, k and the kind's options; without the index)."""
        return RetrievalOptions.model_validate(self.model_dump(exclude={"index", "allow_unfiltered_index"}))


MAX_COUNT = 10_000_000  # tasks, rollouts, iterations: more is a typo on any machine this runs on


class ScheduleOptions(BaseModel):
    """How long a run goes and on which tasks."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # upper bounds: a count past them is a typo (a 20-digit epoch count), never a run
    epochs: int = Field(default=2, ge=1, le=10_000, description="passes over the train split")
    minibatch: int = Field(default=40, ge=1, le=MAX_COUNT, description="train tasks per iteration")
    max_iterations: int | None = Field(default=None, ge=1, le=MAX_COUNT,
                                       description="stop after this many update iterations")
    train_limit: int | None = Field(default=None, ge=1, le=MAX_COUNT, description="use only the first N train tasks")
    val_limit: int | None = Field(default=None, ge=1, le=MAX_COUNT, description="use only the first N val tasks")
    test: bool = Field(default=True, description="at the end, score s0 and the best skill on the test split "
                       "(reported only, never used for selection, not counted in the rollout budget)")
    test_limit: int | None = Field(default=None, ge=1, le=MAX_COUNT, description="use only the first N test tasks")
    seed: int = Field(default=0, ge=0, le=2**32 - 1, description="seed of the minibatch order and of every "
                      "embedded-model call (llama.cpp takes 32 bits)")
    workers: int = Field(default=4, ge=1, le=1024, description="rollouts run in parallel (also the model-call limit)")


class BudgetOptions(BaseModel):
    """What a run may spend, and how it retries what failed for reasons outside the skill."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    rollouts: int | None = Field(default=None, ge=1, le=MAX_COUNT, description="train + val rollouts, never exceeded",
                                 json_schema_extra=cli("--budget-rollouts"))
    usd: float | None = Field(default=None, gt=0, description="USD budget, checked before each model call with the "
                              "call's worst case (spend exceeds it by at most one call); every model needs a known "
                              "price (--price)", json_schema_extra=cli("--budget-usd"))
    test_usd: float | None = Field(default=None, gt=0, description="a USD budget of its own for the test "
                                   "evaluation (enforced like `usd`, per call); when set, `usd` covers every other "
                                   "call and the test split is scored even after the optimization spent `usd`; "
                                   "unset, `usd` covers the test evaluation too", json_schema_extra=cli("--budget-test-usd"))
    infra_retries: int = Field(default=2, ge=0, description="times the rollouts of a batch that failed for "
                               "infrastructure reasons (model call failing after the gateway's retries) are re-run "
                               "before the run stops resumably")
    infra_retry_wait_s: float = Field(default=10.0, ge=0.0, description="pause before re-running such rollouts")
    call_attempts: int = Field(default=6, ge=1, description="attempts per model call on transient failures "
                               "(rate limit, timeout, connection, 5xx), with exponential backoff")
    call_retry_max_wait_s: float = Field(default=60.0, ge=0.0, description="longest backoff between two attempts")
    refused_call_attempts: int = Field(default=2, ge=1, description="attempts per model call when nothing listens "
                                       "at the model's address (connection refused: the server is down, not busy); "
                                       "the rollouts it fails are re-run per infra_retries or the run stops resumably")


class OptimizeConfig(BaseModel):
    """Everything that determines an optimization run (docs/design.md §1 and §4): the harness, the run
    directory, and one section per part of the run, each the options model of the code that reads it."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    format_version: Literal[2] = Field(default=FORMAT_VERSION, description="the configuration format",
                                       json_schema_extra=cli(hidden=True))
    harness: str = Field(default="spreadsheet", description="registered harness name or 'package.module:Class'")
    harness_options: dict[str, Any] = Field(
        default_factory=dict, description="keyword arguments for the harness constructor",
        json_schema_extra=cli("--harness-arg", metavar="KEY=VALUE"))
    run_dir: Path | None = Field(default=None, description="the run directory; None = runs/<harness>-<UTC time>")

    models: ModelsConfig = Field(default_factory=ModelsConfig, description="the target and optimizer models",
                                 json_schema_extra=cli(flag_all=True))
    agent: AgentConfig = Field(
        default_factory=AgentConfig, description="the execution agent (raso.agent.AgentConfig)",
        json_schema_extra=cli(flags={"mode": ["--agent-mode", "--mode"], "max_steps": ["--max-steps"],
                                     "max_tokens": ["--max-reply-tokens", "--max-tokens"],
                                     "temperature": ["--temperature"], "context_chars": ["--context-chars"]}))
    program: ProgramConfig = Field(
        default_factory=ProgramConfig, description="the agent program that runs the rollouts: builtin (raso's own "
        "loop, the agent section) or an external one (`raso agents` lists them), the sandbox limits of an external "
        "one and each program's own options (raso.agent.programs.config)",
        json_schema_extra=cli(flags={"name": ["--agent"]}))
    retrieval: RetrievalSection = Field(
        default_factory=RetrievalSection, description="how corpus sections are retrieved: the kind and its options "
        "(raso.retrieval.retrievers.RetrievalOptions), k, the index",
        json_schema_extra=cli(flags={"kind": ["--retrieval"], "k": ["-k", "--k"]}))
    init: InitOptions = Field(
        default_factory=InitOptions, description="how s0 is written (raso.optimizer.options.InitOptions)",
        json_schema_extra=cli(flags={"method": ["--init"], "num_requirements": ["--num-requirements"],
                                     "adapt": ["--adapt"]}, also={"adapt": ["update.adapt"]}))
    update: UpdateOptions = Field(
        default_factory=UpdateOptions, description="how candidates are proposed (raso.optimizer.options.UpdateOptions)",
        json_schema_extra=cli(flags={"method": ["--update"], "chunk_size": ["--chunk-size"]}))
    limits: PromptLimits | None = Field(default=None, description="prompt and reply budgets of the optimizer's "
                                        "prompts (raso.optimizer.render.PromptLimits); None = the optimizer model "
                                        "profile's; the fields given replace the profile's")
    schedule: ScheduleOptions = Field(default_factory=ScheduleOptions, description="epochs, minibatch, limits",
                                      json_schema_extra=cli(flag_all=True))
    budget: BudgetOptions = Field(default_factory=BudgetOptions, description="rollout and USD budgets, retries",
                                  json_schema_extra=cli(flag_all=True))
    gate: GateOptions = Field(default_factory=GateOptions, description="the validation gate: mode (strict, paired, "
                              "significant), rollouts_per_task, level, val_holdout (raso.engine.gate.GateOptions)",
                              json_schema_extra=cli(flags={"mode": ["--gate"]}))
    execution: ExecutionOptions = Field(
        default_factory=ExecutionOptions, description="where rollouts run: an executor (threads, processes, dask, "
        "ray) and its address, workers, driver_host (raso.execution.options.ExecutionOptions)",
        json_schema_extra=cli(flags={"executor": ["--executor", "--execution"],
                                     "address": ["--execution-address"], "workers": ["--execution-workers"]}))

    quick_defaults_applied: list[str] = Field(default_factory=list, description="dotted keys the embedded model's "
                                              "quick schedule filled", json_schema_extra=cli(hidden=True))

    @model_validator(mode="before")
    @classmethod
    def _other_spellings(cls, data: Any) -> Any:
        """Dotted keys and word sections (`init="rfsi"`) as the nested sections."""
        if isinstance(data, Mapping) and any(_other_spelling(key, value) for key, value in data.items()):
            return nested(data)
        return data

    @field_validator("retrieval", mode="before")
    @classmethod
    def _retrieval_options(cls, value: Any) -> Any:
        """A kind alone, or a retriever's RetrievalOptions, is the section with its other fields at their defaults."""
        if isinstance(value, str):
            return {"kind": value}
        if isinstance(value, RetrievalOptions) and not isinstance(value, RetrievalSection):
            return value.model_dump(exclude_unset=True)
        return value

    @field_validator("execution", mode="before")
    @classmethod
    def _execution_executor(cls, value: Any) -> Any:
        return {"executor": value} if isinstance(value, str) else value

    @field_validator("harness")
    @classmethod
    def _non_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value.strip()

    # ------------------------------------------------------------------ derived
    @property
    def init_kind(self) -> Literal["rasi", "rfsi", "file"]:
        method = self.init.method
        return method if method in ("rasi", "rfsi") else "file"  # type: ignore[return-value]

    @property
    def needs_retriever(self) -> bool:
        return self.init_kind == "rasi" or self.update.method == "rasu"

    def resolved_optimizer_model(self) -> str:
        return self.models.resolved_optimizer()

    def get(self, key: str) -> Any:
        """The value at a dotted key (`schedule.epochs`)."""
        value: Any = self
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else getattr(value, part)
        return value

    def updated(self, options: Mapping[str, Any]) -> "OptimizeConfig":
        """A copy with `options` (dotted keys or sections) set, validated."""
        return validate(merge(self.model_dump(exclude_unset=True), nested(options)), "the updated configuration")

    def to_json_dict(self) -> dict[str, Any]:
        return json.loads(self.model_dump_json())


# ---------------------------------------------------------------------------------------------- dotted keys
#: Sections that may be given as a word (not a table): the method / kind / executor / program.
_WORD_SECTIONS = {"init": "init.method", "update": "update.method", "retrieval": "retrieval.kind",
                  "execution": "execution.executor", "program": "program.name"}


def _other_spelling(key: str, value: Any) -> bool:
    return "." in key or (key in _WORD_SECTIONS and isinstance(value, str))


def base_type(annotation: Any) -> Any:
    """`X | None` -> X; other annotations unchanged."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def section_model(annotation: Any) -> type[BaseModel] | None:
    """The options model of a section field (`PromptLimits | None` -> PromptLimits), or None for a leaf."""
    kind = base_type(annotation)
    return kind if isinstance(kind, type) and issubclass(kind, BaseModel) else None


def _is_mapping_type(annotation: Any) -> bool:
    kind = base_type(annotation)
    return kind is dict or typing.get_origin(kind) is dict


def option_keys(model: type[BaseModel] | None = None, prefix: str = "") -> list[str]:
    """Every option's dotted key (`schedule.epochs`, `retrieval.dreamer.kc`)."""
    out: list[str] = []
    for name, info in (model or OptimizeConfig).model_fields.items():
        sub = section_model(info.annotation)
        out.extend(option_keys(sub, f"{prefix}{name}.") if sub is not None else [f"{prefix}{name}"])
    return out


def _suggestion(key: str) -> str:
    """'; did you mean schedule.minibatch?' for a near miss of an option's name, else ''."""
    last = key.rsplit(".", 1)[-1]
    keys = option_keys()
    near = difflib.get_close_matches(last, sorted({k.rsplit(".", 1)[-1] for k in keys}), n=1, cutoff=0.75)
    matches = [k for k in keys if near and k.rsplit(".", 1)[-1] == near[0]]
    return f"; did you mean {' or '.join(matches[:3])}?" if matches else ""


def check_key(key: str) -> str:
    """`key` (a dotted option name) if it names an option of OptimizeConfig, else ConfigError naming the known
    ones. A key below a mapping option (`harness_options.split`) names an entry of that mapping."""
    model: type[BaseModel] = OptimizeConfig
    parts = key.split(".")
    for depth, part in enumerate(parts):
        fields = model.model_fields
        where = ".".join(parts[:depth])
        if part not in fields:
            known = ", ".join(sorted(fields))
            raise ConfigError(f"unknown option {key!r}: {where or 'the configuration'} has {known}"
                              f"{_suggestion(key)}")
        sub = section_model(fields[part].annotation)
        if sub is None:
            if depth < len(parts) - 1 and not _is_mapping_type(fields[part].annotation):
                raise ConfigError(f"unknown option {key!r}: {'.'.join(parts[:depth + 1])} is a single value")
            return key
        model = sub
    return key


def _set(values: dict[str, Any], key: str, value: Any) -> None:
    *parents, last = key.split(".")
    node = values
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[last] = value


def has_key(values: Mapping[str, Any], key: str) -> bool:
    """Whether `values` (nested) set the option at dotted `key`; a section given as something other than a table
    counts as set (validation reports it)."""
    node: Any = values
    for part in key.split("."):
        if not isinstance(node, Mapping):
            return True
        if part not in node:
            return False
        node = node[part]
    return True


def merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """`update` over `base`, table by table (a section given in both keeps the keys only `base` sets)."""
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def nested(options: Mapping[str, Any]) -> dict[str, Any]:
    """Options in any accepted spelling as one nested mapping: dotted keys (`schedule.epochs`), sections as
    tables (`agent={"max_steps": 8}`) or as a word (`init="rfsi"`). A dotted key naming no option is a
    ConfigError; other unknown names are reported by validation."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key in _WORD_SECTIONS and isinstance(value, str):
            targets: tuple[str, ...] = (_WORD_SECTIONS[key],)
        elif "." in key:
            targets = (check_key(key),)
        else:
            targets = (key,)
        for target in targets:
            update: dict[str, Any] = {}
            _set(update, target, value)
            out = merge(out, update)
    return out


def parse_value(raw: str) -> Any:
    """A command-line value: JSON where it parses, else a YAML scalar or flow collection (`8`, `true`, `null`,
    `[a, b]`); a date-like word stays text."""
    try:
        return json.loads(raw)
    except ValueError:
        pass
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw
    return raw if isinstance(value, (datetime.date, datetime.datetime)) else value


def parse_assignments(pairs: Iterable[str], flag: str = "--set", *, check: bool = True) -> dict[str, Any]:
    """KEY=VALUE pairs (the one parser of every `--set`, `--harness-arg`, `--price`) as a dict; with `check`,
    each KEY must be an option's dotted name (or a section given as a word). ConfigError for a malformed pair."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"{flag} {pair!r}: expected KEY=VALUE")
        if check and key not in _WORD_SECTIONS:
            check_key(key)
        out[key] = parse_value(raw)
    return out


def _known_at(loc: Sequence[Any]) -> str:
    model: type[BaseModel] = OptimizeConfig
    for part in loc:
        field = model.model_fields.get(str(part))
        sub = section_model(field.annotation) if field is not None else None
        if sub is None:
            break
        model = sub
    return ", ".join(sorted(model.model_fields))


def _format_errors(exc: ValidationError, source: str) -> str:
    lines = [f"invalid configuration in {source}:"]
    for err in exc.errors():
        loc = err.get("loc", ())
        where = ".".join(str(p) for p in loc) or "(top level)"
        msg = err.get("msg", "invalid")
        if err.get("type") == "extra_forbidden":
            msg = f"unknown option (known options: {_known_at(loc[:-1])}){_suggestion(where)}"
        given = err.get("input")
        shown = "" if err.get("type") in ("extra_forbidden", "missing") else f" (got {given!r})"
        lines.append(f"  - {where}: {msg}{shown}")
    if any(len(err.get("loc", ())) == 1 and (err.get("type") == "extra_forbidden" or err["loc"][0] == "format_version")
           for err in exc.errors()):
        lines.append("  (a configuration or run directory written before format 2, with flat names such as `epochs`, "
                     "is converted once by `raso migrate PATH`)")
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
    """The quick-schedule keys that the harness's task needs (Harness.task_needs) replace; none when its class
    cannot be loaded (the run then reports that error where it builds the harness)."""
    from raso.harness.registry import HarnessLoadError, harness_class

    try:
        needs = harness_class(harness).task_needs
    except (ValueError, TypeError, HarnessLoadError):  # unknown name, not a Harness, import failure
        return {}
    keys = {"agent.max_steps": needs.agent_steps, "agent.max_tokens": needs.reply_tokens}
    return {key: value for key, value in keys.items() if value is not None}


def quick_schedule(model: str, harness: str, profile: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The quick schedule (dotted keys) for a target model on a harness: its profile's (with `profile`
    overrides), the harness's own replacing the entries it names; empty for a model whose profile has none."""
    schedule = dict(_profile(model, profile).quick_schedule)
    return {**schedule, **harness_quick_defaults(harness)} if schedule else {}


def _table(values: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """The section `key` of nested `values` as given, or an empty one."""
    table = values.get(key)
    return table if isinstance(table, Mapping) else {}


def resolve_defaults(values: dict[str, Any]) -> dict[str, Any]:
    """Fill each field of the model profile's quick schedule that `values` (nested) leaves unset, and record
    which."""
    models = _table(values, "models")
    model = str(models.get("target") or ModelsConfig.model_fields["target"].default)
    harness = str(values.get("harness") or OptimizeConfig.model_fields["harness"].default)
    out = dict(values)
    applied = []
    profile = models.get("profile") if isinstance(models.get("profile"), Mapping) else None
    for key, value in quick_schedule(model, harness, profile).items():
        if not has_key(values, key):
            update: dict[str, Any] = {}
            _set(update, key, value)
            out = merge(out, update)
            applied.append(key)
    out["quick_defaults_applied"] = applied
    return out


def _profile(model: str, overrides: Any) -> Any:
    try:
        return profile_for(model, overrides if isinstance(overrides, Mapping) else None)
    except ProfileError:  # reported where the config's models section is validated
        return profile_for(model)


def fill_limits(values: dict[str, Any]) -> dict[str, Any]:
    """`limits` given in part (`--set limits.section_chars=800`) over the optimizer model profile's limits, so
    the other budgets stay what the profile sets and the resolved config holds the limits the run uses."""
    limits = values.get("limits")
    if not isinstance(limits, Mapping):
        return values
    models = _table(values, "models")
    target = str(models.get("target") or ModelsConfig.model_fields["target"].default)
    optimizer = models.get("optimizer")
    overrides = models.get("optimizer_profile") if optimizer else (models.get("optimizer_profile")
                                                                   or models.get("profile"))
    return {**values, "limits": merge(_profile(str(optimizer or target), overrides).prompt_limits, limits)}


def validate(values: Mapping[str, Any], source: str) -> OptimizeConfig:
    """OptimizeConfig from a nested mapping; ConfigError naming each bad option."""
    try:
        return OptimizeConfig.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(_format_errors(exc, source)) from None


def build_config(
    file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    quick_local_defaults: bool = True,
) -> OptimizeConfig:
    """Config from an optional file plus overrides (dotted keys, section tables or words; None values are
    ignored), the quick schedule filling what neither sets. Raises ConfigError."""
    values: dict[str, Any] = nested(_without_records(read_config_file(file))) if file is not None else {}
    if file is not None:  # the file's own values, before flags override some: a bad one is the file's to fix
        validate(fill_limits(values), str(file))
    values = merge(values, nested({k: v for k, v in (overrides or {}).items() if v is not None}))
    values.pop("quick_defaults_applied", None)
    values = fill_limits(values)
    if quick_local_defaults:
        values = resolve_defaults(values)
    source = str(file) if file is not None else "the command-line options"
    config = validate(values, source)
    if config.init_kind == "file":
        init_path = Path(config.init.method).expanduser()
        if not (init_path.is_file() or (init_path / "SKILL.md").is_file()):
            raise ConfigError(
                f"invalid configuration in {source}:\n  - init.method: is neither 'rasi' nor 'rfsi' and no file "
                f"exists at {config.init.method!r} (nor a skill folder holding a SKILL.md)"
            )
        config.init.method = os.path.abspath(init_path)  # absolute, a final link kept as a link (it is refused)
    return config


def load_resolved(path: str | Path) -> OptimizeConfig:
    """Reload `config.resolved.json` from a run directory exactly as it was (no defaults re-applied)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read the run's resolved config {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"the run's resolved config {path} is not a mapping of options")
    return validate(nested(_without_records(data)), str(path))


#: The key under which a run's config.resolved.* records its corpus (RunDir.write_config).
CORPUS_KEY = "corpus"
#: Keys a run's config.resolved.* records beside the options; never options themselves.
RECORD_KEYS = (CORPUS_KEY,)


def _without_records(values: Mapping[str, Any]) -> dict[str, Any]:
    """`values` without the records a resolved config carries, so a config.resolved.* file reads back as options."""
    return {k: v for k, v in values.items() if k not in RECORD_KEYS}


__all__ = [
    "BudgetOptions", "FORMAT_VERSION", "ModelsConfig", "OptimizeConfig",
    "QUICK_LOCAL_DEFAULTS", "RetrievalSection", "ScheduleOptions", "base_type", "build_config", "check_key", "cli",
    "fill_limits",
    "has_key", "load_resolved", "merge", "nested", "option_keys", "parse_assignments", "parse_value", "quick_schedule",
    "read_config_file", "resolve_defaults", "section_model", "validate",
]
