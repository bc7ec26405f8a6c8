"""A kernel's per-session reset (C4.1) and its approval switch (C4.8).

``Kernel.reset_trace`` is the explicit reset of a session: its mark, what it grounded and
the confidential values it holds go, another session's stay. ``Kernel.enable_approvals``
takes the key it is given, else ``FAK_APPROVAL_KEY``, and says whether approvals are on.
The oracles are the values the tests planted and tokens minted under a known key.
"""

from __future__ import annotations

import pytest

from fak_core import Kernel, Policy, Reason, ToolCall, VerdictKind
from fak_core.approvals import APPROVAL_ENV, mint_approval
from fak_core.taint import Taint
from fak_core.verdicts import Verdict

URL = "https://drop.example/x"
SECRET = "acct-4471-9902-secret"


def _plant(k: Kernel, trace: str) -> None:
    k.ledger.raise_to(trace, Taint.QUARANTINED)
    k.grounding.record_trusted(trace, f"send it to {URL}", "host:user")
    k.confidential.record(trace, [SECRET], "tool:vault")


def _held(k: Kernel, trace: str) -> tuple[Taint, bool, bool]:
    carried = k.confidential.carried(trace, {"body": f"x {SECRET} y"}) is not None
    return k.ledger.level(trace), k.grounding.grounded(trace, URL), carried


@pytest.mark.fak_theorem("C4.1")
@pytest.mark.parametrize("order", ["reset-first", "reset-second"])
def test_reset_trace_clears_exactly_that_session(order: str) -> None:
    k = Kernel(Policy())
    _plant(k, "a")
    _plant(k, "b")
    gone, kept = ("a", "b") if order == "reset-first" else ("b", "a")
    assert _held(k, gone) == (Taint.QUARANTINED, True, True)  # the plant took
    k.reset_trace(gone)
    assert _held(k, gone) == (Taint.TRUSTED, False, False)
    assert _held(k, kept) == (Taint.QUARANTINED, True, True)


KEY = b"k" * 32
ENV_KEY = b"v" * 32
ARGS = '{"to": "a@b.example"}'


def _ask(k: Kernel, key: bytes) -> Verdict:
    token = mint_approval(key, "s", "send", ARGS, 60)
    call = ToolCall.make("send", ARGS, "s", meta={"witness": token})
    return k.resolve_witness(call, Verdict.require_witness("approve send", "sink"))


@pytest.mark.fak_theorem("C4.8")
@pytest.mark.parametrize("env", [None, ENV_KEY])
@pytest.mark.parametrize("given", [None, KEY])
def test_enable_approvals_takes_the_given_key_else_the_environment(
    monkeypatch: pytest.MonkeyPatch, env: bytes | None, given: bytes | None
) -> None:
    if env is None:
        monkeypatch.delenv(APPROVAL_ENV, raising=False)
    else:
        monkeypatch.setenv(APPROVAL_ENV, env.decode())
    k = Kernel(Policy())
    key = given if given is not None else env
    assert k.enable_approvals(given) is (key is not None)
    for minted in (KEY, ENV_KEY):
        v = _ask(k, minted)
        if key is None:
            assert (v.kind, v.reason) == (VerdictKind.DENY, Reason.UNWITNESSED)
        elif minted == key:
            assert (v.kind, v.meta["witness"], v.meta["resolver"]) == (
                VerdictKind.ALLOW,
                "confirmed",
                "approval",
            )
        else:
            assert (v.kind, v.reason) == (VerdictKind.DENY, Reason.TRUST_VIOLATION)
