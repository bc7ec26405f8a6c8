"""D10.7 on ``/mcp``'s own body reader, driven directly as an ASGI server would drive it.

:class:`~fak_core.gateway.app.McpHttpEndpoint` reads a POST body before the MCP SDK
does, refuses a JSON-RPC message nested past the limit (400, -32600) and replays the body
to the SDK otherwise. In the served app the body limit of the middleware in front of it
refuses long bodies first, and a real HTTP server coalesces or splits the body as its
socket reads fall, so this witness is the ASGI server itself: it hands the endpoint the
raw body in the exact ``http.request`` messages it chooses (one message without
``more_body``, which ASGI reads as false; several chunks; a chunk that reaches the body
limit with more to come; a client that goes away). The expected answers are written here
from the ASGI spec, JSON-RPC 2.0 (an error answer always has an ``id``, null when the
request's is unknown) and the theorem, with depth counted by construction; the SDK's own
answers are read only as 200 (the request served) and 413 (the body past its limit).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from starlette.types import Message

from fak_core.gateway.app import McpHttpEndpoint
from fak_core.gateway.mcp_server import build_mcp_server
from fak_core.gateway.state import GatewayState
from fak_core.jsondepth import MAX_JSON_DEPTH
from tests.gateway.support import make_kernel

MAX_BODY = 4096
INVALID_REQUEST = -32600
#: Levels an initialize request puts around ``v`` (message, params, capabilities,
#: experimental, the ``x`` object); the list inside adds its own.
AROUND = 5
TOO_DEEP = f"invalid request: the JSON-RPC message nests deeper than {MAX_JSON_DEPTH} levels"
REQUEST_TIMEOUT = 10
#: A real server's ``receive`` never answers a loop this long; the endpoint's own reads are few.
MAX_RECEIVES = 200


def initialize(depth: int, rid: Any = 1, size: int | None = None) -> bytes:
    """An initialize request nested exactly ``depth`` levels, padded to ``size`` bytes."""
    inner = depth - AROUND
    assert inner >= 0
    nested = "[" * inner + "]" * inner if inner else "0"

    def text(pad: str) -> bytes:
        return (
            '{"jsonrpc":"2.0","id":' + json.dumps(rid) + ',"method":"initialize","params":'
            '{"protocolVersion":"2025-06-18","clientInfo":{"name":"body","version":"1"},'
            '"capabilities":{"experimental":{"x":{"p":"' + pad + '","v":' + nested + "}}}}}"
        ).encode()

    if size is None:
        return text("")
    body = text("a" * (size - len(text(""))))
    assert len(body) == size
    return body


@dataclass
class Answer:
    """What the endpoint sent back for one request."""

    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    done: anyio.Event = field(default_factory=anyio.Event)

    def json(self) -> Any:
        return json.loads(self.body)

    def sse_json(self) -> Any:
        """The first JSON-RPC message of an event stream answer."""
        for line in self.body.decode().splitlines():
            if line.startswith("data:") and line[5:].strip():
                return json.loads(line[5:])
        raise AssertionError(f"no data in the event stream: {self.body!r}")


def _scope() -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"accept", b"application/json, text/event-stream"),
            (b"content-type", b"application/json"),
        ],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 80),
    }


async def _exchange(endpoint: McpHttpEndpoint, messages: Sequence[Message]) -> Answer:
    """Serve one request whose body arrives as ``messages``; then the client waits for the
    whole answer and goes away (``http.disconnect``), as a real server reports it."""
    answer = Answer()
    queue = list(messages)
    calls = 0

    async def receive() -> Message:
        nonlocal calls
        calls += 1
        assert calls <= MAX_RECEIVES, "the body was read in a loop"
        if queue:
            return queue.pop(0)
        await answer.done.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = {k.decode().lower(): v.decode() for k, v in message["headers"]}
        elif message["type"] == "http.response.body":
            answer.body += message.get("body", b"")
            if not message.get("more_body", False):
                answer.done.set()

    with anyio.fail_after(REQUEST_TIMEOUT):
        await endpoint(_scope(), receive, send)
    return answer


def _chunks(body: bytes, *cuts: int, last_more: bool = False) -> list[Message]:
    """``body`` cut at ``cuts`` into ``http.request`` messages, the last with
    ``more_body`` false (or, with ``last_more``, one more empty message closes it)."""
    bounds = [0, *cuts, len(body)]
    parts = [body[a:b] for a, b in itertools.pairwise(bounds)]
    msgs: list[Message] = [{"type": "http.request", "body": p, "more_body": True} for p in parts]
    if last_more:
        msgs.append({"type": "http.request", "body": b"", "more_body": False})
    else:
        msgs[-1]["more_body"] = False
    return msgs


def _serve(cases: Sequence[Sequence[Message]]) -> list[Answer]:
    async def main() -> list[Answer]:
        endpoint = McpHttpEndpoint(build_mcp_server(GatewayState(make_kernel())), max_body=MAX_BODY)
        async with endpoint.running():
            return [await _exchange(endpoint, msgs) for msgs in cases]

    return anyio.run(main)


def _served(answer: Answer, rid: Any = 1) -> None:
    assert answer.status == 200, (answer.status, answer.body[:300])
    reply = answer.sse_json()
    assert reply["id"] == rid and reply["result"]["serverInfo"]["name"] == "fak-gateway", reply


def _refused_too_deep(answer: Answer, rid: Any) -> None:
    assert answer.status == 400, (answer.status, answer.body[:300])
    assert answer.headers["content-type"].split(";")[0] == "application/json"
    doc = answer.json()
    assert set(doc) == {"jsonrpc", "id", "error"}, doc  # JSON-RPC 2.0: the id is required
    assert set(doc["error"]) == {"code", "message"}, doc  # no data to give
    assert (doc["jsonrpc"], doc["id"], doc["error"]["code"]) == ("2.0", rid, INVALID_REQUEST)
    assert doc["error"]["message"].startswith(TOO_DEEP), doc


@pytest.mark.fak_theorem("D10.7")
def test_a_body_within_the_limit_is_read_whole_however_it_is_cut() -> None:
    limit = MAX_JSON_DEPTH
    at_limit = initialize(limit)
    deep = initialize(limit + 1)
    whole: Message = {"type": "http.request", "body": at_limit}  # no more_body: false
    answers = _serve(
        [
            [whole],
            _chunks(at_limit, 1, len(at_limit) // 2),
            _chunks(deep, len(deep) // 2),
            [{"type": "http.request", "body": deep}],
            _chunks(initialize(limit, size=MAX_BODY), MAX_BODY // 3, last_more=True),
            _chunks(initialize(limit + 1, size=MAX_BODY), last_more=True),
        ]
    )
    _served(answers[0])
    _served(answers[1])
    _refused_too_deep(answers[2], 1)
    _refused_too_deep(answers[3], 1)
    _served(answers[4])
    _refused_too_deep(answers[5], 1)  # exactly the limit, with an empty message after it


@pytest.mark.fak_theorem("D10.7")
@pytest.mark.parametrize(("rid", "want"), [(7, 7), ("a", "a"), (1.5, None), (None, None)])
def test_a_body_too_deep_is_answered_with_its_id_or_null(rid: Any, want: Any) -> None:
    (answer,) = _serve([_chunks(initialize(MAX_JSON_DEPTH + 1, rid=rid))])
    _refused_too_deep(answer, want)


@pytest.mark.fak_theorem("D10.7")
def test_a_body_past_the_limit_is_not_read_for_depth_and_the_sdk_refuses_it() -> None:
    over = initialize(MAX_JSON_DEPTH + 1, size=MAX_BODY + 1)
    answers = _serve(
        [
            _chunks(over, last_more=True),  # the limit passed with more to come
            _chunks(over, MAX_BODY // 2, last_more=True),
        ]
    )
    for answer in answers:
        assert answer.status == 413, (answer.status, answer.body[:300])


@pytest.mark.fak_theorem("D10.7")
def test_a_client_that_goes_away_gets_nothing_and_serving_goes_on() -> None:
    body = initialize(MAX_JSON_DEPTH)
    answers = _serve(
        [
            [{"type": "http.disconnect"}],
            [
                {"type": "http.request", "body": body[:10], "more_body": True},
                {"type": "http.disconnect"},
            ],
            [{"type": "http.request", "body": body}],
        ]
    )
    for gone in answers[:2]:
        assert (gone.status, gone.body) == (None, b"")
    _served(answers[2])
