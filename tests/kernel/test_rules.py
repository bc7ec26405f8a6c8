"""Argument rules (D2.9): ordered per-tool rules, composed with the fold. The oracle picks
the first matching rule by (priority descending, file order) with its own range check."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
import tomli_w
from hypothesis import given
from hypothesis import strategies as st

from fak_core import Kernel, Policy, PolicyError, Reason, Taint, ToolCall, VerdictKind, load_policy
from fak_core.policy import ToolDecl
from fak_core.rules import ArgumentRule

REASONS = {"POLICY_BLOCK": Reason.POLICY_BLOCK, "SECRET_EXFIL": Reason.SECRET_EXFIL}
TOOLS = ("pay", "refund")
#: the tools are declared no sinks, so only the rules (and the floor) decide
NOT_SINKS = {t: {"sink": "NONE"} for t in TOOLS}
PAY_NOT_A_SINK = {"pay": ToolDecl("NONE")}
rules_st = st.lists(
    st.tuples(
        st.none() | st.integers(0, 50),  # lo (None: no condition, every call)
        st.integers(0, 50),  # width
        st.sampled_from(["any", "trusted", "tainted"]),
        st.sampled_from(["allow", "deny", "witness"]),
        st.integers(-2, 2),  # priority
        st.sampled_from(TOOLS),
        st.sampled_from(["", *REASONS]),  # reason (none on an allow rule)
        st.sampled_from(["", "over the limit"]),  # claim
        st.booleans(),  # write the keys at their documented defaults, or leave them out
    ),
    max_size=6,
)
Raw = tuple[int | None, int, str, str, int, str, str, str, bool]


def _rule_doc(raw: Raw) -> dict[str, Any]:
    """The rule as a policy file writes it (README "Policy v2"): a key at its documented
    default (when: every call, taint any, priority 0, no reason, no claim) may be left out."""
    lo, width, taint, effect, priority, tool, reason, claim, explicit = raw
    doc: dict[str, Any] = {"tool": tool, "effect": effect}
    if lo is not None:
        doc["when"] = {"properties": {"amount": {"minimum": lo, "maximum": lo + width}}}
    for key, value, default in (
        ("taint", taint, "any"),
        ("priority", priority, 0),
        ("reason", "" if effect == "allow" else reason, ""),
        ("claim", claim, ""),
    ):
        if value != default or explicit:
            doc[key] = value
    return doc


SESSIONS = (Taint.TRUSTED, Taint.TAINTED, Taint.QUARANTINED)


def _first_match(raw: list[Raw], tool: str, amount: int, tainted: bool) -> int | None:
    """The oracle: the index of the first rule, by (priority descending, file order), for
    ``tool`` whose taint condition holds and whose range holds ``amount``."""
    for i in sorted(range(len(raw)), key=lambda i: (-raw[i][4], i)):
        lo, width, taint, _, _, rule_tool, _, _, _ = raw[i]
        if rule_tool != tool:
            continue
        if (taint == "trusted" and tainted) or (taint == "tainted" and not tainted):
            continue
        if lo is None or lo <= amount <= lo + width:
            return i
    return None


@pytest.mark.fak_theorem("D2.9")
@given(rules_st, st.sampled_from(["json", "toml"]), st.integers(0, 100))
def test_the_first_matching_rule_by_priority_decides(raw: list[Raw], fmt: str, extra: int) -> None:
    doc = {
        "version": "fak-policy/v2",
        "allow": list(TOOLS),
        "tools": NOT_SINKS,  # the rules alone decide: the sink gate has no opinion
        "rules": [_rule_doc(r) for r in raw],
    }
    k = Kernel(load_policy(json.dumps(doc) if fmt == "json" else tomli_w.dumps(doc), fmt))
    for session in SESSIONS:
        k.ledger.raise_to(session.label, session)
    # every edge of every range (each side of it), and one more amount
    amounts = {extra}
    for lo, width, *_ in raw:
        if lo is not None:
            amounts |= {lo - 1, lo, lo + width, lo + width + 1}
    for session, args_taint, tool, amount in itertools.product(
        SESSIONS, (Taint.TAINTED, Taint.QUARANTINED), TOOLS, sorted(amounts)
    ):
        call = ToolCall(tool, json.dumps({"amount": amount}), session.label, args_taint=args_taint)
        # a session is tainted once its level is, or quarantined arguments make it so
        tainted = session != Taint.TRUSTED or args_taint == Taint.QUARANTINED
        first = _first_match(raw, tool, amount, tainted)
        effect = "allow" if first is None else raw[first][3]
        v = k.decide(call)
        kind = {"allow": VerdictKind.ALLOW, "deny": VerdictKind.DENY}.get(
            effect, VerdictKind.REQUIRE_WITNESS
        )
        assert v.kind == kind, (call, first, v)
        gate = k.rules.adjudicate(k.view(call))
        if first is None or effect == "allow":
            assert gate.kind == VerdictKind.DEFER
            continue
        reason, claim = raw[first][6], raw[first][7]
        default = Reason.POLICY_BLOCK if effect == "deny" else Reason.TRUST_VIOLATION
        assert (gate.reason, gate.by, gate.meta["rule"]) == (
            REASONS.get(reason, default),
            "rules",
            str(first),
        ), (call, first)
        assert gate.claim == (claim or f"argument rule {first} for {tool} ({effect})")
        assert (v.reason, v.claim) == (gate.reason, gate.claim)


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
            version="fak-policy/v2",
            allow=("pay",),
            tools=PAY_NOT_A_SINK,
            rules=(trusted_only, tainted_only, fallback),
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
    k = Kernel(
        Policy(version="fak-policy/v2", allow=("pay",), tools=PAY_NOT_A_SINK, rules=(first, second))
    )
    v = k.decide(ToolCall("pay", "{}", "clean"))
    assert (v.reason, v.claim) == (Reason.SECRET_EXFIL, "first")
    # arguments that are not a JSON object are refused as MALFORMED before any rule;
    # the rules themselves have no opinion on them
    v = k.decide(ToolCall("pay", "[1, 2]", "clean"))
    assert (v.kind, v.reason) == (VerdictKind.DENY, Reason.MALFORMED)
    assert k.rules.adjudicate(k.view(ToolCall("pay", "[1, 2]", "clean"))).kind == (
        VerdictKind.DEFER
    )


@pytest.mark.fak_theorem("D2.9")
@pytest.mark.parametrize("fmt", ["json", "toml"])
def test_a_rules_keys_left_out_take_their_documented_defaults(fmt: str) -> None:
    # README "Policy v2": no `when` is every call, taint `any`, priority 0, no reason
    # (the effect's default), no claim (one naming the rule)
    doc = {
        "version": "fak-policy/v2",
        "rules": [{"tool": "t", "effect": effect} for effect in ("allow", "deny", "witness")],
    }
    policy = load_policy(json.dumps(doc) if fmt == "json" else tomli_w.dumps(doc), fmt)
    assert [(r.when, r.taint, r.priority, r.reason, r.claim) for r in policy.rules] == [
        (True, "any", 0, "", "")
    ] * 3
    written = {**doc, "rules": [{**r, "priority": 0} for r in doc["rules"]]}
    again = load_policy(json.dumps(written) if fmt == "json" else tomli_w.dumps(written), fmt)
    assert again == policy
