"""A loopback stand-in model server for tests (no tests here): an OpenAI-compatible /v1/chat/completions endpoint on
127.0.0.1 that answers each request with the scripted function registered for the requested model name. Processes
that cannot share the test's in-process scripted models (Ray's workers) reach it as `openai/<name>` with its
`api_base`, through litellm like any hosted model."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[list[dict[str, Any]]], str]


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"

    def log_message(self, *args: Any) -> None:  # quiet
        return

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        model = str(body.get("model", ""))
        answer = self.server.models.get(model)
        if answer is None or not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": f"no scripted model {model!r} at {self.path}", "type": "not_found"}})
            return
        messages = body.get("messages") or []
        with self.server.lock:
            self.server.calls.append(model)
        text = answer(messages)
        prompt = sum(len(str(m.get("content") or "").split()) for m in messages)
        completion = len(text.split())
        self._send(200, {
            "id": f"chatcmpl-{len(self.server.calls)}", "object": "chat.completion", "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        })

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, models: dict[str, Answer]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.models = models
        self.calls: list[str] = []
        self.lock = threading.Lock()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


@contextmanager
def loopback_model_server(models: dict[str, Answer]) -> Iterator[_Server]:
    """Serve `models` (name -> scripted answer) on a free loopback port for the duration of the block."""
    server = _Server(models)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
