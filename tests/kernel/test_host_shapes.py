"""What makes a string URL-shaped (D2.7), at the edges of the RFC 3986 scheme grammar: a
string over the length limit with a space in it is refused exactly when it starts with a
scheme and a colon, and is otherwise prose, not read.

The oracle is the grammar itself (RFC 3986 section 3.1, ``scheme = ALPHA *( ALPHA / DIGIT
/ "+" / "-" / "." )``), written as a regular expression; the heads are hand-picked at its
edges: a one-letter scheme, a colon first, a digit, sign or non-ASCII letter first, a
character no scheme holds before the colon, and a last character outside ASCII.
"""

from __future__ import annotations

import json
import re

import pytest

from fak_core import Kernel, Policy, ToolCall
from tests.kernel.hostgen import DENY_ENTRIES

KERNEL = Kernel(Policy(allow=("http_get",), deny_hosts=DENY_ENTRIES))
LIMIT = 65536  # the longest string read as a destination
RFC3986_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
HEADS = (
    "a:",
    "Z:x",
    "ab:",
    "a1+.-z:",
    ":a",
    "::",
    "1a:",
    "+a:",
    "-a:",
    ".a:",
    "a_b:",
    "a/b:",
    "\u00e9:",
    "a\u00e9:",
    "\uff41:",
    "a",
    "ab",
)


@pytest.mark.fak_theorem("D2.7")
@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("last", ["x", "\u00e9"])
def test_a_long_string_is_url_shaped_exactly_when_it_starts_with_a_scheme(
    head: str, last: str
) -> None:
    value = (head + " " + "x" * LIMIT)[:LIMIT] + last
    v = KERNEL.decide(ToolCall("http_get", json.dumps({"v": value})))
    kind, reason = KERNEL.kinds.name(v.kind), KERNEL.reasons.name(v.reason)
    if RFC3986_SCHEME.match(head):
        assert (kind, reason) == ("DENY", "EGRESS_BLOCK"), head
        assert v.claim == f"refused destination: a {LIMIT + 1}-char destination is over {LIMIT}"
    else:
        assert kind == "ALLOW", (head, v.claim)
