"""D12 at the trace middleware: every answer names its trace, a route's failure included.

:class:`TraceMiddleware` is driven as an ASGI app around hand-written routes: one that
answers with the trace it was handed, one that sets its own ``X-Trace-Id``, one that fails
before answering and one that fails half-way through its answer. Written from the
statement: the trace is the ``X-Trace-Id`` sent (blanks around it stripped, ECMA-262's
white space as the body's trace id loses it, not Python's; blank or absent,
a minted one, which the request then carries and the route is told it minted); one over
128 characters as sent is a 400 naming ``trace_id`` and no route runs; every answer
carries exactly one ``X-Trace-Id``, the route's own when it set one; a route's failure
before its answer is a 500 in the gateway's envelope naming the trace (in the message and
the header); once the answer has begun, the failure is re-raised to the server; a scope
that is not HTTP passes through untouched.
"""

from __future__ import annotations

import asyncio
import json
import logging
import string
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.types import Message, Receive, Scope, Send

from fak_core.gateway.middleware import MINTED_KEY, TraceMiddleware, header_value

MINTED = "gw-minted-for-this-request"
#: RFC 3986 percent-encoding leaves visible ASCII and space as they are, except ``%``.
SAFE = "".join(c for c in string.printable if c.isprintable() and c != "%")
#: ECMA-262 WhiteSpace and LineTerminator inside Latin-1 (a header's characters): TAB, LF,
#: VT, FF, CR, SP, NBSP; not U+001C to U+001F or U+0085, which Python's ``str.strip`` takes
BLANKS = "\t\n\x0b\x0c\r \xa0"


class Boom(Exception):
    """A route's own failure."""


async def _echo(scope: Scope, receive: Receive, send: Send) -> None:
    seen = [v for k, v in scope["headers"] if k == b"x-trace-id"]
    minted = scope.get(MINTED_KEY, "")
    body = b"|".join(seen) + b"#" + str(minted).encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


async def _own(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 201, "headers": [(b"X-Trace-Id", b"o")]})
    await send({"type": "http.response.body", "body": b""})


async def _fails(scope: Scope, receive: Receive, send: Send) -> None:
    raise Boom("the route broke")


async def _fails_late(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    raise Boom("the route broke half-way")


class _Collect(logging.Handler):
    """Keeps the records it is handed."""

    def __init__(self, into: list[logging.LogRecord]) -> None:
        super().__init__(logging.ERROR)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record)


ROUTES = {"echo": _echo, "own": _own, "fails": _fails, "late": _fails_late}


def run(
    route: str, trace: bytes | None, minted: str = MINTED
) -> tuple[list[Message], BaseException | None]:
    """Send one request with ``trace`` as its ``X-Trace-Id`` (None: no header), where the
    gateway would mint ``minted``."""
    headers = [(b"host", b"127.0.0.1")]
    if trace is not None:
        headers.append((b"x-trace-id", trace))
    scope: dict[str, Any] = {
        "type": "http",
        "method": "GET",
        "path": "/x",
        "headers": headers,
        "query_string": b"",
        "client": ("127.0.0.1", 1),
    }
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    app = TraceMiddleware(ROUTES[route], mint=lambda: minted)
    try:
        asyncio.run(app(scope, receive, send))
    except Boom as exc:
        return sent, exc
    return sent, None


def _start(sent: list[Message]) -> tuple[int, list[bytes]]:
    starts = [m for m in sent if m["type"] == "http.response.start"]
    assert len(starts) == 1, sent
    traces = [v for k, v in starts[0]["headers"] if k.lower() == b"x-trace-id"]
    return int(starts[0]["status"]), traces


def _body(sent: list[Message]) -> bytes:
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


TRACE_TEXT = st.text(st.characters(codec="latin-1", exclude_characters="\r\n"), max_size=140)


@pytest.mark.fak_theorem("D12")
@settings(max_examples=60, deadline=None)
@given(sent=st.one_of(st.none(), TRACE_TEXT))
def test_every_answer_names_its_trace_and_the_route_reads_it(sent: str | None) -> None:
    raw = None if sent is None else sent.encode("latin-1")
    messages, error = run("echo", raw)
    assert error is None
    status, traces = _start(messages)
    given_trace = (sent or "").strip(BLANKS)
    if sent is not None and len(sent) > 128:
        assert status == 400 and traces == [header_value(given_trace).encode()], messages
        assert b'"param":"trace_id"' in _body(messages)
        return
    trace = given_trace or MINTED
    assert status == 200 and traces == [header_value(trace).encode("ascii")], messages
    minted = MINTED if not given_trace else ""
    assert _body(messages) == trace.encode("latin-1") + b"#" + minted.encode()


@pytest.mark.fak_theorem("D12")
@pytest.mark.parametrize("trace", [None, b"  t-own  "])
def test_a_route_that_names_the_trace_itself_is_not_named_twice(trace: bytes | None) -> None:
    messages, error = run("own", trace)
    assert error is None and _start(messages) == (201, [b"o"])


@pytest.mark.fak_theorem("D12")
@pytest.mark.parametrize(("trace", "named"), [(None, MINTED), (b" t-fail ", "t-fail")])
def test_a_route_that_fails_before_answering_is_a_500_naming_the_trace(
    trace: bytes | None, named: str
) -> None:
    logged: list[logging.LogRecord] = []
    handler = _Collect(logged)
    logger = logging.getLogger("fak_core.gateway")
    logger.addHandler(handler)  # its own handler each run: a re-run starts from nothing
    try:
        messages, error = run("fails", trace)
    finally:
        logger.removeHandler(handler)
    assert error is None
    assert _start(messages) == (500, [named.encode()])
    doc = json.loads(_body(messages))
    assert doc["error"]["type"] == "server_error"
    message = doc["error"]["message"]
    assert message.startswith("internal error") and "logged" in message and named in message
    assert len(logged) == 1 and logged[0].exc_info is not None
    assert isinstance(logged[0].exc_info[1], Boom)
    assert "GET" in logged[0].getMessage() and "/x" in logged[0].getMessage()


@pytest.mark.fak_theorem("D12")
@pytest.mark.parametrize("minted", ["tea \u2615", "caf\xe9 1"])
def test_a_minted_trace_of_any_characters_is_named(minted: str) -> None:
    """A trace the gateway takes for the request (its configured default, say) that is not
    visible ASCII is named percent-encoded, like any other."""
    messages, error = run("echo", None, minted=minted)
    assert error is None
    assert _start(messages) == (200, [quote(minted, safe=SAFE).encode("ascii")])


@pytest.mark.fak_theorem("D12")
def test_a_route_that_fails_half_way_is_the_servers_failure() -> None:
    messages, error = run("late", b"t-late")
    assert isinstance(error, Boom)
    assert _start(messages) == (200, [b"t-late"])


@pytest.mark.fak_theorem("D12")
@pytest.mark.parametrize("kind", ["lifespan", "websocket"])
def test_a_scope_that_is_not_http_passes_untouched(kind: str) -> None:
    seen: list[Any] = []

    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append((scope, receive, send))

    async def receive() -> Message:
        raise AssertionError("the middleware read a message of a non-HTTP scope")

    async def send(message: Message) -> None:
        raise AssertionError("the middleware answered a non-HTTP scope")

    scope = {"type": kind, "headers": [(b"x-trace-id", b"t")]}
    asyncio.run(TraceMiddleware(inner, mint=lambda: MINTED)(scope, receive, send))
    assert seen == [(scope, receive, send)] and seen[0][0] is scope
