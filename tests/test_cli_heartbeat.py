"""Long commands print a line of their progress every so often when their output is not a terminal
(raso.cli.heartbeat), and nothing extra on a terminal."""

from __future__ import annotations

import io
import threading

from raso.cli.heartbeat import Heartbeat


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_pipe_gets_a_line_of_model_calls_and_tokens_every_period():
    stream = io.StringIO()
    totals = {"calls": 3, "prompt_tokens": 1200, "completion_tokens": 40}
    beat = Heartbeat("raso init", lambda: totals, every=0.01, stream=stream)
    with beat:
        for _ in range(1000):  # until two lines are out (10 s at most)
            if stream.getvalue().count("\n") >= 2:
                break
            threading.Event().wait(0.01)
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("raso init: working, 3 model calls, 1,200 prompt + 40 completion tokens so far (")
    assert not beat._thread.is_alive()  # stopped with the command


def test_a_terminal_gets_no_heartbeat_lines():
    stream = FakeTerminal()
    with Heartbeat("raso eval", lambda: {"calls": 1}, every=0.001, stream=stream) as beat:
        threading.Event().wait(0.05)
    assert stream.getvalue() == "" and not beat.enabled
