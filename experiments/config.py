"""An experiment's configuration (YAML/TOML/JSON) and the cells it expands into.

A cell is one (method, harness, seed, setting). A method is either an initialization alone, scored on test with
zero rollouts (``none``, ``skillrouter``, ``rfsi``, ``rasi``, ``rasi-raw``), or ``INIT+UPDATE``: an update method
run from the shared s0 of that initialization (``rfsi+textgrad``, ``rasi+rasu``, ...). Short names: ``textgrad``,
``gepa``, ``rfsu``, ``rasu`` start from RFSI (the paper's update table); ``raso`` is ``rasi+rasu``.
A method that retrieves (RASI or RASU in it) may name its own retriever after ``@``: ``raso@two_stage`` is full
RASO with the shipped two-stage retriever, its own labelled row beside the config's retriever (the paper's section
BM25) where a table compares methods.
A setting is a dict of option overrides for one point of a sweep axis (``{k: 3}``, ``{corpus_fraction: 0.1}``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from raso.choices import InitMode, RetrievalKind, UpdateMode, choices_of
from raso.engine.config import OptimizeConfig, has_key, nested, read_config_file
from raso.errors import ConfigError

from .accounting import Convention
from .baselines.textgrad_baseline import TextGradTrajectories

# Method names are raso's init and update modes (raso.choices), plus the baselines.
S0_METHODS = choices_of(InitMode)  # initializations an update can start from (share one decomposition)
INIT_METHODS = ("none", "skillrouter", *S0_METHODS)
UPDATE_METHODS = (*choices_of(UpdateMode), "textgrad", "gepa")
ALIASES = {"textgrad": "rfsi+textgrad", "gepa": "rfsi+gepa", "rfsu": "rfsi+rfsu", "rasu": "rfsi+rasu",
           "raso": "rasi+rasu"}
TableKind = Literal["init", "update", "stage_ablation", "adaptation_ablation", "k_sweep", "corpus_fraction", "cost"]
Backend = Literal["loky", "threading", "sequential", "ray", "dask"]

#: Setting keys the runner itself interprets; every other key is an OptimizeConfig option.
RUNNER_SETTING_KEYS = ("corpus_fraction",)


class Method(BaseModel):
    """A parsed method name: the initialization and the optional update."""

    model_config = ConfigDict(frozen=True)

    name: str
    init: str
    update: str | None = None
    retriever: str | None = None  # `@KIND`: this row's own retrieval.kind (None: the config's)

    @classmethod
    def parse(cls, name: str) -> "Method":
        raw = name.strip().lower()
        base, at, retriever = raw.partition("@")
        if at:
            kinds = choices_of(RetrievalKind)
            method = cls.parse(base)
            if retriever not in kinds:
                raise ValueError(f"unknown retriever in method {name!r}: after @ comes one of {', '.join(kinds)}")
            if not method.init.startswith("rasi") and not (method.update or "").startswith("rasu"):
                raise ValueError(f"method {name!r}: {base} retrieves nothing, so it takes no @retriever")
            return method.model_copy(update={"name": raw, "retriever": retriever})
        full = ALIASES.get(raw, raw)
        init, _, update = full.partition("+")
        if not update:
            if init not in INIT_METHODS:
                raise ValueError(f"unknown method {name!r}: an initialization is one of {', '.join(INIT_METHODS)}; "
                                 f"an update is INIT+UPDATE with UPDATE one of {', '.join(UPDATE_METHODS)} "
                                 f"(short names: {', '.join(ALIASES)})")
            return cls(name=raw, init=init)
        if init not in S0_METHODS or update not in UPDATE_METHODS:
            raise ValueError(f"unknown method {name!r}: an update starts from one of {', '.join(S0_METHODS)} and is "
                             f"one of {', '.join(UPDATE_METHODS)}")
        return cls(name=raw, init=init, update=update)

    @property
    def uses_corpus(self) -> bool:
        """Whether the method retrieves from the corpus (RASI's init, SkillRouter's routing, RASU's update)."""
        return self.init in ("rasi", "rasi-raw", "skillrouter") or self.update in ("rasu", "rasu-raw")

    @property
    def label(self) -> str:
        """The row name in the paper's tables."""
        labels = {"none": "No skill", "skillrouter": "SkillRouter", "rfsi": "RFSI", "rasi": "RASI",
                  "rasi-raw": "RASI (raw sections)", "rfsu": "RFSU", "rasu": "RASU", "rasu-raw": "RASU (raw sections)",
                  "textgrad": "TextGrad", "gepa": "GEPA"}
        retriever = f" [{self.retriever.replace('_', '-')} retriever]" if self.retriever else ""
        base = self.name.partition("@")[0]
        if self.update is None:
            return labels[self.init] + retriever
        if base == "raso":
            return "RASO (RASI + RASU)" + retriever
        if base in ALIASES:
            return labels[self.update] + retriever
        return f"{labels[self.init]} + {labels[self.update]}{retriever}"


class HarnessSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    options: dict[str, Any] = Field(default_factory=dict)

    @property
    def label(self) -> str:
        """How tables name it: the registered name (or class name), with its options."""
        short = self.name.rsplit(":", 1)[-1]
        options = ", ".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        return f"{short}({options})" if options else short

    @property
    def key(self) -> str:
        if not self.options:
            return self.name
        digest = hashlib.sha1(json.dumps(self.options, sort_keys=True).encode()).hexdigest()[:8]
        return f"{self.name}-{digest}"


class ExperimentConfig(BaseModel):
    """One table's experiment. Unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="results go to <results_dir>/<name>/")
    table: TableKind
    description: str = ""
    harnesses: list[HarnessSpec]
    model: str = Field(description="target model M, any litellm model string")
    optimizer_model: str | None = Field(default=None, description="model of every optimizer role; default: model")
    api_base: str | None = None
    optimizer_api_base: str | None = None
    methods: list[str]
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2])
    settings: list[dict[str, Any]] = Field(default_factory=lambda: [dict[str, Any]()], description="sweep axis points")
    optimize: dict[str, Any] = Field(default_factory=dict, description="OptimizeConfig options of every cell")
    rollout_convention: Convention = "candidates"
    budget_rollouts: int | None = Field(default=None, ge=1, description="per update cell, under the convention; "
                                        "None = the whole schedule's count")
    test_limit: int | None = Field(default=None, ge=1, description="score on the first N test tasks")
    gepa_minibatch: int = Field(default=3, ge=1, description="GEPA's reflection minibatch (its own default)")
    reference: str | None = Field(default=None, description="the method every row's paired difference is taken "
                                  "against; default: `none` in an init table, `rfsi` in an update table (ablations "
                                  "and sweeps name their full method)")
    reference_setting: int | None = Field(default=None, ge=0, description="sweeps: the index in `settings` of the "
                                          "point every row is paired with (the paper's default); None: its own")
    textgrad_trajectories: TextGradTrajectories = Field(
        default="equal", description="what TextGrad's loss reads of each rollout: 'equal' — the clipped rendering "
        "every method's reflection gets (limits.trajectory_chars_each); 'full' — every step unclipped (the paper's "
        "TextGrad setting)")
    jobs: int = Field(default=1, ge=1, description="cells run in parallel")
    backend: Backend = "loky"
    cluster: str | None = Field(default=None, description="Ray or Dask scheduler address for backend ray/dask")
    results_dir: Path = Path("experiments/results")
    mlflow_uri: str | None = Field(default=None, description="log cells to this MLflow tracking URI")
    allow_starter_corpus: bool = Field(
        default=False, description="let a harness with split=paper retrieve from the starter corpus (a few hundred "
        "skills shipped for demos, never the paper's corpus); refused otherwise, as split=paper refuses demo data. "
        "Every result and table names the corpus either way")

    @field_validator("harnesses", mode="before")
    @classmethod
    def _harness_names(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("methods")
    @classmethod
    def _known_methods(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("name at least one method")
        for name in value:
            Method.parse(name)
        return value

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, value: list[int]) -> list[int]:
        if not value or len(set(value)) != len(value):
            raise ValueError("give one or more distinct seeds (3 or more for a standard error)")
        return value

    @model_validator(mode="after")
    def _options_are_known(self) -> "ExperimentConfig":
        known = set(OptimizeConfig.model_fields) | set(RUNNER_SETTING_KEYS)
        for where, mapping in [("optimize", self.optimize), *(("settings", s) for s in self.settings)]:
            try:
                names = nested({k: v for k, v in mapping.items() if k not in RUNNER_SETTING_KEYS})
            except ConfigError as exc:
                raise ValueError(f"{where}: {exc}") from None
            unknown = sorted(set(names) - known)
            if unknown:
                raise ValueError(f"{where}: unknown option(s) {', '.join(unknown)}")
        optimize = nested(self.optimize)
        for forbidden in ("harness", "models.target", "models.optimizer", "init.method", "update.method",
                          "schedule.seed", "run_dir"):
            if has_key(optimize, forbidden):
                raise ValueError(f"optimize: {forbidden!r} is set per cell by the runner; use the experiment's own keys")
        return self

    @model_validator(mode="after")
    def _harness_options_for_every_harness(self) -> "ExperimentConfig":
        """`optimize.harness_options` (e.g. `--set harness_options.split=dev`) is given to every harness: it
        becomes part of each harness spec, so it shows in the cell's key and label."""
        optimize = nested(self.optimize)
        shared = optimize.pop("harness_options", None)
        if shared:
            self.harnesses = [h.model_copy(update={"options": {**h.options, **shared}}) for h in self.harnesses]
        self.optimize = optimize  # under the nested names, however the file spelled them
        return self

    @model_validator(mode="after")
    def _reference_is_run(self) -> "ExperimentConfig":
        if self.reference is not None:
            name = Method.parse(self.reference).name
            if name not in {m.name for m in self.parsed_methods()}:
                raise ValueError(f"reference: {self.reference!r} is not one of the methods ({', '.join(self.methods)})")
            self.reference = name
        if self.reference_setting is not None and self.reference_setting >= len(self.settings):
            raise ValueError(f"reference_setting: {self.reference_setting} is not an index of the {len(self.settings)} "
                             "setting(s)")
        return self

    def parsed_methods(self) -> list[Method]:
        return [Method.parse(m) for m in self.methods]

    @property
    def results_root(self) -> Path:
        return Path(self.results_dir) / self.name


class Cell(BaseModel):
    """One unit of an experiment; `key` names its directory."""

    model_config = ConfigDict(frozen=True)

    method: Method
    harness: HarnessSpec
    seed: int
    setting: dict[str, Any] = Field(default_factory=dict)
    setting_index: int = 0

    @property
    def setting_label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(self.setting.items())) or "default"

    @property
    def key(self) -> str:
        method = self.method.name.replace('+', '_').replace('@', '-')
        return f"{self.harness.key}/{method}/s{self.setting_index}_seed{self.seed}"


#: The experiment options that do not change what a finished cell computed, each with why. Every other option of
#: ExperimentConfig is a result option (`result_options`): cells made under another value of one are never reused
#: in its table (a new option is one until it is declared here).
NOT_AFFECTING_RESULTS: dict[str, str] = {
    "name": "names the results folder",
    "description": "text shown with the tables",
    "harnesses": "in each cell's own key (its folder names the harness and its options)",
    "methods": "in each cell's own key (its folder); methods may be added to a table",
    "seeds": "in each cell's own key (its folder); seeds may be added to a table",
    "reference": "which row the tables pair every row with: read when the tables are written",
    "reference_setting": "which sweep point the tables pair with: read when the tables are written",
    "jobs": "how many cells run at once",
    "backend": "where the cells run",
    "cluster": "where the cells run",
    "results_dir": "where the results folder is",
    "mlflow_uri": "where finished cells are also logged",
    "allow_starter_corpus": "permits a run; the corpus a cell retrieved from is recorded in its result and tables",
}


def result_options() -> tuple[str, ...]:
    """The ExperimentConfig options a finished cell is reused under: all but `NOT_AFFECTING_RESULTS`."""
    return tuple(name for name in ExperimentConfig.model_fields if name not in NOT_AFFECTING_RESULTS)


def expand_cells(config: ExperimentConfig) -> list[Cell]:
    return [Cell(method=m, harness=h, seed=seed, setting=setting, setting_index=i)
            for h in config.harnesses for i, setting in enumerate(config.settings)
            for m in config.parsed_methods() for seed in config.seeds]


def harness_option_names(name: str) -> set[str] | None:
    """The constructor options a harness takes (None when it takes any keyword: nothing to check against)."""
    import inspect

    from raso.harness.registry import HarnessLoadError, HarnessNotFoundError, harness_class

    try:
        cls = harness_class(name)
    except (HarnessNotFoundError, HarnessLoadError) as exc:
        raise ConfigError(f"harness {name!r}: {exc}") from None
    params = inspect.signature(cls.__init__).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.name != "self" and p.kind is not inspect.Parameter.VAR_POSITIONAL}


def check_harness_options(harnesses: list[HarnessSpec]) -> None:
    """Every option given to a harness is one its constructor takes: a misspelt key is an error, never dropped."""
    for spec in harnesses:
        known = harness_option_names(spec.name)
        unknown = sorted(set(spec.options) - known) if known is not None else []
        if unknown:
            raise ConfigError(f"harness {spec.name!r} has no option(s) {', '.join(unknown)}; it takes "
                              f"{', '.join(sorted(known or ())) or 'none'}")


def _matches(spec: HarnessSpec, name: str) -> bool:
    return name in (spec.name, spec.name.rsplit(":", 1)[-1], spec.key)


def apply_harness_args(config: ExperimentConfig, assignments: list[str]) -> ExperimentConfig:
    """`--harness-arg NAME.KEY=VALUE` (repeatable): option KEY of harness NAME (VALUE parsed as JSON/YAML, as for
    `--set`). A NAME the experiment does not run, or a KEY its constructor does not take, is a ConfigError."""
    from raso.engine.config import parse_assignments

    harnesses = list(config.harnesses)
    for key, value in parse_assignments(assignments, "--harness-arg", check=False).items():
        name, dot, option = key.rpartition(".")
        if not dot or not name or not option:
            raise ConfigError(f"--harness-arg {key}=...: expected HARNESS.OPTION=VALUE, e.g. webshop.data_dir=PATH")
        where = [i for i, spec in enumerate(harnesses) if _matches(spec, name)]
        if not where:
            raise ConfigError(f"--harness-arg {key}: this experiment runs no harness {name!r} (it runs "
                              f"{', '.join(h.name for h in harnesses)})")
        for i in where:
            harnesses[i] = harnesses[i].model_copy(update={"options": {**harnesses[i].options, option: value}})
    check_harness_options(harnesses)
    return config.model_copy(update={"harnesses": harnesses})


def load_experiment(source: str | Path | dict[str, Any], overrides: dict[str, Any] | None = None) -> ExperimentConfig:
    """An experiment from a config file (or a mapping) plus overrides (e.g. a test's scripted model and toy
    harness; `harness_args`: a list of `--harness-arg` assignments). Raises ConfigError naming the source and
    each bad key."""
    if isinstance(source, dict):
        data, where = dict(source), "the given mapping"
    else:
        data, where = read_config_file(source), str(source)
    values = dict(overrides or {})
    harness_args = values.pop("harness_args", None) or []
    data.update({k: v for k, v in values.items() if v is not None})
    try:
        config = ExperimentConfig.model_validate(data)
        return apply_harness_args(config, harness_args) if harness_args else config
    except ValidationError as exc:
        lines = [f"invalid experiment configuration in {where}:"]
        for err in exc.errors():
            loc = ".".join(str(p) for p in err.get("loc", ())) or "(top level)"
            lines.append(f"  - {loc}: {err.get('msg', 'invalid')}")
        raise ConfigError("\n".join(lines)) from None


__all__ = ["ALIASES", "Cell", "ExperimentConfig", "HarnessSpec", "INIT_METHODS", "Method", "NOT_AFFECTING_RESULTS",
           "S0_METHODS", "UPDATE_METHODS", "apply_harness_args", "check_harness_options", "expand_cells",
           "harness_option_names", "load_experiment", "result_options"]
