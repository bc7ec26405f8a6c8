"""D10.4: a request body the proxy cannot read as a JSON object is a 400, and never upstream.

Each wire gets bodies that are empty (or blank), not JSON, JSON that is not an object (an
array, a string, a number, null) and JSON nested past the depth limit; the oracle, written
here, is the wire's own error shape with status 400, a message that names what is wrong
(empty, not JSON, not an object, the limit), and no request at the upstream.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from .inprocess import in_process_gateway
from .scripted_upstream import Script

_UPSTREAM, _STATE, _APP = in_process_gateway()
PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}

#: (body, a phrase the 400's message must hold)
BODIES: list[tuple[bytes, str]] = [
    (b"", "empty"),
    (b" \n\t", "empty"),
    (b"{not json", "malformed JSON"),
    (b'{"model": "m",', "malformed JSON"),
    (b"[1, 2]", "must be a JSON object, not list"),
    (b'"text"', "must be a JSON object, not str"),
    (b"7", "must be a JSON object, not int"),
    (b"null", "must be a JSON object, not NoneType"),
    (b"[" * 200 + b"]" * 200, "128 levels"),
]


async def _post(wire: str, body: bytes) -> httpx.Response:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=_APP), base_url="http://gw"
    ) as c:
        headers = {"content-type": "application/json"}
        return await c.post(PATHS[wire], content=body, headers=headers)


@pytest.mark.fak_theorem("D10.4")
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
@pytest.mark.parametrize(("body", "says"), BODIES, ids=[s for _, s in BODIES])
def test_a_body_that_is_not_a_json_object_is_a_400(wire: str, body: bytes, says: str) -> None:
    _UPSTREAM.reset(Script(text="ok"))
    r = asyncio.run(_post(wire, body))
    assert r.status_code == 400, (r.status_code, r.text[:300])
    doc = r.json()
    if wire == "openai":
        message = doc["error"]["message"]
    else:
        assert doc["type"] == "error" and doc["error"]["type"] == "invalid_request_error", doc
        message = doc["error"]["message"]
    assert says in message, message
    assert _UPSTREAM.requests == []
