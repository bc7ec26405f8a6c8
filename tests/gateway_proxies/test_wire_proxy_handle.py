"""Every branch of a proxied turn's handler (``WireProxy.handle``), on both wires, in process.

A turn is served, or answered with an error in its wire's own envelope whose status, type
and code are written out here by hand (not read from the gateway's tables): a body over the
size limit 413 ``body_too_large``, a body that is not a JSON object or a request the proxy
cannot forward 400, a trace id over the limit 400 naming ``trace_id``, a foreign session
token 403, a wire the upstream does not speak 501 ``wire_not_supported``, more tool results
than the turn may carry 413 ``too_many_tool_results``, a turn whose journal share or commit
failed 503 ``journal_unavailable``, an upstream failure its mapped status. Every answer
after the trace is known names it in ``X-Trace-Id``, and only the trace's first request
carries the session token it minted. Gateway and scripted upstream run in this process
(``httpx.ASGITransport``), so the witnesses are cheap to re-run under every mutant.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from fak_core.gateway import GatewayState, UpstreamConfig, proxy_routes
from fak_core.gateway.app import create_app
from fak_core.gateway.sessions import ENTRY_OVERHEAD, MAX_TRACE_BYTES, Sessions
from fak_core.journal import Journal
from tests.journal.faults import refuse_inserts

from .kernels import make_kernel
from .scripted_upstream import Script, ScriptedUpstream

PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}
WIRES = ("openai", "anthropic")
#: The OpenAI envelope's ``type`` per status (the gateway's documented envelope).
OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "authentication_error",
    404: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    501: "server_error",
    502: "server_error",
    503: "server_error",
    504: "server_error",
}
#: Anthropic's error ``type`` per status (docs.anthropic.com, "Errors").
ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    501: "api_error",
    502: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
}
CALL = ("get_user", {"id": 1})


def _app(
    upstream: ScriptedUpstream, state: GatewayState, *, wires: tuple[str, ...] = WIRES
) -> Starlette:
    transport = httpx.ASGITransport(app=upstream.app)
    cfg = UpstreamConfig(base_url="http://up/v1", transport=transport, wires=wires)  # type: ignore[arg-type]
    return Starlette(routes=proxy_routes(state, cfg))


def _full_app(upstream: ScriptedUpstream, state: GatewayState) -> Starlette:
    """The whole gateway (its middleware opens each request's journal scope)."""
    cfg = UpstreamConfig(base_url="http://up/v1", transport=httpx.ASGITransport(app=upstream.app))
    return create_app(state, extra_routes=proxy_routes(state, cfg))


def _post(
    app: Starlette,
    wire: str,
    content: bytes | dict[str, Any],
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    async def go() -> httpx.Response:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
        ) as c:
            raw = content if isinstance(content, bytes) else json.dumps(content).encode()
            hdrs = {"content-type": "application/json", **(headers or {})}
            return await c.post(PATHS[wire], content=raw, headers=hdrs)

    return asyncio.run(go())


def _turn(wire: str, messages: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "model": "m",
        "messages": messages or [{"role": "user", "content": "go"}],
    }
    if wire == "anthropic":
        doc["max_tokens"] = 16
    return {**doc, **extra}


def _error(wire: str, r: httpx.Response, status: int, code: str | None = None) -> str:
    """Assert ``r`` is ``status`` in ``wire``'s envelope (with ``code`` on OpenAI, which
    carries one); its message."""
    assert r.status_code == status, r.text
    doc = r.json()
    if wire == "openai":
        assert set(doc) == {"error"} and set(doc["error"]) == {"message", "type", "code", "param"}
        assert doc["error"]["type"] == OPENAI_TYPES[status]
        assert doc["error"]["code"] == code
        return str(doc["error"]["message"])
    assert doc["type"] == "error" and set(doc["error"]) == {"type", "message"}
    assert doc["error"]["type"] == ANTHROPIC_TYPES[status]
    return str(doc["error"]["message"])


def _param(wire: str, r: httpx.Response) -> Any:
    return r.json()["error"]["param"] if wire == "openai" else None


def _calls(wire: str, doc: dict[str, Any]) -> list[str]:
    if wire == "openai":
        return [c["function"]["name"] for c in doc["choices"][0]["message"].get("tool_calls") or []]
    return [b["name"] for b in doc["content"] if b["type"] == "tool_use"]


def _results(wire: str, n: int) -> list[Any]:
    """A transcript whose assistant called ``get_user`` ``n`` times and got ``n`` results."""
    ids = [f"c{i}" for i in range(n)]
    if wire == "openai":
        calls = [
            {"id": i, "type": "function", "function": {"name": "get_user", "arguments": "{}"}}
            for i in ids
        ]
        return [
            {"role": "user", "content": "who?"},
            {"role": "assistant", "content": None, "tool_calls": calls},
            *({"role": "tool", "tool_call_id": i, "content": "x"} for i in ids),
        ]
    uses = [{"type": "tool_use", "id": i, "name": "get_user", "input": {}} for i in ids]
    results = [{"type": "tool_result", "tool_use_id": i, "content": "x"} for i in ids]
    return [
        {"role": "user", "content": "who?"},
        {"role": "assistant", "content": uses},
        {"role": "user", "content": results},
    ]


def _trace() -> str:
    return f"handle-{uuid.uuid4().hex}"


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.fak_theorem("D10.3")
def test_a_turn_is_served_with_its_trace_and_streams_only_when_asked(wire: str) -> None:
    up, state = ScriptedUpstream(), GatewayState(make_kernel())
    app = _app(up, state)
    for stream in (None, False, True):
        up.reset(Script(text="hi", calls=[CALL]))
        trace = _trace()
        extra = {} if stream is None else {"stream": stream}
        r = _post(app, wire, _turn(wire, **extra), {"x-trace-id": trace})
        assert r.status_code == 200, r.text
        assert r.headers["x-trace-id"] == trace
        media = r.headers["content-type"].partition(";")[0]
        if stream:
            assert media == "text/event-stream" and "get_user" in r.text
        else:
            assert media == "application/json" and _calls(wire, r.json()) == ["get_user"]
        assert len(up.requests) == 1


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.fak_theorem("D10.3")
def test_a_body_over_the_limit_is_a_413_and_never_goes_upstream(wire: str) -> None:
    up, state = ScriptedUpstream(), GatewayState(make_kernel(), max_body=200)
    app = _app(up, state)
    fits = _turn(wire)
    assert len(json.dumps(fits)) <= 200
    assert _post(app, wire, fits).status_code == 200
    big = _turn(wire, [{"role": "user", "content": "x" * 300}])
    message = _error(wire, _post(app, wire, big), 413, "body_too_large")
    assert "200" in message
    assert len(up.requests) == 1


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"", "empty"),
        (b'{"model": ', "malformed JSON"),
        (b"[1, 2]", "JSON object"),
    ],
    ids=["empty", "malformed", "array"],
)
@pytest.mark.fak_theorem("D10.3")
def test_a_body_that_is_not_a_json_object_is_a_400(wire: str, body: bytes, fragment: str) -> None:
    up = ScriptedUpstream()
    r = _post(_app(up, GatewayState(make_kernel())), wire, body)
    assert fragment in _error(wire, r, 400)
    assert _param(wire, r) is None and not up.requests


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.fak_theorem("D10.3")
def test_a_request_the_proxy_cannot_forward_is_a_400_naming_the_field(wire: str) -> None:
    up = ScriptedUpstream()
    app = _app(up, GatewayState(make_kernel()))
    doc = _turn(wire)
    del doc["model"]
    r = _post(app, wire, doc)
    assert "model" in _error(wire, r, 400)
    assert _param(wire, r) in (None if wire == "anthropic" else "model",)
    assert not up.requests


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.fak_theorem("D10.3")
def test_the_session_rules_hold_on_the_proxies(wire: str) -> None:
    """The trace's first request mints and returns a session token, later ones do not; a
    foreign token is a 403 naming ``trace_id``; an over-long trace id a 400 naming it."""
    up, state = ScriptedUpstream(), GatewayState(make_kernel())
    app = _app(up, state)
    trace = _trace()
    first = _post(app, wire, _turn(wire), {"x-trace-id": trace})
    assert first.status_code == 200 and first.headers["x-trace-id"] == trace
    token = first.headers["x-fak-session"]
    assert len(token) == 32
    again = _post(app, wire, _turn(wire), {"x-trace-id": trace, "x-fak-session": token})
    assert again.status_code == 200 and "x-fak-session" not in again.headers
    foreign = _post(app, wire, _turn(wire), {"x-trace-id": trace, "x-fak-session": "f" * 32})
    assert "belongs to another session" in _error(wire, foreign, 403)
    assert _param(wire, foreign) in (None if wire == "anthropic" else "trace_id",)
    long = _post(app, wire, _turn(wire), {"x-trace-id": "t" * (MAX_TRACE_BYTES + 1)})
    assert "the limit is 128" in _error(wire, long, 400)
    assert _param(wire, long) in (None if wire == "anthropic" else "trace_id",)
    assert len(up.requests) == 2


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.fak_theorem("D10.3")
def test_a_dropped_trace_is_never_claimed_afresh_on_the_proxies(wire: str) -> None:
    """D12's orphan rule on the proxies: a client-chosen trace whose owner the table
    dropped is a 403 in the wire's envelope, with or without its old token, no new token
    is minted for it and nothing goes upstream; the operator key is still served; and a
    turn without a token (or with another) on an owned trace is a 403 as well."""
    room = ENTRY_OVERHEAD + MAX_TRACE_BYTES
    up = ScriptedUpstream()
    up.reset(Script(text="hi"))
    state = GatewayState(make_kernel(), sessions=Sessions(max_bytes=room, operator_key="op-" * 6))
    app = _app(up, state)
    first, second = "a" * MAX_TRACE_BYTES, "b" * MAX_TRACE_BYTES
    opened = _post(app, wire, _turn(wire), {"x-trace-id": first})
    token = opened.headers["x-fak-session"]
    taken = _post(app, wire, _turn(wire), {"x-trace-id": first})  # no token: not its session
    assert "belongs to another session" in _error(wire, taken, 403)
    assert "x-fak-session" in _post(app, wire, _turn(wire), {"x-trace-id": second}).headers
    sent = len(up.requests)
    for headers in ({}, {"x-fak-session": token}):  # its owner was dropped
        back = _post(app, wire, _turn(wire), {"x-trace-id": first, **headers})
        assert "no longer remembers" in _error(wire, back, 403)
        assert back.headers["x-trace-id"] == first and "x-fak-session" not in back.headers
    assert len(up.requests) == sent, "a refused turn went upstream"
    op = _post(app, wire, _turn(wire), {"x-trace-id": first, "x-fak-operator-key": "op-" * 6})
    assert op.status_code == 200 and "x-fak-session" not in op.headers, op.text


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.fak_theorem("D10.3")
def test_a_turn_whose_owner_cannot_be_checked_is_a_503_state_unavailable(wire: str) -> None:
    """With the shared owner table unreachable (a real Redis client, a port nobody serves),
    a turn on a trace is refused 503 in the wire's envelope (``state_unavailable`` on
    OpenAI), naming the trace in ``X-Trace-Id``, with no token and nothing upstream."""
    from fak_core.gateway.redis_sessions import RedisSessions
    from fak_core.redis_state import RedisState
    from tests.replicas.support import free_port

    up = ScriptedUpstream()
    up.reset(Script(text="hi"))
    state = GatewayState(make_kernel())
    state.sessions = RedisSessions(RedisState(f"redis://127.0.0.1:{free_port()}/0", timeout=0.5))
    trace = _trace()
    r = _post(_app(up, state), wire, _turn(wire), {"x-trace-id": trace})
    said = _error(wire, r, 503, "state_unavailable")
    assert repr(trace) in said and "retry" in said, said
    assert r.headers["x-trace-id"] == trace and "x-fak-session" not in r.headers
    assert not up.requests


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.fak_theorem("D10.3")
def test_a_wire_the_upstream_does_not_speak_is_a_501_naming_the_other_route(wire: str) -> None:
    other = "anthropic" if wire == "openai" else "openai"
    up = ScriptedUpstream()
    up.reset(Script(text="hi"))
    app = _app(up, GatewayState(make_kernel()), wires=(other,))
    trace = _trace()
    r = _post(app, wire, _turn(wire), {"x-trace-id": trace})
    assert PATHS[other] in _error(wire, r, 501, "wire_not_supported")
    assert r.headers["x-trace-id"] == trace and not up.requests
    served = _post(app, other, _turn(other))
    assert served.status_code == 200 and len(up.requests) == 1


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.fak_theorem("D10.3")
def test_more_tool_results_than_the_limit_is_a_413_counted(wire: str) -> None:
    up, state = ScriptedUpstream(), GatewayState(make_kernel(), max_tool_results=2)
    app = _app(up, state)
    at_limit = _post(app, wire, _turn(wire, _results(wire, 2)))
    assert at_limit.status_code == 200, at_limit.text
    assert state.limits()["tool_results_refused"] == 0
    trace = _trace()
    r = _post(app, wire, _turn(wire, _results(wire, 3)), {"x-trace-id": trace})
    message = _error(wire, r, 413, "too_many_tool_results")
    assert "3 tool results" in message and "at most 2" in message
    assert r.headers["x-trace-id"] == trace
    assert state.limits()["tool_results_refused"] == 1
    assert len(up.requests) == 1


@pytest.mark.parametrize(
    ("wire", "status", "code", "script"),
    [
        ("openai", 502, "upstream_error", Script(fault="status", status=500)),
        ("anthropic", 502, "upstream_error", Script(fault="status", status=500)),
        ("openai", 429, "upstream_rate_limited", Script(fault="status", status=429)),
        ("anthropic", 503, "upstream_unavailable", Script(fault="status", status=529)),
        ("openai", 502, "upstream_malformed", Script(fault="malformed_json")),
    ],
    ids=["openai-500", "anthropic-500", "openai-429", "anthropic-529", "openai-not-json"],
)
@pytest.mark.fak_theorem("D10.3")
def test_an_upstream_failure_is_the_wires_error_with_the_trace(
    wire: str, status: int, code: str, script: Script
) -> None:
    up = ScriptedUpstream()
    up.reset(Script(**{**script.__dict__, "calls": [CALL]}))
    trace = _trace()
    r = _post(_app(up, GatewayState(make_kernel())), wire, _turn(wire), {"x-trace-id": trace})
    assert _error(wire, r, status, code).startswith("upstream")
    assert r.headers["x-trace-id"] == trace and "get_user" not in r.text


def _journaled(tmp_path: Path, **kw: Any) -> tuple[ScriptedUpstream, GatewayState, Journal, Path]:
    up, state = ScriptedUpstream(), GatewayState(make_kernel())
    path = tmp_path / "decisions.db"
    journal = Journal(path, **kw)
    journal.attach(state.kernel)
    state.journal = journal
    up.reset(Script(text="ok", calls=[CALL]))
    return up, state, journal, path


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.fak_theorem("D10.3")
def test_a_turn_over_its_journal_share_is_a_503_before_the_upstream(
    wire: str, tmp_path: Path
) -> None:
    up, state, journal, _ = _journaled(tmp_path, max_request_bytes=16 << 10)
    app = _full_app(up, state)
    try:
        small = _post(app, wire, _turn(wire))
        assert small.status_code == 200 and _calls(wire, small.json()) == ["get_user"]
        big = _post(app, wire, _turn(wire, _results(wire, 200)))
        assert "16384-byte limit per request" in _error(wire, big, 503, "journal_unavailable")
        assert "x-trace-id" in big.headers and len(up.requests) == 1
    finally:
        journal.close()


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.fak_theorem("D10.3")
def test_a_turn_whose_decisions_cannot_be_committed_is_a_503_without_a_call(
    wire: str, tmp_path: Path
) -> None:
    up, state, journal, path = _journaled(tmp_path)
    app = _app(up, state)
    try:
        assert _post(app, wire, _turn(wire)).status_code == 200  # the journal file exists
        refuse_inserts(path)
        trace = _trace()
        r = _post(app, wire, _turn(wire), {"x-trace-id": trace})
        _error(wire, r, 503, "journal_unavailable")
        assert r.headers["x-trace-id"] == trace and "get_user" not in r.text
    finally:
        journal.close()


def _padded(wire: str, size: int) -> bytes:
    """A turn's JSON text padded with trailing white space to exactly ``size`` bytes."""
    raw = json.dumps(_turn(wire)).encode()
    assert len(raw) <= size
    return raw + b" " * (size - len(raw))


def _post_chunked(app: Starlette, wire: str, body: bytes, pieces: int) -> httpx.Response:
    """``body`` sent in ``pieces`` chunks with no ``Content-Length`` (chunked)."""

    async def chunks() -> Any:
        step = -(-len(body) // pieces)
        for i in range(0, len(body), step):
            yield body[i : i + step]

    async def go() -> httpx.Response:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
        ) as c:
            hdrs = {"content-type": "application/json"}
            return await c.post(PATHS[wire], content=chunks(), headers=hdrs)

    return asyncio.run(go())


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.fak_theorem("D10.3")
def test_the_size_limit_holds_at_its_edge_declared_or_chunked(wire: str) -> None:
    """A body of exactly ``max_body`` bytes is served, one byte more is a 413, whether its
    length is declared or it arrives in chunks."""
    limit = 256
    up, state = ScriptedUpstream(), GatewayState(make_kernel(), max_body=limit)
    app = _app(up, state)
    assert _post(app, wire, _padded(wire, limit)).status_code == 200
    _error(wire, _post(app, wire, _padded(wire, limit + 1)), 413, "body_too_large")
    for pieces in (1, 3):
        served = _post_chunked(app, wire, _padded(wire, limit), pieces)
        assert served.status_code == 200, served.text
        over = _post_chunked(app, wire, _padded(wire, limit + 1), pieces)
        _error(wire, over, 413, "body_too_large")
    assert [len(r.body) for r in up.requests] == [limit] * 3
