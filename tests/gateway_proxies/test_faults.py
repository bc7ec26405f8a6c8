"""Upstream faults answer 502/503/504 in the wire's own error shape, with no tool call.

Every fault is scripted while the upstream proposes an allowed call (``send_email``), so
a pass-through would show up as a tool call in the answer.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import openai
import pytest

from .clients import anthropic_client, openai_client
from .conftest import Gateway
from .scripted_upstream import Script, ScriptedUpstream
from .servers import closed_port

ALLOWED_CALL = ("send_email", {"to": "ops", "body": "x"})
PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}


def body(wire: str, stream: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": "go"}],
        "stream": stream,
    }
    if wire == "anthropic":
        doc["max_tokens"] = 16
    return doc


def assert_error_shape(wire: str, doc: Any, status: int) -> str:
    if wire == "openai":
        assert set(doc) == {"error"}
        err = doc["error"]
        assert set(err) == {"message", "type", "code", "param"}
        want = {
            503: "server_error",
            504: "server_error",
            502: "server_error",
            429: "rate_limit_error",
        }
        assert err["type"] == want.get(status, "invalid_request_error")
        return str(err["message"])
    assert doc["type"] == "error"
    assert set(doc["error"]) == {"type", "message"}
    want = {
        502: "api_error",
        503: "overloaded_error",
        504: "timeout_error",
        429: "rate_limit_error",
    }
    assert doc["error"]["type"] == want[status]
    return str(doc["error"]["message"])


def _calls_in(value: Any) -> int:
    """Tool calls anywhere in a decoded document: OpenAI tool_calls entries, tool_use blocks."""
    if isinstance(value, list):
        return sum(_calls_in(v) for v in value)
    if not isinstance(value, dict):
        return 0
    n = len(value["tool_calls"]) if isinstance(value.get("tool_calls"), list) else 0
    n += value.get("type") == "tool_use"
    return n + sum(_calls_in(v) for k, v in value.items() if k != "tool_calls")


def no_tool_calls(text: str) -> None:
    """The body (JSON or SSE) carries no tool call at all."""
    lines = [ln[6:] for ln in text.splitlines() if ln.startswith("data: {")]
    docs = [json.loads(ln) for ln in lines] if lines else [json.loads(text)]
    assert sum(_calls_in(d) for d in docs) == 0
    assert _calls_in({"tool_calls": [{}], "x": {"type": "tool_use"}}) == 2  # the check can fail


# (fault script, expected status, message fragment, applies to stream / buffered)
FAULTS = [
    pytest.param(
        Script(fault="status", status=500, calls=[ALLOWED_CALL]), 502, "HTTP 500", id="500"
    ),
    pytest.param(
        Script(fault="status", status=502, calls=[ALLOWED_CALL]), 502, "HTTP 502", id="502"
    ),
    pytest.param(
        Script(fault="status", status=503, calls=[ALLOWED_CALL]), 503, "overloaded", id="503"
    ),
    pytest.param(
        Script(fault="status", status=529, calls=[ALLOWED_CALL]), 503, "overloaded", id="529"
    ),
    pytest.param(
        Script(fault="status", status=504, calls=[ALLOWED_CALL]), 504, "timed out", id="504"
    ),
    pytest.param(
        Script(fault="status", status=429, calls=[ALLOWED_CALL]), 429, "rate limit", id="429"
    ),
    pytest.param(
        Script(fault="slow", delay=3.0, calls=[ALLOWED_CALL]), 504, "timed out", id="timeout"
    ),
    pytest.param(
        Script(fault="bad_tool_format", calls=[ALLOWED_CALL]),
        502,
        "format not recognized",
        id="tool-format",
    ),
]


@pytest.mark.parametrize("stream", [False, True], ids=["buffered", "stream"])
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
@pytest.mark.parametrize(("script", "status", "fragment"), FAULTS)
def test_upstream_fault_is_a_clean_error(
    make_gateway: Any,
    upstream: ScriptedUpstream,
    wire: str,
    stream: bool,
    script: Script,
    status: int,
    fragment: str,
) -> None:
    gw = make_gateway(timeout=1.0) if script.fault == "slow" else make_gateway()
    # Stream faults fire before any output: no text first, so the gateway can still set the status.
    upstream.reset(Script(**{**script.__dict__, "text_first": False}))
    r = httpx.post(gw.url + PATHS[wire], json=body(wire, stream), timeout=15)
    assert r.status_code == status, r.text
    message = assert_error_shape(wire, r.json(), status)
    assert fragment in message
    no_tool_calls(r.text)


@pytest.mark.parametrize("stream", [False, True], ids=["buffered", "stream"])
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_dead_upstream_is_502(make_gateway: Any, wire: str, stream: bool) -> None:
    gw = make_gateway(base_url=f"http://127.0.0.1:{closed_port()}/v1")
    r = httpx.post(gw.url + PATHS[wire], json=body(wire, stream), timeout=15)
    assert r.status_code == 502
    assert "unreachable" in assert_error_shape(wire, r.json(), 502)


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
@pytest.mark.fak_theorem("D10.3")
def test_malformed_json_body_is_502(
    gateway: Gateway, upstream: ScriptedUpstream, wire: str
) -> None:
    upstream.reset(Script(fault="malformed_json", calls=[ALLOWED_CALL]))
    r = httpx.post(gateway.url + PATHS[wire], json=body(wire, False))
    assert r.status_code == 502
    assert "not JSON" in assert_error_shape(wire, r.json(), 502)


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_streaming_request_answered_without_sse_is_502(
    gateway: Gateway, upstream: ScriptedUpstream, wire: str
) -> None:
    upstream.reset(Script(fault="not_sse", calls=[ALLOWED_CALL]))
    r = httpx.post(gateway.url + PATHS[wire], json=body(wire, True))
    assert r.status_code == 502
    assert "not an event stream" in assert_error_shape(wire, r.json(), 502)


@pytest.mark.parametrize("fault", ["truncate", "cut"])
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
@pytest.mark.fak_theorem("D10.3")
def test_stream_broken_before_output_is_502(
    gateway: Gateway, upstream: ScriptedUpstream, wire: str, fault: str
) -> None:
    upstream.reset(Script(fault=fault, calls=[ALLOWED_CALL], text_first=False))
    r = httpx.post(gateway.url + PATHS[wire], json=body(wire, True), timeout=15)
    assert r.status_code == 502
    msg = assert_error_shape(wire, r.json(), 502)
    assert "truncated" in msg or "connection" in msg
    no_tool_calls(r.text)


@pytest.mark.parametrize("fault", ["truncate", "cut"])
def test_openai_stream_broken_mid_way_raises_in_the_sdk(
    gateway: Gateway, upstream: ScriptedUpstream, fault: str
) -> None:
    upstream.reset(Script(text="partial answer", fault=fault, calls=[ALLOWED_CALL]))
    seen_calls: list[Any] = []
    text = ""

    def consume() -> None:
        nonlocal text
        for chunk in openai_client(gateway.url).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "go"}], stream=True
        ):
            for c in chunk.choices:
                text += c.delta.content or ""
                seen_calls.extend(c.delta.tool_calls or [])

    with pytest.raises(openai.APIError, match=r"truncated|connection"):
        consume()
    assert text == "partial answer"  # text streamed as it arrived
    assert seen_calls == []  # the held call never reached the client


@pytest.mark.parametrize("fault", ["truncate", "cut"])
def test_anthropic_stream_broken_mid_way_raises_in_the_sdk(
    gateway: Gateway, upstream: ScriptedUpstream, fault: str
) -> None:
    upstream.reset(Script(text="partial answer", fault=fault, calls=[ALLOWED_CALL]))
    tool_starts: list[Any] = []

    def consume() -> None:
        for ev in anthropic_client(gateway.url).messages.create(
            model="m", max_tokens=8, messages=[{"role": "user", "content": "go"}], stream=True
        ):
            if ev.type == "content_block_start" and ev.content_block.type == "tool_use":
                tool_starts.append(ev)

    with pytest.raises(anthropic.APIStatusError, match=r"truncated|connection"):
        consume()
    assert tool_starts == []


def test_sdk_sees_upstream_overload_as_503(make_gateway: Any, upstream: ScriptedUpstream) -> None:
    gw = make_gateway()
    upstream.reset(Script(fault="status", status=529, calls=[ALLOWED_CALL]))
    with pytest.raises(openai.InternalServerError) as oa:
        openai_client(gw.url).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "go"}]
        )
    assert oa.value.status_code == 503
    with pytest.raises(anthropic.InternalServerError) as an:
        anthropic_client(gw.url).messages.create(
            model="m", max_tokens=8, messages=[{"role": "user", "content": "go"}]
        )
    assert an.value.status_code == 503


def test_upstream_4xx_is_passed_on_with_its_message(
    gateway: Gateway, upstream: ScriptedUpstream
) -> None:
    upstream.reset(Script(fault="status", status=401))
    r = httpx.post(gateway.url + PATHS["openai"], json=body("openai", False))
    assert r.status_code == 401
    assert r.json()["error"]["type"] == "authentication_error"
    assert "scripted 401" in r.json()["error"]["message"]
