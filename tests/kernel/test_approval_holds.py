"""Approval holds (C4.3, C4.8): ``approve = true`` turns the sink gate's refusal of a
tainted call into a hold for a human, whether the call had a value that could not be
grounded or had nothing to ground at all; the same declaration without it is refused, a
grounded call is not held, and a clean session is neither held nor refused. The oracle is
the declaration table written out by hand below, not the gate's own code."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core import Kernel, Policy, Reason, Taint, ToolCall, ToolDecl, VerdictKind
from fak_core.approvals import mint_approval
from fak_core.cli import explain_sinks
from fak_core.policy import PolicyError, load_policy

KEY = b"h" * 32
CLASSES = ("EXEC", "DESTRUCTIVE", "EGRESS", "SPEND", "CREDENTIAL")
TRUSTED = "alice@example.com"
STRANGER = "mallory@evil.example"
# shape -> (destinations, content, arguments, is there an ungrounded value?)
SHAPES: dict[str, tuple[tuple[str, ...], tuple[str, ...], dict[str, Any], bool]] = {
    "bare": ((), (), {"id": "42", "when": "today"}, False),
    "grounded": (("/to",), (), {"to": TRUSTED, "n": 1}, False),
    "ungrounded": (("/to",), (), {"to": STRANGER, "n": 1}, True),
    "plain-content": ((), ("/title",), {"title": "lunch on friday"}, False),
    "linked-content": ((), ("/title",), {"title": "see https://evil.example/x now"}, True),
}
ADVICE = "; a human may approve this exact call: fak approve --trace ... --tool {tool}"


def _kernel(sink: str, shape: str, approve: bool, mark: Taint | None) -> Kernel:
    dests, content, _, _ = SHAPES[shape]
    decl = ToolDecl(sink, dests, content=content, approve=approve)
    k = Kernel(
        Policy(version="fak-policy/v2", allow=("act",), tools={"act": decl}, gated_sinks=CLASSES)
    )
    assert k.enable_approvals(KEY)
    k.register_tool("act", lambda args: "done")
    k.record_trusted("s", f"please write to {TRUSTED}")
    if mark is not None:
        k.ledger.raise_to("s", mark)
    return k


@pytest.mark.fak_theorem("C4.3", "C4.8")
@settings(max_examples=60)
@given(
    st.sampled_from(CLASSES),
    st.sampled_from(sorted(SHAPES)),
    st.booleans(),
    st.sampled_from([None, Taint.TAINTED, Taint.QUARANTINED]),
)
def test_approve_holds_exactly_what_the_gate_would_refuse(
    sink: str, shape: str, approve: bool, mark: Taint | None
) -> None:
    k = _kernel(sink, shape, approve, mark)
    args = SHAPES[shape][2]
    v = k.decide(ToolCall("act", json.dumps(args), "s"))
    refused = mark is not None and (shape == "bare" or SHAPES[shape][3])
    if not refused:
        assert v.kind == VerdictKind.ALLOW, (v.kind, v.claim)
        return
    flow = "tainted" if mark == Taint.TAINTED else "quarantined"
    assert (v.reason, v.by) == (Reason.TRUST_VIOLATION, "ifc-sink")
    assert v.kind == (VerdictKind.REQUIRE_WITNESS if approve else VerdictKind.DENY)
    meta = dict(v.meta)
    assert (meta.pop("ifc_sink"), meta.pop("ifc_flow")) == (sink, flow)
    assert meta.pop("approval", None) == ("required" if approve else None)
    advice = ADVICE.format(tool="act") if approve else ""
    if shape == "bare":
        assert meta == {}
        held = " (nothing to ground)" if approve else ""
        assert v.claim == f"{sink} sink fed {flow} data{held}{advice}"
    else:
        assert set(meta) == {"ifc_ungrounded"}
        assert v.claim.startswith(f"{sink} sink fed {flow} data: ")
        assert v.claim.endswith(advice)


@pytest.mark.fak_theorem("C4.8")
@settings(max_examples=20)
@given(st.sampled_from(CLASSES), st.sampled_from(["bare", "ungrounded", "linked-content"]))
def test_a_held_call_runs_once_with_its_token_and_never_without(sink: str, shape: str) -> None:
    k = _kernel(sink, shape, True, Taint.TAINTED)
    args = SHAPES[shape][2]
    result, v = k.syscall(ToolCall("act", json.dumps(args), "s"))
    assert v.kind == VerdictKind.DENY and result.payload == ""
    token = mint_approval(KEY, "s", "act", args)
    call = ToolCall.make("act", json.dumps(args), "s", meta={"witness": token})
    result, v = k.syscall(call)
    assert v.kind == VerdictKind.ALLOW and result.payload == "done"
    result, v = k.syscall(call)
    assert v.kind == VerdictKind.DENY and result.payload == ""


@pytest.mark.fak_theorem("C4.8")
def test_a_tool_without_approve_is_refused_even_with_a_token() -> None:
    k = _kernel("DESTRUCTIVE", "bare", False, Taint.TAINTED)
    args = SHAPES["bare"][2]
    token = mint_approval(KEY, "s", "act", args)
    result, v = k.syscall(ToolCall.make("act", json.dumps(args), "s", meta={"witness": token}))
    assert (v.kind, v.reason) == (VerdictKind.DENY, Reason.TRUST_VIOLATION)
    assert result.payload == ""


@pytest.mark.fak_theorem("D2.8")
def test_policy_check_says_which_calls_are_held() -> None:
    policy = load_policy(
        'version = "fak-policy/v2"\nallow = ["wipe", "pay"]\n'
        '[tools.wipe]\nsink = "DESTRUCTIVE"\napprove = true\n'
        '[tools.pay]\nsink = "SPEND"\ndestinations = ["/to"]\napprove = true\n',
        "toml",
    )
    lines = explain_sinks(policy)
    assert "  wipe: DESTRUCTIVE (declared, gated; held for approval)" in lines
    assert "  pay: SPEND (declared, gated; grounded: /to; ungrounded: held for approval)" in lines


@pytest.mark.fak_theorem("D2.8")
@pytest.mark.parametrize("fmt", ["toml", "json"])
def test_a_tool_that_is_never_a_sink_cannot_be_held(fmt: str) -> None:
    doc = {"version": "fak-policy/v2", "tools": {"read": {"sink": "NONE", "approve": True}}}
    text = (
        json.dumps(doc)
        if fmt == "json"
        else ('version = "fak-policy/v2"\n[tools.read]\nsink = "NONE"\napprove = true\n')
    )
    with pytest.raises(PolicyError, match=r"tools\.read\.approve.*never a sink is never held"):
        load_policy(text, fmt)
