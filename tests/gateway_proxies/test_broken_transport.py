"""D10.5: a stream whose connection breaks is an error, even after its choice finished.

A raw upstream served on a real loopback socket streams a whole OpenAI turn (text or none,
a kept call, the finish chunk) and then breaks its connection before ``[DONE]``: the answer
was not read whole, so the client, the official ``openai`` SDK streaming through a gateway
on loopback, gets an error (an HTTP 502 before any event, the wire's error event after the
text) and no tool call. A stream that ends cleanly at the same place is a whole turn (its
choice finished), and its kept call is relayed: the oracle, written here, tells the two
apart only by the broken transport.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from pytest_fak.fixtures import serve_app

from .clients import openai_client
from .conftest import Gateway

_RAW: dict[str, Any] = {"frames": [], "cut": True}


async def _answer(request: Request) -> Response:
    frames: list[bytes] = list(_RAW["frames"])
    cut = bool(_RAW["cut"])

    async def body() -> AsyncIterator[bytes]:
        for frame in frames:
            yield frame
        if cut:
            raise RuntimeError("the connection broke")

    return StreamingResponse(body(), media_type="text/event-stream")


@pytest.fixture(scope="module")
def raw_url() -> Iterator[str]:
    app = Starlette(routes=[Route("/v1/chat/completions", _answer, methods=["POST"])])
    with serve_app(app) as url:
        yield url


def _frame(delta: dict[str, Any], finish: str | None = None) -> bytes:
    chunk = {
        "id": "chatcmpl-cut",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _turn(text: bool) -> list[bytes]:
    call = {
        "index": 0,
        "id": "call_0",
        "type": "function",
        "function": {"name": "get_user", "arguments": '{"id": 1}'},
    }
    frames = [_frame({"role": "assistant", "content": "hello"})] if text else []
    return [*frames, _frame({"tool_calls": [call]}), _frame({}, "tool_calls")]


def _stream(url: str) -> tuple[list[Any], BaseException | None]:
    client = openai_client(url)
    chunks: list[Any] = []
    try:
        for chunk in client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "go"}], stream=True
        ):
            chunks.append(chunk)
    except openai.APIError as exc:
        return chunks, exc
    return chunks, None


def _calls(chunks: list[Any]) -> list[str]:
    return [
        tc.function.name
        for c in chunks
        for ch in c.choices
        for tc in ch.delta.tool_calls or []
        if tc.function is not None and tc.function.name
    ]


@pytest.mark.fak_theorem("D10.5")
@pytest.mark.parametrize("text", [False, True])
def test_a_connection_broken_after_the_finish_is_an_error_and_no_call(
    make_gateway: Callable[..., Gateway], raw_url: str, text: bool
) -> None:
    gw = make_gateway(base_url=raw_url + "/v1")
    _RAW.update(frames=_turn(text), cut=True)
    chunks, error = _stream(gw.url)
    assert error is not None, chunks
    assert _calls(chunks) == []
    if text:
        said = "".join(ch.delta.content or "" for c in chunks for ch in c.choices)
        assert said == "hello", chunks
    else:
        assert isinstance(error, openai.APIStatusError) and error.status_code == 502, error
    # the same stream ended cleanly is a whole turn: its kept call is relayed
    _RAW.update(frames=_turn(text), cut=False)
    chunks, error = _stream(gw.url)
    assert error is None and _calls(chunks) == ["get_user"], (error, chunks)
