"""D12 at the seam: which trace a request names, how long it may be, and who binds it.

A request's trace is the body's ``trace_id`` (JSON-text white space and the other blanks
stripped), else its ``X-Trace-Id``, else one the gateway mints (on MCP without a header, the
configured default trace first); a trace id of more than 128 characters (characters, not
bytes) is a 400 naming ``trace_id`` (an MCP error result), and is never bound. The first
request on a trace gets its session token in ``X-Fak-Session``, later ones none (and a 403
without it); a trace whose owner was dropped at the table's bound is a 403 and never handed
a token again; a trace first used over MCP is bound too (its token in the result's
``_meta``), so an HTTP client cannot take it; a reset or a context that
names no trace is a 400 naming ``trace_id``. The expectations are written here; the app
runs in process (HTTP through Starlette's ``TestClient``, MCP through the SDK's in-memory
client on the ``Server`` the app mounts).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from mcp import Client
from starlette.testclient import TestClient

from fak_core.gateway.app import create_app
from fak_core.gateway.sessions import ENTRY_OVERHEAD, MAX_TRACE_BYTES, Sessions
from fak_core.gateway.state import GatewayState
from tests.gateway.support import make_kernel
from tests.gateway.test_parity_property import _mcp_server

MINTED = re.compile(r"gw-[A-Za-z0-9_-]{22}")
TOKEN = re.compile(r"[A-Za-z0-9_-]{32}")


@contextmanager
def app(**state_kw: Any) -> Iterator[tuple[TestClient, Client]]:
    state = GatewayState(make_kernel(), **state_kw)
    asgi = create_app(state)
    with TestClient(asgi, base_url="http://127.0.0.1") as client:
        portal = client.portal
        assert portal is not None
        with portal.wrap_async_context_manager(Client(_mcp_server(asgi), mode="legacy")) as mcp:
            yield client, mcp
    state.close()


def _adjudicate(client: TestClient, body: dict[str, Any], **headers: str) -> Any:
    return client.post("/v1/fak/adjudicate", json={"tool": "echo", **body}, headers=headers)


def _mcp(client: TestClient, mcp: Client, body: dict[str, Any]) -> Any:
    portal = client.portal
    assert portal is not None
    return portal.call(mcp.call_tool, "fak_adjudicate", {"tool": "echo", **body})


@pytest.mark.fak_theorem("D12")
def test_the_trace_is_the_bodys_else_the_headers_else_a_minted_one() -> None:
    with app() as (client, mcp):
        cases = [
            ({"trace_id": "body-1"}, {"X-Trace-Id": "head-1"}, "body-1"),
            ({"trace_id": " \t body-2 \u3000\ufeff"}, {"X-Trace-Id": "head-2"}, "body-2"),
            ({"trace_id": " \u2028 "}, {"X-Trace-Id": "head-3"}, "head-3"),
            ({}, {"X-Trace-Id": "head-4"}, "head-4"),
        ]
        for body, headers, want in cases:
            r = _adjudicate(client, body, **headers)
            assert r.status_code == 200, r.text
            assert (r.json()["trace_id"], r.headers["x-trace-id"]) == (want, want)
        minted = {_adjudicate(client, {}).json()["trace_id"] for _ in range(3)}
        assert len(minted) == 3 and all(MINTED.fullmatch(t) for t in minted), minted

        res = _mcp(client, mcp, {"trace_id": "mcp-1"})
        assert res.is_error is False and json.loads(res.content[0].text)["trace_id"] == "mcp-1"
        minted = {json.loads(_mcp(client, mcp, {}).content[0].text)["trace_id"] for _ in range(3)}
        assert len(minted) == 3 and all(MINTED.fullmatch(t) for t in minted), minted
    with app(default_trace="the-default") as (client, mcp):
        res = _mcp(client, mcp, {})
        assert json.loads(res.content[0].text)["trace_id"] == "the-default"


@pytest.mark.fak_theorem("D12")
def test_a_trace_id_of_more_than_128_characters_is_a_400_and_never_bound() -> None:
    with app() as (client, mcp):
        for char in ("x", "\xe9", "\u6f22"):
            ok, long = char * 128, char * 129
            r = _adjudicate(client, {"trace_id": ok})
            assert r.status_code == 200 and r.json()["trace_id"] == ok, r.text
            r = _adjudicate(client, {"trace_id": long})
            assert r.status_code == 400, r.text
            err = r.json()["error"]
            assert err["param"] == "trace_id", err
            assert "128" in err["message"] and "shorter" in err["message"], err
            assert "X-Fak-Session" not in r.headers
            res = _mcp(client, mcp, {"trace_id": long})
            said = res.content[0].text
            assert res.is_error is True and "128" in said and "shorter" in said, said
        r = _adjudicate(client, {}, **{"X-Trace-Id": "h" * 129})
        assert r.status_code == 400 and r.json()["error"]["param"] == "trace_id", r.text
        assert "shorter" in r.json()["error"]["message"]


@pytest.mark.fak_theorem("D12")
def test_only_the_first_request_on_a_trace_gets_its_token() -> None:
    with app() as (client, _):
        first = _adjudicate(client, {"trace_id": "tok-1"})
        token = first.headers.get("x-fak-session")
        assert token is not None and TOKEN.fullmatch(token), first.headers
        again = _adjudicate(client, {"trace_id": "tok-1"}, **{"X-Fak-Session": token})
        assert again.status_code == 200 and "x-fak-session" not in again.headers
        tokenless = _adjudicate(client, {"trace_id": "tok-1"})
        assert tokenless.status_code == 403 and "x-fak-session" not in tokenless.headers
        assert "belongs to another session" in tokenless.json()["error"]["message"]
        mine = "m" * 20
        bound = _adjudicate(client, {"trace_id": "tok-2"}, **{"X-Fak-Session": mine})
        assert bound.headers.get("x-fak-session") == mine
        read = client.get("/v1/fak/trace/tok-2", headers={"X-Fak-Session": mine})
        assert read.status_code == 200, read.text
        minted = _adjudicate(client, {})
        assert TOKEN.fullmatch(minted.headers.get("x-fak-session", "")), minted.headers


@pytest.mark.fak_theorem("D12")
def test_a_dropped_owner_is_never_replaced_over_http() -> None:
    # room for one owner of a 100-character trace: the second claim drops the first
    with app(sessions=Sessions(max_bytes=ENTRY_OVERHEAD + MAX_TRACE_BYTES)) as (client, _):
        a, b = "a" * 100, "b" * 100
        assert "x-fak-session" in _adjudicate(client, {"trace_id": a}).headers
        assert "x-fak-session" in _adjudicate(client, {"trace_id": b}).headers
        again = _adjudicate(client, {"trace_id": a})
        assert again.status_code == 403 and "x-fak-session" not in again.headers
        assert "no longer remembers" in again.json()["error"]["message"]
        mine = "z" * 20
        again = _adjudicate(client, {"trace_id": a}, **{"X-Fak-Session": mine})
        assert again.status_code == 403 and "x-fak-session" not in again.headers
        read = client.get(f"/v1/fak/trace/{a}", headers={"X-Fak-Session": mine})
        assert read.status_code == 403, read.text
        fresh = _adjudicate(client, {})  # an id the gateway mints is always claimable
        assert "x-fak-session" in fresh.headers


@pytest.mark.fak_theorem("D12")
def test_a_trace_opened_over_mcp_is_bound() -> None:
    with app() as (client, mcp):
        res = _mcp(client, mcp, {"trace_id": "via-mcp"})
        assert res.is_error is False
        token = (res.meta or {}).get("fak/session", "")
        assert TOKEN.fullmatch(token), res.meta  # the client's token, in the result's _meta
        read = client.get("/v1/fak/trace/via-mcp", headers={"X-Fak-Session": token})
        assert read.status_code == 200, read.text
        again = _mcp(client, mcp, {"trace_id": "via-mcp"})  # no token: an error result
        assert again.is_error is True and "belongs to another session" in again.content[0].text
        r = _adjudicate(client, {"trace_id": "via-mcp"}, **{"X-Fak-Session": "q" * 20})
        assert r.status_code == 403, r.text
        assert client.post("/v1/fak/trace/reset", json={"trace_id": "via-mcp"}).status_code == 403


@pytest.mark.fak_theorem("D12")
def test_a_reset_or_context_naming_no_trace_is_a_400() -> None:
    with app() as (client, _):
        for route, extra in (("/v1/fak/trace/reset", {}), ("/v1/fak/trace/context", {"text": "x"})):
            for body in ({}, {"trace_id": None}, {"trace_id": ""}, {"trace_id": " \t\u3000"}):
                r = client.post(route, json={**body, **extra})
                assert r.status_code == 400, (route, body, r.text)
                assert r.json()["error"]["param"] == "trace_id", r.text
            r = client.post(route, json={"trace_id": 5, **extra})
            assert r.status_code == 400 and r.json()["error"]["param"] == "trace_id"
        first = _adjudicate(client, {"trace_id": "resettable"})
        token = first.headers["x-fak-session"]
        r = client.post(
            "/v1/fak/trace/reset",
            json={"trace_id": " resettable "},
            headers={"X-Fak-Session": token},
        )
        assert r.status_code == 200 and r.json() == {"reset": True, "trace_id": "resettable"}
