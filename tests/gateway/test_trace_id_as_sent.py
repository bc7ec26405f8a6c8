"""A trace id is measured as sent (D12): the OpenAPI document gives ``trace_id`` a
``maxLength`` of 128 on the raw string, so 129 characters whose first or last is a blank
are a 400 naming the limit, in the body and in ``X-Trace-Id``, and 128 as sent pass. The
oracle is the schema's own count, written out here (JSON Schema counts code points)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from fak_core.gateway.app import create_app
from fak_core.gateway.state import GatewayState, WireError
from tests.gateway.support import make_kernel

LIMIT = 128  # the OpenAPI document's maxLength of trace_id
#: blanks the gateway strips from a body trace id (ECMA-262 white space and line ends)
BLANKS = st.sampled_from(["\t", " ", "\u00a0", "\u2003", "\u3000", "\ufeff"])
#: a character the gateway keeps: any code point that is not white space, astral included
KEPT = st.characters(
    blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc"), blacklist_characters="\ufeff"
)


def _client() -> TestClient:
    return TestClient(
        create_app(GatewayState(make_kernel()), mcp=False), base_url="http://127.0.0.1"
    )


@pytest.mark.fak_theorem("D12")
@settings(max_examples=25)
@given(
    st.text(KEPT, min_size=1, max_size=8) | st.text(KEPT, min_size=LIMIT - 3, max_size=LIMIT),
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
