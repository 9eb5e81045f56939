"""Where a batch's rollouts run: threads in this process (the default), a pool of local processes, or the workers
of a Dask or Ray cluster (docs/design.md §9).

The driver (the process running the engine) keeps everything that must be exact: the checkpoint, the budgets, the
ledger and the reply cache. A rollout on another process reaches its model through the driver's own gateway: the
agent shipped to a worker holds a `RemoteGateway`, which sends each call over an authenticated loopback/LAN
connection to the driver's `GatewayServer`, which makes it through the run's `UnitGateway`. So a distributed batch
books exactly the calls a threaded one does, hits the same cache keys, and is admitted by the same USD budget.

A harness is never pickled: a worker rebuilds it from its registered name (or 'module:Class') and options, once per
worker process. Its data folders are given by path in those options and must exist on every worker.

A rollout whose worker died, or whose result never came back, is an infrastructure failure (`outcome`
"infrastructure"): the engine re-runs it, it never scores 0.
"""

from __future__ import annotations

import hashlib
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from pydantic import BaseModel, Field

from raso.choices import ExecutorKind, choices_of
from raso.harness import Harness, Rollout, RolloutRunner, Task, failed_rollout
from raso.llm.view import UnitGateway

from .options import ExecutionOptions
from .remote import GatewayServer

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from raso.llm.gateway import Gateway
    from raso.skill import Skill

logger = logging.getLogger(__name__)

#: An agent factory: the engine's `RunComponents.agent_factory` (a gateway in, a RolloutRunner out).
AgentFactory = Callable[[Any], RolloutRunner]


class TaskSkills:
    """Each task's own skills, in the order of a batch's tasks (e.g. a whole corpus skill routed to each task), given
    to `RolloutExecutor.run` in place of the one skill list a batch usually shares."""

    def __init__(self, per_task: Sequence[Sequence[Skill]]) -> None:
        self.per_task = [list(skills) for skills in per_task]


def skills_per_task(skills: Sequence[Skill] | TaskSkills, n_tasks: int) -> list[list[Skill]]:
    """The skill list of each of a batch's `n_tasks` tasks: the shared list for every task, or `TaskSkills`'s own."""
    if isinstance(skills, TaskSkills):
        if len(skills.per_task) != n_tasks:
            raise ValueError(f"TaskSkills holds {len(skills.per_task)} skill lists for a batch of {n_tasks} tasks")
        return skills.per_task
    shared = list(skills)
    return [shared] * n_tasks


class InfrastructureFailure(RuntimeError):
    """A rollout whose worker died or whose result was lost: never the skill's fault."""


def infrastructure_rollout(harness_name: str, task: Task, skills: Sequence[Skill], exc: BaseException,
                           wall_time_s: float = 0.0) -> Rollout:
    rollout = failed_rollout(harness_name, task, skills, exc, wall_time_s=wall_time_s)
    return rollout.model_copy(update={"outcome": "infrastructure"})


def guarded_rollout(harness: Harness, agent: RolloutRunner, task: Task, skills: Sequence[Skill]) -> Rollout:
    """`harness.rollout`, which should never raise; if one does, the rollout still only scores 0."""
    started = time.perf_counter()
    try:
        rollout = harness.rollout(task, skills, agent)
        if not isinstance(rollout, Rollout):
            raise TypeError(f"{type(harness).__name__}.rollout returned {type(rollout).__name__}, not a Rollout")
        return rollout
    except Exception as exc:
        return failed_rollout(getattr(harness, "name", type(harness).__name__), task, skills, exc,
                              wall_time_s=time.perf_counter() - started)


# ---------------------------------------------------------------------------------------------- worker side
class HarnessSpec(BaseModel):
    """How a worker rebuilds the run's harness: its registered name (or 'module:Class') and constructor options."""

    name: str
    options: dict[str, Any] = Field(default_factory=dict)

    def key(self) -> str:
        return json.dumps({"name": self.name, "options": self.options}, sort_keys=True, default=str)


_worker_lock = threading.Lock()
_worker_harnesses: dict[str, Harness] = {}
_worker_agents: dict[str, RolloutRunner] = {}


def _worker_harness(spec: HarnessSpec) -> Harness:
    from raso.harness.registry import get_harness

    key = spec.key()
    with _worker_lock:
        harness = _worker_harnesses.get(key)
        if harness is None:
            harness = _worker_harnesses[key] = get_harness(spec.name, **spec.options)
        return harness


def _worker_agent(blob: bytes) -> RolloutRunner:
    import cloudpickle

    key = hashlib.sha256(blob).hexdigest()
    with _worker_lock:
        agent = _worker_agents.get(key)
        if agent is None:
            if len(_worker_agents) > 32:  # one per batch; old batches' agents are not needed again
                _worker_agents.clear()
            agent = _worker_agents[key] = cloudpickle.loads(blob)
        return agent


def run_on_worker(spec: HarnessSpec, agent_blob: bytes, task: Task, skills: list[Skill]) -> Rollout:
    """One rollout on a worker process: the harness rebuilt from its spec, the agent unpickled (its gateway calls
    the driver). A harness that cannot be built here fails the rollout as infrastructure (the worker lacks a
    package or a data folder), never as the skill's 0."""
    try:
        harness = _worker_harness(spec)
    except Exception as exc:
        return infrastructure_rollout(spec.name, task, skills, InfrastructureFailure(
            f"worker {socket.gethostname()} cannot build harness {spec.name!r}: {type(exc).__name__}: {exc}"))
    return guarded_rollout(harness, _worker_agent(agent_blob), task, skills)


# ---------------------------------------------------------------------------------------------- executors
class RolloutExecutor:
    """Runs a batch of (task, skills) with one agent and yields (index, rollout) as rollouts finish. A consumer
    that stops iterating (an exception in its loop) cancels what has not started."""

    name: str = "threads"

    def agent(self, factory: AgentFactory, gateway: Gateway, unit: str) -> RolloutRunner:
        """The batch's agent, built by `factory` around the gateway it must use where it runs."""
        return factory(UnitGateway(gateway, unit))

    def run(self, harness: Harness, agent: RolloutRunner, tasks: Sequence[Task],
            skills: Sequence[Skill] | TaskSkills) -> Generator[tuple[int, Rollout], None, None]:
        raise NotImplementedError

    def close(self) -> None:
        """Release pools, clusters and servers this executor started."""

    def __enter__(self) -> RolloutExecutor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class ThreadExecutor(RolloutExecutor):
    """Rollouts in a thread pool in this process (the harness and agent objects are shared)."""

    name = "threads"

    def __init__(self, workers: int = 2) -> None:
        self.workers = max(1, workers)

    def run(self, harness: Harness, agent: RolloutRunner, tasks: Sequence[Task],
            skills: Sequence[Skill] | TaskSkills) -> Generator[tuple[int, Rollout], None, None]:
        from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

        per_task = skills_per_task(skills, len(tasks))
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="rollout") as pool:
            pending: dict[Future[Rollout], int] = {
                pool.submit(guarded_rollout, harness, agent, task, per_task[i]): i for i, task in enumerate(tasks)}
            try:
                while pending:
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        yield pending.pop(future), future.result()  # cannot raise: guarded_rollout catches
            finally:
                for future in pending:
                    future.cancel()


class _RemoteExecutor(RolloutExecutor):
    """Common to the backends whose rollouts run in other processes: the gateway server, the harness spec, the
    pickled agent, and turning a lost rollout into an infrastructure failure."""

    def __init__(self, gateway: Gateway, spec: HarnessSpec, options: ExecutionOptions) -> None:
        self.spec = spec
        self.options = options
        self._server: GatewayServer | None = None
        self._gateway = gateway

    def _driver_host(self) -> tuple[str, str]:
        """(bind, advertise) for the gateway server."""
        if self.options.driver_host:
            return "0.0.0.0", self.options.driver_host
        if not self.options.address:
            return "127.0.0.1", "127.0.0.1"
        return "0.0.0.0", route_address(self.options.address)

    def server(self) -> GatewayServer:
        if self._server is None:
            bind, advertise = self._driver_host()
            self._server = GatewayServer(self._gateway, bind=bind, advertise=advertise)
        return self._server

    def agent(self, factory: AgentFactory, gateway: Gateway, unit: str) -> RolloutRunner:
        return factory(self.server().remote(unit))

    def _blob(self, agent: RolloutRunner) -> bytes:
        import cloudpickle

        try:
            return cloudpickle.dumps(agent)
        except Exception as exc:
            raise ValueError(f"the execution agent cannot be sent to the {self.name} workers ({type(exc).__name__}: "
                             f"{exc}); use execution.executor=threads with this agent") from exc

    def _lost(self, task: Task, skills: Sequence[Skill], exc: BaseException) -> Rollout:
        return infrastructure_rollout(self.spec.name, task, skills, InfrastructureFailure(
            f"the {self.name} worker running this rollout failed ({type(exc).__name__}: {exc})"))

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None


class ProcessExecutor(_RemoteExecutor):
    """A pool of local worker processes (spawned: nothing of the driver's state is inherited)."""

    name = "processes"

    def __init__(self, gateway: Gateway, spec: HarnessSpec, options: ExecutionOptions, workers: int) -> None:
        super().__init__(gateway, spec, options)
        self.workers = max(1, workers)
        self._pool: Executor | None = None

    def _get_pool(self) -> Executor:
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"))
        return self._pool

    def run(self, harness: Harness, agent: RolloutRunner, tasks: Sequence[Task],
            skills: Sequence[Skill] | TaskSkills) -> Generator[tuple[int, Rollout], None, None]:
        from concurrent.futures import FIRST_COMPLETED, Future, wait
        from concurrent.futures.process import BrokenProcessPool

        blob, per_task = self._blob(agent), skills_per_task(skills, len(tasks))
        pool = self._get_pool()
        pending: dict[Future[Rollout], int] = {
            pool.submit(run_on_worker, self.spec, blob, task, per_task[i]): i for i, task in enumerate(tasks)}
        broken = False
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    index = pending.pop(future)
                    try:
                        rollout = future.result()
                    except Exception as exc:  # a dead worker breaks the whole pool: every rollout in it is lost
                        broken = broken or isinstance(exc, BrokenProcessPool)
                        rollout = self._lost(tasks[index], per_task[index], exc)
                    yield index, rollout
        finally:
            for future in pending:
                future.cancel()
            if broken:  # the next batch gets a fresh pool
                pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        super().close()


class DaskExecutor(_RemoteExecutor):
    """Rollouts as tasks on a Dask cluster: `address`'s scheduler, or a local cluster of `workers` processes."""

    name = "dask"

    def __init__(self, gateway: Gateway, spec: HarnessSpec, options: ExecutionOptions, workers: int) -> None:
        super().__init__(gateway, spec, options)
        self.workers = max(1, workers)
        self._client: Any = None
        self._cluster: Any = None

    def client(self) -> Any:
        if self._client is None:
            try:
                from distributed import Client as DaskClient
                from distributed import LocalCluster
            except ImportError as exc:
                raise ImportError("execution.executor=dask needs Dask's `distributed` package: pip install "
                                  "'raso[distributed]'") from exc
            if self.options.address:
                self._client = DaskClient(self.options.address)
            else:
                self._cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True,
                                             host="127.0.0.1", dashboard_address=None)
                self._client = DaskClient(self._cluster)
        return self._client

    def run(self, harness: Harness, agent: RolloutRunner, tasks: Sequence[Task],
            skills: Sequence[Skill] | TaskSkills) -> Generator[tuple[int, Rollout], None, None]:
        from distributed import as_completed

        client = self.client()
        blob, per_task = self._blob(agent), skills_per_task(skills, len(tasks))
        futures = {client.submit(run_on_worker, self.spec, blob, task, per_task[i], pure=False): i
                   for i, task in enumerate(tasks)}
        remaining = dict(futures)
        try:
            for future in as_completed(list(futures)):
                index = remaining.pop(future)
                try:
                    rollout = future.result()
                except Exception as exc:  # KilledWorker (died more often than the scheduler allows), lost data
                    rollout = self._lost(tasks[index], per_task[index], exc)
                yield index, rollout
        finally:
            for future in remaining:
                future.cancel()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None
        super().close()


class RayExecutor(_RemoteExecutor):
    """Rollouts as Ray tasks: the cluster at `address`, or a local Ray started with `workers` CPUs."""

    name = "ray"

    def __init__(self, gateway: Gateway, spec: HarnessSpec, options: ExecutionOptions, workers: int) -> None:
        super().__init__(gateway, spec, options)
        self.workers = max(1, workers)
        self._started = False
        self._remote: Any = None

    def _ray(self) -> Any:
        try:
            import ray
        except ImportError as exc:
            raise ImportError("execution.executor=ray needs Ray: pip install 'raso[ray]'") from exc
        if not ray.is_initialized():
            if self.options.address:
                ray.init(address=self.options.address, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(num_cpus=self.workers, include_dashboard=False, log_to_driver=False)
            self._started = True
        if self._remote is None:
            self._remote = ray.remote(num_cpus=1)(run_on_worker)
        return ray

    def run(self, harness: Harness, agent: RolloutRunner, tasks: Sequence[Task],
            skills: Sequence[Skill] | TaskSkills) -> Generator[tuple[int, Rollout], None, None]:
        ray = self._ray()
        blob, per_task = ray.put(self._blob(agent)), skills_per_task(skills, len(tasks))
        pending = {self._remote.remote(self.spec, blob, task, per_task[i]): i for i, task in enumerate(tasks)}
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    index = pending.pop(ref)
                    try:
                        rollout = ray.get(ref)
                    except Exception as exc:  # WorkerCrashedError after Ray's own retries, a lost object
                        rollout = self._lost(tasks[index], per_task[index], exc)
                    yield index, rollout
        finally:
            for ref in pending:
                ray.cancel(ref)

    def close(self) -> None:
        if self._started:
            import ray

            ray.shutdown()
            self._started = False
        super().close()


def route_address(address: str) -> str:
    """This machine's IP address on the route to a cluster's `address` (no packet is sent)."""
    parsed = urlparse(address if "://" in address else f"tcp://{address}")
    host = parsed.hostname or "127.0.0.1"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host, parsed.port or 1))
            return probe.getsockname()[0]
    except OSError:
        return socket.gethostbyname(socket.gethostname())


def harness_spec(harness: Harness, name: str, options: dict[str, Any]) -> HarnessSpec:
    """How workers rebuild `harness`: the configured `name` when it names this harness's class, else the class's
    own 'module:Class' (a harness given as an object); `options` are the constructor's keyword arguments."""
    from raso.harness.registry import harness_class

    cls = type(harness)
    try:
        same = harness_class(name) is cls
    except Exception:
        same = False
    if not same and (cls.__module__ == "__main__" or "<locals>" in cls.__qualname__):
        raise ValueError(f"harness class {cls.__qualname__} is defined in a script or a function, so workers cannot "
                         "rebuild it: define it in an importable module (or register it) to run it on workers")
    return HarnessSpec(name=name if same else f"{cls.__module__}:{cls.__qualname__}", options=dict(options))


def make_executor(options: ExecutionOptions, *, gateway: Gateway, harness: Harness, harness_name: str,
                  harness_options: dict[str, Any], default_workers: int) -> RolloutExecutor:
    """The executor `options` ask for (`default_workers`: schedule.workers, used when options.workers is None)."""
    workers = options.workers or default_workers
    if options.executor == "threads":
        return ThreadExecutor(workers)
    spec = harness_spec(harness, harness_name, harness_options)
    remote: dict[ExecutorKind, Callable[[Gateway, HarnessSpec, ExecutionOptions, int], RolloutExecutor]] = {
        "processes": ProcessExecutor, "dask": DaskExecutor, "ray": RayExecutor}
    if options.executor not in remote:
        raise ValueError(f"unknown executor {options.executor!r} (known: {', '.join(choices_of(ExecutorKind))})")
    return remote[options.executor](gateway, spec, options, workers)


__all__ = ["DaskExecutor", "HarnessSpec", "InfrastructureFailure", "ProcessExecutor", "RayExecutor", "RolloutExecutor",
           "TaskSkills", "ThreadExecutor", "guarded_rollout", "harness_spec", "infrastructure_rollout", "make_executor",
           "route_address", "run_on_worker", "skills_per_task"]
