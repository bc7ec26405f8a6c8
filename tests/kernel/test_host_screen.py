"""The quick screen never clears a word that names a denied host (D2.7): bare numbers in
every radix, alone and with trailing dots, are read in full and denied.

The oracle is the address the generator encodes (WHATWG IPv4 number forms, written from
the standard), not the code under test.
"""

from __future__ import annotations

import ipaddress
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core import Kernel, Policy, ToolCall
from tests.kernel.hostgen import DENIED_V4, DENY_ENTRIES

KERNEL = Kernel(Policy(allow=("http_get",), deny_hosts=DENY_ENTRIES))


@pytest.mark.fak_theorem("D2.7")
@given(
    st.sampled_from(DENIED_V4),
    st.sampled_from(["0x", "0X"]),
    st.sampled_from(["{:x}", "{:X}", "{:08x}"]),
    st.sampled_from(["", ".", ".."]),
)
def test_a_bare_hex_or_decimal_number_naming_a_denied_address_is_denied(
    address: str, prefix: str, digits: str, dots: str
) -> None:
    n = int(ipaddress.IPv4Address(address))
    for word in (prefix + digits.format(n) + dots, str(n) + dots, "0" + format(n, "o") + dots):
        v = KERNEL.decide(ToolCall("http_get", json.dumps({"v": [word]})))
        assert (KERNEL.kinds.name(v.kind), KERNEL.reasons.name(v.reason)) == (
            "DENY",
            "EGRESS_BLOCK",
        ), word
        assert address in v.claim, v.claim
