"""The rate limit: calls 1..N pass, N+1 waits; a denied call spends no budget; no overspend."""

from __future__ import annotations

import threading

import pytest

from fak_core import Kernel, Policy, PolicyError, Reason, ToolCall, VerdictKind, load_policy
from fak_core.ratelimit import RateLimit


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def limited(cap: int, key: str = "trace") -> tuple[Kernel, Clock]:
    k = Kernel(Policy(allow=("get_a", "get_b"), rate_limit=RateLimit(cap, 10.0, key)))
    clock = Clock()
    assert k.rate_limiter is not None
    k.rate_limiter.clock = clock
    return k, clock


def test_cap_then_wait_with_retry_after() -> None:
    k, clock = limited(3)
    for _ in range(3):
        assert k.decide(ToolCall("get_a", "{}", "t")).kind == VerdictKind.ALLOW
    v = k.decide(ToolCall("get_a", "{}", "t"))
    assert (v.kind, v.reason) == (VerdictKind.DENY, Reason.RATE_LIMITED)
    assert v.meta["retry_after_ms"] == "10000"
    result, _ = k.syscall(ToolCall("get_a", "{}", "t"))
    assert result.meta["disposition"] == "WAIT" and result.meta["retry_after_ms"] == "10000"
    assert k.decide(ToolCall("get_a", "{}", "other")).kind == VerdictKind.ALLOW
    clock.now += 10.0
    assert k.decide(ToolCall("get_a", "{}", "t")).kind == VerdictKind.ALLOW


def test_a_denied_call_spends_no_budget() -> None:
    k, _ = limited(2)
    for _ in range(5):
        assert k.decide(ToolCall("forbidden", "{}", "t")).reason == Reason.DEFAULT_DENY
        assert k.decide(ToolCall("get_a", "{bad", "t")).reason == Reason.MALFORMED
    assert k.rate_limiter is not None and k.rate_limiter.used("trace:t") == 0
    assert k.decide(ToolCall("get_a", "{}", "t")).kind == VerdictKind.ALLOW
    assert k.decide(ToolCall("get_a", "{}", "t")).kind == VerdictKind.ALLOW
    assert k.decide(ToolCall("get_a", "{}", "t")).reason == Reason.RATE_LIMITED


def test_reset_restores_exactly_the_cleared_key() -> None:
    k, _ = limited(1, key="tool")
    assert k.decide(ToolCall("get_a", "{}", "t")).kind == VerdictKind.ALLOW
    assert k.decide(ToolCall("get_b", "{}", "t")).kind == VerdictKind.ALLOW
    assert k.decide(ToolCall("get_a", "{}", "u")).reason == Reason.RATE_LIMITED
    assert k.rate_limiter is not None
    k.rate_limiter.reset("tool:get_a")
    assert k.decide(ToolCall("get_a", "{}", "u")).kind == VerdictKind.ALLOW
    assert k.decide(ToolCall("get_b", "{}", "u")).reason == Reason.RATE_LIMITED


def test_concurrent_calls_never_overspend() -> None:
    k, _ = limited(50, key="global")
    allowed: list[int] = []

    def worker() -> None:
        for _ in range(40):
            if k.decide(ToolCall("get_a", "{}", "t")).kind == VerdictKind.ALLOW:
                allowed.append(1)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(allowed) == 50


def test_policy_key_round_trips_and_is_strict() -> None:
    p = load_policy('{"rate_limit": {"max_calls": 5, "window_s": 2, "key": "tool"}}', "json")
    assert p.rate_limit == RateLimit(5, 2.0, "tool")
    for bad, fragment in [
        ('{"rate_limit": {"max_calls": 0}}', "max_calls"),
        ('{"rate_limit": {"max_calls": 1, "key": "user"}}', "rate_limit.key"),
        ('{"rate_limit": {"max_calls": 1, "burst": 2}}', "rate_limit.burst"),
        ('{"rate_limit": {"max_calls": 1, "window_s": -1}}', "window_s"),
    ]:
        with pytest.raises(PolicyError, match=fragment):
            load_policy(bad, "json")


def test_set_policy_adds_and_removes_the_limiter() -> None:
    k = Kernel(Policy(allow=("get_a",)))
    assert k.rate_limiter is None
    k.set_policy(Policy(allow=("get_a",), rate_limit=RateLimit(1)))
    assert k.decide(ToolCall("get_a", "{}", "t")).kind == VerdictKind.ALLOW
    assert k.decide(ToolCall("get_a", "{}", "t")).reason == Reason.RATE_LIMITED
    k.set_policy(Policy(allow=("get_a",)))
    assert k.rate_limiter is None
    assert k.decide(ToolCall("get_a", "{}", "t")).kind == VerdictKind.ALLOW
