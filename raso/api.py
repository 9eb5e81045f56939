"""The front door and the only wiring: a configuration becomes the collaborators of a run (gateway, harness,
retriever over the configured index, execution agent, initializer, proposer, run directory) here and nowhere
else. The engine receives them; the CLI and the experiment runner are thin callers of these functions.

    import raso
    result = raso.optimize("webshop", models={"target": "openai/gpt-4o-mini"}, schedule={"epochs": 2},
                           run_dir="runs/x")
    print(result.best_val, result.best_test, result.best_skill_path)

A harness is given by name (registered entry point or 'package.module:Class') or as an instance; options as
an OptimizeConfig, a config file (TOML/YAML/JSON), keyword overrides, or a mix (overrides win). Overrides use
the dotted keys of the nested config (`**{"agent.max_steps": 8}`) or whole sections (`agent={"max_steps": 8}`;
`init="rfsi"` names a section's method). Every error
that can be known before work starts (unknown harness, missing extra, bad option, unusable model, a run
directory that already holds a run) is raised before anything is written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from typing_extensions import Unpack

from raso.engine.budget import TEST_UNITS
from raso.engine.config import OptimizeConfig, build_config, fill_limits, has_key, load_resolved, merge, nested, validate
from raso.errors import ConfigError, RunError
from raso.harness import Harness, Rollout, Task
from raso.harness.registry import HarnessLoadError, HarnessNotFoundError, available_harnesses, get_harness, harness_class
from raso.optimizer.options import InitOptions, UpdateOptions
from raso.skill import Skill

if TYPE_CHECKING:
    from corpus_tools.index import SectionIndex
    from raso.agent.evaluate import EvalResult
    from raso.engine.engine import OptimizeResult
    from raso.engine.events import EventSink
    from raso.engine.loop import LoopStrategies
    from raso.engine.plan import CostPlan
    from raso.engine.protocols import AgentFactory, RunComponents
    from raso.engine.run_dir import RunDir
    from raso.harness.base import RolloutRunner
    from raso.llm import GatewayConfig, LLMGateway, RetryConfig, UsageLedger
    from raso.optimizer.context import RunContext
    from raso.optimizer.steps import Initializer, Proposer
    from raso.optimizer.types import InitResult, Requirement
    from raso.retrieval.retrievers import RetrievalOptions, SectionSearcher

# ---------------------------------------------------------------------------------------------- configuration
def harness_target(harness: Harness) -> str:
    """How a run directory names a harness instance: its registered name when that name loads this very class,
    else 'module:Class' (what `resume` needs to build it again)."""
    cls = type(harness)
    target = f"{cls.__module__}:{cls.__qualname__}"
    registered = available_harnesses().get(getattr(harness, "name", ""))
    option = getattr(cls, "name_argument", None)  # `tasks:PATH`: the argument is part of the name
    if registered and option and hasattr(harness, option) and harness_class(harness.name) is cls:
        return f"{harness.name}:{getattr(harness, option)}"
    return harness.name if registered == target else target


def resolve_config(
    harness: "str | Harness | None" = None,
    config: OptimizeConfig | None = None,
    *,
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    quick_defaults: bool = True,
) -> OptimizeConfig:
    """One OptimizeConfig from a harness, a config object or file, and keyword overrides (overrides win; with
    `quick_defaults`, the embedded model's quick schedule fills what none of them set). Raises ConfigError
    naming each bad option."""
    values: dict[str, Any] = nested(overrides or {})
    if isinstance(harness, Harness):
        values.setdefault("harness", harness_target(harness))
    elif harness is not None:
        values.setdefault("harness", harness)
    if config is not None:
        if config_file is not None:
            raise ConfigError("give either a config object or a config file, not both")
        return validate(fill_limits(merge(config.model_dump(exclude_unset=True), values)), "the given configuration")
    return build_config(config_file, values, quick_local_defaults=quick_defaults)


def load_harness(spec: "str | Harness", options: Mapping[str, Any] | None = None, for_runs: bool = True) -> Harness:
    """A harness instance from a name or 'module:Class' (with constructor options), or the instance itself.
    Raises ConfigError with the reason (unknown name, missing optional extra or data, bad options; with
    `for_runs`, what this machine lacks to run its tasks)."""
    if isinstance(spec, Harness):
        harness = spec
    else:
        try:
            harness = get_harness(spec, **dict(options or {}))
        except (HarnessNotFoundError, HarnessLoadError) as exc:
            raise ConfigError(f"cannot load harness {spec!r}: {exc}") from None
        except (TypeError, ValueError, OSError, ImportError) as exc:
            raise ConfigError(f"cannot load harness {spec!r} with options {dict(options or {})}: "
                              f"{type(exc).__name__}: {exc}") from None
    if for_runs:  # an instance given by a script is checked too: it was built without the sandbox
        try:
            harness.check_runnable()
        except OSError as exc:
            raise ConfigError(f"cannot run harness {spec!r} here: {exc}") from None
    return harness


# ------------------------------------------------------------------------------------------------ collaborators
def gateway_config(config: OptimizeConfig, **options: Any) -> "GatewayConfig":
    """The gateway's roles for a config: `agent` = the target model, `optimizer` = the optimizer model (default:
    the target). The optimizer reuses the target's api_base only when it is the target model."""
    from raso.llm import GatewayConfig

    models = config.models
    return GatewayConfig.for_models(
        target=models.target, optimizer=models.optimizer, api_base=models.api_base,
        optimizer_api_base=models.optimizer_api_base or (models.api_base if models.optimizer is None else None),
        profile=models.profile, optimizer_profile=models.optimizer_profile, **options,
    )


def make_gateway(
    config: OptimizeConfig,
    *,
    cache_dir: str | Path | None = None,
    ledger: "UsageLedger | None" = None,
    max_concurrency: int | None = None,
    retry: "RetryConfig | None" = None,
) -> "LLMGateway":
    """The gateway every model call of a run, an init, an eval or a CLI check goes through."""
    from raso.llm import LLMGateway, RetryConfig

    wait = config.budget.call_retry_max_wait_s
    options: dict[str, Any] = {
        "cache_dir": cache_dir, "max_concurrency": max_concurrency or config.schedule.workers,
        "retry": retry or RetryConfig(max_attempts=config.budget.call_attempts, initial_wait_s=min(1.0, wait),
                                      max_wait_s=wait, jitter_s=min(1.0, wait),
                                      refused_attempts=config.budget.refused_call_attempts),
        "prices": config.models.prices, "budget_usd": config.budget.usd, "seed": config.schedule.seed,
        "unit_budgets_usd": {TEST_UNITS: config.budget.test_usd} if config.budget.test_usd is not None else {},
        "structured_output": config.models.structured_output,
        "optimizer_structured_output": config.models.optimizer_structured_output,
    }
    return LLMGateway(gateway_config(config, **options), ledger=ledger)


def check_budget_prices(config: OptimizeConfig, gateway: "LLMGateway") -> None:
    """A USD budget needs every model's price: refuse it (before any work) for a model nobody prices."""
    if config.budget.usd is None and config.budget.test_usd is None:
        return
    unpriced = gateway.unpriced_models()
    if unpriced:
        names = ", ".join(repr(m) for m in unpriced)
        flag = "--budget-usd" if config.budget.usd is not None else "--budget-test-usd"
        raise ConfigError(f"{flag} cannot be enforced: no price is known for {names} (litellm does not price "
                          f"it); give one with --price {unpriced[0]}=INPUT,OUTPUT (USD per million tokens) or a "
                          "[prices] table in the config file")


def check_index_blocklist(config: OptimizeConfig, harness: Harness) -> None:
    """Refuse a path that is no section index, and a corpus index that was not built with the blocklist of the
    benchmark being run (its skills may name or solve the benchmark), unless `allow_unfiltered_index`. The
    starter corpus is chosen from repositories that name no benchmark (corpus_tools.starter.select_starter), so
    it passes."""
    from corpus_tools.blocklist import benchmark_for, index_blocklists

    benchmark, index = benchmark_for(harness.name), config.retrieval.index
    if index is None:
        return
    try:  # read for every harness: a path that is no index is refused before a run directory exists
        blocklists = index_blocklists(index)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the index {index}: {exc} (build one with `raso corpus build`)") from None
    if benchmark is None or config.retrieval.allow_unfiltered_index:
        return
    if benchmark not in blocklists:
        built = ", ".join(blocklists) if blocklists else "no blocklist"
        raise ConfigError(f"the index {index} was built with {built}, not the {benchmark!r} blocklist: its "
                          f"corpus may leak {benchmark!r} solutions into the skill. Rebuild it with `raso corpus "
                          f"build ... --blocklist {benchmark}`, or pass --allow-unfiltered-index to go on (the "
                          "report will say so)")


def load_index(config: OptimizeConfig) -> "SectionIndex":
    """The configured section index, or the packaged starter corpus's index."""
    if config.retrieval.index is not None:
        from corpus_tools.index import SectionIndex

        return SectionIndex.load(config.retrieval.index)
    from corpus_tools.starter import starter_index

    return starter_index()


def make_retriever(config: OptimizeConfig, gateway: "LLMGateway | None" = None, *,
                   index: "SectionIndex | None" = None, skills: Sequence[Any] | None = None,
                   encoder: Any = None) -> "SectionSearcher":
    """The configured retriever (`config.retrieval`) over `index` (default: the configured index). `skills` and
    `encoder` reuse a skill pool or a loaded dense encoder (benchmarks score many retrievers over one pool)."""
    from raso.retrieval.retrievers import build_retriever

    return build_retriever(config.retrieval.retriever_options(), index=index if index is not None else load_index(config),
                           gateway=gateway, skills=skills, encoder=encoder)


def prompt_library(harness: Harness) -> Any:
    """The prompt templates for this harness: its own `prompts/` folder first, then the package defaults."""
    from raso.prompts import PromptLibrary

    return PromptLibrary.for_harness(harness)


def make_agent(config: OptimizeConfig, gateway: "LLMGateway", harness: Harness) -> "RolloutRunner":
    """The execution agent: raso's own loop with the `agent` section (`program.name` builtin), else the external
    agent program `program.name` built from its options, run by raso.agent.programs.runner.ExternalAgentRunner."""
    from raso.agent import ExecutionAgent

    if config.program.external:
        from raso.agent.programs.registry import make_program
        from raso.agent.programs.runner import ExternalAgentRunner

        return ExternalAgentRunner(make_program(config.program.name, config.program.options()), gateway,
                                   config.agent.model_copy(), config.program.model_copy())
    return ExecutionAgent(gateway, config.agent.model_copy(), prompts=prompt_library(harness))


def check_agent_program(config: OptimizeConfig, harness: Harness) -> None:
    """Before any work: raso's own agent (`program.name` builtin) needs a harness with a text form; an external
    agent program needs to be installed, the OS sandbox, a harness with a workspace form and rollouts run in
    threads. ConfigError saying which."""
    from raso.agent.programs.registry import make_program

    name = config.program.name
    if not config.program.external:
        if harness.text_form() is None:
            raise ConfigError(f"harness {harness.name!r} has no text form (raso.harness.TextTasks), which raso's own "
                              "agent (program.name builtin) runs: choose an agent program that works in its workspace")
        return
    from raso.agent.programs.runner import AgentSetupError, check_workspace_harness
    from raso.harness.sandbox import Sandbox

    try:
        program = make_program(name, config.program.options())
    except ValueError as exc:
        raise ConfigError(f"program.name: {exc}") from None
    try:
        check_workspace_harness(harness, name)
    except AgentSetupError as exc:
        raise ConfigError(str(exc)) from None
    if config.execution.executor != "threads":
        raise ConfigError(f"agent program {name!r} runs its rollouts in this process's threads; execution.executor "
                          f"{config.execution.executor!r} is for the builtin agent")
    reason = program.unavailable_reason()
    if reason:
        raise ConfigError(f"agent program {name!r} cannot run here: {reason}")
    if Sandbox().isolation_level != "os":
        raise ConfigError(f"agent program {name!r} needs the OS sandbox (bubblewrap with user namespaces): a coding "
                          "agent runs any command it likes")


def harness_description_for(config: OptimizeConfig, harness: Harness) -> str:
    """H as every optimizer role reads it: the harness's own for the builtin agent; for an external agent, the
    harness's workspace description and the agent program's tools (both true of the rollouts it runs)."""
    from raso.agent.programs.registry import make_program

    workspace = harness.workspace_form()
    if not config.program.external or workspace is None:
        return harness.harness_description
    program = make_program(config.program.name, config.program.options())
    return (f"{workspace.workspace_description.strip()}\n\n## The agent ({program.name})\n\n"
            f"{program.tools_description.strip()}")


def step_options(config: OptimizeConfig) -> tuple[InitOptions, UpdateOptions]:
    """The `init` and `update` sections of `config`."""
    return config.init, config.update


def retrieval_options(config: OptimizeConfig) -> "RetrievalOptions":
    """The retriever's options of `config`'s `retrieval` section (its kind, k and the kind's options)."""
    return config.retrieval.retriever_options()


def default_initializer(options: InitOptions, *, requirements: "Sequence[Requirement] | None" = None) -> "Initializer":
    """RASI or RFSI as `options` say (`requirements`: a shared decomposition used instead of query-init). A SKILL.md
    given as the init method is loaded by the engine, not written by an initializer: ConfigError."""
    from raso.optimizer.rasi import initializer_for

    if options.kind == "file":
        raise ConfigError(f"init method {options.method!r} is a SKILL.md file; an initializer writes 'rasi' or 'rfsi'")
    return initializer_for(options, requirements=requirements)


def default_proposer(options: UpdateOptions) -> "Proposer":
    """RASU or RFSU as `options` say."""
    from raso.optimizer.rasu import proposer_for

    return proposer_for(options)


def run_context(config: OptimizeConfig, harness: Harness, gateway: "LLMGateway", *,
                retriever: "SectionSearcher | None" = None, use_retrieval: bool = True) -> "RunContext":
    """The context every algorithm step of a run reads: `gateway`, the harness's descriptions and prompt library,
    the retrieval options, the worker count, and the retriever (`retriever`, else the configured one, built on
    first need; none when not `use_retrieval`)."""
    from raso.optimizer.context import RunContext

    def build_retriever() -> "SectionSearcher":
        if retriever is not None:
            return retriever
        try:
            return make_retriever(config, gateway)
        except (OSError, ValueError, ImportError, NotImplementedError) as exc:
            index = config.retrieval.index
            where = f"index {index}" if index else "starter corpus"
            raise RunError(f"cannot build the {config.retrieval.kind!r} retriever ({where}): {exc}") from exc

    return RunContext(
        gateway=gateway, task_description=harness.task_description,
        harness_description=harness_description_for(config, harness),
        retriever_factory=build_retriever if use_retrieval else None, prompts=prompt_library(harness),
        retrieval=retrieval_options(config), workers=config.schedule.workers, limits=config.limits,
    )


def _checked_steps(initializer: Any, proposer: Any, loop: Any = None) -> None:
    """A user's strategies are objects with `init(ctx)` / `propose(ctx, skill, rollouts)`: say so before any work."""
    from raso.optimizer.steps import Initializer, Proposer

    if initializer is not None and not isinstance(initializer, Initializer):
        raise ConfigError(f"initializer {initializer!r} has no init(ctx) method (see raso.optimizer.steps.Initializer)")
    if proposer is not None and not isinstance(proposer, Proposer):
        raise ConfigError(f"proposer {proposer!r} has no propose(ctx, skill, rollouts) method (see "
                          "raso.optimizer.steps.Proposer)")
    from raso.engine.loop import LoopStrategies

    if loop is not None and not isinstance(loop, LoopStrategies):
        raise ConfigError(f"loop {loop!r} is not a raso.engine.loop.LoopStrategies")


def build_components(
    config: OptimizeConfig,
    harness: Harness,
    gateway: "LLMGateway",
    *,
    initializer: "Initializer | None" = None,
    proposer: "Proposer | None" = None,
    agent_factory: "AgentFactory | None" = None,
    retriever: "SectionSearcher | None" = None,
    sinks: Iterable["EventSink"] = (),
    loop: "LoopStrategies | None" = None,
) -> "RunComponents":
    """A run's collaborators; any part given replaces the product's own (tests, experiments, baselines). The
    initializer and proposer are built from the config's `init` and `update` sections (none for a SKILL.md init,
    which the engine loads); the loop's strategies left unset in `loop` are the configured ones."""
    from raso.engine.loop import LoopStrategies
    from raso.engine.protocols import RunComponents

    _checked_steps(initializer, proposer, loop)
    init, update = step_options(config)

    def build_agent(unit_gateway: "LLMGateway") -> Any:
        return make_agent(config, unit_gateway, harness)

    if initializer is None and init.kind != "file":
        initializer = default_initializer(init)
    return RunComponents(
        harness=harness, context=run_context(config, harness, gateway, retriever=retriever),
        agent_factory=agent_factory or build_agent, initializer=initializer,
        proposer=proposer or default_proposer(update), sinks=list(sinks), loop=loop or LoopStrategies(),
    )


def check_splits(harness: Harness, config: OptimizeConfig) -> None:
    """An optimization needs train tasks to learn from and val tasks for the gate; say so before starting."""
    for split in ("train", "val"):
        try:
            tasks = harness.tasks(split)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if not tasks:
            raise ConfigError(f"harness {harness.name!r} has no {split} tasks; an optimization needs train tasks "
                              "and val tasks for the validation gate")


def _preflight(gateway: "LLMGateway") -> None:
    from raso.llm import LLMError

    try:
        gateway.preflight()
    except LLMError as exc:
        raise RunError(f"the model cannot be used: {exc}") from None


def _run_components(config: OptimizeConfig, run_dir: "RunDir", harness: Harness, parts: dict[str, Any]) -> "RunComponents":
    """A run's collaborators around the run's own gateway (its response cache and call ledger live in the run
    directory, so a resumed run replays the calls it already paid for)."""
    from raso.engine.replay import PersistentLedger

    gateway = make_gateway(config, cache_dir=run_dir.cache, ledger=PersistentLedger(run_dir.ledger_calls))
    return build_components(config, harness, gateway, **parts)


# ------------------------------------------------------------------------------------------------ public API
def optimize(
    harness: "str | Harness | None" = None,
    config: OptimizeConfig | None = None,
    *,
    config_file: str | Path | None = None,
    sinks: Iterable["EventSink"] = (),
    initializer: "Initializer | None" = None,
    proposer: "Proposer | None" = None,
    agent_factory: "AgentFactory | None" = None,
    retriever: "SectionSearcher | None" = None,
    loop: "LoopStrategies | None" = None,
    **overrides: Any,
) -> "OptimizeResult":
    """Optimize a skill for `harness`: s0 by RASI/RFSI (or a file), RASU/RFSU updates behind the validation gate,
    then s0 and the best skill scored on test. Writes a run directory (`raso.resume` continues it).

    `overrides` are OptimizeConfig options by dotted key (`**{"schedule.epochs": 1}`), section
    (`agent={"max_steps": 8}`) or format-1 name (`epochs=1`). Raises ConfigError / RunError before writing
    anything when the run cannot start.

    `initializer` and `proposer` replace RASI/RFSI and RASU/RFSU with your own strategies (raso.optimizer.steps):
    an object with `init(ctx) -> InitResult`, and one with `propose(ctx, skill, rollouts) -> UpdateProposal`
    (or any record with `candidate`, `gradients`, `lessons` and `to_dict()`). `ctx` is a
    raso.optimizer.context.RunContext: `ctx.gateway` (every model call, tagged with the unit of work),
    `ctx.task_description`, `ctx.harness_description`, `ctx.retriever()` (built on first call), `ctx.prompts`,
    `ctx.prompt_limits`, `ctx.k` and the exclusions, `ctx.workers`. A strategy's own options are its attributes.
    `agent_factory` and `retriever` replace the execution agent and the configured retriever. `loop`
    (raso.engine.loop.LoopStrategies) replaces the loop's batch sampler, candidate selector, gate or stoppers."""
    from raso.engine.engine import load_initial_skill, start_run
    from raso.engine.run_dir import RunDir, default_run_dir

    _checked_steps(initializer, proposer, loop)
    cfg = resolve_config(harness, config, config_file=config_file, overrides=overrides)
    harness_obj = load_harness(harness if isinstance(harness, Harness) else cfg.harness, cfg.harness_options)
    check_splits(harness_obj, cfg)
    check_agent_program(cfg, harness_obj)
    root = Path(cfg.run_dir) if cfg.run_dir is not None else default_run_dir(harness_obj.name)
    run_dir = RunDir(root)
    _check_new_run_dir(run_dir)
    if cfg.init_kind == "file":
        try:
            load_initial_skill(cfg)
        except Exception as exc:
            raise ConfigError(f"init skill {cfg.init.method}: {exc}") from None
    cfg = cfg.model_copy(update={"run_dir": root.resolve()})
    if cfg.needs_retriever and retriever is None:
        check_index_blocklist(cfg, harness_obj)
    check_budget_prices(cfg, make_gateway(cfg))
    _preflight(make_gateway(cfg))  # before the run's own gateway, whose cache lives in the run directory
    root.mkdir(parents=True, exist_ok=True)
    with run_dir.lock("optimize"):
        _check_new_run_dir(run_dir, probe_lock=False)  # again, holding it: another run may have started meanwhile
        components = _run_components(cfg, run_dir, harness_obj, dict(
            initializer=initializer, proposer=proposer, agent_factory=agent_factory, retriever=retriever,
            sinks=sinks, loop=loop))
        return start_run(cfg, run_dir, components)


def _check_new_run_dir(run_dir: "RunDir", probe_lock: bool = True) -> None:
    """A new run needs a new or empty folder; with `probe_lock`, a folder another command is working in is refused
    naming the holder."""
    from raso.engine.run_dir import LOCK_FILE

    root = run_dir.root
    if root.exists() and not root.is_dir():
        raise RunError(f"{root} is a file, not a folder; choose a new or empty folder for the run directory")
    if probe_lock and (root / LOCK_FILE).is_file():  # a run there, maybe in progress: its holder is the more useful news
        run_dir.lock("optimize").acquire().release()
    if run_dir.exists() or (root.is_dir() and any(p.name != LOCK_FILE for p in root.iterdir())):
        raise RunError(f"{root} is not empty; continue a run there with `raso resume {root}` or choose another "
                       "run directory")


class RunParts(TypedDict, total=False):
    """The replaceable parts of a run, as `optimize` takes them (None or absent = the product's own)."""

    sinks: Iterable["EventSink"]
    initializer: "Initializer | None"
    proposer: "Proposer | None"
    agent_factory: "AgentFactory | None"
    retriever: "SectionSearcher | None"
    loop: "LoopStrategies | None"


def resume(run_dir: str | Path, *, harness: Harness | None = None, **parts: Unpack[RunParts]) -> "OptimizeResult":
    """Continue the run in `run_dir` from its last checkpoint with the configuration it recorded. Model calls
    that finished before the interruption replay from the run's cache. Pass `harness` when the run was started
    with an instance that its recorded name cannot rebuild, and the same `parts` as `optimize` got."""
    from raso.engine.engine import continue_run, load_state
    from raso.engine.run_dir import RunDir

    rd = RunDir(run_dir)
    load_state(rd)  # not a run directory: said before a lock file is made in it
    with rd.lock("resume"):
        state = load_state(rd)  # read again under the lock: the holder before us may have moved it on
        edit = rd.config_edit(state.config_digest)
        if edit is not None:
            raise RunError(f"{edit}. A resume continues with the options the run started with and changes none "
                           "of them (to run with other options, start a new run with `raso optimize`)")
        cfg = load_resolved(rd.config_json)
        harness_obj = load_harness(harness if harness is not None else cfg.harness, cfg.harness_options)
        if state.phase != "done":
            _preflight(make_gateway(cfg))
        components = _run_components(cfg, rd, harness_obj, dict(parts))
        return continue_run(cfg, rd, state, components)


def init_skill(
    harness: "str | Harness | None" = None,
    config: OptimizeConfig | None = None,
    *,
    config_file: str | Path | None = None,
    retrieval: bool | None = None,
    gateway: "LLMGateway | None" = None,
    **overrides: Any,
) -> "InitResult":
    """Cold start with zero rollouts: RASI (retrieval-augmented) or, with `retrieval=False` or init='rfsi', RFSI,
    built from the config's `init` section. The result holds the skill, the requirements, the lessons with their
    corpus provenance, and any errors."""
    cfg = resolve_config(harness, config, config_file=config_file, overrides=overrides)
    harness_obj = load_harness(harness if isinstance(harness, Harness) else cfg.harness, cfg.harness_options)
    init, _ = step_options(cfg)
    use_retrieval = retrieval if retrieval is not None else init.kind != "rfsi"
    if use_retrieval:
        check_index_blocklist(cfg, harness_obj)
    gw = gateway or make_gateway(cfg)
    check_budget_prices(cfg, gw)
    _preflight(gw)
    ctx = run_context(cfg, harness_obj, gw, use_retrieval=use_retrieval)
    initializer = default_initializer(init.model_copy(update={"method": "rasi" if use_retrieval else "rfsi"}))
    return initializer.init(ctx)


def evaluate(
    harness: "str | Harness | None" = None,
    skills: "Skill | str | Path | Sequence[Skill | str | Path] | None" = None,
    *,
    split: str = "test",
    config: OptimizeConfig | None = None,
    limit: int | None = None,
    out_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    on_rollout: Callable[[Rollout], Any] | None = None,
    gateway: "LLMGateway | None" = None,
    task_skills: Callable[[Task], Sequence[Skill]] | None = None,
    **overrides: Any,
) -> "EvalResult":
    """Score skills (a Skill, a SKILL.md path, a list of them, or None for the no-skill baseline) on a split:
    one rollout per task through the execution agent, in parallel (`schedule.workers`). With `out_dir`, each trajectory
    is written there as JSON. `overrides` are options as `optimize` takes them; `agent.mode` chooses how
    several skills are incorporated (default: full with skills, none without). `task_skills` (instead of `skills`)
    gives each task its own skills: called once per task before the rollouts start (e.g. a router)."""
    from raso.agent.evaluate import evaluate as run_rollouts

    items = [] if skills is None else [skills] if isinstance(skills, (Skill, str, Path)) else list(skills)
    if task_skills is not None and items:
        raise ConfigError("give either skills (shared by every task) or task_skills (each task's own), not both")
    has_skills = bool(items) or task_skills is not None
    values = nested(overrides)
    given = config.model_dump(exclude_unset=True) if config is not None else {}
    if not has_key(values, "agent.mode") and not has_key(given, "agent.mode"):
        values = merge(values, {"agent": {"mode": "full" if has_skills else "none"}})
    cfg = resolve_config(harness, config, overrides=values, quick_defaults=False)
    mode = cfg.agent.mode
    if mode == "none" and has_skills:
        raise ConfigError("agent.mode 'none' runs without a skill; give no skills (or another mode)")
    if mode != "none" and not has_skills:
        raise ConfigError(f"agent.mode {mode!r} needs at least one skill")
    skill_list = load_skills(items, max_chars=cfg.init.skill_max_chars)  # the limit of `optimize --init`'s skill
    harness_obj = load_harness(harness if isinstance(harness, Harness) else cfg.harness, cfg.harness_options)
    tasks = eval_tasks(harness_obj, split, limit)
    check_index_blocklist(cfg, harness_obj)
    check_agent_program(cfg, harness_obj)
    gw = gateway or make_gateway(cfg, cache_dir=cache_dir)
    check_budget_prices(cfg, gw)
    _preflight(gw)
    agent = make_agent(cfg, gw, harness_obj)
    return run_rollouts(harness_obj, agent, tasks, skill_list, max_workers=cfg.schedule.workers,
                        trajectories_dir=Path(out_dir) / "trajectories" if out_dir is not None else None,
                        on_rollout=on_rollout, task_skills=task_skills)


def plan(
    harness: "str | Harness | None" = None,
    config: OptimizeConfig | None = None,
    *,
    config_file: str | Path | None = None,
    previous_run: str | Path | None = None,
    **overrides: Any,
) -> "CostPlan":
    """The cost plan of the run `optimize` would start with the same arguments, without calling any model:
    rollouts per phase, model calls, tokens and USD per role (raso.engine.plan; `format_plan` prints it).
    `previous_run`: a run directory of the same harness and model to measure rollout length from (default: the
    newest one next to the run directory, else the per-harness defaults)."""
    from raso.engine.plan import plan_run

    cfg = resolve_config(harness, config, config_file=config_file, overrides=overrides)
    # a plan needs the tasks, not this machine's sandbox or container runtime: what the run would lack is a note
    harness_obj = load_harness(harness if isinstance(harness, Harness) else cfg.harness, cfg.harness_options,
                               for_runs=False)
    check_splits(harness_obj, cfg)
    made = plan_run(cfg, harness_obj, previous_run=Path(previous_run) if previous_run is not None else None)
    try:
        harness_obj.check_runnable()
    except Exception as exc:  # noqa: BLE001 - each harness raises its own kind; the plan only reports it
        made = made.model_copy(update={"cannot_run_here": str(exc).splitlines()[0]})
    return made


def eval_tasks(harness: Harness, split: str, limit: int | None = None) -> list[Task]:
    """The tasks of `split` (the first `limit`); ConfigError for an unknown or empty split."""
    try:
        tasks = list(harness.tasks(split))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if limit is not None:
        if limit < 1:
            raise ConfigError("limit must be at least 1")
        tasks = tasks[:limit]
    if not tasks:
        raise ConfigError(f"harness {harness.name!r} has no tasks in split {split!r}")
    return tasks


def load_skills(skills: "Skill | str | Path | Sequence[Skill | str | Path] | None", *,
                max_chars: int | None = None) -> list[Skill]:
    """Skill objects from skills and SKILL.md paths; ConfigError for an unreadable one, a SKILL.md longer than
    `max_chars` or repeated names (the agent's selection and LOAD_SKILL address skills by name)."""
    if skills is None:
        return []
    items = [skills] if isinstance(skills, (Skill, str, Path)) else list(skills)
    out: list[Skill] = []
    for item in items:
        if isinstance(item, Skill):
            out.append(item)
            continue
        try:
            out.append(Skill.load_with_folder(item, max_chars=max_chars))  # as `optimize --init` reads one
        except Exception as exc:
            raise ConfigError(f"cannot use skill {item}: {exc}") from None
    names = [s.name for s in out]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated and len(out) > 1:
        raise ConfigError(f"skill names must be unique (selection and LOAD_SKILL use them); repeated: "
                          f"{', '.join(repeated)}")
    return out


__all__ = [
    "build_components", "check_agent_program", "check_budget_prices", "check_index_blocklist", "check_splits",
    "default_initializer", "default_proposer", "eval_tasks", "evaluate", "gateway_config", "harness_description_for",
    "harness_target", "init_skill", "load_harness", "load_skills", "make_agent", "make_gateway", "load_index",
    "make_retriever", "optimize", "plan", "prompt_library",
    "resolve_config", "resume", "retrieval_options", "run_context", "step_options",
]
