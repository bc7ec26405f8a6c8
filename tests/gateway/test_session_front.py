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
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from fak_core.gateway.app import create_app
from fak_core.gateway.sessions import ENTRY_OVERHEAD, Sessions
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
    says how many of the oldest owners left. Every one of those stays unclaimable, with or
    without a token, and its old token no longer permits; the same id minted is claimed."""
    table = Sessions(ENTRY_OVERHEAD * (room + 1) + 128, operator_key=None)
    bound: list[tuple[str, str]] = []  # owners, oldest first
    dropped: list[tuple[str, str]] = []
    for trace in traces:
        token = table.claim(trace, None)
        if token is None:
            continue  # shares an orphan's bit (the caveat): not bound
        bound.append((trace, token))
        gone = table.evicted - len(dropped)
        dropped += bound[:gone]
        del bound[:gone]
    assert dropped, "the witness must drop owners"
    for trace, token in dropped:
        assert table.permits(trace, token, None) is None, trace
        assert table.claim(trace, None) is None, trace
        assert table.claim(trace, "token-of-someone-01") is None, trace
    for trace, token in bound:
        assert table.permits(trace, token, None) == "owner", trace
    trace, _ = dropped[0]
    assert table.claim(trace, None, fresh=True) is not None, trace
