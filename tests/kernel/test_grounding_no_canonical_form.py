"""Values with no canonical form are never grounded (C4.6): URLs whose hosts the WHATWG
and RFC 3986 readings read apart, hosts with an IDNA deviation character, a port out of
range, an unclosed IPv6 literal. Written in the user's words, in a trusted tool's result,
or at a declared identifier field (C4.9), none of them grounds itself or another of them;
the store answers "not grounded" for each without failing.
"""

from __future__ import annotations

import json

import pytest

from fak_core import Kernel, Policy, Result, Status, ToolCall, ToolDecl, VerdictKind
from fak_core.grounding import GroundingStore, _canonical
from fak_core.taint import Taint

AMBIGUOUS = [
    "http://a%2Fb.com/",  # WHATWG decodes the %2F into the host; RFC 3986 does not
    "https://x.org:99999/",  # no such port
    "xn--fa-hia.de",  # faß.de: IDNA 2003 and 2008 read two places
    "http://[::1",  # an IPv6 literal never closed
]


@pytest.fixture(autouse=True)
def _fresh_canonical_forms() -> None:
    """A canonical form the real code cached must not answer for a mutant."""
    _canonical.cache_clear()


@pytest.mark.fak_theorem("C4.6")
def test_the_store_grounds_no_value_without_a_canonical_form() -> None:
    store = GroundingStore()
    store.record_trusted("s", "send it to " + " or ".join(AMBIGUOUS))
    for value in AMBIGUOUS:
        assert store.grounded("s", value) is False, value
    assert store.grounded("s", "send") is True  # the text was recorded


@pytest.mark.fak_theorem("C4.6", "C4.9")
@pytest.mark.parametrize("held", AMBIGUOUS)
def test_an_identifier_without_a_canonical_form_grounds_nothing(held: str) -> None:
    k = Kernel(
        Policy(
            version="fak-policy/v2",
            allow=("inbox", "send"),
            sources={"inbox": "untrusted"},
            tools={
                "inbox": ToolDecl("NONE", identifiers=("/*",)),
                "send": ToolDecl("EGRESS", ("/to",)),
            },
        )
    )
    call = ToolCall("inbox", "{}", "s")
    assert k.decide(call).kind == VerdictKind.ALLOW
    k.admit(call, Result(Status.OK, json.dumps([held, "alicevalue"]), taint=Taint.TRUSTED))
    assert k.taint("s") == Taint.TAINTED
    send = ToolCall("send", json.dumps({"to": "alicevalue"}), "s")
    assert k.decide(send).kind == VerdictKind.ALLOW  # the other identifier grounds
    for value in AMBIGUOUS:
        sent = k.decide(ToolCall("send", json.dumps({"to": value}), "s"))
        assert sent.kind == VerdictKind.DENY, (held, value, sent)
