"""D12 at the edges the table model does not reach: the MCP trace header, the operator key
as the app is configured with it, and orphans among many traces.

The MCP witness serves the gateway on loopback and calls it through the official SDK
client with and without an ``X-Trace-Id`` header; the operator witness drives the app in
process; the orphan witness fills a small owner table with generated client-chosen ids
and checks the fail-closed rule (a dropped trace is never claimed afresh, a minted one
always is) with no knowledge of how the table remembers orphans.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import ServerRequestContext
from mcp.shared._httpx_utils import create_mcp_http_client
from starlette.requests import Request
from starlette.testclient import TestClient

from fak_core.gateway.app import create_app
from fak_core.gateway.mcp_server import SESSION_META, ConnectionTokens
from fak_core.gateway.sessions import ENTRY_OVERHEAD, SessionError, Sessions
from fak_core.gateway.state import GatewayState
from pytest_fak.fixtures import serve_app
from tests.gateway.support import make_kernel

OPERATOR = "operator-key-0123456789"


async def _adjudicate(url: str, headers: dict[str, str], arguments: dict[str, Any]) -> Any:
    http = create_mcp_http_client(headers=headers)
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as c:
        result = await c.call_tool("fak_adjudicate", arguments)
        assert result.is_error is False, result
        return result.structured_content


@pytest.mark.fak_theorem("D12")
def test_an_mcp_call_without_a_trace_takes_the_x_trace_id_header() -> None:
    state = GatewayState(make_kernel())
    with serve_app(create_app(state)) as url:

        async def main() -> list[Any]:
            with anyio.fail_after(30):
                return [
                    await _adjudicate(
                        url + "/mcp", {"X-Trace-Id": "hdr-trace-1"}, {"tool": "echo"}
                    ),
                    await _adjudicate(
                        url + "/mcp",
                        {"X-Trace-Id": "hdr-trace-2"},
                        {"tool": "echo", "trace_id": "b-1"},
                    ),
                    await _adjudicate(url + "/mcp", {}, {"tool": "echo"}),
                ]

        header, body, minted = anyio.run(main)
    assert header["trace_id"] == "hdr-trace-1", header
    assert body["trace_id"] == "b-1", body
    assert minted["trace_id"].startswith("gw-") and len(minted["trace_id"]) >= 25, minted


async def _read(app: Any, trace: str, headers: dict[str, str]) -> int:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        return (await c.get(f"/v1/fak/trace/{trace}", headers=headers)).status_code


@pytest.mark.fak_theorem("D12")
@pytest.mark.parametrize("configured", [OPERATOR, "", None])
def test_the_operator_key_the_app_is_given_reads_any_session(configured: str | None) -> None:
    state = GatewayState(make_kernel())
    owner = state.sessions.claim("t-op", None)
    assert owner is not None
    app = create_app(state, operator_key=configured, mcp=False)
    for sent in (OPERATOR, "", "wrong-operator-key"):
        status = asyncio.run(_read(app, "t-op", {"X-Fak-Operator-Key": sent}))
        assert status == (200 if configured and sent == configured else 403), (configured, sent)
    assert asyncio.run(_read(app, "t-op", {"X-Fak-Session": owner})) == 200


ids = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=12)


@pytest.mark.fak_theorem("D12")
@settings(max_examples=25, deadline=None)
@given(traces=st.lists(ids, min_size=8, max_size=40, unique=True), room=st.integers(1, 4))
def test_every_dropped_trace_stays_unclaimable_and_a_minted_one_is_claimed(
    traces: list[str], room: int
) -> None:
    """Claims of fresh client-chosen ids fill a small table; the table's own drop counter
    says how many of the oldest owners left. Every one of those is refused (403) with or
    without a token, its old one included, and its old token no longer permits; the same
    id minted is claimed."""
    table = Sessions(ENTRY_OVERHEAD * (room + 1) + 128, operator_key=None)
    bound: list[tuple[str, str]] = []  # owners, oldest first
    dropped: list[tuple[str, str]] = []
    for trace in traces:
        try:
            token = table.claim(trace, None)
        except SessionError:  # shares an orphan's bit (the caveat): not bound
            continue
        assert token is not None, trace
        bound.append((trace, token))
        gone = table.evicted - len(dropped)
        dropped += bound[:gone]
        del bound[:gone]
    assert dropped, "the witness must drop owners"
    for trace, token in dropped:
        assert table.permits(trace, token, None) is None, trace
        for sent in (None, "token-of-someone-01", token):
            with pytest.raises(SessionError) as gone:
                table.claim(trace, sent)
            assert gone.value.status == 403, (trace, sent)
    for trace, token in bound:
        assert table.permits(trace, token, None) == "owner", trace
    trace, _ = dropped[0]
    assert table.claim(trace, None, fresh=True) is not None, trace


async def _mcp_calls(
    url: str, headers: dict[str, str], calls: list[dict[str, Any] | None]
) -> list[Any]:
    """Calls of ``fak_adjudicate`` on the trace ``mcp-owned`` over one streamable-HTTP
    connection; each item is the request's ``_meta`` (or None)."""
    http = create_mcp_http_client(headers=headers)
    out = []
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as c:
        for meta in calls:
            args = {"tool": "echo", "trace_id": "mcp-owned"}
            out.append(await c.call_tool("fak_adjudicate", args, meta=meta))  # type: ignore[arg-type]
    return out


def _refused(result: Any) -> bool:
    said = result.content[0].text if result.is_error else ""
    return bool(result.is_error) and "belongs to another session" in said and "fak/session" in said


@pytest.mark.fak_theorem("D12")
def test_an_mcp_client_gets_its_token_in_meta_and_its_connection_keeps_it() -> None:
    """Over ``/mcp``: the call that binds a trace hands its token back in the result's
    ``_meta`` (``fak/session``); the same connection goes on without sending it; another
    connection is refused unless it sends the token (``_meta`` or ``X-Fak-Session``) or
    the operator key; a wrong token is refused even on the owner's connection."""
    state = GatewayState(make_kernel())
    with serve_app(create_app(state, operator_key=OPERATOR)) as url:
        mcp = url + "/mcp"

        async def main() -> tuple[list[Any], ...]:
            with anyio.fail_after(60):
                owner = await _mcp_calls(mcp, {}, [None, None, {SESSION_META: "w" * 20}])
                token = owner[0].meta[SESSION_META]
                other = await _mcp_calls(mcp, {}, [None, {SESSION_META: token}, None])
                header = await _mcp_calls(mcp, {"X-Fak-Session": token}, [None])
                wrong = await _mcp_calls(mcp, {"X-Fak-Session": "w" * 20}, [None])
                op = await _mcp_calls(mcp, {"X-Fak-Operator-Key": OPERATOR}, [None])
                return owner, other, header, wrong, op

        owner, other, header, wrong, op = anyio.run(main)
    token = owner[0].meta[SESSION_META]
    assert len(token) == 32 and owner[0].is_error is False, owner[0]
    assert owner[1].is_error is False and not owner[1].meta, owner[1]  # remembered
    assert _refused(owner[2]), owner[2]
    assert _refused(other[0]) and other[1].is_error is False and _refused(other[2]), other
    assert header[0].is_error is False and _refused(wrong[0]), (header, wrong)
    assert op[0].is_error is False and not op[0].meta, op
    assert state.sessions.permits("mcp-owned", token, None) == "owner"


@pytest.mark.fak_theorem("D12")
def test_fak_mcp_over_stdio_is_one_connection_that_keeps_its_token() -> None:
    """``fak mcp``'s stdio loop: the first call's token comes back in ``_meta`` and the
    later calls of the process need not send it; a wrong one sent is still refused."""
    from tests.gateway.test_mcp_frames import stdio

    def call(n: int, meta: dict[str, str] | None) -> bytes:
        params: dict[str, Any] = {
            "name": "fak_adjudicate",
            "arguments": {"tool": "echo", "trace_id": "stdio-owned"},
        }
        if meta is not None:
            params["_meta"] = meta
        frame = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}
        return json.dumps(frame).encode()

    async def main() -> list[dict[str, Any]]:
        got = []
        with anyio.fail_after(60):
            async with stdio(max_frame=1 << 16) as client:
                for n, meta in enumerate([None, None, {SESSION_META: "w" * 20}], start=1):
                    client.write(call(n, meta) + b"\n")
                    while (answer := json.loads(await client.out.recv.receive())).get("id") != n:
                        pass  # a notification the server sends meanwhile
                    got.append(answer["result"])
        return got

    first, again, wrong = anyio.run(main)
    assert len(first["_meta"][SESSION_META]) == 32 and not first.get("isError"), first
    assert not again.get("isError") and "_meta" not in again, again
    assert wrong["isError"] is True and "belongs to another session" in wrong["content"][0]["text"]


@pytest.mark.fak_theorem("D12")
def test_the_remembered_connections_are_bounded_oldest_forgotten_first() -> None:
    """Each streamable-HTTP session (``Mcp-Session-Id``) keeps its first token; past the
    bound the oldest is forgotten (its client must then send the token: fails closed); a
    request without a session id, or on another transport, keeps nothing."""

    def ctx(sid: str | None) -> Any:
        headers = [(b"mcp-session-id", sid.encode())] if sid is not None else []
        request = Request({"type": "http", "method": "POST", "headers": headers, "path": "/"})
        return ServerRequestContext(
            session=None,  # type: ignore[arg-type]
            lifespan_context=None,
            protocol_version="2025-06-18",
            method="tools/call",
            request=request,
        )

    assert ConnectionTokens().limit == 4096  # the documented default
    tokens = ConnectionTokens(limit=2)
    for sid, token in (("s1", "t1"), ("s2", "t2"), ("s1", "t9"), ("s3", "t3")):
        tokens.remember(ctx(sid), token)
    assert [tokens.get(ctx(s)) for s in ("s1", "s2", "s3")] == [None, "t2", "t3"]
    tokens.remember(ctx(None), "t4")
    assert tokens.get(ctx(None)) is None
    bare = ServerRequestContext(
        session=None,  # type: ignore[arg-type]
        lifespan_context=None,
        protocol_version="2025-06-18",
        method="tools/call",
    )
    tokens.remember(bare, "t5")
    assert tokens.get(bare) is None and len(tokens._tokens) == 2
    stdio_tokens = ConnectionTokens(stdio=True)
    stdio_tokens.remember(bare, "t6")
    stdio_tokens.remember(bare, "t7")
    assert stdio_tokens.get(bare) == "t6"


@pytest.mark.fak_theorem("D12")
def test_an_id_minted_for_the_request_is_bound_even_on_a_dropped_ones_bit() -> None:
    """A trace the gateway minted for the request is new by construction: bound (HTTP and
    MCP) even when it is a dropped trace's id (so on its orphan bit), while the same id
    named by a client is refused. The minting is pinned to that id to meet the bit."""
    from unittest import mock

    from mcp import Client as MemoryClient

    from fak_core.gateway import state as state_module
    from tests.gateway.test_parity_property import _mcp_server

    state = GatewayState(make_kernel(), sessions=Sessions(ENTRY_OVERHEAD + 128))
    app = create_app(state)

    def drop(trace: str) -> None:  # bind it, then bind another: the table drops it
        for t in (trace, "other-" + trace):
            state.sessions.claim(t, None)
        with pytest.raises(SessionError):
            state.sessions.claim(trace, None)

    with TestClient(app, base_url="http://127.0.0.1") as http:
        portal = http.portal
        assert portal is not None
        drop("dropped-h")
        named = http.post("/v1/fak/adjudicate", json={"tool": "echo", "trace_id": "dropped-h"})
        assert named.status_code == 403, named.text
        with mock.patch.object(state_module, "new_trace_id", return_value="dropped-h"):
            minted = http.post("/v1/fak/adjudicate", json={"tool": "echo"})
        assert minted.status_code == 200 and "x-fak-session" in minted.headers, minted.text
        drop("dropped-m")
        with portal.wrap_async_context_manager(MemoryClient(_mcp_server(app), mode="legacy")) as c:
            args = {"tool": "echo", "trace_id": "dropped-m"}
            refused = portal.call(c.call_tool, "fak_adjudicate", args)
            with mock.patch.object(state_module, "new_trace_id", return_value="dropped-m"):
                bound = portal.call(c.call_tool, "fak_adjudicate", {"tool": "echo"})
    assert refused.is_error is True and "no longer remembers" in refused.content[0].text
    assert bound.is_error is False and len((bound.meta or {})[SESSION_META]) == 32, bound
