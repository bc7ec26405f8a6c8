"""A trace id in ``X-Trace-Id`` loses the same blanks as one in the body (D12).

The OpenAPI document reads a trace id's white space as ECMA-262 ``\\s`` does, and the body's
``trace_id`` is stripped of exactly those; the header must be too, or the same text names
one trace in the body and another (or none, and a minted one) in the header. A header value
is Latin-1, so the characters that tell the definitions apart there are U+001C to U+001F and
U+0085 (Python's ``str.isspace`` takes them, ECMA-262 does not): the generator puts them at
the ends of the id as often as any other character. The oracle is the ECMA-262 set written
out here and a percent-encoder of its own for the echoed header.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core.gateway.app import create_app
from fak_core.gateway.state import GatewayState
from tests.gateway.support import make_kernel

#: ECMA-262 WhiteSpace and LineTerminator inside Latin-1: TAB, LF, VT, FF, CR, SP, NBSP
LATIN1_BLANKS = "\t\n\x0b\x0c\r \xa0"
#: what Python's ``str.strip()`` also takes in Latin-1, which ECMA-262 keeps
NEAR_BLANKS = "\x1c\x1d\x1e\x1f\x85"
#: a Latin-1 character the gateway keeps (NUL aside: no header carries it)
KEPT = st.sampled_from([chr(c) for c in range(1, 256) if chr(c) not in LATIN1_BLANKS])
END = st.one_of(st.sampled_from(NEAR_BLANKS), KEPT)
PRINTABLE_ASCII = {chr(c) for c in range(0x20, 0x7F)}


def _echoed(trace: str) -> str:
    """``X-Trace-Id`` as D12 states it: the id itself when it is visible ASCII (and space),
    else its UTF-8 bytes percent-encoded, visible ASCII other than ``%`` kept."""
    if set(trace) <= PRINTABLE_ASCII:
        return trace
    out = []
    for ch in trace:
        if ch in PRINTABLE_ASCII and ch != "%":
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    return "".join(out)


@st.composite
def _cores(draw: st.DrawFn) -> str:
    """An id of kept characters whose first and last are near-blanks as often as not."""
    middle = draw(st.text(KEPT, max_size=6))
    return draw(END) + middle + (draw(END) if middle or draw(st.booleans()) else "")


def _adjudicate(header: str | None, body_trace: str | None) -> httpx.Response:
    """One ``POST /v1/fak/adjudicate`` naming the trace in ``X-Trace-Id`` (its Latin-1 bytes,
    as a server hands them on: a test client that re-encodes headers as UTF-8 would not) or
    in the body, on a fresh gateway."""
    doc = {"tool": "echo"} if body_trace is None else {"tool": "echo", "trace_id": body_trace}
    headers = {} if header is None else {"X-Trace-Id": header.encode("latin-1")}

    async def go() -> httpx.Response:
        app = create_app(GatewayState(make_kernel()), mcp=False)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return await c.post("/v1/fak/adjudicate", json=doc, headers=headers)

    r = asyncio.run(go())
    assert r.status_code == 200, r.text
    return r


def _header_trace(header: str) -> tuple[str, list[str]]:
    r = _adjudicate(header, None)
    return r.json()["trace_id"], r.headers.get_list("x-trace-id")


@pytest.mark.fak_theorem("D12")
@settings(max_examples=40, deadline=None)
@given(
    _cores(),
    st.text(st.sampled_from(LATIN1_BLANKS), max_size=3),
    st.text(st.sampled_from(LATIN1_BLANKS), max_size=3),
)
def test_the_header_trace_is_the_body_trace(core: str, before: str, after: str) -> None:
    sent = before + core + after
    trace, echoed = _header_trace(sent)
    assert trace == core, (sent, trace)
    assert echoed == [_echoed(core)]
    assert _adjudicate(None, sent).json()["trace_id"] == trace


@pytest.mark.fak_theorem("D12")
@pytest.mark.parametrize("near", list(NEAR_BLANKS))
def test_a_near_blank_alone_is_a_trace_not_a_missing_one(near: str) -> None:
    trace, echoed = _header_trace(" " + near + "\t")
    assert trace == near
    assert echoed == [_echoed(near)]
