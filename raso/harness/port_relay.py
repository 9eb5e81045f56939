"""A byte relay for a sandboxed run's loopback ports: one thread and one `selectors` loop forward every connection
accepted on a listener to a fresh upstream connection, both ways, until both sides are done.

It runs twice per run that may reach host loopback ports. Inside the box its source is run as a script (`python -I
-S -c <this file's text>`, stdlib only, nothing imported from raso): it listens on 127.0.0.1:<port> in the run's own
network namespace, forwards to the Unix socket <dir>/<port>.sock, starts the run's command and exits with its
status. On the host, `raso.harness.sandbox` imports `Relay` to forward that Unix socket to the real 127.0.0.1:<port>.

Why one loop and a cap: a thread per connection ran out of the run's process and file limits after a few hundred
idle connections, killing the accept thread and the run's endpoint with it. Here each connection costs two sockets
and at most two 64 KiB buffers, at most `max_connections` are open at once, and a new connection past that closes
the one idle longest among those that never carried a byte, else the one idle longest (so idle ones cannot lock a
working client out, not even one whose request waits for its answer). An error on one connection closes that
connection only; the loop never stops for it.
"""

from __future__ import annotations

import errno
import json
import os
import selectors
import socket
import sys
import threading
import time
from typing import Any

MAX_CONNECTIONS = 32  # open at once per relay (per run); past this the longest-idle one is closed
BUFFER_BYTES = 64 * 1024  # read from one side only when the other side's pending bytes are all sent


class _Pair:
    """A client connection and its upstream, with the bytes read from each side not yet sent to the other."""

    __slots__ = ("client", "upstream", "connecting", "to_client", "to_upstream", "client_eof", "upstream_eof",
                 "last_active", "used")

    def __init__(self, client: socket.socket, upstream: socket.socket, connecting: bool) -> None:
        self.client, self.upstream, self.connecting = client, upstream, connecting
        self.to_client, self.to_upstream = b"", b""
        self.client_eof = self.upstream_eof = False
        self.last_active = time.monotonic()
        self.used = False  # a byte has passed: a client at work (a request waiting for its answer looks idle too)


class Relay:
    """Forwards connections from listeners to upstream addresses; `run()` serves until `stop()` (from any thread)."""

    def __init__(self, max_connections: int = MAX_CONNECTIONS) -> None:
        self.max_connections = max(1, max_connections)
        self.selector = selectors.DefaultSelector()
        self.pairs: list[_Pair] = []
        self.listeners: list[socket.socket] = []
        self._events: dict[socket.socket, int] = {}  # what each registered socket waits for
        self._wake_read, self._wake_write = socket.socketpair()
        self._wake_read.setblocking(False)
        self.selector.register(self._wake_read, selectors.EVENT_READ, ("wake", None))
        self._stopping = False

    def add_listener(self, listener: socket.socket, family: int, address: Any) -> None:
        """Forward every connection accepted on `listener` (already listening) to `address` of `family`."""
        listener.setblocking(False)
        self.listeners.append(listener)
        self.selector.register(listener, selectors.EVENT_READ, ("listen", (family, address)))

    def stop(self) -> None:
        self._stopping = True
        try:
            self._wake_write.send(b"x")
        except OSError:
            pass

    def run(self) -> None:
        try:
            while not self._stopping:
                for key, mask in self.selector.select():
                    kind, target = key.data
                    if kind == "listen":
                        self._accept(key.fileobj, *target)  # type: ignore[arg-type]
                    elif kind == "pair":
                        self._serve(target, key.fileobj, mask)  # type: ignore[arg-type]
        finally:
            for pair in list(self.pairs):
                self._close(pair)
            for sock in [*self.listeners, self._wake_read, self._wake_write]:
                sock.close()
            self.selector.close()

    # ------------------------------------------------------------------ connections
    def _accept(self, listener: socket.socket, family: int, address: Any) -> None:
        try:
            client, _ = listener.accept()
        except OSError as exc:  # out of file descriptors (or a connection reset before accept): make room, go on
            if exc.errno in (errno.EMFILE, errno.ENFILE):
                if self.pairs:
                    self._close(self._victim())
                else:  # nothing of ours to close: wait instead of spinning on a listener that stays readable
                    time.sleep(0.05)
            return
        upstream = None
        try:
            if len(self.pairs) >= self.max_connections:
                self._close(self._victim())
            client.setblocking(False)
            upstream = socket.socket(family, socket.SOCK_STREAM)
            upstream.setblocking(False)
            code = upstream.connect_ex(address)
            if code not in (0, errno.EINPROGRESS):
                raise OSError(code, os.strerror(code))
            pair = _Pair(client, upstream, connecting=code != 0)
            self.pairs.append(pair)
            self._update(pair)
        except Exception:  # noqa: BLE001 - whatever went wrong, only this connection is refused
            client.close()
            if upstream is not None:
                upstream.close()

    def _victim(self) -> _Pair:
        """The connection to close for room: the longest idle of those that never carried a byte, else the longest
        idle of all. Under load a working client's request can sit unanswered behind queued idle connections; by
        idle time alone it would be closed first."""
        unused = [p for p in self.pairs if not p.used]
        return min(unused or self.pairs, key=lambda p: p.last_active)

    def _serve(self, pair: _Pair, sock: socket.socket, mask: int) -> None:
        if pair not in self.pairs:  # closed by an earlier event of the same round
            return
        try:
            if sock is pair.upstream and pair.connecting:
                code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if code:
                    raise OSError(code, os.strerror(code))
                pair.connecting = False
            else:
                self._move(pair, sock, mask)
            if pair.client_eof and pair.upstream_eof and not pair.to_client and not pair.to_upstream:
                self._close(pair)
            else:
                self._update(pair)
        except Exception:  # noqa: BLE001 - a reset, a refused upstream, anything: this connection ends, the loop goes on
            self._close(pair)

    def _move(self, pair: _Pair, sock: socket.socket, mask: int) -> None:
        is_client = sock is pair.client
        if mask & selectors.EVENT_WRITE:  # send what was read from the other side
            if is_client:
                pair.to_client = pair.to_client[sock.send(pair.to_client):]
            else:
                pair.to_upstream = pair.to_upstream[sock.send(pair.to_upstream):]
            pair.last_active = time.monotonic()
            pair.used = True
        if mask & selectors.EVENT_READ:
            data = sock.recv(BUFFER_BYTES)
            pair.used = pair.used or bool(data)
            if data and is_client:
                pair.to_upstream = data
            elif data:
                pair.to_client = data
            else:  # this side is done sending: tell the other (nothing is pending for it, or this side was not read)
                if is_client:
                    pair.client_eof = True
                else:
                    pair.upstream_eof = True
                (pair.upstream if is_client else pair.client).shutdown(socket.SHUT_WR)
            pair.last_active = time.monotonic()

    def _update(self, pair: _Pair) -> None:
        """Register each side for what it can do now: read when the other side has nothing pending, write when it has."""
        if pair.connecting:
            wants = {pair.client: 0, pair.upstream: selectors.EVENT_WRITE}
        else:
            wants = {
                pair.client: (selectors.EVENT_READ if not pair.client_eof and not pair.to_upstream else 0)
                | (selectors.EVENT_WRITE if pair.to_client else 0),
                pair.upstream: (selectors.EVENT_READ if not pair.upstream_eof and not pair.to_client else 0)
                | (selectors.EVENT_WRITE if pair.to_upstream else 0),
            }
        for sock, events in wants.items():
            had = self._events.get(sock, 0)
            if events == had:
                continue
            if not events:
                self.selector.unregister(sock)
                del self._events[sock]
            elif had:
                self.selector.modify(sock, events, ("pair", pair))
                self._events[sock] = events
            else:
                self.selector.register(sock, events, ("pair", pair))
                self._events[sock] = events

    def _close(self, pair: _Pair) -> None:
        if pair in self.pairs:
            self.pairs.remove(pair)
        for sock in (pair.client, pair.upstream):
            if self._events.pop(sock, 0):
                self.selector.unregister(sock)
            sock.close()


def _connection_cap() -> int:
    """MAX_CONNECTIONS, or fewer when the run's open-file limit cannot hold two sockets for each."""
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return MAX_CONNECTIONS
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(1, min(MAX_CONNECTIONS, (soft - 16) // 2))


def _main_in_box() -> None:
    """argv: a JSON config {"ports": [...], "dir": folder of <port>.sock}, then the command to run."""
    cfg, argv = json.loads(sys.argv[1]), sys.argv[2:]
    relay = Relay(_connection_cap())
    for port in cfg["ports"]:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
        relay.add_listener(listener, socket.AF_UNIX, f"{cfg['dir']}/{port}.sock")
    threading.Thread(target=relay.run, daemon=True).start()
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    os._exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    _main_in_box()
