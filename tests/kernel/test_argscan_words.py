"""D2.5 in the walk's quick screen: a bare word of ASCII letters is skipped as naming no
host only while no one-label name is denied; when one is (``localhost``), the word is read,
the denied host decides the call, and no redacted key is reported with it.

The oracle is the hand-written expectation per case (the host is planted or not).
"""

from __future__ import annotations

import json

import pytest

from fak_core import Policy, ToolCall, VerdictKind
from fak_core.floor import CapabilityFloor
from fak_core.view import CallView

WORDS = ("localhost", "LocalHost", "intranet")


@pytest.mark.fak_theorem("D2.5")
@pytest.mark.parametrize("denied", [("localhost", "intranet"), ("evil.example",)])
@pytest.mark.parametrize("word", WORDS)
@pytest.mark.parametrize("depth", [0, 1, 2])
def test_a_denied_one_label_name_decides_before_redaction(
    denied: tuple[str, ...], word: str, depth: int
) -> None:
    floor = CapabilityFloor(
        Policy(allow=("get_page",), redact_fields=("password",), deny_hosts=denied)
    )
    value: object = word
    for _ in range(depth):
        value = [{"u": value}]
    args = {"q": "plain", "password": "hunter2", "where": value}
    v = floor.adjudicate(CallView(ToolCall("get_page", json.dumps(args))))
    glob, why, redacted = floor._scan.scan(args, (), True)
    if word.lower() in denied:
        assert (v.kind, floor.reasons.name(v.reason)) == (VerdictKind.DENY, "EGRESS_BLOCK")
        assert (glob, why is not None, redacted) == (None, True, False)
    else:
        assert v.kind == VerdictKind.TRANSFORM and v.meta["redacted"] == "password"
        assert (glob, why, redacted) == (None, None, True)
