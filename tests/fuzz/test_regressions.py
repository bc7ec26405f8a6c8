"""Bugs the fuzzers found, pinned as plain examples."""

from __future__ import annotations

from urllib.parse import unquote

import pytest
from starlette.testclient import TestClient

from fak_core.gateway.app import create_app
from fak_core.gateway.middleware import header_value
from fak_core.gateway.state import GatewayState
from tests.gateway.support import make_kernel


@pytest.mark.parametrize("trace", ["\U000aab4d", "caf\u00e9 \u2603", "a\nb", "50%", "\U0001f1fa"])
@pytest.mark.parametrize("route", ["/v1/fak/adjudicate", "/v1/fak/syscall", "/v1/fak/admit"])
def test_non_ascii_body_trace_is_echoed_percent_encoded_not_a_500(route: str, trace: str) -> None:
    """A body trace id that is not visible ASCII used to crash the header write (500)."""
    with TestClient(create_app(GatewayState(make_kernel()), mcp=False)) as client:
        r = client.post(route, json={"tool": "echo", "trace_id": trace})
        assert r.status_code == 200, r.text
        assert r.json()["trace_id"] == trace.strip()
        assert unquote(r.headers["x-trace-id"]) == trace.strip()
        # the same trace is the same session: its taint is readable by its own id
        reset = client.post("/v1/fak/trace/reset", json={"trace_id": trace})
        assert reset.status_code == 200, reset.text


def test_header_value_keeps_visible_ascii_and_encodes_the_rest() -> None:
    assert header_value("t-1 ok") == "t-1 ok"
    assert header_value("a%b\u00e9") == "a%25b%C3%A9"
    assert header_value("a\tb") == "a%09b"
