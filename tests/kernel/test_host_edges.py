"""Denied hosts at the edges of their readings (D2.7): what makes a string URL-shaped,
trailing dots that turn an address into a WHATWG domain, the RFC 3986 reading of a host
too long for a name, and deny-list entries no parser can read.

The oracles never call ``fak_core.hosts``: the RFC 3986 scheme grammar written as a
regular expression, the targets the generators draw (``tests.kernel.hostgen``), and
hand-written expected values.
"""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core import Kernel, Policy, PolicyError, ToolCall, load_policy
from tests.kernel.hostgen import DENIED_V4, DENIED_V6, DENY_ENTRIES, ipv4_text, ipv6_text

KERNEL = Kernel(Policy(allow=("http_get",), deny_hosts=DENY_ENTRIES))
LIMIT = 65536  # the longest string read as a destination


def _decide(value: Any) -> tuple[str, str, str]:
    v = KERNEL.decide(ToolCall("http_get", json.dumps({"v": value})))
    return KERNEL.kinds.name(v.kind), KERNEL.reasons.name(v.reason), v.claim


# RFC 3986 section 3.1: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), then ":"
RFC3986_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
# heads around the grammar's edges: a digit or a sign first, a colon first or second,
# characters no scheme holds (an underscore, a non-ASCII letter, a slash) before the colon
HEAD = st.text(st.sampled_from([*"aZ0+-.:_/", "\u00e9", "\uff41"]), min_size=1, max_size=6)


@pytest.mark.fak_theorem("D2.7")
@given(st.lists(st.tuples(HEAD, st.sampled_from("x\u00e9")), min_size=4, max_size=4))
def test_prose_over_the_limit_is_refused_exactly_when_it_starts_with_a_scheme(
    heads: list[tuple[str, str]],
) -> None:
    """A string over the limit with a space is refused when URL-shaped (an RFC 3986 scheme
    and a colon first) and otherwise not read, whatever it ends with."""
    for head, last in heads:
        value = (head + " " + "x" * LIMIT)[:LIMIT] + last
        kind, reason, claim = _decide(value)
        if RFC3986_SCHEME.match(head):
            assert (kind, reason) == ("DENY", "EGRESS_BLOCK"), head
            assert claim == f"refused destination: a {LIMIT + 1}-char destination is over {LIMIT}"
        else:
            assert kind == "ALLOW", (head, claim)


@pytest.mark.fak_theorem("D2.7")
@given(st.sampled_from(DENIED_V4), st.integers(2, 4), st.data())
def test_an_address_with_trailing_dots_is_still_the_address(
    address: str, dots: int, data: Any
) -> None:
    """With two dots or more after it, an IPv4 address is a domain to WHATWG; without its
    trailing dots it is the address again, in every numeric form, in a URL or bare."""
    n = int.from_bytes(bytes(int(p) for p in address.split(".")))
    text = data.draw(ipv4_text(n)).rstrip(".") + "." * dots
    for value in (f"http://{text}/x", text, f"{text}:8080"):
        kind, reason, claim = _decide(value)
        assert (kind, reason) == ("DENY", "EGRESS_BLOCK"), value
        assert address in claim, claim


@pytest.mark.fak_theorem("D2.7")
@given(st.integers(1030, 1100), st.sampled_from(["evil.example", "EVIL.Example", "localhost"]))
def test_the_rfc3986_host_is_read_past_the_length_of_a_name(dots: int, name: str) -> None:
    """urllib's host ``evil.example`` followed by a thousand dots is too long for a host
    name, yet an RFC 3986 client strips the dots and reaches ``evil.example``."""
    for value in (f"http://good.example\\@{name}{'.' * dots}/", f"x\\@{name}{'.' * dots}"):
        kind, reason, claim = _decide(value)
        assert (kind, reason) == ("DENY", "EGRESS_BLOCK"), value
        assert name.lower() in claim, claim


@pytest.mark.fak_theorem("D2.7")
@pytest.mark.parametrize("entry", ["a\ud800.example", "\udfff", "evil.example\ud83d"])
def test_a_deny_entry_no_parser_can_read_is_refused_by_name(entry: str) -> None:
    """A lone surrogate (JSON lets a policy file spell one) is no host: the entry is
    refused with an error naming it, never a crash."""
    with pytest.raises(PolicyError, match="deny_hosts entry") as caught:
        load_policy(json.dumps({"allow": ["t"], "deny_hosts": [entry]}))
    assert repr(entry)[1:-1] in str(caught.value)


def _fullwidth(draw: st.DrawFn, text: str) -> str:
    """``text`` with each character fullwidth or not, and each dot an ideographic or a
    fullwidth full stop or not (UTS #46 maps them all back)."""
    out = []
    for c in text:
        if c == ".":
            out.append(draw(st.sampled_from([".", "\u3002", "\uff0e", "\uff61"])))
        elif draw(st.booleans()):
            out.append(chr(ord(c) + 0xFEE0))
        else:
            out.append(c)
    return "".join(out)


@pytest.mark.fak_theorem("D2.7")
@given(st.data())
def test_a_fullwidth_bare_host_is_the_host(data: Any) -> None:
    """A denied name or address spelled in fullwidth characters, bare or in a URL (the
    quick screen must not clear a word it cannot read)."""
    for target in ("localhost", "LocalHost", "evil.example", *DENIED_V4):
        text = _fullwidth(data.draw, target)
        for value in (text, f"http://{text}/"):
            kind, reason, claim = _decide(value)
            assert (kind, reason) == ("DENY", "EGRESS_BLOCK"), value
            assert target.lower() in claim, claim


@pytest.mark.fak_theorem("D2.7")
@given(
    st.sampled_from(["metadata-server", "my_host", "-x-", "db_1"]),
    st.lists(st.booleans(), min_size=15, max_size=15),
)
def test_a_denied_one_label_name_with_a_hyphen_or_underscore_is_denied_in_any_case(
    name: str, upper: list[bool]
) -> None:
    kernel = Kernel(Policy(allow=("t",), deny_hosts=(name, "evil.example")))
    spelled = "".join(c.upper() if u else c for c, u in zip(name, upper, strict=False))
    for value in (spelled, f"http://{spelled}/", f"{spelled}:80", f"{spelled}."):
        v = kernel.decide(ToolCall("t", json.dumps({"a": [{"b": value}]})))
        assert (kernel.kinds.name(v.kind), kernel.reasons.name(v.reason)) == (
            "DENY",
            "EGRESS_BLOCK",
        ), value
        assert name in v.claim, v.claim


@pytest.mark.fak_theorem("D2.7")
@given(
    st.sampled_from(DENIED_V6),
    st.sampled_from(["", "%0", "%eth0", "%25"]),
    st.booleans(),
    st.data(),
)
def test_an_ipv6_entry_in_any_text_form_denies_its_address(
    address: str, zone: str, bracketed: bool, data: Any
) -> None:
    """An IPv6 deny entry is read by ``ipaddress`` (brackets and a zone id allowed, which
    the WHATWG host parser refuses) and denies the address it spells."""
    text = data.draw(ipv6_text(int(ipaddress.IPv6Address(address)))) + zone
    entry = f"[{text}]" if bracketed else text
    kernel = Kernel(load_policy(json.dumps({"allow": ["t"], "deny_hosts": [entry]})))
    for value in (f"http://[{address}]/", address, f"[{address.upper()}]"):
        v = kernel.decide(ToolCall("t", json.dumps({"u": value})))
        assert (kernel.kinds.name(v.kind), kernel.reasons.name(v.reason)) == (
            "DENY",
            "EGRESS_BLOCK",
        ), (entry, value)
        assert address in v.claim, v.claim
