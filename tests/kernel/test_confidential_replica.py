"""C4.10 on a replica that cannot see the values recorded elsewhere: every tainted call to
a declared sink whose destinations are grounded is refused (held under ``approve``), and
the refusal names the whole arguments (``ifc_confidential`` is ``""``) and says the
session's values are kept on another replica. The oracle is the theorem's text.
"""

from __future__ import annotations

import json

import pytest

from fak_core import Kernel, Policy, ToolCall, ToolDecl, VerdictKind
from fak_core.confidential import UnsharedConfidential
from fak_core.taint import Taint

V2 = "fak-policy/v2"


def _kernel(approve: bool) -> Kernel:
    policy = Policy(
        version=V2,
        allow=("profile", "send"),
        tools={
            "profile": ToolDecl("NONE", confidential=("/passport",)),
            "send": ToolDecl("EGRESS", ("/to",), content=("/body",), approve=approve),
        },
    )
    return Kernel(policy, confidential=UnsharedConfidential())


@pytest.mark.fak_theorem("C4.10")
@pytest.mark.parametrize("approve", [False, True])
@pytest.mark.parametrize("body", ["hello", "", "x" * 40])
def test_a_replica_names_the_whole_call_and_why(approve: bool, body: str) -> None:
    k = _kernel(approve)
    k.record_trusted("s", "mail my wife at wife@home.example")
    k.ledger.raise_to("s", Taint.TAINTED)
    v = k.decide(ToolCall("send", json.dumps({"to": "wife@home.example", "body": body}), "s"))
    wanted = VerdictKind.REQUIRE_WITNESS if approve else VerdictKind.DENY
    assert v.kind == wanted, v
    assert v.meta.get("ifc_confidential") == "", v
    assert "kept on another replica" in (v.claim or ""), v
