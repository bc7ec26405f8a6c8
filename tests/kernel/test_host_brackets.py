"""D2.7's refusal of a ``deny_hosts`` entry that is no host, at an unmatched bracket.

The WHATWG URL standard's host parser fails on a host that starts with ``[`` and does not
end with ``]`` (IPv6-unclosed), and ``[`` and ``]`` are forbidden host code points
anywhere else, so a lone ``]`` fails too; ``ipaddress`` reads no bracket at all, and the
theorem allows only a matched pair around an address. So an entry holding exactly one
bracket, at either end, is no host and must be refused, whatever address the rest
spells; the same address in a matched pair is an entry. The oracle is that rule, written
here, and ``ipaddress`` for the controls. One exception the theorem's wording makes: after
a zone id (``fe80::1%eth0]``) a bracket is part of the zone id, which ``ipaddress`` reads
as written, so that entry is an address (``fe80::1``, its zone dropped) and is not drawn.
"""

from __future__ import annotations

import ipaddress
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core import ToolCall, VerdictKind
from fak_core.floor import CapabilityFloor
from fak_core.policy import PolicyError, parse_policy
from fak_core.reasons import Reason
from fak_core.view import CallView

V6 = ("::1", "1::1", "1::", "::", "fe80::1%eth0", "::ffff:10.0.0.1", "2001:db8::42", "a::b")
V4 = ("10.0.0.1", "169.254.169.254", "0.0.0.0")


def _one_bracket(address: str, side: str) -> str:
    return "[" + address if side == "left" else address + "]"


@pytest.mark.fak_theorem("D2.7")
@settings(max_examples=40, deadline=None)
@given(st.sampled_from(V6 + V4), st.sampled_from(["left", "right"]), st.sampled_from(["", " "]))
def test_an_entry_with_one_bracket_is_refused(address: str, side: str, pad: str) -> None:
    if side == "right" and "%" in address:
        side = "left"  # a bracket after a zone id is part of the zone id (see above)
    entry = pad + _one_bracket(address, side) + pad
    with pytest.raises(PolicyError, match="deny_hosts"):
        parse_policy({"deny_hosts": [entry]})


@pytest.mark.fak_theorem("D2.7")
@pytest.mark.parametrize("entry", ["[", "]", "[]", "[[::1]", "[::1]]"])
def test_brackets_alone_or_doubled_are_refused(entry: str) -> None:
    with pytest.raises(PolicyError, match="deny_hosts"):
        parse_policy({"deny_hosts": [entry]})


@pytest.mark.fak_theorem("D2.7")
@pytest.mark.parametrize("address", [a for a in V6 + V4 if "%" not in a])
def test_the_same_address_in_a_matched_pair_is_an_entry(address: str) -> None:
    """A matched pair around what ``ipaddress`` reads, an IPv4 address included (the
    theorem allows brackets around any address ``ipaddress`` reads), denies that address."""
    policy = parse_policy({"deny_hosts": [f"[{address}]"], "allow": ["fetch"]})
    assert policy.deny_hosts == (f"[{address}]",)
    ip = ipaddress.ip_address(address)  # the control really is an address
    host = f"[{ip}]" if ip.version == 6 else str(ip)
    v = CapabilityFloor(policy).adjudicate(_view(f"http://{host}/x"))
    assert (v.kind, v.reason) == (VerdictKind.DENY, Reason.EGRESS_BLOCK), address


def _view(url: str) -> CallView:
    return CallView(ToolCall("fetch", json.dumps({"url": url}), "t"), 1 << 20, 64)
