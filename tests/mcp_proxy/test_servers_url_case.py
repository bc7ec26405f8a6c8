"""A downstream server's URL scheme is read in any ASCII case (D11's servers file).

RFC 3986 (3.1) makes a scheme case-insensitive, lower case canonical; ``HTTP://h/mcp`` was
refused. The expectation is written here: the scheme, of ASCII letters in any case,
lower-cased, the rest of the URL exactly as written (its host and path keep their case);
a scheme spelt with a character that only looks like, or only case-folds to, an ASCII
letter (fullwidth, the Kelvin sign, the long s) is still refused.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fak_core.gateway.mcp_downstream import DownstreamSpec, ServerConfigError


@st.composite
def _cased(draw: st.DrawFn, word: str) -> str:
    return "".join(c.upper() if draw(st.booleans()) else c for c in word)


SCHEMES = st.sampled_from(["http", "https"]).flatmap(_cased)
REST = st.text(st.sampled_from("AbZ.h/:09-_?=%"), max_size=12)


@pytest.mark.fak_theorem("D11")
@settings(max_examples=60, deadline=None)
@given(scheme=SCHEMES, rest=REST)
@example(scheme="HTTP", rest="h/mcp")
@example(scheme="HttpS", rest="Host.Example/MCP")
def test_the_scheme_in_any_case_is_read_in_lower_case(scheme: str, rest: str) -> None:
    spec = DownstreamSpec("s", url=f"{scheme}://{rest}")
    want = ("https" if len(scheme) == 5 else "http") + "://" + rest
    assert (spec.url, spec.transport) == (want, "http")


@pytest.mark.fak_theorem("D11")
@pytest.mark.parametrize(
    "url",
    ["\uff28TTP://h/mcp", "http\u017f://h/mcp", "HTTP\u212a://h", "HTTP:/h/mcp", "HTTPX://h"],
)
def test_a_scheme_that_only_looks_like_http_is_refused(url: str) -> None:
    with pytest.raises(ServerConfigError, match="url must be http:// or https://"):
        DownstreamSpec("s", url=url)
