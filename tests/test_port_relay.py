"""The relay between a sandboxed run's loopback port and the host's model endpoint survives what an agent may do to
it: hundreds of idle connections, then a normal request, still answered (the old thread-per-connection relay lost
its accept thread to the run's file and process limits and left the endpoint dead for the rest of the run)."""

from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
from pathlib import Path

import openai
import pytest

import raso.harness.sandbox as sandbox_module
from raso.agent.endpoint import ModelEndpoint
from raso.harness.port_relay import MAX_CONNECTIONS, Relay
from raso.harness.sandbox import Sandbox, SandboxLimits
from raso.llm.config import GatewayConfig, RoleConfig
from raso.llm.gateway import LLMGateway
from raso.llm.scripted import ScriptedModel


def _endpoint(model: ScriptedModel) -> ModelEndpoint:
    return ModelEndpoint(LLMGateway(GatewayConfig(roles={"agent": RoleConfig(model=model.model)})))


def test_idle_connections_neither_kill_the_relay_nor_lock_a_client_out():
    model = ScriptedModel(["still answered", "streamed " * 2000])
    relay = Relay()
    listener = socket.create_server(("127.0.0.1", 0))
    with _endpoint(model) as endpoint, endpoint.session("r1") as session:
        relay.add_listener(listener, socket.AF_INET, ("127.0.0.1", endpoint.port))
        thread = threading.Thread(target=relay.run, daemon=True)
        thread.start()
        relay_port = listener.getsockname()[1]
        idle = [socket.create_connection(("127.0.0.1", relay_port), timeout=10) for _ in range(300)]
        try:
            base = session.base_url("openai-chat").replace(f":{endpoint.port}/", f":{relay_port}/")
            client = openai.OpenAI(base_url=base, api_key=session.api_key, max_retries=0, timeout=30)
            reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x" * 1_000_000}])
            chunks = list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "y"}],
                                                         stream=True))
            open_pairs = len(relay.pairs)
        finally:
            for sock in idle:
                sock.close()
            relay.stop()
            thread.join(10)
    assert reply.choices[0].message.content == "still answered"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "streamed " * 2000
    assert model.calls[0][0]["content"] == "x" * 1_000_000  # 1 MB through the relay, byte for byte
    assert open_pairs <= MAX_CONNECTIONS and session.calls == 2
    assert not thread.is_alive() and listener.fileno() == -1  # stop() ends the loop and closes what it held


def test_a_request_waiting_for_its_answer_is_not_closed_for_idle_connections_behind_it():
    # under load a request can wait for its answer while idle connections queue behind it; past the limit the relay
    # makes room by closing a connection that never carried a byte, not the working one that looks idle longest
    upstream = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    answer = threading.Event()

    def serve() -> None:
        while True:
            try:
                conn, _ = upstream.accept()
            except OSError:
                return
            accepted.append(conn)
            if len(accepted) == 1:  # the first is the request's: read it, answer when told
                def reply(c: socket.socket = conn) -> None:
                    c.recv(100)
                    answer.wait(10)
                    c.sendall(b"the answer")
                    c.close()
                threading.Thread(target=reply, daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    relay = Relay(max_connections=4)
    listener = socket.create_server(("127.0.0.1", 0))
    relay.add_listener(listener, socket.AF_INET, ("127.0.0.1", upstream.getsockname()[1]))
    thread = threading.Thread(target=relay.run, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port), timeout=10)
    client.sendall(b"request")
    for _ in range(1000):  # the request has reached the upstream
        if accepted:
            break
        threading.Event().wait(0.01)
    idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(10)]
    for _ in range(1000):  # every idle connection accepted (each opens its upstream connection)
        if len(accepted) == 11:
            break
        threading.Event().wait(0.01)
    answer.set()
    try:
        assert client.recv(100) == b"the answer"
    finally:
        for sock in [client, *idle]:
            sock.close()
        relay.stop()
        thread.join(10)
        upstream.close()
    assert len(accepted) == 11


def test_an_unreachable_upstream_ends_that_connection_only():
    closed = socket.create_server(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    relay = Relay()
    listener = socket.create_server(("127.0.0.1", 0))
    relay.add_listener(listener, socket.AF_INET, ("127.0.0.1", closed_port))
    thread = threading.Thread(target=relay.run, daemon=True)
    thread.start()
    try:
        outcomes = []
        for _ in range(3):
            with socket.create_connection(listener.getsockname(), timeout=10) as client:
                client.sendall(b"GET / HTTP/1.1\r\n\r\n")
                try:
                    outcomes.append(client.recv(100))
                except ConnectionResetError:
                    outcomes.append(b"reset")
        alive, pairs_left = thread.is_alive(), len(relay.pairs)
    finally:
        relay.stop()
        thread.join(10)
    assert set(outcomes) <= {b"", b"reset"} and len(outcomes) == 3  # each one closed, none left hanging
    assert alive and pairs_left == 0


@pytest.fixture
def command_dir():
    folder = Path(tempfile.mkdtemp(prefix="raso-relay-"))
    os.chmod(folder, 0o755)  # the run's uid (nobody, under root) must reach it
    yield folder
    sandbox_module.shutil.rmtree(folder, ignore_errors=True)


# Inside the box: two processes hold 150 idle connections each to the endpoint's port (the run's file limit is 256
# per process), then a normal request is made; it must be answered.
IDLE_THEN_ASK = r"""
import json, os, socket, sys, time, urllib.request
port, url, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ready_r, ready_w = os.pipe()
children = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        held = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(150)]
        os.write(ready_w, b"x")
        time.sleep(120)
        os._exit(0)
    children.append(pid)
assert os.read(ready_r, 1) + os.read(ready_r, 1) == b"xx"
body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hello"}]}).encode()
request = urllib.request.Request(url, data=body, headers={"Authorization": "Bearer " + key,
                                                          "Content-Type": "application/json"})
try:
    with urllib.request.urlopen(request, timeout=20) as response:
        print(json.loads(response.read())["choices"][0]["message"]["content"])
finally:
    for pid in children:
        os.kill(pid, 9)
"""


@pytest.mark.sandbox_os
def test_the_relay_in_the_box_survives_300_idle_connections(command_dir):
    model = ScriptedModel(["answered through the box"])
    box = Sandbox(SandboxLimits(cpu_seconds=20, wall_seconds=60))
    assert box.isolation_level == "os", f"bubblewrap is needed: {box.support.notes}"
    with _endpoint(model) as endpoint, endpoint.session("r1") as session:
        url = session.base_url("openai-chat") + "/chat/completions"
        res = box.run_command([box.python, "-I", "-c", IDLE_THEN_ASK, str(endpoint.port), url, session.api_key],
                              command_dir, ro_binds=box.python_roots, loopback_ports=[endpoint.port])
    assert res.ok, (res.exit_code, res.stderr)
    assert res.stdout.strip() == "answered through the box"
    assert session.calls == 1 and json.dumps(model.calls[0][0]) == json.dumps({"role": "user", "content": "hello"})
