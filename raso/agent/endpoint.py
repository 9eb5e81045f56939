"""The loopback model endpoint: an HTTP server on 127.0.0.1 that external agent programs (Claude Code, Codex,
mini-swe-agent, a user's command) use as their model API. Every request is translated by a wire format
(raso.agent.wire) into one gateway call, so the agent's model calls are in raso's ledger, cache and budgets like
any other call, whatever model the `agent` role names (a hosted one, the embedded one, a scripted one in tests).

Each rollout gets a session (`endpoint.session(tag)`): its own URL prefix `/s/<token>` and API key, so calls are
attributed to their rollout and callers without both are refused. A session records its exchanges (request,
reply) and counts tokens, cost and calls. A gateway error (budget, an unreachable model) becomes an HTTP error in
the format's shape, so the agent stops instead of waiting; after one such refusal (budget, unusable, infrastructure)
every later call of the session is refused at once, without asking the gateway (and waiting out its retries) again.

What it reads is bounded whatever the caller sends: nothing before the session, path and key are known good; then a
body of at most MAX_BODY_BYTES in every framing (Content-Length, chunked with trailers; neither is 411), read into at
most that much memory and refused (413) before more is read, with at most LARGE_READS_PER_SESSION bodies over
LARGE_BODY_BYTES being read for one session at once; JSON nested at most MAX_JSON_DEPTH deep (checked before
parsing); a connection silent for `read_timeout_s` is closed. A refusal is one reply in the format's shape and a
line in the log, never a traceback.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import socket
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from raso.choices import FailureKind, WireFormatName
from raso.llm.errors import BudgetExceededError, LLMContextWindowError, failure_kind

from .wire import FORMATS, ChatReply, ChatRequest, ToolCall

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 32 * 1024 * 1024
LARGE_BODY_BYTES = 1024 * 1024  # a body past this size needs one of its session's large-read slots
LARGE_READS_PER_SESSION = 2  # so one rollout's parallel requests hold at most 2 x MAX_BODY_BYTES while read
MAX_JSON_DEPTH = 100  # arrays and objects inside each other; far below the parser's recursion limit
READ_TIMEOUT_S = 300.0  # a connection that sends nothing for this long (between requests too) is closed
SESSION_PREFIX = "/s/"
_MAX_LINE = 4096  # a chunk-size or trailer line
_MAX_TRAILER_LINES = 64
_READ_PIECE = 1024 * 1024
_LINGER_S = 5.0  # after refusing a body: how long its rest is read and dropped, so the client sees the reply
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_LEAF_CONTAINER = re.compile(rb"\[\]|\{\}")
_NOT_BRACKET = bytes(c for c in range(256) if c not in b"[]{}")


class EndpointSession:
    """One rollout's view of the endpoint: its URLs and key, and what its agent asked and got."""

    def __init__(self, endpoint: ModelEndpoint, tag: str) -> None:
        self.endpoint = endpoint
        self.tag = tag
        self.token = secrets.token_urlsafe(12)
        self.api_key = f"raso-{secrets.token_urlsafe(24)}"
        self.exchanges: list[tuple[ChatRequest, ChatReply]] = []
        self.errors: list[dict[str, Any]] = []  # {"status", "kind" (a FailureKind or "request"), "message", "at"}
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost_usd = 0.0
        self.calls = 0
        self._lock = threading.Lock()
        self._large_reads = threading.BoundedSemaphore(LARGE_READS_PER_SESSION)

    @property
    def url(self) -> str:
        """The session's root URL (no trailing slash)."""
        return f"http://127.0.0.1:{self.endpoint.port}{SESSION_PREFIX}{self.token}"

    def base_url(self, format_name: WireFormatName) -> str:
        """The base URL a client of `format_name` is given (the session's URL plus the format's base path)."""
        fmt = FORMATS.get(format_name)
        if fmt is None:
            raise ValueError(f"unknown wire format {format_name!r} (known: {', '.join(sorted(FORMATS))})")
        return self.url + str(getattr(fmt, "base_path", ""))

    def failure(self) -> FailureKind | None:
        """The failure kind of the worst gateway error this session answered (budget over unusable over
        infrastructure over agent_error), None when every call was answered."""
        kinds = {e["kind"] for e in self.errors}
        order: tuple[FailureKind, ...] = ("budget", "unusable", "infrastructure", "agent_error")
        return next((kind for kind in order if kind in kinds), None)

    def refusal(self) -> dict[str, Any] | None:
        """The first call this session refused for a reason outside the agent (budget, unusable, infrastructure),
        or None. Such a refusal is final for the rollout: the gateway has retried already."""
        with self._lock:
            return next((e for e in self.errors if e["kind"] in ("budget", "unusable", "infrastructure")), None)

    def _book(self, request: ChatRequest, reply: ChatReply, cost: float) -> None:
        with self._lock:
            self.exchanges.append((request, reply))
            self.prompt_tokens += reply.prompt_tokens
            self.completion_tokens += reply.completion_tokens
            self.cost_usd += cost
            self.calls += 1

    def _error(self, status: int, kind: str, message: str) -> None:
        with self._lock:  # `at` (epoch seconds): how long a program went on after a refusal can be told
            self.errors.append({"status": status, "kind": kind, "message": message, "at": time.time()})

    def close(self) -> None:
        self.endpoint._sessions.pop(self.token, None)

    def __enter__(self) -> EndpointSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ModelEndpoint:
    """A threaded HTTP server on 127.0.0.1 (a free port) serving every registered wire format for `gateway`'s
    `role`; a context manager (or start()/stop()). `max_tokens_cap` bounds the reply length an agent may ask for
    (agents ask for tens of thousands of tokens; a small model's context holds far fewer)."""

    def __init__(self, gateway: Any, role: str = "agent", stage: str = "rollout", *,
                 max_tokens_cap: int | None = None, read_timeout_s: float = READ_TIMEOUT_S) -> None:
        self.gateway = gateway
        self.role = role
        self.stage = stage
        self.max_tokens_cap = max_tokens_cap
        self.read_timeout_s = read_timeout_s
        self.formats = {name: cls() for name, cls in FORMATS.items()}
        self._routes = {path: fmt for fmt in self.formats.values() for path in fmt.paths}
        self._sessions: dict[str, EndpointSession] = {}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the model endpoint is not started")
        return int(self._server.server_address[1])

    def start(self) -> ModelEndpoint:
        if self._server is None:
            handler = type("Handler", (_Handler,), {"endpoint": self, "timeout": self.read_timeout_s})
            self._server = _Server(("127.0.0.1", 0), handler)
            self._thread = threading.Thread(target=self._server.serve_forever, name="raso-model-endpoint", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
            self._thread = None

    def __enter__(self) -> ModelEndpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def session(self, tag: str) -> EndpointSession:
        """A new session (a rollout's own URL prefix and key); close it when the rollout ends."""
        found = EndpointSession(self, tag)
        self._sessions[found.token] = found
        return found

    # ------------------------------------------------------------------ one call
    def answer(self, session: EndpointSession, request: ChatRequest) -> tuple[ChatReply, float]:
        """The gateway's reply to `request` (raises the gateway's LLMError)."""
        params: dict[str, Any] = {}
        max_tokens = request.max_tokens
        if self.max_tokens_cap is not None:
            max_tokens = min(max_tokens or self.max_tokens_cap, self.max_tokens_cap)
        for key, value in (("max_tokens", max_tokens), ("temperature", request.temperature), ("stop", request.stop),
                           ("tools", request.tools), ("tool_choice", request.tool_choice if request.tools else None)):
            if value is not None:
                params[key] = value
        completion = self.gateway.complete(self.role, request.messages, stage=self.stage, **params)
        calls = [ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"]) for c in completion.tool_calls or []]
        finish = "tool_calls" if calls else ("length" if completion.finish_reason == "length" else "stop")
        reply = ChatReply(text=completion.text, tool_calls=calls, finish_reason=finish,
                          prompt_tokens=completion.prompt_tokens, completion_tokens=completion.completion_tokens,
                          model=completion.model)
        return reply, completion.cost_usd


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A connection that ends badly (reset, timed out mid-reply) is the caller's business: one line, no
        # traceback on stderr (the stdlib's default).
        exc = sys.exc_info()[1]
        log.info("endpoint: a connection from %s ended: %s: %s", client_address, type(exc).__name__, exc)
        log.debug("endpoint: connection error", exc_info=True)


class _BodyError(Exception):
    """A request body that is refused before (or while) it is read: an HTTP status and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _nested_too_deep(raw: bytes | bytearray, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text `raw` nests arrays/objects more than `limit` deep (or its brackets do not pair up),
    found without recursion: strings dropped, then the brackets alone, one level of leaf containers removed per pass."""
    brackets = _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKET)
    for _ in range(limit):
        if not brackets:
            return False
        brackets = _LEAF_CONTAINER.sub(b"", brackets)
    return bool(brackets)


def _status_of(exc: Exception) -> tuple[int, str]:
    """(HTTP status, failure kind) of a gateway error. Never a status a client retries on (429, 5xx): the gateway
    has retried already, and an agent retrying a refused budget would only wait."""
    kind = failure_kind(exc)
    if isinstance(exc, BudgetExceededError):
        return 402, kind
    if isinstance(exc, LLMContextWindowError):
        return 400, kind
    return 400 if kind == "agent_error" else 403, kind


class _Handler(BaseHTTPRequestHandler):
    endpoint: ModelEndpoint
    protocol_version = "HTTP/1.1"
    server_version = "raso-endpoint"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        log.debug("endpoint: " + format, *args)

    # ------------------------------------------------------------------ routing
    def _route(self) -> tuple[EndpointSession | None, str]:
        path = self.path.split("?", 1)[0]
        if not path.startswith(SESSION_PREFIX):
            return None, path
        token, _, rest = path[len(SESSION_PREFIX):].partition("/")
        return self.endpoint._sessions.get(token), "/" + rest

    def _authorized(self, session: EndpointSession) -> bool:
        keys = [self.headers.get("x-api-key") or "", self.headers.get("api-key") or ""]
        auth = self.headers.get("authorization") or ""
        if auth.lower().startswith("bearer "):
            keys.append(auth[7:].strip())
        return any(secrets.compare_digest(k.encode(), session.api_key.encode()) for k in keys if k)

    def _send_json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _fail(self, status: int, message: str, fmt: Any = None) -> None:
        fmt = fmt or self.endpoint.formats["openai-chat"]
        self._send_json(status, fmt.error(status, message))

    def _read_body(self, session: EndpointSession, held: list[threading.BoundedSemaphore]) -> bytearray:
        """The request body, read by its framing into at most MAX_BODY_BYTES (raises _BodyError). A body past
        LARGE_BODY_BYTES first takes one of the session's large-read slots (appended to `held`, released by the
        caller once the body is parsed)."""
        codings = [c.strip().lower() for v in self.headers.get_all("transfer-encoding") or [] for c in v.split(",")]
        lengths = self.headers.get_all("content-length") or []
        if codings:
            if lengths:
                raise _BodyError(400, "a request may not have both Transfer-Encoding and Content-Length")
            if codings != ["chunked"]:
                raise _BodyError(400, f"unsupported Transfer-Encoding {', '.join(codings)!r} (only chunked is read)")
            return self._read_chunked(session, held)
        if not lengths:
            raise _BodyError(411, "a request body needs a Content-Length (or Transfer-Encoding: chunked)")
        text = {v.strip() for v in lengths}
        if len(text) != 1 or not (value := text.pop()).isascii() or not value.isdigit():
            raise _BodyError(400, f"bad Content-Length {', '.join(lengths)[:40]!r}: one non-negative number is needed")
        length = int(value)
        if length > MAX_BODY_BYTES:
            raise _BodyError(413, f"request body too large: {length} bytes (at most {MAX_BODY_BYTES})")
        if length > LARGE_BODY_BYTES:
            self._take_large_read(session, held)
        data = bytearray(length)
        view, filled = memoryview(data), 0
        while filled < length:
            got = self.rfile.readinto(view[filled:filled + _READ_PIECE])
            if not got:
                raise _BodyError(400, f"the request body ended after {filled} of {length} bytes")
            filled += got
        return data

    def _take_large_read(self, session: EndpointSession, held: list[threading.BoundedSemaphore]) -> None:
        if held:
            return
        if not session._large_reads.acquire(timeout=self.timeout):
            raise _BodyError(429, f"more than {LARGE_READS_PER_SESSION} request bodies over {LARGE_BODY_BYTES} bytes "
                                  f"at once for this session; retry when one is done")
        held.append(session._large_reads)

    def _read_chunked(self, session: EndpointSession, held: list[threading.BoundedSemaphore]) -> bytearray:
        data = bytearray()
        while True:
            line = self._read_line("chunk size")
            size_text = line.split(b";", 1)[0].strip()
            if not _CHUNK_SIZE.fullmatch(size_text):
                raise _BodyError(400, f"bad chunk size line {bytes(line[:40])!r}")
            size = int(size_text, 16)
            if size == 0:
                break
            if len(data) + size > MAX_BODY_BYTES:
                raise _BodyError(413, f"request body too large: over {MAX_BODY_BYTES} bytes")
            if len(data) + size > LARGE_BODY_BYTES:
                self._take_large_read(session, held)
            while size:
                piece = self.rfile.read(min(size, _READ_PIECE))
                if not piece:
                    raise _BodyError(400, "the request body ended inside a chunk")
                data += piece
                size -= len(piece)
            if self._read_line("chunk end").strip():
                raise _BodyError(400, "a chunk's data is longer than its size")
        for _ in range(_MAX_TRAILER_LINES):
            if not self._read_line("trailer").strip():
                return data
        raise _BodyError(400, f"more than {_MAX_TRAILER_LINES} trailer lines")

    def _read_line(self, what: str) -> bytes:
        line = self.rfile.readline(_MAX_LINE + 1)
        if not line.endswith(b"\n"):
            raise _BodyError(400, f"bad {what} line: " + ("over 4096 bytes" if len(line) > _MAX_LINE else "missing"))
        return line

    def _read_request(self, session: EndpointSession, fmt: Any) -> ChatRequest | None:
        """The request, read and parsed; None when it was refused (the reply is sent and the session has the error)."""
        held: list[threading.BoundedSemaphore] = []
        try:
            try:
                raw = self._read_body(session, held)
            except _BodyError as exc:
                self._refuse_body(exc.status, str(exc), fmt, session)
                return None
            except TimeoutError:
                self._refuse_body(408, f"the request body did not arrive within {self.timeout} s", fmt, session)
                return None
            try:
                if _nested_too_deep(raw):
                    raise ValueError(f"the JSON body nests more than {MAX_JSON_DEPTH} levels deep, or its brackets "
                                     "do not pair up")
                body = json.loads(raw or b"null")
                if not isinstance(body, dict):
                    raise ValueError("the request body must be a JSON object")
                return fmt.to_chat(body)
            except Exception as exc:  # noqa: BLE001 - whatever the body makes the parser raise, the agent gets a 400
                message = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
                session._error(400, "request", message)
                self._fail(400, f"bad request: {message}", fmt)
                return None
        finally:
            for slot in held:
                slot.release()

    def _refuse_body(self, status: int, message: str, fmt: Any, session: EndpointSession | None) -> None:
        """Answer a request whose body is refused or left unread (recorded in `session` when given), then read and
        drop what the client still sends for a few seconds (bounded by time, not memory) before closing, so a client
        still writing sees the reply rather than a reset."""
        self.close_connection = True
        log.info("endpoint: refused a request (%d): %s", status, message)
        if session is not None:
            session._error(status, "request", message)
        self._fail(status, message, fmt)
        if status == 408:
            return
        deadline = time.monotonic() + _LINGER_S
        sink = bytearray(65536)
        try:
            self.connection.shutdown(socket.SHUT_WR)
            while (left := deadline - time.monotonic()) > 0:
                self.connection.settimeout(left)
                if not self.connection.recv_into(sink):
                    break
        except OSError:
            pass

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        session, path = self._route()
        if session is None:
            self._fail(404, f"no such endpoint session: {self.path.split('?')[0]}")
            return
        if not self._authorized(session):
            self._fail(401, "missing or wrong API key for this endpoint session")
            return
        if path in ("/v1/models", "/models"):
            name = "raso-agent"
            self._send_json(200, {"object": "list", "data": [{"id": name, "object": "model", "created": 0,
                                                              "owned_by": "raso"}]})
            return
        self._fail(404, f"no such path: GET {path} (served: GET /v1/models and POST {', '.join(sorted(self.endpoint._routes))})")

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        session, path = self._route()
        fmt = self.endpoint._routes.get(path)
        # Who and where before what: no body is read for an unknown session or path, or without the session's key.
        if session is None:
            self._refuse_body(404, f"no such endpoint session: {self.path.split('?')[0]}", fmt, None)
            return
        if fmt is None:
            self._refuse_body(404, f"no such path: POST {path} (served: {', '.join(sorted(self.endpoint._routes))})",
                              None, None)
            return
        if not self._authorized(session):
            self._refuse_body(401, "missing or wrong API key for this endpoint session", fmt, None)
            return
        request = self._read_request(session, fmt)
        if request is None:
            return
        refused = session.refusal()
        if refused is not None:  # answered at once: asking the gateway again would wait out its retries again
            self._fail(refused["status"], refused["message"], fmt)
            return
        try:
            reply, cost = self.endpoint.answer(session, request)
        except Exception as exc:  # a gateway error: the agent gets an answer in its own format, never silence
            status, kind = _status_of(exc)
            message = f"{type(exc).__name__}: {exc}"
            session._error(status, kind, message)
            self._fail(status, message, fmt)
            return
        session._book(request, reply, cost)
        if request.stream:
            self._stream(fmt.stream(reply, request))
        else:
            self._send_json(200, fmt.from_chat(reply, request))

    def _stream(self, events: Iterator[bytes]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")  # the body ends when the connection does
        self.end_headers()
        self.close_connection = True
        for event in events:
            self.wfile.write(event)
        self.wfile.flush()


__all__ = ["EndpointSession", "ModelEndpoint"]
