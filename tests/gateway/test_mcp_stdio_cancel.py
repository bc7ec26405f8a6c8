"""D10.7 on MCP stdio: a server cancelled while its stdin is open and silent stops at once.

``fak mcp``'s stdio loop is served in this process over a real pipe and initialised; the
client then writes nothing and keeps the pipe open, and the server's task is cancelled (as
a host shutting down cancels it). It must return without waiting for a line: the witness
times the return against a bound well under the moment a timer of its own closes the pipe
(which ends any server still waiting for a line, so the witness always finishes).
"""

from __future__ import annotations

import json
import os
import threading
import time

import anyio
import pytest

from fak_core.gateway.mcp_server import run_stdio
from fak_core.gateway.state import GatewayState
from tests.gateway.mcp_stdio import init_frame
from tests.gateway.support import make_kernel
from tests.gateway.test_mcp_frames import Lines

#: seconds after the cancel at which the witness's timer closes the pipe
EOF_AFTER = 3.0
#: seconds within which the cancelled server must have returned
STOPS_WITHIN = 1.0


class _Pipe:
    """A pipe whose write end is closed once, by whichever comes first."""

    def __init__(self) -> None:
        self.r, self.w = os.pipe()
        self._lock = threading.Lock()
        self._open = True

    def write(self, raw: bytes) -> None:
        view = memoryview(raw)
        while view:
            view = view[os.write(self.w, view) :]

    def close_writer(self) -> None:
        with self._lock:
            if self._open:
                self._open = False
                os.close(self.w)


async def _cancelled_after_init(pipe: _Pipe) -> float:
    """Serve, initialise, cancel with stdin silent; the seconds until the server returned."""
    state = GatewayState(make_kernel())
    out = Lines()
    timer = threading.Timer(EOF_AFTER, pipe.close_writer)
    try:
        with os.fdopen(pipe.r, "rb") as stdin, out.send, out.recv:
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: run_stdio(state, stdin=stdin, stdout=out, max_frame=400))
                pipe.write(json.dumps(init_frame("cancel")).encode() + b"\n")
                with anyio.fail_after(10):
                    first = json.loads(await out.recv.receive())
                assert first["result"]["serverInfo"]["name"] == "fak-gateway", first
                await anyio.sleep(0.05)  # the reader is back in readline, waiting
                timer.start()
                start = time.monotonic()
                tg.cancel_scope.cancel()
            elapsed = time.monotonic() - start
            pipe.close_writer()  # before stdin closes: a read left behind sees EOF
    finally:
        timer.cancel()
        pipe.close_writer()
        state.close()
    return elapsed


@pytest.mark.fak_theorem("D10.7")
def test_a_stdio_server_cancelled_while_stdin_is_silent_stops_at_once() -> None:
    elapsed = anyio.run(_cancelled_after_init, _Pipe())
    assert elapsed < STOPS_WITHIN, f"the cancelled server returned after {elapsed:.2f}s"
