"""D14: the body cap, the API key and the inbound tool-results cap, at the gateway's door.

The served witnesses run the gateway with uvicorn on loopback (real sockets, in this
process) in front of a scripted upstream, and read what reached the kernel (its events)
and the upstream (its recorded requests). The framing witnesses drive
:class:`BodyLimitMiddleware` as an ASGI app with hand-made messages, for what no HTTP
client sends (more bytes than declared, a Content-Length that is not a number, a client
that leaves mid-body). Every oracle is written here from the statement: a body is refused
exactly when its declared or delivered size is over the cap; a request is authorised
exactly when its bearer token, else its ``X-Api-Key``, is the key (blanks aside).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from starlette.types import Message, Receive, Scope, Send

from fak_core import Kernel, parse_policy
from fak_core.events import Event
from fak_core.gateway.app import create_app
from fak_core.gateway.middleware import AuthMiddleware, BodyLimitMiddleware, TraceMiddleware
from fak_core.gateway.proxy_routes import proxy_routes
from fak_core.gateway.sessions import MAX_TRACE_BYTES
from fak_core.gateway.state import GatewayState
from fak_core.gateway.upstream import UpstreamConfig
from pytest_fak.fixtures import serve_app
from tests.gateway.support import POLICY_DOC, make_kernel
from tests.gateway_proxies.scripted_upstream import Script, ScriptedUpstream

CAP = 1024
KEY = "gw-front-door-key"
MCP_ACCEPT = {"accept": "application/json, text/event-stream"}
#: Each route that reads a body, with a JSON object it answers (padded to a size).
BODIES: dict[str, dict[str, Any]] = {
    "/v1/fak/adjudicate": {"tool": "echo", "arguments": {"pad": ""}},
    "/v1/fak/admit": {"tool": "echo", "result": ""},
    "/v1/fak/syscall": {"tool": "echo", "arguments": {"pad": ""}},
    "/v1/chat/completions": {"model": "m", "messages": [{"role": "user", "content": ""}]},
    "/v1/messages": {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": ""}]},
    "/mcp": {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": {"pad": ""}}},
}
NATIVE_DECIDING = ("/v1/fak/adjudicate", "/v1/fak/admit", "/v1/fak/syscall")
PROXIES = ("/v1/chat/completions", "/v1/messages")


def padded(doc: dict[str, Any], size: int) -> bytes:
    """``doc`` as compact JSON of exactly ``size`` bytes: its one empty string padded."""
    base = json.dumps(doc, separators=(",", ":")).encode()
    assert size >= len(base), (size, len(base))
    return base.replace(b'""', b'"' + b"x" * (size - len(base)) + b'"', 1)


@dataclass
class Served:
    url: str
    up: ScriptedUpstream
    state: GatewayState
    events: list[Event] = field(default_factory=list)


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[ScriptedUpstream, str]]:
    """One scripted upstream on loopback for the module (not code under test)."""
    up = ScriptedUpstream()
    with serve_app(up.app) as url:
        yield up, url + "/v1"


@contextmanager
def served(
    upstream: tuple[ScriptedUpstream, str],
    api_key: str | None = None,
    max_tool_results: int = 256,
    max_body: int = CAP,
) -> Iterator[Served]:
    """The gateway (native, proxies, /mcp) on loopback in front of the scripted upstream.
    Started inside each witness, so the server's thread is measured with it."""
    up, up_url = upstream
    up.reset(Script(text="hi"))
    state = GatewayState(make_kernel(), max_body=max_body, max_tool_results=max_tool_results)
    box = Served("", up, state)
    state.kernel.subscribe(box.events.append)
    # httpx's transport keeping no idle connection: nothing of the upstream's pool is left
    # open when the gateway stops (the upstream's client is not what this theorem is about)
    transport = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_keepalive_connections=0))
    config = UpstreamConfig(base_url=up_url, timeout=5.0, transport=transport)
    app = create_app(state, api_key=api_key, extra_routes=proxy_routes(state, config))
    with serve_app(app) as url:
        box.url = url
        yield box


def chunked(body: bytes, step: int) -> Iterator[bytes]:
    for i in range(0, len(body), step):
        yield body[i : i + step]


def post(gw: Served, route: str, body: bytes | Iterator[bytes], **headers: str) -> httpx.Response:
    sent = {"content-type": "application/json", **headers}
    if route == "/mcp":
        sent.update(MCP_ACCEPT)
    return httpx.post(gw.url + route, content=body, headers=sent, timeout=10.0)


def assert_too_large(r: httpx.Response) -> None:
    assert r.status_code == 413, (r.status_code, r.text)
    error = r.json()["error"]
    assert error["code"] == "request_too_large", error
    assert f"{CAP} bytes" in error["message"] and "smaller" in error["message"], error


# ------------------------------------------------------------------------------ body cap
@pytest.mark.fak_theorem("D14")
def test_a_body_over_the_cap_reaches_no_route(upstream: tuple[ScriptedUpstream, str]) -> None:
    """On every route, declared or chunked, over the cap by one byte or by far: a 413
    naming the limit, and neither the kernel nor the upstream saw anything; at the cap the
    route answers."""
    with served(upstream) as gw:
        for route in sorted(BODIES):
            for framing in ("content-length", "chunked"):
                _over_and_at_the_cap(gw, route, framing)
        r = httpx.request("GET", gw.url + "/healthz", content=b"x" * (CAP + 1), timeout=10.0)
        assert_too_large(r)
        assert httpx.get(gw.url + "/healthz").status_code == 200


def _over_and_at_the_cap(gw: Served, route: str, framing: str) -> None:
    for size in (CAP + 1, 4 * CAP):
        body = padded(BODIES[route], size)
        gw.events.clear()
        gw.up.requests.clear()
        r = post(gw, route, body if framing == "content-length" else chunked(body, 100))
        assert_too_large(r)
        assert gw.events == [] and gw.up.requests == [], (route, framing)
    body = padded(BODIES[route], CAP)
    gw.up.requests.clear()
    r = post(gw, route, body if framing == "content-length" else chunked(body, 100))
    assert r.status_code != 413, (route, r.text)
    if route in NATIVE_DECIDING or route in PROXIES:
        assert r.status_code == 200, (route, r.text)
    if route in PROXIES:
        assert len(gw.up.requests) == 1 and gw.up.requests[0].body == body


# --------------------------------------------------------- the cap as an ASGI app, framing
@dataclass
class Drive:
    status: int | None
    body: bytes
    seen: list[bytes]
    reads: int
    #: what the route received after the body (the client's next message)
    after: list[str] = field(default_factory=list)


def _scope(method: str, declared: str | None) -> Scope:
    headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")]
    if declared is not None:
        headers.insert(0, (b"content-length", declared.encode()))
    return {
        "type": "http",
        "method": method,
        "path": "/x",
        "headers": headers,
        "query_string": b"",
    }


async def _inner(
    scope: Scope, receive: Receive, send: Send, seen: list[bytes], after: list[str]
) -> None:
    body, more = b"", True
    while more:
        message = await receive()
        assert message["type"] == "http.request", message
        body += message.get("body", b"")
        more = bool(message.get("more_body", False))
    seen.append(body)
    after.append((await receive())["type"])  # a route waiting for the client to leave
    await send({"type": "http.response.start", "status": 299, "headers": []})
    await send({"type": "http.response.body", "body": b"read:" + body})


def drive(
    chunks: list[bytes],
    declared: str | None,
    method: str = "POST",
    then: str = "end",
    limit: int = CAP,
    flagless: bool = False,
) -> Drive:
    """Run the cap over one request arriving as ``chunks``; what was answered, what the
    route read, how many messages the cap took from the client."""
    messages: list[Message] = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1 or then != "end"}
        for i, c in enumerate(chunks)
    ]
    if flagless and messages and then == "end":  # ASGI: an absent more_body is False
        del messages[-1]["more_body"]
    reads = 0
    seen: list[bytes] = []
    after: list[str] = []
    sent: list[Message] = []

    async def receive() -> Message:
        nonlocal reads
        reads += 1
        if messages:
            return messages.pop(0)
        if then == "hang":
            await anyio.sleep_forever()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    async def inner(scope: Scope, rcv: Receive, snd: Send) -> None:
        if method == "POST":
            await _inner(scope, rcv, snd, seen, after)
        else:  # a GET route: answers without reading a body
            seen.append(b"")
            await snd({"type": "http.response.start", "status": 298, "headers": []})
            await snd({"type": "http.response.body", "body": b""})

    app = BodyLimitMiddleware(inner, limit=lambda: limit)

    async def run() -> None:
        with anyio.fail_after(5):
            await app(_scope(method, declared), receive, send)

    asyncio.run(run())
    start = [m for m in sent if m["type"] == "http.response.start"]
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return Drive(start[0]["status"] if start else None, body, seen, reads, after)


def _split(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(body)) for c in cuts})
    pieces, last = [], 0
    for p in points:
        pieces.append(body[last:p])
        last = p
    pieces.append(body[last:])
    return pieces


SIZES = st.sampled_from([0, 1, CAP - 1, CAP, CAP + 1, 2 * CAP])


@pytest.mark.fak_theorem("D14")
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    size=SIZES,
    cuts=st.lists(st.integers(0, 2 * CAP), max_size=6),
    declare=st.sampled_from(["truth", "none", "less", "more", "zero", "over", "padded"]),
    flagless=st.booleans(),
)
@example(size=CAP + 1, cuts=[CAP], declare="less", flagless=False)
@example(size=CAP + 1, cuts=[], declare="zero", flagless=True)
@example(size=CAP, cuts=[CAP - 1, CAP], declare="truth", flagless=True)
def test_any_framing_is_judged_by_what_is_declared_and_what_arrives(
    size: int, cuts: list[int], declare: str, flagless: bool
) -> None:
    """A declared length over the cap is refused before a byte is read; else the bytes
    are counted as they arrive, a lie included: over the cap is a 413 and the route never
    runs; within it, the route reads the whole body as sent, in one piece."""
    body = bytes(i % 251 for i in range(size))
    declared = {
        "truth": str(size),
        "none": None,
        "less": str(max(size - 7, 0)),
        "more": str(size + 1),
        "zero": "0",
        "over": str(CAP + 1),
        "padded": f" {size} ",
    }[declare]
    d = drive(_split(body, cuts), declared, flagless=flagless)
    declared_over = declared is not None and int(declared) > CAP
    if declared_over:
        assert (d.status, d.seen, d.reads) == (413, [], 0), d
    elif size > CAP:
        assert d.status == 413 and d.seen == [], d
    else:
        assert d.status == 299 and d.seen == [body] and d.body == b"read:" + body, d
        assert d.after == ["http.disconnect"], d
    if d.status == 413:
        doc = json.loads(d.body)
        assert doc["error"]["code"] == "request_too_large"
        assert f"{CAP} bytes" in doc["error"]["message"]


@pytest.mark.fak_theorem("D14")
@pytest.mark.parametrize("limit", [0, 1, 7, CAP])
def test_the_cap_is_read_per_request_at_its_exact_value(limit: int) -> None:
    for size in sorted({0, max(limit - 1, 0), limit, limit + 1}):
        body = b"y" * size
        for declared in (str(size), None):
            d = drive([body[: size // 2], body[size // 2 :]], declared, limit=limit)
            if size > limit:
                assert d.status == 413 and d.seen == [], (limit, size, declared)
                assert f"limit of {limit} bytes" in json.loads(d.body)["error"]["message"]
            else:
                assert d.status == 299 and d.seen == [body], (limit, size, declared)


@pytest.mark.fak_theorem("D14")
@pytest.mark.parametrize("declared", ["abc", "", "1.5", "0x10", "1e3", "ten", "-", "12 3"])
def test_a_content_length_that_is_not_a_number_is_a_400(declared: str) -> None:
    d = drive([b"{}"], declared)
    assert d.status == 400 and d.seen == [] and d.reads == 0, d
    assert "Content-Length must be a whole number" in json.loads(d.body)["error"]["message"]


@pytest.mark.fak_theorem("D14")
@pytest.mark.parametrize("sent", [0, 1, CAP])
def test_a_client_that_leaves_mid_body_gets_no_answer_and_runs_no_route(sent: int) -> None:
    chunks = [b"z" * sent] if sent else []
    messages = len(chunks)
    d = drive(chunks, None, then="leave")
    assert (d.status, d.seen) == (None, []), d
    assert d.reads == messages + 1


@pytest.mark.fak_theorem("D14")
@pytest.mark.parametrize("method", ["GET", "HEAD", "OPTIONS"])
def test_a_bodiless_get_reaches_its_route_without_waiting(method: str) -> None:
    """No Content-Length on a GET, HEAD or OPTIONS: the route runs at once, even while a
    chunked body would still be arriving (those routes read none)."""
    d = drive([b"q" * (CAP + 1)], None, method=method, then="hang")
    assert (d.status, d.seen, d.reads) == (298, [b""], 0), d
    over = drive([b"q" * (CAP + 1)], str(CAP + 1), method=method)
    assert over.status == 413 and over.seen == [], over


@pytest.mark.fak_theorem("D14")
@pytest.mark.parametrize("kind", ["lifespan", "websocket"])
def test_other_scopes_pass_untouched(kind: str) -> None:
    seen: list[str] = []

    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["type"])

    async def never() -> Message:
        raise AssertionError("the cap read a message of a non-HTTP scope")

    async def nosend(message: Message) -> None:
        raise AssertionError("the cap answered a non-HTTP scope")

    app = BodyLimitMiddleware(inner, limit=lambda: 0)
    asyncio.run(app({"type": kind, "headers": [(b"content-length", b"9")]}, never, nosend))
    assert seen == [kind]


# ------------------------------------------------------------------------------ the key
AUTH_ROUTES = [
    ("POST", "/v1/fak/adjudicate"),
    ("POST", "/v1/chat/completions"),
    ("POST", "/mcp"),
    ("GET", "/v1/models"),
    ("GET", "/openapi.json"),
    ("GET", "/v1/fak/trace/t-front"),
    ("GET", "/healthz/"),
]
#: (scheme, separator, token): an Authorization header built from its parts
Auth = tuple[str, str, str]


def authorized(auth: Auth | None, api_key: str | None) -> bool:
    """The oracle: the bearer token when the Authorization header is a Bearer (any case)
    with a token after a space, else the X-Api-Key value; blanks around either ignored."""
    if auth is not None:
        scheme, sep, token = auth
        if scheme.lower() == "bearer" and sep.startswith(" ") and token.strip():
            return token.strip() == KEY
    return api_key is not None and api_key.strip() == KEY


TOKENS = st.sampled_from([KEY, KEY + "x", KEY[:-1], KEY.upper(), "", "wrong", " " + KEY])
auth_headers = st.none() | st.tuples(
    st.sampled_from(["Bearer", "bearer", "BEARER", "BeArEr", "Basic", "Token", "Bearerx"]),
    st.sampled_from([" ", "  ", " \t", "\t"]),
    TOKENS,
)
#: X-Api-Key values a socket client sends as they are (no blanks around them)
API_KEYS = st.none() | st.sampled_from([KEY, KEY + "x", KEY[:-1], KEY.upper(), "", "wrong"])


def _request(
    route: tuple[str, str], auth: Auth | None, api_key: str | None, pad: str = ""
) -> tuple[str, str, bytes, dict[str, str]]:
    method, path = route
    headers: dict[str, str] = {}
    if auth is not None:
        value = "".join(auth)  # over a socket, blanks around a value are not sent
        headers["authorization"] = pad + value + pad if pad else value.strip(" \t")
    if api_key is not None:
        headers["x-api-key"] = pad + api_key + pad if api_key else api_key
    if path == "/mcp":
        headers.update(MCP_ACCEPT)
    body = padded(BODIES.get(path, BODIES["/v1/fak/adjudicate"]), 200) if method == "POST" else b""
    if body:
        headers["content-type"] = "application/json"
    return method, path, body, headers


def assert_unauthorized(r: httpx.Response) -> None:
    assert r.status_code == 401, (r.status_code, r.text)
    assert r.headers["www-authenticate"] == "Bearer"
    error = r.json()["error"]
    assert error["type"] == "authentication_error", error
    assert "Authorization: Bearer" in error["message"] and "X-Api-Key" in error["message"]


def _judge(gw: Served, auth: Auth | None, api_key: str | None, r: httpx.Response) -> None:
    if authorized(auth, api_key):
        assert r.status_code != 401, (auth, api_key, r.text)
    else:
        assert_unauthorized(r)
        assert gw.events == [] and gw.up.requests == [], (auth, api_key)


@pytest.mark.fak_theorem("D14")
def test_without_the_key_no_route_answers(upstream: tuple[ScriptedUpstream, str]) -> None:
    with served(upstream, api_key=KEY) as gw:

        @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
        @given(route=st.sampled_from(AUTH_ROUTES), auth=auth_headers, api_key=API_KEYS)
        @example(route=AUTH_ROUTES[0], auth=None, api_key=None)
        @example(route=AUTH_ROUTES[0], auth=("Bearer", " ", "wrong"), api_key=KEY)
        @example(route=AUTH_ROUTES[0], auth=("Bearer", " ", ""), api_key=KEY)
        @example(route=AUTH_ROUTES[0], auth=("Basic", " ", KEY), api_key=None)
        @example(route=AUTH_ROUTES[0], auth=("Basic", " ", KEY), api_key="wrong")
        @example(route=AUTH_ROUTES[0], auth=("Basic", " ", "x"), api_key=KEY)
        @example(route=AUTH_ROUTES[0], auth=None, api_key=KEY)
        @example(route=AUTH_ROUTES[0], auth=None, api_key="")
        @example(route=AUTH_ROUTES[0], auth=("bearer", "  ", KEY), api_key=None)
        @example(route=AUTH_ROUTES[0], auth=("Bearer", "\t", KEY), api_key=None)
        def run(route: tuple[str, str], auth: Auth | None, api_key: str | None) -> None:
            method, path, body, headers = _request(route, auth, api_key)
            gw.events.clear()
            gw.up.requests.clear()
            r = httpx.request(method, gw.url + path, content=body, headers=headers, timeout=10.0)
            _judge(gw, auth, api_key, r)

        run()
        for key in (None, "wrong", KEY):  # the open route answers anyone
            headers = {"x-api-key": key} if key else {}
            r = httpx.get(gw.url + "/healthz", headers=headers)
            assert r.status_code == 200 and r.json()["ok"] is True, r.text


async def _asgi(app: Any, method: str, path: str, body: bytes, headers: dict[str, str]) -> Any:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        return await c.request(method, path, content=body, headers=headers)


@pytest.mark.fak_theorem("D14")
@pytest.mark.parametrize("pad", [" ", "\t", " \t "])
def test_blanks_around_a_credential_are_not_part_of_it(
    upstream: tuple[ScriptedUpstream, str], pad: str
) -> None:
    """Header values with blanks around them, as an ASGI server may hand them over."""
    state = GatewayState(make_kernel())
    events: list[Event] = []
    state.kernel.subscribe(events.append)
    app = create_app(state, api_key=KEY, mcp=False)
    cases: list[tuple[Auth | None, str | None]] = [
        (("Bearer", " ", KEY), None),
        (None, KEY),
        (("Bearer", " ", ""), KEY),
        (("Bearer", " ", "wrong"), KEY),
        (None, "wrong"),
        (None, ""),
        (None, None),
    ]
    for auth, api_key in cases:
        method, path, body, headers = _request(AUTH_ROUTES[0], auth, api_key, pad)
        events.clear()
        r = asyncio.run(_asgi(app, method, path, body, headers))
        if authorized(auth, api_key):
            assert r.status_code == 200 and r.json()["verdict"]["kind"] == "ALLOW", r.text
        else:
            assert_unauthorized(r)
            assert events == [], (auth, api_key)


@pytest.mark.fak_theorem("D14")
@pytest.mark.parametrize("kind", ["lifespan", "websocket"])
def test_other_scopes_pass_the_key_untouched(kind: str) -> None:
    seen: list[str] = []

    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["type"])

    async def never() -> Message:
        raise AssertionError("the key check read a message of a non-HTTP scope")

    async def nosend(message: Message) -> None:
        raise AssertionError("the key check answered a non-HTTP scope")

    app = AuthMiddleware(inner, api_key=KEY)
    asyncio.run(app({"type": kind, "path": "/v1/fak/adjudicate", "headers": []}, never, nosend))
    assert seen == [kind]


@pytest.mark.fak_theorem("D14")
@pytest.mark.parametrize("kind", ["lifespan", "websocket"])
def test_other_scopes_pass_the_trace_door_untouched(kind: str) -> None:
    """The outermost middleware hands a non-HTTP scope on as it came (the same object and
    channels), reading and answering nothing and minting no trace."""
    seen: list[tuple[Scope, Receive, Send]] = []

    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append((scope, receive, send))

    async def never() -> Message:
        raise AssertionError("the trace door read a message of a non-HTTP scope")

    async def nosend(message: Message) -> None:
        raise AssertionError("the trace door answered a non-HTTP scope")

    def mint() -> str:
        raise AssertionError("the trace door minted a trace for a non-HTTP scope")

    scope: Scope = {"type": kind, "path": "/v1/fak/adjudicate", "headers": []}
    asyncio.run(TraceMiddleware(inner, mint=mint)(scope, never, nosend))
    assert len(seen) == 1 and seen[0][0] is scope and seen[0][1:] == (never, nosend), seen
    assert scope == {"type": kind, "path": "/v1/fak/adjudicate", "headers": []}


@pytest.mark.fak_theorem("D14")
def test_a_refused_trace_id_is_answered_before_the_key() -> None:
    """With a key, a request whose X-Trace-Id is over the limit is the trace's 400 naming
    ``trace_id``, with or without the key, and runs no route; a trace id within the limit
    leaves the request to the key: the key's route answers, anything else is the 401."""
    state = GatewayState(make_kernel())
    events: list[Event] = []
    state.kernel.subscribe(events.append)
    app = create_app(state, api_key=KEY, mcp=False)
    traces = [None, "t-door", "d" * MAX_TRACE_BYTES, "d" * (MAX_TRACE_BYTES + 1), "e" * 300]
    for trace in traces:
        for key in (None, "wrong", KEY):
            headers = {"x-api-key": key} if key else {}
            if trace is not None:
                headers["x-trace-id"] = trace
            method, path, body, sent = _request(AUTH_ROUTES[0], None, None)
            events.clear()
            r = asyncio.run(_asgi(app, method, path, body, {**sent, **headers}))
            if trace is not None and len(trace) > MAX_TRACE_BYTES:
                assert r.status_code == 400, (trace, key, r.text)
                error = r.json()["error"]
                assert error["param"] == "trace_id", error
                assert f"limit is {MAX_TRACE_BYTES} characters" in error["message"], error
                assert events == [], (trace, key)
            elif key == KEY:
                assert r.status_code == 200 and r.json()["verdict"]["kind"] == "ALLOW", r.text
            else:
                assert_unauthorized(r)
                assert events == [], (trace, key)


@pytest.mark.fak_theorem("D14")
def test_an_empty_key_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="empty"):
        create_app(GatewayState(make_kernel()), api_key="")

    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        raise AssertionError("never served")

    with pytest.raises(ValueError, match="non-empty"):
        AuthMiddleware(inner, api_key="")


def _limited(mode: str) -> GatewayState:
    doc = {**POLICY_DOC, "rate_limit": {"max_calls": 1, "window_s": 600, "key": mode}}
    return GatewayState(Kernel(parse_policy(doc)))


async def _kinds(
    state: GatewayState, callers: list[str | None], api_key: str | None = KEY
) -> list[str]:
    """The verdict kinds of one call from each caller (an address, or None: the server
    names none), each on a trace of its own, through a gateway with or without the key."""
    app = create_app(state, api_key=api_key, mcp=False)
    headers = {"authorization": f"Bearer {KEY}"} if api_key else {}
    kinds: list[str] = []
    for i, address in enumerate(callers):
        client = (address, 1000 + i) if address is not None else None
        transport = httpx.ASGITransport(app=app, client=client)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            r = await c.post(
                "/v1/fak/adjudicate",
                json={"tool": "echo", "trace_id": f"t-rate-{i}"},
                headers=headers,
            )
            assert r.status_code == 200, r.text
            kinds.append(r.json()["verdict"]["kind"])
    return kinds


@pytest.mark.fak_theorem("D14")
def test_callers_of_the_key_share_its_credential_budget_and_keep_their_address() -> None:
    """Under the key, a ``credential`` rate limit charges every caller of the key one
    budget whatever its address; a ``client`` limit still charges each address its own."""
    assert asyncio.run(_kinds(_limited("credential"), ["10.0.0.1", "10.0.0.2"])) == [
        "ALLOW",
        "DENY",
    ]
    assert asyncio.run(_kinds(_limited("client"), ["10.0.0.1", "10.0.0.1", "10.0.0.2"])) == [
        "ALLOW",
        "DENY",
        "ALLOW",
    ]


@pytest.mark.fak_theorem("D14")
@pytest.mark.parametrize("mode", ["credential", "client"])
def test_without_the_key_each_caller_spends_its_own_address(mode: str) -> None:
    """Without a key, a ``credential`` or ``client`` limit charges each address its own
    budget (no credential is shared), and a request with no address has none: each of its
    traces is a budget of its own."""
    callers: list[str | None] = ["10.0.0.1", "10.0.0.1", "10.0.0.2", None, None]
    assert asyncio.run(_kinds(_limited(mode), callers, api_key=None)) == [
        "ALLOW",
        "DENY",
        "ALLOW",
        "ALLOW",
        "ALLOW",
    ]


# ------------------------------------------------------------------- tool results per turn
def _openai_turn(results: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(results):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "echo", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i}"})
    return {"model": "m", "messages": messages}


def _anthropic_turn(results: int) -> dict[str, Any]:
    uses = [
        {"type": "tool_use", "id": f"u{i}", "name": "echo", "input": {}} for i in range(results)
    ]
    answers = [
        {"type": "tool_result", "tool_use_id": f"u{i}", "content": f"result {i}"}
        for i in range(results)
    ]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    if results:
        messages += [{"role": "assistant", "content": uses}, {"role": "user", "content": answers}]
    return {"model": "m", "max_tokens": 8, "messages": messages}


TURNS: dict[str, Callable[[int], dict[str, Any]]] = {
    "/v1/chat/completions": _openai_turn,
    "/v1/messages": _anthropic_turn,
}


@pytest.mark.fak_theorem("D14")
def test_a_turn_over_the_tool_results_cap_is_refused_whole(
    upstream: tuple[ScriptedUpstream, str],
) -> None:
    with served(upstream, max_tool_results=3, max_body=1 << 20) as gw:
        for route in sorted(TURNS):
            _turns(gw, route)


def _turns(gw: Served, route: str) -> None:
    for results in (0, 1, 3, 4, 9):
        gw.events.clear()
        gw.up.requests.clear()
        before = gw.state.tool_results_refused
        r = httpx.post(gw.url + route, json=TURNS[route](results), timeout=10.0)
        if results <= 3:
            assert r.status_code == 200, (results, r.text)
            assert len(gw.up.requests) == 1 and gw.state.tool_results_refused == before
            continue
        assert r.status_code == 413, (results, r.text)
        error = r.json()["error"]
        if route == "/v1/messages":  # each wire's own error shape
            assert error["type"] == "request_too_large", error
        else:
            assert error["code"] == "too_many_tool_results", error
        assert f"carries {results} tool results" in error["message"], error
        assert "at most 3" in error["message"] and "--max-tool-results" in error["message"]
        assert gw.up.requests == [] and gw.events == [], route
        assert gw.state.tool_results_refused == before + 1
        health = httpx.get(gw.url + "/healthz").json()["limits"]
        assert health["tool_results_refused"] == before + 1 and health["max_tool_results"] == 3


# ------------------------------------------------------------------- routes that do not exist
@pytest.mark.fak_theorem("D14")
def test_a_path_or_method_no_route_takes_is_a_404_or_405_saying_what_exists(
    upstream: tuple[ScriptedUpstream, str],
) -> None:
    with served(upstream) as gw:
        for method, path in (("GET", "/v1/nope"), ("POST", "/v1/fak/frob"), ("GET", "/mcp/x")):
            r = httpx.request(method, gw.url + path, json={} if method == "POST" else None)
            assert r.status_code == 404, (path, r.text)
            error = r.json()["error"]
            assert error["type"] == "invalid_request_error", error
            assert path in error["message"] and "/openapi.json" in error["message"], error
        for method, path, allowed in (
            ("DELETE", "/healthz", "GET"),
            ("POST", "/v1/models", "GET"),
            ("GET", "/v1/fak/adjudicate", "POST"),
        ):
            r = httpx.request(method, gw.url + path)
            assert r.status_code == 405, (method, path, r.text)
            assert allowed in r.headers["allow"].split(", "), r.headers
            message = r.json()["error"]["message"]
            assert f"method {method} not allowed on {path}" in message, message
            assert f"use {r.headers['allow']}" in message, message
