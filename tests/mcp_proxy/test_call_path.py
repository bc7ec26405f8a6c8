"""D11: every branch of a ``tools/call`` through the MCP proxy, and the answer it gives.

One proxy over the scripted downstream (``mcp_servers.py scripted``) and the official SDK
client. The oracles are written here from the theorem, never from the proxy's helpers: a
kernel subscriber records the call the kernel was asked to decide (so the witness the
client put in ``_meta`` is compared with what reached the kernel), the downstream's own
call log says what reached the server, and a refusal's shape is the one the theorem
names (the tool, the rendered verdict, what to do instead, the session's trace). The
session's trace is learnt from an allowed call in the same client session, so a refusal
that names another trace (or none) is caught.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio.to_thread
import mcp_types as types
import pytest
from mcp import Client

from fak_core import Kernel, Policy, Reason, ToolCall, Verdict
from fak_core.events import Event, EventKind
from fak_core.gateway.mcp_proxy import McpProxy
from fak_core.journal import Journal
from fak_core.nonblocking import nonblocking
from fak_core.view import CallView

from .conftest import running_proxy, session
from .test_untrusted_downstream import Scripted

pytestmark = pytest.mark.anyio

#: The keys of every refusal before the downstream runs, as the theorem lists them.
REFUSAL_KEYS = {"refused", "tool", "verdict", "instead", "trace_id"}
#: A tool whose listed name is not a valid MCP tool name: the listing hides it.
BAD_NAME = "has space"
#: Allowed by the policy but listed by no server.
GHOST = "ghost_tool"


def _text(result: types.CallToolResult) -> str:
    assert len(result.content) == 1 and isinstance(result.content[0], types.TextContent)
    return result.content[0].text


def _body(result: types.CallToolResult) -> dict[str, Any]:
    body = json.loads(_text(result))
    assert isinstance(body, dict)
    return body


def refused(result: types.CallToolResult, tool: str, trace: str) -> dict[str, Any]:
    """The verdict of a refusal made before the downstream runs, its shape checked."""
    assert result.is_error is True
    body = _body(result)
    assert set(body) == REFUSAL_KEYS, body
    assert (body["refused"], body["tool"], body["trace_id"]) == (True, tool, trace)
    assert isinstance(body["instead"], str) and body["instead"].strip()
    assert result.meta is not None and result.meta["fak"] == body
    verdict = body["verdict"]
    assert isinstance(verdict, dict)
    assert verdict["detail"]["claim"].strip(), verdict  # it says why
    return verdict


def _non_object(view: CallView) -> Verdict:
    """A repair whose arguments are a JSON array: never forwardable."""
    if view.args() == {"text": "to-array"}:
        return Verdict.transform("[1, 2]", "test-arrayer")
    return Verdict.allow("test-arrayer")


def _kernel() -> Kernel:
    # reply is a reply to the client, no sink (v1: exempt from the name heuristics)
    allow = ("reply", "fail", "garble", GHOST, BAD_NAME)
    kernel = Kernel(Policy(allow=allow, safe_sinks=("reply",)))
    kernel.add_adjudicator(_non_object, 50, tools=["reply"])
    return kernel


class Seen:
    """The calls the kernel was asked to decide (a subscriber's record)."""

    def __init__(self, kernel: Kernel) -> None:
        self.calls: list[ToolCall] = []

        @nonblocking
        def record(event: Event) -> None:
            if event.kind == EventKind.DECIDE:
                self.calls.append(event.call)

        kernel.subscribe(record)


@asynccontextmanager
async def proxy_over(tmp: Path, **kw: Any) -> AsyncIterator[tuple[McpProxy, Scripted, Seen]]:
    scripted = Scripted(tmp)
    scripted.set_tools([{"name": BAD_NAME, "inputSchema": {"type": "object"}}])
    kernel = kw.pop("kernel", None) or _kernel()
    seen = Seen(kernel)
    async with running_proxy([scripted.spec()], kernel=kernel, pin=True, **kw) as (proxy, _):
        yield proxy, scripted, seen


async def _trace(client: Client) -> str:
    """The session's trace, from an allowed call in it."""
    ok = await client.call_tool("reply", {"text": "hello"})
    assert ok.is_error is False and _text(ok) == "hello"
    assert ok.meta is not None
    return str(ok.meta["fak"]["trace_id"])


@pytest.mark.fak_theorem("D11")
async def test_the_kernel_decides_the_clients_call_with_its_witness(tmp_path: Path) -> None:
    """The call the kernel decides carries the ``_meta`` witness when it is a string, and
    no witness otherwise (absent, another key, a number, an object)."""
    cases: list[tuple[dict[str, Any] | None, str | None]] = [
        (None, None),
        ({"fak/witness": "approved by bob"}, "approved by bob"),
        ({"fak/witness": 7}, None),
        ({"fak/witness": {"by": "bob"}}, None),
        ({"other": "x"}, None),
        ({}, None),
    ]
    async with proxy_over(tmp_path) as (proxy, _, seen), session(proxy) as client:
        for meta, want in cases:
            seen.calls.clear()
            result = await client.call_tool("reply", {"text": "w"}, meta=meta)  # type: ignore[arg-type]
            assert result.is_error is False, (meta, result)
            assert [c.tool for c in seen.calls] == ["reply"], meta
            assert seen.calls[0].args == '{"text":"w"}', meta
            assert seen.calls[0].meta.get("witness") == want, meta


@pytest.mark.fak_theorem("D11")
async def test_every_refusal_before_the_server_names_the_tool_and_the_session(
    tmp_path: Path,
) -> None:
    """A blank tool name (MALFORMED), a tool the listing hid (TRUST_VIOLATION, its claim
    naming the server and why), a tool no server lists (UNKNOWN_TOOL) and a repair whose
    arguments are not an object (MALFORMED) are refused by the proxy with the refusal's
    full shape, in the caller's session, and none reaches the server."""
    async with proxy_over(tmp_path) as (proxy, scripted, seen), session(proxy) as client:
        trace = await _trace(client)
        for blank in ("", "   "):
            seen.calls.clear()
            v = refused(await client.call_tool(blank, {}), blank, trace)
            assert (v["kind"], v["reason"], v["by"]) == ("DENY", "MALFORMED", "mcp-proxy")
            assert "tool name" in v["detail"]["claim"]
            assert seen.calls == []  # the kernel was not asked

        v = refused(await client.call_tool(BAD_NAME, {}), BAD_NAME, trace)
        assert (v["kind"], v["reason"], v["by"]) == ("DENY", "TRUST_VIOLATION", "mcp-proxy")
        claim = v["detail"]["claim"]
        assert claim.startswith("server 'scripted' lists this tool, but its "), claim
        assert "name" in claim.removeprefix("server 'scripted' lists this tool, but ")

        v = refused(await client.call_tool(GHOST, {}), GHOST, trace)
        assert (v["kind"], v["reason"], v["by"]) == ("DENY", "UNKNOWN_TOOL", "mcp-proxy")
        assert GHOST in v["detail"]["claim"]

        before = scripted.calls("reply")
        v = refused(await client.call_tool("reply", {"text": "to-array"}), "reply", trace)
        assert (v["kind"], v["reason"], v["by"]) == ("DENY", "MALFORMED", "mcp-proxy")
        assert "object" in v["detail"]["claim"]
        assert scripted.calls("reply") == before
        assert scripted.calls(BAD_NAME) == 0 and scripted.calls(GHOST) == 0


@pytest.mark.fak_theorem("D11")
async def test_a_refused_result_names_the_tool_the_session_and_the_stage(tmp_path: Path) -> None:
    """A downstream answer the kernel's admission denies is a refusal at the result stage:
    its shape, the tool, the session's trace, none of the text."""

    def refuse(call: ToolCall, result: Any) -> Verdict:
        if "REFUSE" in str(result.payload):
            return Verdict.deny(Reason.POLICY_BLOCK, "test-refuser", claim="the test refuses it")
        return Verdict.allow("test-refuser")

    kernel = _kernel()
    kernel.add_admitter(refuse, 50, name="test-refuser")
    async with proxy_over(tmp_path, kernel=kernel) as (proxy, _, _s), session(proxy) as client:
        trace = await _trace(client)
        result = await client.call_tool("reply", {"text": "REFUSE the hidden plan"})
    assert result.is_error is True
    body = _body(result)
    assert set(body) == REFUSAL_KEYS | {"stage"}, body
    assert (body["refused"], body["tool"], body["trace_id"], body["stage"]) == (
        True,
        "reply",
        trace,
        "result",
    )
    assert (body["verdict"]["kind"], body["verdict"]["by"]) == ("DENY", "test-refuser")
    assert body["instead"].strip()
    assert "hidden plan" not in result.model_dump_json()


@pytest.mark.fak_theorem("D11")
async def test_a_server_that_fails_without_answering_is_an_error_result(tmp_path: Path) -> None:
    """A frame that is not JSON-RPC ends the connection: the client gets an error result
    naming the failure, the server, the tool, the verdict, what to do and the session's
    trace, and no output; a JSON-RPC error answer is an error result too, never a crash."""
    async with proxy_over(tmp_path) as (proxy, _, _s), session(proxy) as client:
        trace = await _trace(client)
        result = await client.call_tool("garble", {})
        assert result.is_error is True
        body = _body(result)
        assert set(body) == {"error", "server", "tool", "detail", "verdict", "instead", "trace_id"}
        assert body["error"].startswith("downstream ") and body["error"] != "downstream "
        assert (body["server"], body["tool"], body["trace_id"]) == ("scripted", "garble", trace)
        assert body["detail"]
        # it says the server failed and that no result was produced
        assert "failed" in body["instead"] and "no result" in body["instead"]
        assert body["verdict"] == {"kind": "ALLOW", "by": "floor"}

        answer = await client.call_tool("fail", {"code": -32001, "message": "busy"})
        assert answer.is_error is True
        err = _body(answer)
        want = ("downstream error answer", -32001, "busy")
        assert (err["error"], err["code"], err["message"]) == want
        assert err["trace_id"] == trace


@pytest.mark.fak_theorem("D11")
async def test_nothing_reaches_the_server_before_its_decision_is_committed(
    tmp_path: Path,
) -> None:
    """With a decision journal, a call whose decision cannot be committed is refused
    DENY/JOURNAL_DOWN by ``journal`` and never reaches the server."""
    kernel = _kernel()
    db = tmp_path / "j.db"
    journal = Journal(db)
    journal.attach(kernel)
    try:
        async with (
            proxy_over(tmp_path, kernel=kernel, decision_journal=journal) as (proxy, scripted, _),
            session(proxy) as client,
        ):
            trace = await _trace(client)
            # every row so far committed (the answer's admission too), so the trigger below
            # refuses exactly the next decision and nothing before it
            await anyio.to_thread.run_sync(journal.sync)
            conn = sqlite3.connect(db)
            conn.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON decisions "
                "BEGIN SELECT RAISE(ABORT, 'disk full'); END"
            )
            conn.commit()
            conn.close()
            before = scripted.calls("reply")
            v = refused(await client.call_tool("reply", {"text": "late"}), "reply", trace)
            assert (v["kind"], v["reason"], v["by"]) == ("DENY", "JOURNAL_DOWN", "journal")
            assert "disk full" in v["detail"]["claim"]  # the journal's own failure
            assert scripted.calls("reply") == before
    finally:
        journal.close()


@pytest.mark.fak_theorem("D11")
async def test_a_call_whose_metadata_cannot_be_admitted_is_refused(tmp_path: Path) -> None:
    """An unpinned tool's metadata is admitted before its call is decided (D11.3); when
    the kernel holds that admission the proxy refuses the call, DENY/TRUST_VIOLATION by
    ``mcp-proxy``, and the server never sees it."""
    kernel = _kernel()
    kernel.add_admitter(
        lambda call, result: Verdict.quarantine(Reason.TRUST_VIOLATION, "test-holder"),
        50,
        tools=["scripted/tools/list"],
    )
    scripted = Scripted(tmp_path)
    scripted.set_tools([])
    async with (
        running_proxy([scripted.spec()], kernel=kernel) as (proxy, _),
        session(proxy) as client,
    ):
        before = scripted.calls("reply")
        result = await client.call_tool("reply", {"text": "hello"})
        body = _body(result)
        v = refused(result, "reply", body["trace_id"])
        assert (v["kind"], v["reason"], v["by"]) == ("DENY", "TRUST_VIOLATION", "mcp-proxy")
        assert v["detail"]["claim"] == "the tool's metadata could not be admitted in this session"
        assert scripted.calls("reply") == before
