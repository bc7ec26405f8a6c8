"""D12: every answer on a trace names it in ``X-Trace-Id``, whatever characters it has.

The body carries the trace id unchanged; the header carries it as it is when it is visible
ASCII (space included, ``%`` too), else as percent-encoded UTF-8 (every byte outside
visible ASCII, and then ``%`` itself, written ``%XX``), so a client can always read its own
trace back from the header. The expected headers are written out by hand (RFC 3986
percent-encoding of the UTF-8 bytes); the app runs in process.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from fak_core.gateway.app import create_app
from fak_core.gateway.state import GatewayState
from tests.gateway.support import make_kernel

#: (trace id, the X-Trace-Id an answer carries)
ECHOES = [
    ("plain-1", "plain-1"),
    ("with space ~!", "with space ~!"),
    ("50%", "50%"),
    ("caf\xe9", "caf%C3%A9"),
    ("\xe9 50%", "%C3%A9 50%25"),
    ("tea \u2615", "tea %E2%98%95"),
    ("bell\x07", "bell%07"),
    ("tab\there", "tab%09here"),
    ("\U0001f600", "%F0%9F%98%80"),
]


@pytest.mark.fak_theorem("D12")
def test_the_trace_header_names_the_trace_whatever_its_characters() -> None:
    state = GatewayState(make_kernel())
    try:
        with TestClient(create_app(state, mcp=False), base_url="http://127.0.0.1") as client:
            for trace, header in ECHOES:
                r = client.post("/v1/fak/adjudicate", json={"tool": "echo", "trace_id": trace})
                assert r.status_code == 200, r.text
                assert r.json()["trace_id"] == trace
                assert r.headers["x-trace-id"] == header, trace
                token = r.headers["x-fak-session"]
                path = "/v1/fak/trace/" + quote(trace, safe="")  # the request's own URL
                read = client.get(path, headers={"X-Fak-Session": token})
                assert read.status_code == 200, (trace, read.text)
                assert read.json()["trace_id"] == trace
                assert read.headers["x-trace-id"] == header, trace
    finally:
        state.close()
