"""The model-call link between a worker and the driver: a rollout on another process reaches its model through
the driver's own gateway. The agent shipped to a worker holds a `RemoteGateway`, which sends each call over an
authenticated loopback/LAN connection to the driver's `GatewayServer`, which makes it through the run's
`UnitGateway`. Both sides serve exactly `raso.llm.view.VIEW_METHODS`."""

from __future__ import annotations

import secrets
import threading
from multiprocessing.connection import Client, Connection, Listener
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from raso.llm.errors import LLMError, LLMUnavailableError
from raso.llm.view import VIEW_METHODS, UnitGateway

if TYPE_CHECKING:
    from raso.llm.gateway import Gateway


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
        with conn:
            while True:
                try:
                    unit, method, args, kwargs = conn.recv()
                except (EOFError, OSError):  # the worker finished or died
                    return
                try:
                    if method not in VIEW_METHODS:
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
    """A worker's stand-in for the run's `UnitGateway`: the same methods (raso.llm.view.VIEW_METHODS; not the
    ledger), each one a request to the driver's `GatewayServer`. Picklable (the connection is per worker thread
    and made on first use). A driver that cannot be reached is an outage (LLMUnavailableError: infrastructure),
    never the agent's failure."""

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


__all__ = ["GatewayServer", "RemoteGateway"]
