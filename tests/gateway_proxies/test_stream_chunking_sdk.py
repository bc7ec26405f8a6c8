"""The stream-chunking cases through the official SDKs, over real loopback sockets.

The raw upstream of ``test_stream_chunking`` is served by uvicorn and writes its stream in
small pieces with a pause between them, so the gateway's reader meets events, ``data:``
prefixes, blank lines and UTF-8 characters cut across TCP reads; the gateway is served by
uvicorn too, and the ``openai`` and ``anthropic`` clients read its stream with their own
stream parsers. The oracle is the one of ``test_stream_chunking``: the calls the test kernel
allows, with their arguments as sent, in proposal order, and no refused call's marker
anywhere in what the client receives.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from fak_core.gateway import UpstreamConfig, proxy_routes
from pytest_fak.fixtures import serve_app

from .clients import anthropic_client, openai_client
from .kernels import make_state
from .test_stream_chunking import PARALLEL, Call, _cut, anthropic_stream, openai_stream

_BODY: dict[str, list[bytes]] = {"pieces": []}


async def _answer(request: Request) -> Response:
    pieces = list(_BODY["pieces"])

    async def gen() -> Any:
        for piece in pieces:
            yield piece
            await anyio.sleep(0.002)  # one TCP write each, most of the time

    return StreamingResponse(gen(), media_type="text/event-stream")


@pytest.fixture(scope="module")
def gateway_url() -> Iterator[str]:
    upstream = Starlette(
        routes=[
            Route("/v1/chat/completions", _answer, methods=["POST"]),
            Route("/v1/messages", _answer, methods=["POST"]),
        ]
    )
    with serve_app(upstream) as up_url:
        cfg = UpstreamConfig(base_url=f"{up_url}/v1", transport=httpx.AsyncHTTPTransport())
        with serve_app(Starlette(routes=proxy_routes(make_state(), cfg))) as url:
            yield url


CASES = [
    pytest.param(PARALLEL, [1, 0, 3, 2], True, 3, id="parallel-every-3-bytes"),
    pytest.param(PARALLEL, [0, 0, 1, 3, 2], False, 11, id="parallel-every-11-bytes"),
    pytest.param(PARALLEL[1::2], [], False, 5, id="all-refused"),
]


def _expected(proposed: list[Call], prefix: str) -> list[tuple[str, str, Any]]:
    return [(f"{prefix}{i}", c.name, c.args) for i, c in enumerate(proposed) if c.kept]


@pytest.mark.parametrize(("proposed", "order", "share", "step"), CASES)
def test_openai_sdk_receives_only_the_kept_calls(
    gateway_url: str, proposed: list[Call], order: list[int], share: bool, step: int
) -> None:
    body = openai_stream(proposed, order, share)
    _BODY["pieces"] = _cut(body, list(range(step, len(body), step)))
    client = openai_client(gateway_url)
    stream = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "go"}], stream=True
    )
    calls: dict[int, dict[str, str]] = {}
    seen: list[str] = []
    finish = None
    for chunk in stream:
        seen.append(chunk.model_dump_json())
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for frag in choice.delta.tool_calls or []:
                slot = calls.setdefault(frag.index, {"id": "", "name": "", "args": ""})
                slot["id"] += frag.id or ""
                if frag.function is not None:
                    slot["name"] += frag.function.name or ""
                    slot["args"] += frag.function.arguments or ""
    got = [(s["id"], s["name"], json.loads(s["args"])) for _, s in sorted(calls.items())]
    assert got == _expected(proposed, "call_")
    assert finish == ("tool_calls" if got else "stop")
    text = "".join(seen)
    assert not [c.marker for c in proposed if not c.kept and c.marker in text]


@pytest.mark.parametrize(("proposed", "order", "share", "step"), CASES)
def test_anthropic_sdk_receives_only_the_kept_calls(
    gateway_url: str, proposed: list[Call], order: list[int], share: bool, step: int
) -> None:
    body = anthropic_stream(proposed)
    _BODY["pieces"] = _cut(body, list(range(step, len(body), step)))
    client = anthropic_client(gateway_url)
    with client.messages.stream(
        model="m", max_tokens=16, messages=[{"role": "user", "content": "go"}]
    ) as stream:
        seen = [event.model_dump_json() for event in stream]
        message = stream.get_final_message()
    got = [(b.id, b.name, b.input) for b in message.content if b.type == "tool_use"]
    assert got == _expected(proposed, "toolu_")
    assert message.stop_reason == ("tool_use" if got else "end_turn")
    text = "".join(seen)
    assert not [c.marker for c in proposed if not c.kept and c.marker in text]
