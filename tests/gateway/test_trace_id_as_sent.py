"""A trace id is measured as sent (D12): the OpenAPI document gives ``trace_id`` a
``maxLength`` of 128 on the raw string, so 129 characters whose first or last is a blank
are a 400 naming the limit, in the body and in ``X-Trace-Id``, and 128 as sent pass. The
oracle is the schema's own count, written out here (JSON Schema counts code points)."""

from __future__ import annotations

import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from fak_core.gateway.app import create_app
from fak_core.gateway.state import GatewayState, WireError
from tests.gateway.support import make_kernel

LIMIT = 128  # the OpenAPI document's maxLength of trace_id
#: ECMA-262 (sec. 12.2, 12.3) WhiteSpace: TAB, VT, FF, ZWNBSP and every code point of
#: general category Zs (USP); LineTerminator: LF, CR, LS, PS. The OpenAPI ``pattern`` of
#: a trace id reads \S by these, so these are what the gateway strips from a body trace id.
ECMA_BLANKS = sorted(
    {"\t", "\v", "\f", "\ufeff", "\n", "\r", "\u2028", "\u2029"}
    | {c for c in map(chr, range(sys.maxunicode + 1)) if unicodedata.category(c) == "Zs"}
)
BLANKS = st.sampled_from(ECMA_BLANKS)
#: a character the gateway keeps: any code point that is not an ECMA-262 blank (controls
#: included); lone surrogates cannot be sent as UTF-8 JSON
KEPT = st.characters(blacklist_categories=("Cs",), blacklist_characters=ECMA_BLANKS)
#: what other definitions call blank and ECMA-262 does not: Python's ``str.isspace`` (the
#: Unicode White_Space property and the bidi separators: U+001C to U+001F, U+0085), and
#: the two characters that were Zs in earlier Unicode versions (U+180E until 6.3, U+200B
#: in 4.0): the gateway keeps them
NEAR_BLANKS = sorted(
    ({c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace()} | {"\u180e", "\u200b"})
    - set(ECMA_BLANKS)
)
#: a kept character, a near-blank as often as any other
CORE = st.one_of(st.sampled_from(NEAR_BLANKS), KEPT)


def _client() -> TestClient:
    return TestClient(
        create_app(GatewayState(make_kernel()), mcp=False), base_url="http://127.0.0.1"
    )


@pytest.mark.fak_theorem("D12")
@settings(max_examples=25)
@given(
    st.text(CORE, min_size=1, max_size=8) | st.text(CORE, min_size=LIMIT - 3, max_size=LIMIT),
    st.lists(BLANKS, max_size=3),
    st.lists(BLANKS, max_size=3),
)
def test_a_body_trace_id_is_measured_as_sent(
    core: str, before: list[str], after: list[str]
) -> None:
    sent = "".join(before) + core + "".join(after)
    with _client() as c:
        r = c.post("/v1/fak/adjudicate", json={"tool": "echo", "trace_id": sent})
    if len(sent) > LIMIT:
        assert r.status_code == 400, (len(sent), r.text)
        assert f"limit is {LIMIT} characters" in r.json()["error"]["message"]
    else:
        assert r.status_code == 200, (len(sent), r.text)
        assert r.json()["trace_id"] == core


@pytest.mark.fak_theorem("D12")
@pytest.mark.parametrize("where", ["front", "back"])
def test_129_characters_with_a_blank_at_an_end_are_refused(where: str) -> None:
    core = "t" * LIMIT
    sent = "\t" + core if where == "front" else core + "\u3000"
    with _client() as c:
        r = c.post("/v1/fak/adjudicate", json={"tool": "echo", "trace_id": sent})
        assert r.status_code == 400, r.text
        ok = c.post("/v1/fak/adjudicate", json={"tool": "echo", "trace_id": core})
        assert ok.status_code == 200 and ok.json()["trace_id"] == core


@pytest.mark.fak_theorem("D12")
@pytest.mark.parametrize("where", ["body", "header"])
def test_the_state_refuses_a_long_trace_id_from_any_caller(where: str) -> None:
    """``GatewayState.trace_for`` refuses on its own, whoever calls it (the routes check
    first; a host that builds calls through the state does not)."""
    state = GatewayState(make_kernel())
    long, ok = "t" * (LIMIT + 1), "t" * LIMIT
    args = (long, None) if where == "body" else (None, long)
    with pytest.raises(WireError, match=f"limit is {LIMIT} characters"):
        state.trace_for(*args)
    assert state.trace_for(*((ok, None) if where == "body" else (None, ok))) == ok
