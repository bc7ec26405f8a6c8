"""MCP over stdio (``fak mcp`` as a subprocess) and streamable HTTP (real uvicorn), with the
official ``mcp`` SDK client, plus raw malformed frames written to the stdio server."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError, StdioServerParameters
from starlette.applications import Starlette

from fak_core.gateway.app import create_app
from fak_core.gateway.state import GatewayState
from tests.gateway.mcp_stdio import Stdio

TIMEOUT = 30


def _stdio_params(policy_file: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "fak_core.gateway.mcp_cli",
            "--policy",
            str(policy_file),
            "--tools",
            "tests.gateway.sample_tools",
        ],
        env={"PYTHONPATH": os.getcwd()},
    )


async def _exercise(client: Client) -> dict[str, Any]:
    tools = await client.list_tools()
    out: dict[str, Any] = {"tools": sorted(t.name for t in tools.tools)}
    deny = await client.call_tool("fak_adjudicate", {"tool": "shell_rm_rf", "trace_id": "m1"})
    out["deny"] = deny
    allow = await client.call_tool("fak_syscall", {"tool": "get_user_details", "arguments": {}})
    out["syscall"] = allow
    out["blank"] = await client.call_tool("fak_adjudicate", {"tool": "  "})
    out["admit"] = await client.call_tool(
        "fak_admit", {"tool": "fetch_url", "result": "hello", "trace_id": "m2"}
    )
    with pytest.raises(MCPError) as info:
        await client.call_tool("no_such_tool", {})
    out["unknown_code"] = info.value.error.code
    return out


def _check(out: dict[str, Any]) -> None:
    assert out["tools"] == ["fak_adjudicate", "fak_admit", "fak_syscall"]
    deny = out["deny"]
    assert deny.is_error is False  # a deny is a normal result
    body = json.loads(deny.content[0].text)
    assert body["verdict"]["kind"] == "DENY"
    assert body["verdict"]["reason"] == "POLICY_BLOCK"
    assert body["trace_id"] == "m1"
    assert deny.structured_content == body
    sc = json.loads(out["syscall"].content[0].text)
    assert sc["verdict"]["kind"] == "ALLOW"
    assert sc["trace_id"].startswith("gw-")  # minted and returned
    assert out["blank"].is_error is True
    assert "missing tool name" in out["blank"].content[0].text
    admit = json.loads(out["admit"].content[0].text)
    assert admit["result"]["status"] == "OK"
    assert out["unknown_code"] == -32602


def test_mcp_over_stdio_with_the_sdk_client(policy_file: Path) -> None:
    async def main() -> dict[str, Any]:
        with anyio.fail_after(TIMEOUT):
            async with Client(_stdio_params(policy_file), mode="legacy") as client:
                return await _exercise(client)

    _check(anyio.run(main))


def test_mcp_over_streamable_http_with_the_sdk_client(
    state: GatewayState, live_server: Callable[[Starlette], str]
) -> None:
    url = live_server(create_app(state))

    async def main() -> dict[str, Any]:
        with anyio.fail_after(TIMEOUT):
            async with Client(f"{url}/mcp", mode="legacy") as client:
                return await _exercise(client)

    _check(anyio.run(main))
    # the HTTP MCP surface decided on the same kernel as the HTTP API
    assert state.kernel.taint("m2").label == "tainted"


def test_raw_bad_frames_get_error_codes_and_the_server_keeps_serving(policy_file: Path) -> None:
    raw = Stdio(policy_file)
    try:
        raw.handshake("raw", request_id=1)

        raw.send(b"this is not json {")
        r = raw.recv()
        assert (r["id"], r["error"]["code"]) == (None, -32700)

        raw.send(b"[1, 2, 3]")
        assert raw.recv()["error"]["code"] == -32600

        raw.send(b'{"jsonrpc":"1.0","id":5,"method":"ping"}')
        r = raw.recv()
        assert (r["id"], r["error"]["code"]) == (5, -32600)

        raw.send(b'{"jsonrpc":"2.0","id":6,"method":"no/such/method"}')
        r = raw.recv()
        assert (r["id"], r["error"]["code"]) == (6, -32601)

        raw.send(b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":3}}')
        r = raw.recv()
        assert (r["id"], r["error"]["code"]) == (7, -32602)

        call = {
            "jsonrpc": "2.0",
            "id": 8,
            "method": "tools/call",
            "params": {"name": "fak_adjudicate", "arguments": {"tool": "exfiltrate"}},
        }
        raw.send(json.dumps(call).encode())
        r = raw.recv()
        assert r["id"] == 8
        assert r["result"]["isError"] is False
        assert r["result"]["structuredContent"]["verdict"]["reason"] == "SECRET_EXFIL"

        raw.send(b'{"jsonrpc":"2.0","id":9,"method":"ping"}')
        assert raw.recv() == {"jsonrpc": "2.0", "id": 9, "result": {}}
    finally:
        assert raw.close() == 0


def test_oversized_stdio_frame_is_refused_and_serving_continues() -> None:
    from fak_core.gateway.mcp_server import _frame_error

    err = _frame_error(b"x" * 101, 100)
    assert err is not None
    assert err.error.code == -32600
    assert "maximum size" in err.error.message
    assert _frame_error(b'{"jsonrpc":"2.0","id":1,"method":"ping"}', 100) is None
