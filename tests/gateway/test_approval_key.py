"""The gateway reads its approval key at start: tokens are accepted when
``FAK_APPROVAL_KEY`` is set, and a key too short to sign with stops the start, saying so."""

from __future__ import annotations

import json

import pytest

from fak_core import Policy, Taint, ToolCall, ToolDecl, VerdictKind
from fak_core.approvals import mint_approval
from fak_core.gateway.bootstrap import BootstrapError, build_state

KEY = "g" * 32
POLICY = Policy(
    version="fak-policy/v2",
    allow=("pay",),
    tools={"pay": ToolDecl("SPEND", ("/to",), approve=True)},
    gated_sinks=("SPEND",),
)


@pytest.mark.fak_theorem("C4.8")
def test_a_key_in_the_environment_turns_approvals_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAK_APPROVAL_KEY", KEY)
    kernel = build_state(policy=POLICY).kernel
    kernel.register_tool("pay", lambda args: "paid")
    kernel.ledger.raise_to("s", Taint.TAINTED)
    args = {"to": "x@evil.example"}
    token = mint_approval(KEY.encode(), "s", "pay", args)
    call = ToolCall.make("pay", json.dumps(args), "s", meta={"witness": token})
    assert kernel.syscall(call)[1].kind == VerdictKind.ALLOW


def test_without_a_key_a_token_approves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FAK_APPROVAL_KEY", raising=False)
    kernel = build_state(policy=POLICY).kernel
    kernel.register_tool("pay", lambda args: "paid")
    kernel.ledger.raise_to("s", Taint.TAINTED)
    token = mint_approval(KEY.encode(), "s", "pay", {"to": "x@evil.example"})
    call = ToolCall.make("pay", '{"to": "x@evil.example"}', "s", meta={"witness": token})
    assert kernel.syscall(call)[1].kind == VerdictKind.DENY


@pytest.mark.fak_theorem("C4.8")
def test_a_short_key_stops_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAK_APPROVAL_KEY", "short")
    with pytest.raises(BootstrapError, match="FAK_APPROVAL_KEY must hold at least 32 bytes"):
        build_state(policy=POLICY)
