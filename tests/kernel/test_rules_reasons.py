"""D2.9 with the host's own reasons: an argument rule may name a reason the host
registered on its kernel, and its refusal carries exactly that reason's code.

The oracle is the code the test registers, never one the gate computes.
"""

from __future__ import annotations

import pytest

from fak_core import Kernel, Policy, Reason, ToolCall, VerdictKind
from fak_core.policy import ToolDecl
from fak_core.rules import ArgumentRule
from fak_core.taint import Taint

HOLD = 1913  # a host reason code (extension codes start at 1024)


@pytest.mark.fak_theorem("D2.9")
@pytest.mark.parametrize("effect", ["deny", "witness"])
def test_a_rule_refuses_with_a_reason_the_host_registered(effect: str) -> None:
    k = Kernel(Policy(allow=("pay",)))
    k.register_reason(HOLD, "HOLD_FOR_REVIEW")
    rules = (
        ArgumentRule("pay", effect, {"required": ["big"]}, "any", 1, "HOLD_FOR_REVIEW", "held"),
        ArgumentRule("pay", "deny", True, "tainted", 0),
    )
    # pay is declared no sink: the rules alone decide on the tainted session
    pay = {"pay": ToolDecl("NONE")}
    k.set_policy(Policy(version="fak-policy/v2", allow=("pay",), tools=pay, rules=rules))
    kind = VerdictKind.DENY if effect == "deny" else VerdictKind.REQUIRE_WITNESS
    gate = k.rules.adjudicate(k.view(ToolCall("pay", '{"big": 1}', "clean")))
    assert (gate.kind, gate.reason, gate.claim, gate.meta["rule"]) == (kind, HOLD, "held", "0")
    assert k.decide(ToolCall("pay", '{"big": 1}', "clean")).reason == HOLD
    # the second rule reads the kernel's own ledger: a tainted session meets it
    assert k.decide(ToolCall("pay", "{}", "clean")).kind == VerdictKind.ALLOW
    k.ledger.raise_to("dirty", Taint.TAINTED)
    v = k.decide(ToolCall("pay", "{}", "dirty"))
    assert (v.kind, v.reason) == (VerdictKind.DENY, Reason.POLICY_BLOCK)
