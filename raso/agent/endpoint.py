"""The loopback model endpoint: an HTTP server on 127.0.0.1 that external agent programs (Claude Code, Codex,
mini-swe-agent, a user's command) use as their model API. Every request is translated by a wire format
(raso.agent.wire) into one gateway call, so the agent's model calls are in raso's ledger, cache and budgets like
any other call, whatever model the `agent` role names (a hosted one, the embedded one, a scripted one in tests).

Each rollout gets a session (`endpoint.session(tag)`): its own URL prefix `/s/<token>` and API key, so calls are
attributed to their rollout and callers without both are refused. A session records its exchanges (request,
reply) and counts tokens, cost and calls. A gateway error (budget, an unreachable model) becomes an HTTP error in
the format's shape, so the agent stops instead of waiting; after one such refusal (budget, unusable, infrastructure)
every later call of the session is refused at once, without asking the gateway (and waiting out its retries) again.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from raso.choices import FailureKind
from raso.llm.errors import BudgetExceededError, LLMContextWindowError, failure_kind

from .wire import FORMATS, ChatReply, ChatRequest, ToolCall

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 32 * 1024 * 1024
SESSION_PREFIX = "/s/"


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

    @property
    def url(self) -> str:
        """The session's root URL (no trailing slash)."""
        return f"http://127.0.0.1:{self.endpoint.port}{SESSION_PREFIX}{self.token}"

    def base_url(self, format_name: str) -> str:
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
                 max_tokens_cap: int | None = None) -> None:
        self.gateway = gateway
        self.role = role
        self.stage = stage
        self.max_tokens_cap = max_tokens_cap
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
            handler = type("Handler", (_Handler,), {"endpoint": self})
            self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
            self._server.daemon_threads = True
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

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
                if len(data) > MAX_BODY_BYTES:
                    raise ValueError("request body too large")
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_BODY_BYTES:
            raise ValueError("request body too large")
        return self.rfile.read(length) if length else b""

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
        try:
            raw = self._read_body()
        except ValueError as exc:
            self.close_connection = True
            self._fail(413, str(exc))
            return
        if session is None:
            self._fail(404, f"no such endpoint session: {self.path.split('?')[0]}")
            return
        fmt = self.endpoint._routes.get(path)
        if fmt is None:
            self._fail(404, f"no such path: POST {path} (served: {', '.join(sorted(self.endpoint._routes))})")
            return
        if not self._authorized(session):
            self._fail(401, "missing or wrong API key for this endpoint session", fmt)
            return
        try:
            body = json.loads(raw or b"null")
            if not isinstance(body, dict):
                raise ValueError("the request body must be a JSON object")
            request = fmt.to_chat(body)
        except ValueError as exc:
            session._error(400, "request", str(exc))
            self._fail(400, f"bad request: {exc}", fmt)
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
