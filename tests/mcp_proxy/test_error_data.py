"""D11.1: a clean error answer's data reaches the client unchanged, or as a note.

The scripted downstream (``mcp_servers.py scripted``) answers ``fail`` with the JSON-RPC
error in its error file, so the data never passes the kernel as arguments. Data the proxy
can write as JSON reaches the client unchanged beside the code, its class and the message;
data it cannot (an integer past 64 bits, which orjson refuses) is replaced by a note that
it was omitted, and the answer is still the server's error answer, never the proxy's own
failure. The expectations are written here by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from fak_core import Kernel, Policy

from .conftest import running_proxy, session
from .test_untrusted_downstream import Scripted

pytestmark = pytest.mark.anyio

#: (data the server sends, what the client's answer carries, or None for a note)
DATA: list[tuple[Any, Any]] = [
    ({"retry_after": 5, "hint": ["slow", "down"]}, {"retry_after": 5, "hint": ["slow", "down"]}),
    ([1, 2.5, None, True], [1, 2.5, None, True]),
    ("plain text", "plain text"),
    (0, 0),
    ({"n": 2**70}, None),
    ([-(2**64) - 1], None),
]


def _body(result: types.CallToolResult) -> dict[str, Any]:
    assert len(result.content) == 1 and isinstance(result.content[0], types.TextContent)
    body = json.loads(result.content[0].text)
    assert isinstance(body, dict)
    return body


@pytest.mark.fak_theorem("D11.1")
async def test_error_data_reaches_the_client_unchanged_or_as_a_note(tmp_path: Path) -> None:
    scripted = Scripted(tmp_path)
    scripted.set_tools([])
    kernel = Kernel(Policy(allow=("fail",)))
    async with (
        running_proxy([scripted.spec()], kernel=kernel) as (proxy, _),
        session(proxy) as client,
    ):
        for sent, want in DATA:
            scripted.set_error({"code": -32001, "message": "busy", "data": sent})
            result = await client.call_tool("fail", {})
            assert result.is_error is True
            body = _body(result)
            assert (body["error"], body["code"], body["class"], body["message"]) == (
                "downstream error answer",
                -32001,
                "server error",
                "busy",
            ), body
            if want is not None:
                assert body["data"] == want, body
            else:
                note = body["data"]
                assert isinstance(note, str) and "omitted" in note, body
