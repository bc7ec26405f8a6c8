"""C4.8 across restarts: a spent approval stays spent when a lone gateway restarts.

Without ``--state`` spent nonces live in the process, so a new process cannot know what the
old one confirmed; the nonce store's start epoch refuses every token minted before it.
The witness runs generated sequences of mint, use, restart (a new kernel built the way
``fak serve`` builds it: :func:`fak_core.gateway.bootstrap.build_state` with the key in
``FAK_APPROVAL_KEY``) and the passing of time, on a virtual system clock, and compares
every use with the oracle written here: a use runs exactly when the token was never
confirmed before (by this kernel or any earlier one), is unexpired, and was minted after
the running kernel started; a refusal of a token minted before the start says so.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core import Kernel, ToolCall
from fak_core.approvals import APPROVAL_ENV, ApprovalResolver, MemoryNonces, mint_approval
from fak_core.gateway.bootstrap import build_state
from fak_core.policy import parse_policy
from fak_core.reasons import Reason
from fak_core.taint import Taint

KEY = "r" * 32
POLICY = parse_policy(
    {
        "version": "fak-policy/v2",
        "allow": ["pay"],
        "tools": {"pay": {"sink": "SPEND", "approve": True}},
    }
)
ARGS = {"to": "acct-1", "amount": 5}
ARGS_TEXT = json.dumps(ARGS)
T0 = 1_900_000_000.0


@dataclass
class _Clock:
    now: float = T0

    def __call__(self) -> float:
        return self.now


@contextmanager
def _virtual_time(clock: _Clock) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(time, "time", clock)
        m.setenv(APPROVAL_ENV, KEY)
        yield


def _serve() -> Kernel:
    """A kernel as ``fak serve`` builds it (no --state), its session tainted."""
    kernel = build_state(policy=POLICY).kernel
    kernel.ledger.raise_to("s", Taint.TAINTED)
    return kernel


STEP = st.one_of(
    st.tuples(st.just("mint"), st.sampled_from([1.0, 30.0, 300.0, 86400.0])),
    st.tuples(st.just("use"), st.integers(0, 5)),
    st.tuples(st.just("restart"), st.floats(0.001, 5.0)),
    st.tuples(st.just("wait"), st.floats(0.001, 400.0)),
)


@pytest.mark.fak_theorem("C4.8")
@settings(deadline=None)
@given(st.lists(STEP, min_size=1, max_size=14))
def test_a_spent_token_stays_spent_across_restarts(steps: list[tuple[str, float]]) -> None:
    clock = _Clock()
    with _virtual_time(clock):
        kernel = _serve()
        started = clock.now
        tokens: list[tuple[str, float, int]] = []  # (token, minted at, expiry)
        confirmed: set[int] = set()
        for op, arg in steps:
            if op == "mint":
                tokens.append((mint_approval(KEY.encode(), "s", "pay", ARGS, arg), clock.now, 0))
                token, minted, _ = tokens[-1]
                tokens[-1] = (token, minted, int(minted + arg))
            elif op == "wait":
                clock.now += arg
            elif op == "restart":
                clock.now += arg  # the old process is gone before the new one starts
                kernel = _serve()
                started = clock.now
            elif tokens:
                i = int(arg) % len(tokens)
                token, minted, exp = tokens[i]
                call = ToolCall.make("pay", ARGS_TEXT, "s", meta={"witness": token})
                _, verdict, runs = kernel.authorize(call)
                stale = minted < started
                expected = i not in confirmed and exp > clock.now and not stale
                assert runs is expected, (i, confirmed, minted, started, exp, clock.now)
                if runs:
                    confirmed.add(i)
                else:
                    assert verdict.reason == Reason.TRUST_VIOLATION
                    if stale and exp > clock.now:
                        assert "minted before this gateway started at" in verdict.claim
                        assert "mint a new one" in verdict.claim


@pytest.mark.fak_theorem("C4.8")
def test_a_token_minted_right_at_the_start_runs_and_skew_slack_widens_the_epoch() -> None:
    key = KEY.encode()
    token = mint_approval(key, "s", "pay", ARGS, 60, T0)
    call = ToolCall.make("pay", ARGS_TEXT, "s", meta={"witness": token})
    at_start = ApprovalResolver(key, clock=lambda: T0)
    assert at_start.verify(call, token) is None
    slack = ApprovalResolver(key, clock=lambda: T0, mint_skew_s=2.0)
    why = slack.verify(call, mint_approval(key, "s", "pay", ARGS, 60, T0 + 1.5))
    assert why is not None and why.startswith("the approval was minted before this gateway")
    assert slack.verify(call, mint_approval(key, "s", "pay", ARGS, 60, T0 + 2.0)) is None
    for bad in (-1, -0.001, 86400, 86400.5):
        with pytest.raises(ValueError, match="mint_skew_s"):
            ApprovalResolver(key, mint_skew_s=bad)
    for fine in (0, 86399, 86399.5):
        ApprovalResolver(key, mint_skew_s=fine)
    # a store started later refuses what was minted before it, whatever the resolver's clock
    later = ApprovalResolver(key, clock=lambda: T0, nonces=MemoryNonces(started=T0 + 10))
    assert (later.verify(call, token) or "").startswith("the approval was minted before")
