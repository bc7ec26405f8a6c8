"""Argument rules (D2.9): ordered per-tool rules, composed with the fold. The oracle picks
the first matching rule by (priority descending, file order) with its own range check."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core import Kernel, Policy, PolicyError, Reason, Taint, ToolCall, VerdictKind, load_policy
from fak_core.rules import ArgumentRule

rules_st = st.lists(
    st.tuples(
        st.integers(0, 50),  # lo
        st.integers(0, 50),  # width
        st.sampled_from(["any", "trusted", "tainted"]),
        st.sampled_from(["allow", "deny", "witness"]),
        st.integers(-2, 2),  # priority
    ),
    max_size=6,
)


def _rule(lo: int, width: int, taint: str, effect: str, priority: int) -> ArgumentRule:
    when = {"properties": {"amount": {"minimum": lo, "maximum": lo + width}}}
    return ArgumentRule("pay", effect, when, taint, priority)


@pytest.mark.fak_theorem("D2.9")
@given(rules_st, st.integers(0, 100), st.booleans())
def test_the_first_matching_rule_by_priority_decides(
    raw: list[tuple[int, int, str, str, int]], amount: int, tainted: bool
) -> None:
    rules = tuple(_rule(*r) for r in raw)
    k = Kernel(Policy(version="fak-policy/v2", allow=("pay",), rules=rules))
    if tainted:
        k.ledger.raise_to("s", Taint.TAINTED)
    v = k.decide(ToolCall("pay", json.dumps({"amount": amount}), "s"))
    order = sorted(range(len(raw)), key=lambda i: (-raw[i][4], i))
    expected = "allow"
    for i in order:
        lo, width, taint, effect, _ = raw[i]
        if (taint == "trusted" and tainted) or (taint == "tainted" and not tainted):
            continue
        if lo <= amount <= lo + width:
            expected = effect
            if effect != "allow":
                assert v.meta["rule"] == str(i)
            break
    kind = {"allow": VerdictKind.ALLOW, "deny": VerdictKind.DENY}.get(
        expected, VerdictKind.REQUIRE_WITNESS
    )
    assert v.kind == kind, (expected, v)
    if expected == "deny":
        assert (v.reason, v.by) == (Reason.POLICY_BLOCK, "rules")


@pytest.mark.fak_theorem("D2.9")
def test_an_allow_rule_never_lifts_the_sink_gate_or_the_floor() -> None:
    everything = ArgumentRule("send_email", "allow", True, "any", 9)
    unlisted = ArgumentRule("wipe", "allow", True, "any", 9)
    k = Kernel(Policy(version="fak-policy/v2", allow=("send_email",), rules=(everything, unlisted)))
    k.ledger.raise_to("s", Taint.TAINTED)
    v = k.decide(ToolCall("send_email", '{"to": "x@evil.example"}', "s"))
    assert (v.kind, v.by) == (VerdictKind.DENY, "ifc-sink")
    v = k.decide(ToolCall("wipe", "{}", "clean"))
    assert (v.kind, v.reason) == (VerdictKind.DENY, Reason.DEFAULT_DENY)


@pytest.mark.fak_theorem("D2.9")
@pytest.mark.parametrize(
    ("rule", "fragment"),
    [
        ({"effect": "deny"}, "rules[0].tool"),
        ({"tool": "x"}, "rules[0].effect"),
        ({"tool": "x", "effect": "maybe"}, "rules[0].effect"),
        ({"tool": "x", "effect": "deny", "taint": "dirty"}, "rules[0].taint"),
        ({"tool": "x", "effect": "deny", "priority": "high"}, "rules[0].priority"),
        ({"tool": "x", "effect": "deny", "when": {"type": "nope"}}, "rules[0].when"),
        ({"tool": "x", "effect": "deny", "reason": "MAYBE"}, "rules[0].reason"),
        ({"tool": "x", "effect": "allow", "reason": "POLICY_BLOCK"}, "rules[0].reason"),
        ({"tool": "x", "effect": "deny", "colour": 1}, "rules[0].colour"),
    ],
)
def test_rules_mean_one_thing_or_are_refused(rule: dict[str, object], fragment: str) -> None:
    with pytest.raises(PolicyError) as info:
        load_policy(json.dumps({"version": "fak-policy/v2", "rules": [rule]}), "json")
    assert fragment in str(info.value)
    with pytest.raises(PolicyError, match="needs version"):
        load_policy(json.dumps({"rules": []}), "json")


@pytest.mark.fak_theorem("D2.9")
def test_taint_conditions_claims_ties_and_unparseable_arguments() -> None:
    trusted_only = ArgumentRule("pay", "deny", True, "trusted", 5)
    tainted_only = ArgumentRule("pay", "witness", True, "tainted", 5)
    fallback = ArgumentRule("pay", "deny", True, "any", 0, "SECRET_EXFIL", "too much")
    k = Kernel(
        Policy(
            version="fak-policy/v2", allow=("pay",), rules=(trusted_only, tainted_only, fallback)
        )
    )
    clean = k.decide(ToolCall("pay", "{}", "clean"))
    assert (clean.kind, clean.claim, clean.meta["rule"]) == (
        VerdictKind.DENY,
        "argument rule 0 for pay (deny)",
        "0",
    )
    k.ledger.raise_to("t", Taint.TAINTED)
    held = k.decide(ToolCall("pay", "{}", "t"))
    assert (held.kind, held.reason, held.meta["rule"]) == (
        VerdictKind.REQUIRE_WITNESS,
        Reason.TRUST_VIOLATION,
        "1",
    )
    # equal priorities: file order; the named reason and claim are the rule's own
    first = ArgumentRule("pay", "deny", True, "any", 1, "SECRET_EXFIL", "first")
    second = ArgumentRule("pay", "deny", True, "any", 1, "POLICY_BLOCK", "second")
    k = Kernel(Policy(version="fak-policy/v2", allow=("pay",), rules=(first, second)))
    v = k.decide(ToolCall("pay", "{}", "clean"))
    assert (v.reason, v.claim) == (Reason.SECRET_EXFIL, "first")
    # arguments that are not a JSON object are refused as MALFORMED before any rule;
    # the rules themselves have no opinion on them
    v = k.decide(ToolCall("pay", "[1, 2]", "clean"))
    assert (v.kind, v.reason) == (VerdictKind.DENY, Reason.MALFORMED)
    assert k.rules.adjudicate(k.view(ToolCall("pay", "[1, 2]", "clean"))).kind == (
        VerdictKind.DEFER
    )
