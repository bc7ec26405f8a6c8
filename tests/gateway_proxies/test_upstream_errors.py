"""What a dead, slow, failing or hostile upstream turns into: the table of D10.3, by hand.

The status an upstream answers is mapped to the gateway's status, code and sentence, with
the upstream's own message quoted after it (at most 500 characters of ``error.message`` or
a string ``error``; the first 200 bytes of a body that is not JSON), buffered and streamed.
The transport failures are real: a closed loopback port, a server that answers garbage, one
that cuts its body short, one that never answers, through the default transport
(``httpx-aiohttp``) and httpx's own. The expected values are written out here.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response

from fak_core.gateway.upstream import Upstream, UpstreamConfig, UpstreamError

from .servers import closed_port

#: A connection another test's failed upstream left to the collector may be collected
#: while one of these runs; it is not this test's to report.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

#: status -> (gateway status, code, sentence); ``{n}`` is the upstream's status.
TABLE: dict[int, tuple[int, str, str]] = {
    400: (400, "upstream_rejected", "upstream refused the request (HTTP {n})"),
    401: (401, "upstream_auth", "upstream rejected the credentials"),
    402: (402, "upstream_rejected", "upstream refused the request (HTTP {n})"),
    403: (403, "upstream_auth", "upstream rejected the credentials"),
    404: (404, "upstream_rejected", "upstream refused the request (HTTP {n})"),
    428: (428, "upstream_rejected", "upstream refused the request (HTTP {n})"),
    429: (429, "upstream_rate_limited", "upstream rate limit"),
    430: (430, "upstream_rejected", "upstream refused the request (HTTP {n})"),
    499: (499, "upstream_rejected", "upstream refused the request (HTTP {n})"),
    500: (502, "upstream_error", "upstream model error (HTTP {n})"),
    501: (502, "upstream_error", "upstream model error (HTTP {n})"),
    502: (502, "upstream_error", "upstream model error (HTTP {n})"),
    503: (503, "upstream_unavailable", "upstream overloaded"),
    504: (504, "upstream_timeout", "upstream timed out"),
    505: (502, "upstream_error", "upstream model error (HTTP {n})"),
    528: (502, "upstream_error", "upstream model error (HTTP {n})"),
    529: (503, "upstream_unavailable", "upstream overloaded"),
    530: (502, "upstream_error", "upstream model error (HTTP {n})"),
}
#: (error body, the upstream's own message the gateway quotes)
BODIES: list[tuple[bytes, str]] = [
    (b'{"error": {"message": "quota gone", "type": "x"}}', "quota gone"),
    (b'{"error": {"message": "' + b"m" * 600 + b'"}}', "m" * 500),
    (b'{"error": "' + b"s" * 600 + b'"}', "s" * 500),
    (b'{"error": {"message": 5}}', ""),
    (b'{"message": "not in an error"}', ""),
    (b"[1, 2]", ""),
    (b"", ""),
    (b"  plain text  ", "plain text"),
    (b"t" * 250, "t" * 200),
    (b"bad \xff byte", "bad \ufffd byte"),
    (b"e" * 199 + "é".encode(), "e" * 199 + "\ufffd"),
]


def _app(status: int, body: bytes, ctype: str | None, seen: list[dict[str, str]]) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        request = Request(scope, receive)
        await request.body()
        seen.append({"method": request.method, **dict(request.headers)})
        response = Response(body, status_code=status)
        if ctype is None:
            del response.headers["content-type"]
        else:
            response.headers["content-type"] = ctype
        await response(scope, receive, send)

    return app


def _upstream(transport: httpx.AsyncBaseTransport | None, port: int = 9, **kw: Any) -> Upstream:
    return Upstream(
        UpstreamConfig(base_url=f"http://127.0.0.1:{port}/v1", transport=transport, **kw)
    )


async def _complete(up: Upstream) -> dict[str, Any]:
    try:
        return await asyncio.wait_for(up.complete("openai", b"{}", {}), 3)
    finally:
        await up.aclose()


async def _stream(up: Upstream) -> str:
    async def go() -> str:
        async with up.stream("anthropic", b"{}", {}) as resp:
            return (await resp.aread()).decode()

    try:
        return await asyncio.wait_for(go(), 3)
    finally:
        await up.aclose()


def _fails(coro: Any) -> UpstreamError:
    with pytest.raises(UpstreamError) as info:
        asyncio.run(coro)
    return info.value


@pytest.mark.parametrize("stream", [False, True], ids=["buffered", "stream"])
@pytest.mark.parametrize("status", sorted(TABLE))
@pytest.mark.fak_theorem("D10.3")
def test_an_upstream_error_status_is_mapped_and_quoted(status: int, stream: bool) -> None:
    want_status, code, sentence = TABLE[status]
    for body, detail in BODIES:
        seen: list[dict[str, str]] = []
        up = _upstream(httpx.ASGITransport(app=_app(status, body, "application/json", seen)))
        err = _fails(_stream(up) if stream else _complete(up))
        head = sentence.format(n=status)
        assert (err.status, err.code) == (want_status, code)
        assert err.message == (f"{head}: {detail}" if detail else head)
        assert seen and seen[0]["method"] == "POST"


@pytest.mark.fak_theorem("D10.3")
def test_an_answer_below_400_is_read_as_the_answer() -> None:
    """A 2xx (and any status under 400) is the turn's answer, on both paths."""
    for status in (200, 399):
        seen: list[dict[str, str]] = []
        app = _app(status, b'{"id": "ok"}', "application/json", seen)
        assert asyncio.run(_complete(_upstream(httpx.ASGITransport(app=app)))) == {"id": "ok"}
        app = _app(status, b"data: {}\n\n", "text/event-stream; charset=utf-8", seen)
        assert asyncio.run(_stream(_upstream(httpx.ASGITransport(app=app)))) == "data: {}\n\n"
        assert [h["method"] for h in seen] == ["POST", "POST"]
        assert seen[1]["accept"] == "text/event-stream" and "accept" not in seen[0]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b'{"id": ', "upstream returned a body that is not JSON"),
        (b"[1, 2]", "upstream returned JSON that is not an object"),
        (b"[" * 200 + b"]" * 200, "upstream response"),
    ],
    ids=["not-json", "not-object", "too-deep"],
)
@pytest.mark.fak_theorem("D10.3")
def test_an_unreadable_answer_is_a_502_malformed(body: bytes, fragment: str) -> None:
    app = _app(200, body, "application/json", [])
    err = _fails(_complete(_upstream(httpx.ASGITransport(app=app))))
    assert (err.status, err.code) == (502, "upstream_malformed")
    assert fragment in err.message and err.message.startswith(("upstream", "the upstream"))


@pytest.mark.parametrize(
    ("ctype", "named"),
    [(None, "'no content type'"), ("application/json", "'application/json'")],
    ids=["none", "json"],
)
@pytest.mark.fak_theorem("D10.3")
def test_a_stream_answered_without_an_event_stream_is_a_502(ctype: str | None, named: str) -> None:
    app = _app(200, b'{"id": "x"}', ctype, [])
    err = _fails(_stream(_upstream(httpx.ASGITransport(app=app))))
    assert (err.status, err.code) == (502, "upstream_malformed")
    assert named in err.message and "not an event stream" in err.message


# Real sockets ------------------------------------------------------------------------
def _serve(reply: bytes | None) -> Iterator[int]:
    """A loopback server that reads a request, then writes ``reply`` and closes (None:
    never answers)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held: list[socket.socket] = []

    def run() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conn.recv(65536)
            if reply is None:
                held.append(conn)
                continue
            conn.sendall(reply)
            conn.close()

    threading.Thread(target=run, daemon=True).start()
    try:
        yield int(srv.getsockname()[1])
    finally:
        srv.close()
        for c in held:
            c.close()


HOSTILE = {
    "garbage": (b"garbage\r\n\r\n", 502, "upstream_error", "upstream connection failed"),
    "cut-error-body": (
        b"HTTP/1.1 500 X\r\nContent-Length: 100\r\n\r\nabc",
        502,
        "upstream_error",
        "upstream connection failed",
    ),
    "cut-body": (
        b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\ncontent-type: application/json\r\n\r\n{"a"',
        502,
        "upstream_error",
        "upstream connection failed",
    ),
    "silent": (None, 504, "upstream_timeout", "upstream timed out"),
}


#: A streamed answer's body is read by the relay (D10.5), not by the upstream client.
HOSTILE_CASES = [
    pytest.param(case, stream, id=f"{case}-{'stream' if stream else 'buffered'}")
    for case in sorted(HOSTILE)
    for stream in (False, True)
    if not (stream and case == "cut-body")
]


@pytest.mark.parametrize("transport", ["default", "httpx"])
@pytest.mark.parametrize(("case", "stream"), HOSTILE_CASES)
@pytest.mark.fak_theorem("D10.3")
def test_a_hostile_upstream_is_a_clean_error(case: str, stream: bool, transport: str) -> None:
    reply, status, code, fragment = HOSTILE[case]
    for port in _serve(reply):
        t = httpx.AsyncHTTPTransport() if transport == "httpx" else None
        up = _upstream(t, port, timeout=0.3)
        err = _fails(_stream(up) if stream else _complete(up))
        assert (err.status, err.code) == (status, code), err.message
        assert err.message.startswith(fragment)


@pytest.mark.parametrize("transport", ["default", "httpx"])
@pytest.mark.parametrize("stream", [False, True], ids=["buffered", "stream"])
@pytest.mark.fak_theorem("D10.3")
def test_a_dead_upstream_is_unreachable(stream: bool, transport: str) -> None:
    t = httpx.AsyncHTTPTransport() if transport == "httpx" else None
    up = _upstream(t, closed_port())
    err = _fails(_stream(up) if stream else _complete(up))
    assert (err.status, err.code) == (502, "upstream_unreachable")
    assert err.message.startswith("upstream unreachable: ")
