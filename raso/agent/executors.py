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
import secrets
import socket
import threading
import time
from collections.abc import Callable, Generator, Sequence
from multiprocessing.connection import Client, Connection, Listener
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, model_validator

from raso.harness import Harness, Rollout, RolloutRunner, Task, failed_rollout
from raso.llm.errors import LLMError, LLMUnavailableError

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from raso.llm.gateway import Gateway
    from raso.skill import Skill

logger = logging.getLogger(__name__)

Backend = Literal["threads", "processes", "dask", "ray"]
BACKENDS: tuple[str, ...] = ("threads", "processes", "dask", "ray")

#: An agent factory: the engine's `RunComponents.agent_factory` (a gateway in, a RolloutRunner out).
AgentFactory = Callable[[Any], RolloutRunner]


class ExecutionOptions(BaseModel):
    """Where a run's rollouts execute (the `execution` section of the run's config)."""

    model_config = ConfigDict(extra="forbid")

    backend: Backend = Field(default="threads", description="threads (in this process), processes (a local pool), "
                             "dask or ray (a cluster's workers)")
    address: str | None = Field(default=None, description="an existing cluster: a Dask scheduler "
                                "(tcp://host:8786) or a Ray address (host:6379, ray://host:10001, auto); None starts "
                                "a local one on this machine")
    workers: int | None = Field(default=None, ge=1, description="rollouts run at once: threads or processes, or the "
                                "workers of the local cluster started for the run; None = schedule.workers. With an "
                                "address, the cluster's own size decides")
    driver_host: str | None = Field(default=None, description="the host name or IP address at which the workers "
                                    "reach this process's model-call server; None = the local address on the route "
                                    "to the cluster (loopback for a local one)")

    @model_validator(mode="after")
    def _address_needs_a_cluster(self) -> ExecutionOptions:
        if self.backend in ("threads", "processes") and (self.address or self.driver_host):
            given = "address" if self.address else "driver_host"
            raise ValueError(f"{given} is for a cluster: set backend to dask or ray (backend {self.backend} runs "
                             "on this machine)")
        return self


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


# ---------------------------------------------------------------------------------------------- model-call RPC
#: The gateway methods a worker may call through the driver (UnitGateway's surface, less the ledger).
REMOTE_METHODS = frozenset({"complete", "structured", "profile", "preflight", "price", "unpriced_models",
                            "worst_case_cost"})


def _pack_error(exc: BaseException) -> tuple[Any, ...]:
    return ("error", type(exc), exc.args, dict(getattr(exc, "__dict__", {})), str(exc))


def _unpack_error(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any], text: str) -> BaseException:
    """The driver's exception, rebuilt without calling its constructor (some take keyword-only arguments)."""
    try:
        exc = cls.__new__(cls)
        exc.args = args
        exc.__dict__.update(state)
        return exc
    except Exception:  # an exotic exception type: keep its message
        return LLMError(f"{cls.__name__}: {text}")


class GatewayServer:
    """Serves the driver's gateway to rollouts running elsewhere: one thread per worker connection, each request
    made through `UnitGateway(gateway, unit)` so it carries the batch's cache tag. Connections authenticate with a
    random per-run key (multiprocessing.connection's HMAC handshake) before anything is unpickled."""

    def __init__(self, gateway: Gateway, *, bind: str = "127.0.0.1", advertise: str | None = None) -> None:
        self.gateway = gateway
        self.authkey = secrets.token_bytes(32)
        self._listener = Listener((bind, 0), authkey=self.authkey)
        port = int(self._listener.address[1])  # a TCP listener's address is (host, port)
        self.address: tuple[str, int] = (advertise or bind, port)
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._accept_loop, name="raso-gateway-server", daemon=True)
        self._accept.start()

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                conn = self._listener.accept()
            except Exception:  # a failed handshake (wrong key) or the listener closing
                if self._closed.is_set():
                    return
                continue
            if self._closed.is_set():
                conn.close()
                return
            thread = threading.Thread(target=self._serve, args=(conn,), name="raso-gateway-conn", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, conn: Connection) -> None:
        from raso.engine.replay import UnitGateway

        with conn:
            while True:
                try:
                    unit, method, args, kwargs = conn.recv()
                except (EOFError, OSError):  # the worker finished or died
                    return
                try:
                    if method not in REMOTE_METHODS:
                        raise LLMError(f"gateway method {method!r} cannot be called from a worker")
                    reply: tuple[Any, ...] = ("ok", getattr(UnitGateway(self.gateway, unit), method)(*args, **kwargs))
                except Exception as exc:
                    reply = _pack_error(exc)
                try:
                    conn.send(reply)
                except Exception as exc:  # an unpicklable result or error: say so rather than hang the worker
                    try:
                        conn.send(_pack_error(LLMError(f"the driver could not send the reply of {method}: {exc}")))
                    except OSError:
                        return

    def remote(self, unit: str) -> RemoteGateway:
        return RemoteGateway(self.address, self.authkey, unit, self.gateway.config)

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        try:  # wake the blocking accept() so its thread ends
            Client(("127.0.0.1" if self.address[0] in ("0.0.0.0", "") else self.address[0], self.address[1]),
                   authkey=self.authkey).close()
        except Exception:
            pass
        self._listener.close()


_thread_connections = threading.local()


class RemoteGateway:
    """A worker's stand-in for the run's `UnitGateway`: the same methods, each one a request to the driver's
    `GatewayServer`. Picklable (the connection is per worker thread and made on first use). A driver that cannot
    be reached is an outage (LLMUnavailableError: infrastructure), never the agent's failure."""

    def __init__(self, address: tuple[str, int], authkey: bytes, unit: str, config: Any) -> None:
        self._set(address, authkey, unit, config)

    def _set(self, address: tuple[str, int], authkey: bytes, unit: str, config: Any) -> None:
        self._address = (str(address[0]), int(address[1]))
        self._authkey = authkey
        self._unit = unit
        self._config = config

    def __getstate__(self) -> dict[str, Any]:
        return {"address": self._address, "authkey": self._authkey, "unit": self._unit, "config": self._config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._set(state["address"], state["authkey"], state["unit"], state["config"])

    @property
    def unit(self) -> str:
        return self._unit

    @property
    def config(self) -> Any:
        """The driver's GatewayConfig (read-only here: the driver's gateway makes the calls)."""
        return self._config

    @property
    def address(self) -> tuple[str, int]:
        """The driver's model-call server."""
        return self._address

    def _connection(self) -> Connection:
        """This thread's connection to the driver, shared by every batch's RemoteGateway (the unit travels with
        each request), so the driver serves one connection per worker thread however many batches a run has."""
        conns: dict[tuple[Any, ...], Connection] = _thread_connections.__dict__.setdefault("by_server", {})
        conn = conns.get((self._address, self._authkey))
        if conn is None:
            conn = conns[(self._address, self._authkey)] = Client(self._address, authkey=self._authkey)
        return conn

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            conn = self._connection()
            conn.send((self._unit, method, args, kwargs))
            reply = conn.recv()
        except (OSError, EOFError) as exc:
            _thread_connections.__dict__.get("by_server", {}).pop((self._address, self._authkey), None)
            raise LLMUnavailableError(f"the run's driver at {self.address[0]}:{self.address[1]} cannot be reached "
                                      f"from this worker ({type(exc).__name__}: {exc})") from exc
        if reply[0] == "ok":
            return reply[1]
        raise _unpack_error(*reply[1:])

    def complete(self, role: str, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        return self._call("complete", role, messages, **kwargs)

    def structured(self, role: str, messages: list[dict[str, Any]], schema: type[BaseModel], **kwargs: Any) -> Any:
        return self._call("structured", role, messages, schema, **kwargs)

    def profile(self, role: str) -> Any:
        return self._call("profile", role)

    def preflight(self) -> None:
        self._call("preflight")

    def price(self, model: str) -> Any:
        return self._call("price", model)

    def unpriced_models(self) -> list[str]:
        return self._call("unpriced_models")

    def worst_case_cost(self, model: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> float:
        return self._call("worst_case_cost", model, messages, params)


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
        from raso.engine.replay import UnitGateway

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
                             f"{exc}); use execution.backend=threads with this agent") from exc

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
                raise ImportError("execution.backend=dask needs Dask's `distributed` package: pip install "
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
            raise ImportError("execution.backend=ray needs Ray: pip install 'raso[ray]'") from exc
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
    if options.backend == "threads":
        return ThreadExecutor(workers)
    spec = harness_spec(harness, harness_name, harness_options)
    if options.backend == "processes":
        return ProcessExecutor(gateway, spec, options, workers)
    if options.backend == "dask":
        return DaskExecutor(gateway, spec, options, workers)
    if options.backend == "ray":
        return RayExecutor(gateway, spec, options, workers)
    raise ValueError(f"unknown execution backend {options.backend!r} (known: {', '.join(BACKENDS)})")


__all__ = ["BACKENDS", "DaskExecutor", "ExecutionOptions", "GatewayServer", "HarnessSpec", "InfrastructureFailure",
           "ProcessExecutor", "RayExecutor", "RemoteGateway", "RolloutExecutor", "TaskSkills", "ThreadExecutor",
           "guarded_rollout", "harness_spec", "infrastructure_rollout", "make_executor", "route_address", "run_on_worker",
           "skills_per_task"]
