"""D10.3 on every fak-native surface at once: a refusal is a value, a bad request a 4xx.

One app, driven in process: HTTP through Starlette's ``TestClient`` and MCP through the
official SDK ``Client`` on its in-memory transport, connected to the ``Server`` the app
mounts at ``/mcp``. Both are set up inside the test so the gateway code they run is
measured. Every refusal class the test kernel can produce is sent to every deciding route
and tool; the bad requests are the ones a client can get wrong before the kernel is asked.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import pytest
from mcp import Client
from starlette.testclient import TestClient

from fak_core.gateway.app import create_app
from fak_core.gateway.mcp_server import SESSION_META
from fak_core.gateway.state import GatewayState
from tests.gateway.support import make_kernel, own_session
from tests.gateway.test_parity_property import _mcp_server

#: (tool, arguments, taint the session first?, the kernel's kind and reason on adjudicate)
REFUSALS: list[tuple[str, Any, bool, tuple[str, str]]] = [
    ("shell_rm_rf", {}, False, ("DENY", "POLICY_BLOCK")),
    ("exfiltrate", {}, False, ("DENY", "SECRET_EXFIL")),
    ("frobnicate", {}, False, ("DENY", "DEFAULT_DENY")),
    ("echo", "{bad json", False, ("DENY", "MALFORMED")),
    ("echo", "[1, 2]", False, ("DENY", "MALFORMED")),
    ("search_flights", {"origin": 7}, False, ("DENY", "MALFORMED")),
    ("wire_money", {"amount": 5}, False, ("REQUIRE_WITNESS", "UNWITNESSED")),
    ("send_email", {"to": "a@example.com"}, True, ("DENY", "TRUST_VIOLATION")),
]

#: (request body, what the 400 message says, the field it names)
BAD_BODIES: list[tuple[bytes, str, str | None]] = [
    (b"{not json", "malformed request body", None),
    (b"", "empty request body", None),
    (b"[1, 2]", "must be a json object", None),
    (b"{}", "missing tool name", "tool"),
    (b'{"tool": 7}', "'tool' must be a string", "tool"),
    (b'{"tool": "echo", "witness": 1}', "'witness' must be a string", "witness"),
    (b'{"tool": "echo", "arguments": ' + b"[" * 200 + b"]" * 200 + b"}", "nests deeper", None),
]


def _mcp_body(res: Any) -> dict[str, Any]:
    assert res.is_error is False, res  # a refusal is a normal result, not an error result
    body = json.loads(res.content[0].text)
    assert res.structured_content == body
    return dict(body)


@pytest.mark.fak_theorem("D10.3")
def test_every_refusal_is_a_value_and_every_bad_request_a_400() -> None:
    state = GatewayState(make_kernel())
    app = create_app(state)
    session = own_session()
    as_user: Any = {SESSION_META: session["X-Fak-Session"]}  # the same user over MCP
    with TestClient(app, base_url="http://127.0.0.1", headers=session) as http:
        portal = http.portal
        assert portal is not None
        with portal.wrap_async_context_manager(Client(_mcp_server(app), mode="legacy")) as mcp:
            for i, (tool, args, taint, (kind, reason)) in enumerate(REFUSALS):
                for route in ("adjudicate", "syscall"):
                    trace = f"refusal-{i}-{route}"
                    if taint:
                        http.post(
                            "/v1/fak/admit",
                            json={"tool": "echo", "result": "some page", "trace_id": trace},
                        )
                    body = {"tool": tool, "arguments": args, "trace_id": trace}
                    r = http.post(f"/v1/fak/{route}", json=body)
                    assert r.status_code == 200, (tool, route, r.text)
                    v = r.json()["verdict"]
                    if route == "adjudicate":
                        assert (v["kind"], v["reason"]) == (kind, reason), tool
                    else:  # a refused syscall: a DENY verdict and an ERROR result, as a value
                        assert v["kind"] == "DENY", tool
                        result = r.json()["result"]
                        assert set(result) == {"status", "content", "meta"}, tool
                        assert (result["status"], result["content"]) == ("ERROR", ""), tool
                        meta = result["meta"]
                        assert meta["verdict"] == "deny", tool
                        assert (meta["reason"], meta["disposition"], meta["by"]) == (
                            v["reason"],
                            v["disposition"],
                            v["by"],
                        ), tool
                    assert v["disposition"], tool
                    mcp_trace = f"{trace}-mcp"
                    if taint:
                        http.post(
                            "/v1/fak/admit",
                            json={"tool": "echo", "result": "some page", "trace_id": mcp_trace},
                        )
                    name = f"fak_{route}"
                    call = {**body, "trace_id": mcp_trace}
                    got = _mcp_body(portal.call(partial(mcp.call_tool, name, call, meta=as_user)))
                    assert got["verdict"] == v, (tool, route)
                    if route == "syscall":
                        assert got["result"] == r.json()["result"], tool

            for content, needle, param in BAD_BODIES:
                for route in ("adjudicate", "syscall", "admit"):
                    r = http.post(
                        f"/v1/fak/{route}",
                        content=content,
                        headers={"content-type": "application/json"},
                    )
                    assert r.status_code == 400, (content, route, r.text)
                    err = r.json()["error"]
                    assert set(err) == {"message", "type", "code", "param"}
                    assert err["type"] == "invalid_request_error"
                    assert needle in err["message"].lower(), err
                    assert err["param"] == param
            # the same mistakes over MCP: an error tool result that says what to fix
            res = portal.call(mcp.call_tool, "fak_adjudicate", {"tool": "   "})
            assert res.is_error is True
            assert "missing tool name" in res.content[0].text
