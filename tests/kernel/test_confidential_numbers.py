"""C4.10's carriers: a confidential number is carried by a string, an integer or a float.

A tainted session's sink whose destination is grounded is refused when an argument's
number (an int, or a float written as its ``repr``) or string holds a confidential value's
digits consecutively; a boolean, null or a number that does not hold them is no carrier.
The oracle is the digits the test placed, written out by hand.
"""

from __future__ import annotations

import json

import pytest

from fak_core import Kernel, Policy, Result, Status, ToolCall, ToolDecl, VerdictKind
from fak_core.taint import Taint

CARD = 4929123456781234  # a confidential number (16 digits)


def _kernel() -> Kernel:
    k = Kernel(
        Policy(
            version="fak-policy/v2",
            allow=("profile", "send"),
            sources={"profile": "trusted_local"},
            tools={
                "profile": ToolDecl("NONE", confidential=("/card",)),
                "send": ToolDecl("EGRESS", ("/to",), content=("/body",)),
            },
        )
    )
    k.admit(
        ToolCall("profile", "{}", "s"),
        Result(Status.OK, json.dumps({"card": CARD}), taint=Taint.TRUSTED),
    )
    k.record_trusted("s", "mail my wife at wife@home.example")
    k.ledger.raise_to("s", Taint.TAINTED)
    return k


@pytest.mark.fak_theorem("C4.10")
@pytest.mark.parametrize(
    ("value", "carries"),
    [
        (CARD, True),
        (float(CARD), True),  # repr 4929123456781234.0 holds the digits
        (f"card {CARD}", True),
        ([1, {"n": float(CARD)}], True),
        (49291234.0, False),
        (True, False),
        (None, False),
        (3.5, False),
        ("no secret here", False),
    ],
)
def test_a_number_carries_a_confidential_value_as_a_string_does(
    value: object, carries: bool
) -> None:
    k = _kernel()
    args = json.dumps({"to": "wife@home.example", "body": "hello", "extra": value})
    verdict = k.decide(ToolCall("send", args, "s"))
    assert (verdict.kind == VerdictKind.DENY) is carries, verdict
