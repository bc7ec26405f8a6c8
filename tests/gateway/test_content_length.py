"""D14 and D10.3: a ``Content-Length`` is ASCII digits or it is no length, and never a 5xx.

RFC 9110 (8.6) writes the field ``Content-Length = 1*DIGIT``, and RFC 5234's ``DIGIT`` is
``%x30-39``: ASCII only. ``str.isdigit`` also says yes to superscripts (``"²"``, Unicode
category No) and to every decimal digit of every script (Nd, ``"١٢"``), and ``int`` reads
the Nd ones, a sign, underscores and Unicode blanks, and raises on ``"²"``. The values here
are generated from the grammar (blanks, leading zeros, the true length) and from an
alphabet of ASCII digits, signs, separators and Unicode Nd/No digit characters (a digit of
another script swapped in for an ASCII one, value for value, too). A header reaches an ASGI
app as bytes that Starlette and the middleware read as Latin-1, so a value is sent as its
Latin-1 bytes when it has them (the superscripts ``¹²³`` do) and as UTF-8 otherwise.

The oracle is the grammar itself, a regular expression over the bytes sent, with the
documented order of the door (media type before the cap): through the whole gateway
(``create_app``) a value outside the grammar is a 400 saying the length must be a whole
number; a number passes to the media-type check and the cap. The proxy routes mounted on
their own (no cap in front of them) read a value outside the grammar as no length and
count the body as it arrives. Requests are hand-made ASGI messages, since an HTTP client
rewrites the header (and uvicorn, over a socket, refuses such a request itself with its
own plain 400 before any app runs).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import unicodedata
from collections import defaultdict
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.types import ASGIApp

from fak_core.gateway import GatewayState, UpstreamConfig, proxy_routes
from fak_core.gateway.app import create_app
from tests.gateway.asgi_once import CLIENT, asgi_post, status_of
from tests.gateway.support import make_kernel
from tests.gateway_proxies.kernels import make_kernel as proxy_kernel
from tests.gateway_proxies.scripted_upstream import Script, ScriptedUpstream

#: RFC 9110 ``Content-Length = 1*DIGIT``, with the field's own blanks (SP, HTAB) around it.
GRAMMAR = re.compile(rb"[ \t]*([0-9]+)[ \t]*")
CAP = 4096
BODY = b'{"tool": "echo", "arguments": {"a": 1}}'
OWS = st.text(alphabet=" \t", max_size=2)


def _digit_table() -> dict[int, list[str]]:
    """Every Unicode character of category Nd or No that has a digit value, by value."""
    table: dict[int, list[str]] = defaultdict(list)
    for code in range(sys.maxunicode + 1):
        ch = chr(code)
        if unicodedata.category(ch) in ("Nd", "No"):
            value = unicodedata.digit(ch, None)
            if value is not None and not ch.isascii():
                table[value].append(ch)
    return dict(table)


DIGITS = _digit_table()
#: Those a header can carry as themselves (Latin-1): the superscripts one, two, three.
LATIN1_DIGITS = sorted(c for cs in DIGITS.values() for c in cs if ord(c) < 256)
UNICODE_DIGIT = st.one_of(
    st.characters(categories=["Nd", "No"], exclude_characters="0123456789"),
    st.sampled_from(LATIN1_DIGITS),
)
ALPHABET = st.one_of(
    st.sampled_from("0123456789"),
    UNICODE_DIGIT,
    st.sampled_from([" ", "\t", "+", "-", "_", ".", ",", "\xa0", "\x0c", "e", "x"]),
)


def declared_values(n: int) -> st.SearchStrategy[str]:
    """``Content-Length`` values for a body of ``n`` bytes: the grammar's forms of ``n``,
    ``n`` with some ASCII digits swapped for other scripts' digits of the same value, and
    free text over the alphabet (which also yields other numbers, in and out of it)."""
    text = str(n)
    grammar = st.builds(
        lambda pre, zeros, post: pre + "0" * zeros + text + post, OWS, st.integers(0, 3), OWS
    )
    swapped = st.lists(st.booleans(), min_size=len(text), max_size=len(text)).flatmap(
        lambda flips: st.tuples(
            *(
                st.sampled_from(DIGITS[int(d)]) if flip else st.just(d)
                for d, flip in zip(text, flips, strict=True)
            )
        ).map("".join)
    )
    return st.one_of(grammar, swapped, st.text(ALPHABET, min_size=0, max_size=8))


def wire_bytes(value: str) -> bytes:
    """The header's bytes: Latin-1 when the value has them, else its UTF-8."""
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode("utf-8")


def asgi(
    app: ASGIApp,
    path: str,
    headers: list[tuple[bytes, bytes]],
    body: bytes,
    host: bytes = b"127.0.0.1",
) -> int:
    """POST ``body`` to ``app`` with exactly ``headers``; the status answered (500 for an
    exception that escapes the app, as a server would answer it)."""

    async def run() -> int:
        with anyio.fail_after(10):
            try:
                sent = await asgi_post(app, path, body, [(b"host", host), *headers], CLIENT)
            except Exception:
                return 500
        return status_of(sent)

    return asyncio.run(run())


def _length(raw: bytes) -> int | None:
    match = GRAMMAR.fullmatch(raw)
    return int(match.group(1)) if match else None


@pytest.fixture(scope="module")
def gateway() -> Starlette:
    return create_app(GatewayState(make_kernel(), max_body=CAP))


@pytest.mark.fak_theorem("D14")
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(value=declared_values(len(BODY)), media=st.sampled_from(["application/json", "text/plain"]))
@example(value="²", media="text/plain")
@example(value="+" + str(len(BODY)), media="application/json")
@example(value="\t0" + str(len(BODY)) + " ", media="application/json")
@example(value="99999", media="application/json")
def test_a_content_length_outside_the_grammar_is_a_400_on_every_media_type(
    gateway: Starlette, value: str, media: str
) -> None:
    """Through the whole gateway: a value that is not ``1*DIGIT`` is a 400 saying the length
    must be a whole number (never a 5xx, never served); a number is judged by the media
    type (a non-JSON body that declares bytes is a 415) and then by the cap."""
    raw = wire_bytes(value)
    headers = [(b"content-type", media.encode()), (b"content-length", raw)]
    status = asgi(gateway, "/v1/fak/adjudicate", headers, BODY)
    n = _length(raw)
    if n is None:
        expected = 400
    elif media != "application/json" and n > 0:
        expected = 415
    elif n > CAP:
        expected = 413
    else:
        expected = 200
    assert status == expected, (value, raw, media, status)


@pytest.mark.fak_theorem("D14")
@pytest.mark.parametrize("value", ["²", "¹²", "١٢", "+12", "1_2", "-0", "12\xa0", "\x0c12"])
def test_a_non_ascii_or_signed_length_is_refused_with_the_envelope(
    gateway: Starlette, value: str
) -> None:
    """The refusal is the gateway's envelope saying what to fix."""
    raw = wire_bytes(value)
    headers = [(b"host", b"127.0.0.1"), (b"content-type", b"text/plain"), (b"content-length", raw)]
    sent = asyncio.run(asgi_post(gateway, "/v1/fak/adjudicate", b"{}", headers))
    assert sent[0]["status"] == 400, (value, sent)
    doc = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
    assert doc["error"]["type"] == "invalid_request_error"
    assert "Content-Length must be a whole number" in doc["error"]["message"]


# ------------------------------------------------- the proxy routes mounted on their own
def _turn() -> bytes:
    doc: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "go"}]}
    return json.dumps(doc).encode()


TURN = _turn()


@pytest.fixture(scope="module")
def upstream() -> ScriptedUpstream:
    return ScriptedUpstream()


@pytest.mark.fak_theorem("D10.3")
@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(value=declared_values(len(TURN)), slack=st.sampled_from([-1, 0, 1]))
@example(value="²", slack=0)
@example(value=str(len(TURN)), slack=-1)
@example(value=str(len(TURN) + 1), slack=0)
def test_the_proxy_reads_a_length_outside_the_grammar_as_none(
    upstream: ScriptedUpstream, value: str, slack: int
) -> None:
    """The proxy routes alone: a declared number over the limit is a 413 before the body
    is read; a value outside the grammar declares nothing, and the body is counted as it
    arrives (over the limit 413, else served): never a 5xx."""
    limit = len(TURN) + slack
    state = GatewayState(proxy_kernel(), max_body=limit)
    transport = httpx.ASGITransport(app=upstream.app)
    cfg = UpstreamConfig(base_url="http://up/v1", transport=transport, wires=("openai",))
    app = Starlette(routes=proxy_routes(state, cfg))
    upstream.reset(Script(text="hi"))
    raw = wire_bytes(value)
    headers = [(b"content-type", b"application/json"), (b"content-length", raw)]
    status = asgi(app, "/v1/chat/completions", headers, TURN)
    n = _length(raw)
    over = len(TURN) > limit or (n is not None and n > limit)
    assert status == (413 if over else 200), (value, raw, limit, status)
    assert len(upstream.requests) == (0 if over else 1)


# --------------------------------------------------------------- a Host's port is digits
@pytest.fixture(scope="module")
def loopback_gateway() -> Starlette:
    return create_app(GatewayState(make_kernel()), mcp=False, host="127.0.0.1")


@pytest.mark.fak_theorem("D13")
@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    name=st.sampled_from(["127.0.0.1", "localhost"]),  # "[::1]x" is "::1": a caveat of D13
    port=st.lists(
        st.one_of(st.sampled_from("0123456789"), UNICODE_DIGIT), min_size=1, max_size=5
    ).map("".join),
)
@example(name="localhost", port="8²")
@example(name="127.0.0.1", port="80")
def test_a_host_port_is_ascii_digits_or_the_host_is_another_name(
    loopback_gateway: Starlette, name: str, port: str
) -> None:
    """RFC 3986 ``port = *DIGIT`` (ASCII): a loopback name with a port of ASCII digits is
    served; with any other digit in it, the Host is another name, a 421."""
    raw = wire_bytes(f"{name}:{port}")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]
    status = asgi_host(loopback_gateway, raw, headers, BODY)
    ascii_port = re.fullmatch(rb"[0-9]+", wire_bytes(port)) is not None
    assert status == (200 if ascii_port else 421), (raw, status)


def asgi_host(app: ASGIApp, host: bytes, headers: list[tuple[bytes, bytes]], body: bytes) -> int:
    """:func:`asgi` with ``host`` as the request's ``Host``."""
    return asgi(app, "/v1/fak/adjudicate", headers, body, host=host)
