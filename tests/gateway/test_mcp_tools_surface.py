"""D10.1 on the MCP surface itself: the three tools, their answers, and what is not a tool.

The MCP server :func:`build_mcp_server` builds is driven in this thread with the official
``mcp`` SDK client over its in-memory transport, on the state of an app from
:func:`create_app` served on loopback (uvicorn), whose native routes are the other
surface the theorem compares with. The expected answers are
written here by hand from the theorem and the policy of ``tests.gateway.support`` (a
policy deny, an allowed runnable tool, an admitted client result), and from JSON-RPC 2.0
(-32602 for a tool the server does not have); where the theorem says two surfaces agree
(a mistyped field's message, a trace bound on first use), the other surface is the
native HTTP route on the same server.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator, Sequence
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, MCPError

import fak_core
from fak_core.gateway.app import create_app
from fak_core.gateway.mcp_server import build_mcp_server
from fak_core.gateway.state import GatewayState
from fak_core.taint import Taint
from pytest_fak.fixtures import serve_app
from tests.gateway.support import make_kernel

TIMEOUT = 30
TOOLS = ("fak_adjudicate", "fak_syscall", "fak_admit")
INVALID_PARAMS = -32602  # JSON-RPC 2.0: invalid method parameter(s)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[GatewayState, str]]:
    state = GatewayState(make_kernel())
    with serve_app(create_app(state)) as url:
        yield state, url


def _trace(tag: str) -> str:
    return f"surface-{tag}-{secrets.token_hex(8)}"


async def _session(
    state: GatewayState, calls: Sequence[tuple[str, dict[str, Any] | None]]
) -> dict[str, Any]:
    """One MCP session: what initialize, tools/list and each call answered."""
    out: dict[str, Any] = {"calls": []}
    with anyio.fail_after(TIMEOUT):
        async with Client(build_mcp_server(state), mode="legacy") as client:
            out["instructions"] = client.instructions
            out["server"] = client.server_info
            out["tools"] = (await client.list_tools()).tools
            for name, args in calls:
                try:
                    out["calls"].append(await client.call_tool(name, args))
                except MCPError as exc:
                    out["calls"].append(exc.error)
    return out


def _body(result: Any) -> dict[str, Any]:
    """The JSON body of a normal tool result, which its text and structured content both carry."""
    assert result.is_error is False
    assert len(result.content) == 1 and result.content[0].type == "text"
    body = json.loads(result.content[0].text)
    assert result.structured_content == body
    assert isinstance(body, dict)
    return body


def _owned(url: str, trace: str) -> int:
    """The status of a native request on ``trace`` from another client with its own token:
    403 once the trace is bound to someone else (D12)."""
    with httpx.Client(base_url=url, timeout=TIMEOUT) as http:
        r = http.post(
            "/v1/fak/adjudicate",
            json={"tool": "echo", "trace_id": trace},
            headers={"X-Fak-Session": secrets.token_urlsafe(24)},
        )
    return r.status_code


@pytest.mark.fak_theorem("D10.1")
def test_the_three_tools_answer_their_bodies_and_bind_their_traces(
    served: tuple[GatewayState, str],
) -> None:
    state, url = served
    t_adj, t_sys, t_adm = _trace("adj"), _trace("sys"), _trace("adm")
    calls: list[tuple[str, dict[str, Any] | None]] = [
        ("fak_adjudicate", {"tool": "shell_rm_rf", "trace_id": t_adj}),
        (
            "fak_syscall",
            {"tool": "get_user_details", "arguments": {"user_id": "u7"}, "trace_id": t_sys},
        ),
        ("fak_admit", {"tool": "fetch_url", "result": "hello", "trace_id": t_adm}),
    ]
    out = anyio.run(_session, state, calls)
    assert out["server"].name == "fak-gateway"
    assert out["server"].version == fak_core.__version__
    assert all(name in out["instructions"] for name in TOOLS), out["instructions"]
    listed = {t.name: t for t in out["tools"]}
    assert sorted(listed) == sorted(TOOLS)
    assert all(t.input_schema["required"] == ["tool"] for t in listed.values())

    adjudicated, ran, admitted = (_body(r) for r in out["calls"])
    assert set(adjudicated) == {"verdict", "trace_id"}
    assert adjudicated["trace_id"] == t_adj
    assert (adjudicated["verdict"]["kind"], adjudicated["verdict"]["reason"]) == (
        "DENY",
        "POLICY_BLOCK",
    )

    assert set(ran) == {"verdict", "result", "trace_id"}
    assert ran["trace_id"] == t_sys
    assert ran["verdict"]["kind"] == "ALLOW"
    assert (ran["result"]["status"], ran["result"]["content"]) == ("OK", '{"user":"u7"}')

    assert set(admitted) == {"verdict", "result", "trace_id"}
    assert admitted["trace_id"] == t_adm
    assert admitted["result"]["content"] == "hello"
    assert state.kernel.taint(t_adm) == Taint.TAINTED  # minted TAINTED, on the same kernel

    for trace in (t_adj, t_sys, t_adm):  # each tool bound its trace on first use
        assert _owned(url, trace) == 403, trace


@pytest.mark.fak_theorem("D10.1")
def test_a_mistyped_field_is_the_http_message_and_an_unknown_tool_is_invalid_params(
    served: tuple[GatewayState, str],
) -> None:
    state, url = served
    bodies: list[tuple[str, dict[str, Any]]] = [
        ("fak_adjudicate", {"tool": 5}),
        ("fak_syscall", {"tool": "echo", "witness": ["w"]}),
        ("fak_admit", {"tool": "echo", "trace_id": 7}),
    ]
    routes = {"fak_adjudicate": "adjudicate", "fak_syscall": "syscall", "fak_admit": "admit"}
    unknown = "fak_nope"
    out = anyio.run(_session, state, [*bodies, (unknown, {"tool": "echo"})])
    with httpx.Client(base_url=url, timeout=TIMEOUT) as http:
        for (name, body), got in zip(bodies, out["calls"], strict=False):
            r = http.post(f"/v1/fak/{routes[name]}", json=body)
            assert r.status_code == 400, name
            assert got.is_error is True, name
            assert [c.text for c in got.content] == [r.json()["error"]["message"]], name
    error = out["calls"][-1]
    assert error.code == INVALID_PARAMS
    assert error.message == (
        f"unknown tool: {unknown} (this server has fak_adjudicate, fak_syscall, fak_admit)"
    )
