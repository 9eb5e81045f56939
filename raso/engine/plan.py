"""A run's cost plan, made before the run without calling any model (`raso optimize --plan`, `raso.plan`).

The schedule fixes the rollouts: the plan walks the engine's own schedule (raso.engine.schedule.Schedule, with the
run's batch sampler and gate: s0's val evaluation, then per minibatch the train rollouts and the gate's decision,
cut by `max_iterations` and the rollout budget; then the held-out check and the test split). Model calls, tokens
and USD per role follow from a rollout's length and a proposal's calls: measured in a previous run of the same
harness and model when there is one (its ledger of calls), else what the run's strategies report
(`expected_calls` of the initializer and the proposer: `ReportsInitCalls`, `ReportsProposeCalls`) and an agent
turn per allowed step (an upper bound). The price table is the run's (`prices`, then litellm's bundled prices;
in-process models are free).

The plan is written to the run directory as plan.json; the report sets it against what was spent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from .loop import LoopStrategies
from .run_dir import read_jsonl
from .schedule import Schedule

if TYPE_CHECKING:
    from raso.harness import Harness

    from .config import OptimizeConfig

#: Tokens of one model call when no previous run measured them.
DEFAULT_AGENT_PROMPT_TOKENS = 2500
DEFAULT_AGENT_COMPLETION_TOKENS = 200
DEFAULT_OPTIMIZER_PROMPT_TOKENS = 4000
DEFAULT_OPTIMIZER_COMPLETION_TOKENS = 1000


@runtime_checkable
class ReportsInitCalls(Protocol):
    """An initializer that says how many model calls its one init step makes (RASI / RFSI do)."""

    def expected_calls(self) -> float: ...


@runtime_checkable
class ReportsProposeCalls(Protocol):
    """A proposer that says how many model calls one proposal makes from `train_rollouts` rollouts in which the
    plan expects `failure_modes` failure modes (RASU / RFSU do)."""

    def expected_calls(self, train_rollouts: int, failure_modes: int) -> float: ...


class CallShape(BaseModel):
    """Model calls per unit and tokens per call, with where the numbers come from."""

    calls_per_unit: float
    prompt_tokens: float
    completion_tokens: float
    source: str


class RolePlan(BaseModel):
    role: str
    model: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    usd: float | None  # None: nobody prices the model
    basis: str


class CostPlan(BaseModel):
    harness: str
    rollouts: dict[str, int] = Field(description="phase -> rollouts (test and holdout are counted apart from the "
                                     "rollout budget)")
    iterations: int
    roles: list[RolePlan]
    previous_run: str | None = None
    test_usd: float | None = Field(default=0.0, description="of the estimate, the test evaluation's part (its agent "
                                   "calls); None: the agent's model is unpriced")
    budget_usd: float | None = None  # the run's budget.usd
    budget_test_usd: float | None = None  # the run's budget.test_usd (None: budget.usd covers the test evaluation)
    cannot_run_here: str | None = None  # why `optimize` would refuse to start on this machine (a plan is still made)

    @property
    def optimization_rollouts(self) -> int:
        return sum(v for k, v in self.rollouts.items() if k not in ("holdout", "test"))

    @property
    def usd(self) -> float | None:
        costs = [r.usd for r in self.roles]
        return None if any(c is None for c in costs) else float(sum(c or 0.0 for c in costs))

    def budget_lines(self) -> list[str]:
        """The estimate against the USD budgets: which budget covers which calls, and whether it is expected to
        last (a budget that runs out stops the optimization early or cuts the test evaluation short)."""
        def money(value: float | None) -> str:
            return f"${value:.4f}" if value is not None else "unknown (unpriced)"

        def verdict(estimate: float | None, budget: float, short: str) -> str:
            if estimate is None:
                return "cannot be checked"
            return "fits" if estimate <= budget else f"exceeds it: {short}"

        total = self.usd
        lines = []
        if self.budget_test_usd is None:
            if self.budget_usd is not None:
                short = "the run stops early and the test evaluation is cut short"
                lines.append(f"budget.usd ${self.budget_usd:.4f} covers every call, the test evaluation included: "
                             f"estimate {money(total)} {verdict(total, self.budget_usd, short)}")
            return lines
        rest = None if total is None or self.test_usd is None else total - self.test_usd
        if self.budget_usd is not None:
            lines.append(f"budget.usd ${self.budget_usd:.4f} covers every call but the test evaluation: estimate "
                         f"{money(rest)} {verdict(rest, self.budget_usd, 'the optimization stops early')}")
        lines.append(f"budget.test_usd ${self.budget_test_usd:.4f} covers the test evaluation: estimate "
                     f"{money(self.test_usd)} {verdict(self.test_usd, self.budget_test_usd, 'the test evaluation is cut short')}")
        return lines


def schedule_rollouts(config: OptimizeConfig, n_train: int, n_val: int, n_test: int,
                      loop: LoopStrategies | None = None) -> tuple[dict[str, int], int]:
    """(rollouts per phase, iterations) of a run whose every proposal yields a new candidate, by the engine's own
    schedule (`loop`: the run's strategies, unset ones configured), with `n_val` val tasks before the holdout is
    taken out."""
    return _schedule(config, [f"train-{i}" for i in range(n_train)], [f"val-{i}" for i in range(n_val)], n_test,
                     loop).rollouts()


def _schedule(config: OptimizeConfig, train_ids: list[str], val_ids: list[str], n_test: int,
              loop: LoopStrategies | None) -> Schedule:
    return Schedule.of_run(config, (loop or LoopStrategies()).resolved(config), train_ids, val_ids, n_test)


def find_previous_run(config: OptimizeConfig, search: Path | None = None) -> Path | None:
    """The newest finished run directory under `search` (default: the parent of the run's directory, else
    ./runs) with the same harness and target model, or None."""
    from raso.errors import ConfigError

    from .config import nested

    where = search or (Path(config.run_dir).parent if config.run_dir is not None else Path("runs"))
    if not where.is_dir():
        return None
    found: list[tuple[float, Path]] = []
    for resolved in where.glob("*/config.resolved.json"):
        try:
            data = json.loads(resolved.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        try:
            recorded = nested(data) if isinstance(data, dict) else {}  # a format-1 (flat) config too
        except ConfigError:
            continue
        target = recorded.get("models", {}).get("target") if isinstance(recorded.get("models"), dict) else None
        same = recorded.get("harness") == config.harness and target == config.models.target
        has_records = all((resolved.parent / name).is_file() for name in ("ledger.calls.jsonl", "checkpoint.json"))
        if same and has_records and \
                (config.run_dir is None or resolved.parent.resolve() != Path(config.run_dir).resolve()):
            found.append((resolved.stat().st_mtime, resolved.parent))
    return max(found)[1] if found else None


def _unit_head(record: dict[str, Any]) -> str:
    return str(record.get("unit") or "").split("|", 1)[0]


def _mean(values: list[float], default: float) -> float:
    return sum(values) / len(values) if values else default


def measured_shapes(run_dir: Path) -> dict[str, CallShape]:
    """Per role, from a previous run's ledger of calls: `agent` calls per rollout, `init` and `propose` optimizer
    calls per unit, and tokens per paid call."""
    records = read_jsonl(run_dir / "ledger.calls.jsonl")
    state = json.loads((run_dir / "checkpoint.json").read_text(encoding="utf-8"))
    rollouts = int(state.get("rollouts_used", 0)) + int(state.get("test_rollouts", 0)) + int(
        (state.get("holdout") or {}).get("rollouts", 0))
    agent = [r for r in records if r.get("role") == "agent"]
    optimizer = [r for r in records if r.get("role") != "agent"]
    paid = [r for r in records if not r.get("cached")]

    def tokens(role_records: list[dict[str, Any]], key: str, default: float) -> float:
        ids = {id(r) for r in role_records}
        return _mean([float(r.get(key, 0)) for r in paid if id(r) in ids], default)

    init = [r for r in optimizer if _unit_head(r).startswith("init")]
    proposals = [r for r in optimizer if _unit_head(r).endswith("/propose")]
    n_proposals = len({_unit_head(r) for r in proposals})
    source = f"measured in {run_dir}"
    return {
        "agent": CallShape(calls_per_unit=len(agent) / rollouts if rollouts else 0.0, source=source,
                           prompt_tokens=tokens(agent, "prompt_tokens", DEFAULT_AGENT_PROMPT_TOKENS),
                           completion_tokens=tokens(agent, "completion_tokens", DEFAULT_AGENT_COMPLETION_TOKENS)),
        "init": CallShape(calls_per_unit=float(len(init)), source=source,
                          prompt_tokens=tokens(init, "prompt_tokens", DEFAULT_OPTIMIZER_PROMPT_TOKENS),
                          completion_tokens=tokens(init, "completion_tokens", DEFAULT_OPTIMIZER_COMPLETION_TOKENS)),
        "propose": CallShape(calls_per_unit=len(proposals) / n_proposals if n_proposals else 0.0, source=source,
                             prompt_tokens=tokens(proposals, "prompt_tokens", DEFAULT_OPTIMIZER_PROMPT_TOKENS),
                             completion_tokens=tokens(proposals, "completion_tokens",
                                                      DEFAULT_OPTIMIZER_COMPLETION_TOKENS)),
    }


def default_shapes(config: OptimizeConfig, harness: Harness, *, initializer: object | None = None,
                   proposer: object | None = None) -> dict[str, CallShape]:
    """Without a previous run: an agent turn per allowed step (an upper bound), and the optimizer calls the run's
    initializer and proposer report (`initializer`/`proposer` None: the configured RASI/RFSI and RASU/RFSU; one
    that reports nothing: the configured one's count, and the basis says so). The plan expects as many failure
    modes per minibatch as the requirements init plans (`init.num_requirements`)."""
    from raso.optimizer.rasi import initializer_for
    from raso.optimizer.rasu import proposer_for

    steps = config.agent.max_steps or getattr(harness, "max_steps", None) or 20
    reply = config.agent.max_tokens or DEFAULT_AGENT_COMPLETION_TOKENS
    if config.init_kind == "file":
        init_calls, init_source = 0.0, "init from a file: no model call"
    else:
        configured = initializer_for(config.init)
        reporting = initializer if isinstance(initializer, ReportsInitCalls) else configured
        init_calls = reporting.expected_calls()
        init_source = f"reported by init {config.init_kind}" if initializer is None or reporting is initializer \
            else f"init {config.init_kind}'s count (the given initializer reports no expected_calls)"
    configured_proposer = proposer_for(config.update)
    proposing = proposer if isinstance(proposer, ReportsProposeCalls) else configured_proposer
    # at most: only failed rollouts are shown to the gradient calls
    propose_calls = proposing.expected_calls(config.schedule.minibatch, config.init.num_requirements)
    propose_source = f"reported by update {config.update.method}" if proposer is None or proposing is proposer \
        else f"update {config.update.method}'s count (the given proposer reports no expected_calls)"
    opt = dict(prompt_tokens=DEFAULT_OPTIMIZER_PROMPT_TOKENS, completion_tokens=DEFAULT_OPTIMIZER_COMPLETION_TOKENS)
    return {
        "agent": CallShape(calls_per_unit=float(steps), prompt_tokens=DEFAULT_AGENT_PROMPT_TOKENS,
                           completion_tokens=min(reply, DEFAULT_AGENT_COMPLETION_TOKENS),
                           source=f"default: up to {steps} agent turn(s) per rollout"),
        "init": CallShape(calls_per_unit=float(init_calls), source=init_source, **opt),
        "propose": CallShape(calls_per_unit=float(propose_calls), source=propose_source, **opt),
    }


def plan_run(config: OptimizeConfig, harness: Harness, *, previous_run: Path | None = None,
             initializer: object | None = None, proposer: object | None = None,
             loop: LoopStrategies | None = None) -> CostPlan:
    """The plan of `config` on `harness` (no model is called). `previous_run`: a run directory of the same harness
    and model to measure rollout length and calls from (default: found by find_previous_run). `initializer`,
    `proposer` and `loop`: the run's own strategies (None: the configured ones)."""
    from raso.llm.gateway import price_of

    def ids(split: str, limit: int | None) -> list[str]:
        try:
            tasks = list(harness.tasks(split))
        except ValueError:
            return []
        return [t.id for t in (tasks[:limit] if limit is not None else tasks)]

    schedule = config.schedule
    n_test = len(ids("test", schedule.test_limit)) if schedule.test else 0
    phases, iterations = _schedule(config, ids("train", schedule.train_limit), ids("val", schedule.val_limit),
                                   n_test, loop).rollouts()
    previous = previous_run if previous_run is not None else find_previous_run(config)
    shapes = default_shapes(config, harness, initializer=initializer, proposer=proposer)
    if previous is not None:
        try:
            shapes = measured_shapes(previous)
        except (OSError, ValueError) as exc:  # a damaged previous run: the defaults, and say why
            shapes = {k: v.model_copy(update={"source": f"{v.source} ({previous} unreadable: {exc})"})
                      for k, v in shapes.items()}
            previous = None
    optimizer_model = config.resolved_optimizer_model()
    rollouts = sum(phases.values())

    def role(name: str, model: str, parts: list[tuple[float, CallShape]]) -> RolePlan:
        calls = sum(n * shape.calls_per_unit for n, shape in parts)
        prompt = sum(n * shape.calls_per_unit * shape.prompt_tokens for n, shape in parts)
        completion = sum(n * shape.calls_per_unit * shape.completion_tokens for n, shape in parts)
        price = price_of(model, config.models.prices)
        usd = price.cost(round(prompt), round(completion)) if price is not None else None
        basis = "; ".join(sorted({shape.source for _, shape in parts}))
        return RolePlan(role=name, model=model, calls=round(calls), prompt_tokens=round(prompt),
                        completion_tokens=round(completion), usd=usd, basis=basis)

    roles = [role("agent", config.models.target, [(rollouts, shapes["agent"])]),
             role("optimizer", optimizer_model, [(1, shapes["init"]), (iterations, shapes["propose"])])]
    test = role("agent", config.models.target, [(phases["test"], shapes["agent"])])  # the test evaluation's part
    return CostPlan(harness=config.harness, rollouts=phases, iterations=iterations, roles=roles,
                    previous_run=str(previous) if previous is not None else None, test_usd=test.usd,
                    budget_usd=config.budget.usd, budget_test_usd=config.budget.test_usd)


def format_plan(plan: CostPlan) -> str:
    lines = [f"cost plan for {plan.harness} (no model was called)", "",
             "rollouts per phase:"]
    for phase, n in plan.rollouts.items():
        lines.append(f"  {phase:<8} {n:>7}")
    lines += [f"  {'total':<8} {sum(plan.rollouts.values()):>7}  ({plan.optimization_rollouts} count against the "
              f"rollout budget; {plan.iterations} iteration(s))", "", "model calls, tokens and USD per role:"]
    for r in plan.roles:
        usd = f"${r.usd:.4f}" if r.usd is not None else "unpriced (add --price MODEL=IN,OUT)"
        lines.append(f"  {r.role:<9} {r.model}: {r.calls} calls, {r.prompt_tokens} prompt + {r.completion_tokens} "
                     f"completion tokens, {usd}  [{r.basis}]")
    total = plan.usd
    lines += ["", f"estimated total: {'$' + format(total, '.4f') if total is not None else 'unknown (unpriced models)'}"]
    lines += plan.budget_lines()
    if plan.cannot_run_here:
        lines += ["", f"note: the run itself would be refused on this machine: {plan.cannot_run_here}"]
    return "\n".join(lines)


__all__ = ["CallShape", "CostPlan", "ReportsInitCalls", "ReportsProposeCalls", "RolePlan", "default_shapes",
           "find_previous_run", "format_plan", "measured_shapes", "plan_run", "schedule_rollouts"]
