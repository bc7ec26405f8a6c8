"""The rate limit: calls 1..N pass, N+1 waits; a denied call spends no budget; no overspend."""

from __future__ import annotations

import threading

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

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


@pytest.mark.fak_theorem("D9")
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


@pytest.mark.fak_theorem("D9")
def test_a_denied_call_spends_no_budget() -> None:
    k, _ = limited(2)
    for _ in range(5):
        assert k.decide(ToolCall("forbidden", "{}", "t")).reason == Reason.DEFAULT_DENY
        assert k.decide(ToolCall("get_a", "{bad", "t")).reason == Reason.MALFORMED
    assert k.rate_limiter is not None and k.rate_limiter.used("trace:t") == 0
    assert k.decide(ToolCall("get_a", "{}", "t")).kind == VerdictKind.ALLOW
    assert k.decide(ToolCall("get_a", "{}", "t")).kind == VerdictKind.ALLOW
    assert k.decide(ToolCall("get_a", "{}", "t")).reason == Reason.RATE_LIMITED


@pytest.mark.fak_theorem("D9")
def test_reset_restores_exactly_the_cleared_key() -> None:
    k, _ = limited(1, key="tool")
    assert k.decide(ToolCall("get_a", "{}", "t")).kind == VerdictKind.ALLOW
    assert k.decide(ToolCall("get_b", "{}", "t")).kind == VerdictKind.ALLOW
    assert k.decide(ToolCall("get_a", "{}", "u")).reason == Reason.RATE_LIMITED
    assert k.rate_limiter is not None
    k.rate_limiter.reset("tool:get_a")
    assert k.decide(ToolCall("get_a", "{}", "u")).kind == VerdictKind.ALLOW
    assert k.decide(ToolCall("get_b", "{}", "u")).reason == Reason.RATE_LIMITED


@pytest.mark.fak_theorem("D9")
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


# -- D9: the limiter against a model, over generated sequences --------------------------

CAP, WINDOW = 3, 10.0
TRACES = ("t0", "t1", "t2")
MODES = ("credential", "client", "trace", "tool", "global")
#: a caller: (trace, principal, client address, credential); "" is absent. The values of
#: every field are spelled alike, so a key that lost its category would merge budgets.
CALLERS = st.tuples(
    st.sampled_from(TRACES),
    st.sampled_from(["", "t0", "t1"]),
    st.sampled_from(["", "t0", "t1"]),
    st.sampled_from(["", "t0", "t1"]),
)
#: what a call asks for: two tools the policy allows, one it forbids, malformed arguments
TOOLS = {
    "ok": ("get_a", "{}"),
    "ok_b": ("get_b", "{}"),
    "forbidden": ("rm", "{}"),
    "malformed": ("get_a", "{"),
}
#: every key a call of ``CALLERS`` and ``TOOLS`` can spend, as ``used`` and ``reset`` name it
KEYS = (
    *(f"{cat}:{v}" for cat in ("credential", "client", "principal") for v in ("t0", "t1")),
    *(f"trace:{t}" for t in TRACES),
    *(f"tool:{tool}" for tool, _ in TOOLS.values()),
    "global",
)
STEPS = st.one_of(
    st.tuples(st.just("call"), CALLERS, st.sampled_from(sorted(TOOLS))),
    # 9.9995: the window ends within a millisecond, where retry_after_ms is floored at 1
    st.tuples(st.just("tick"), st.sampled_from([0.5, 2.5, 4.0, 9.5, 9.9995, 10.0])),
    st.tuples(st.just("reset"), st.sampled_from([*KEYS, None])),
)
T0 = ("t0", "", "", "")
OK3 = [("call", T0, "ok")] * CAP
#: one call of every category of caller: each key's rule and spelling is read in every mode
EVERY_CALLER = [
    ("call", T0, "ok"),
    ("call", ("t1", "t0", "", ""), "ok_b"),
    ("call", ("t2", "t1", "t0", ""), "ok"),
    ("call", ("t0", "t0", "t1", "t0"), "ok_b"),
    ("call", ("t1", "", "", "t1"), "ok"),
    ("call", ("t2", "", "t1", ""), "forbidden"),
]


def model_key(mode: str, tool: str, caller: tuple[str, str, str, str]) -> str:
    """The key a call spends, by the rule of D9.1 and the spelling D9 states."""
    trace, principal, client, credential = caller
    if mode == "tool":
        return f"tool:{tool}"
    if mode == "global":
        return "global"
    if mode == "credential" and credential:
        return f"credential:{credential}"
    if mode in ("credential", "client") and client:
        return f"client:{client}"
    if mode == "credential" and principal:
        return f"principal:{principal}"
    return f"trace:{trace}"


def _expected_wait(start: float, now: float) -> str:
    return str(max(1, int((WINDOW - (now - start)) * 1000)))


@pytest.mark.fak_theorem("D9")
@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=120, deadline=None)
@given(steps=st.lists(STEPS, max_size=40), max_keys=st.sampled_from([2, 8192]))
@example(steps=[*OK3, ("tick", 2.5), ("call", T0, "forbidden")], max_keys=8192)
@example(
    steps=[("call", ("t1", "", "", ""), "malformed")] * 4
    + [("call", ("t1", "", "", ""), "ok")] * 3
    + [("reset", "trace:t0")],
    max_keys=8192,
)
# a new window starts from zero: exactly CAP more calls, the used count read at the boundary
@example(steps=[*OK3, ("tick", 10.0), *OK3, ("call", T0, "ok")], max_keys=8192)
# retry_after_ms is 1 when less than a millisecond of the window is left
@example(steps=[*OK3, ("tick", 9.9995), ("call", T0, "ok")], max_keys=8192)
# reset() clears every key
@example(steps=[*OK3, ("reset", None), ("call", T0, "ok")], max_keys=8192)
# two live windows: charging a third key drops the least recently charged one
@example(
    steps=[
        ("call", T0, "ok"),
        ("call", ("t1", "", "", ""), "ok"),
        ("call", T0, "ok"),
        ("call", ("t2", "", "", ""), "ok"),
    ],
    max_keys=2,
)
# every category of caller, each spending its own key; then each key reset by its name
@example(steps=EVERY_CALLER * 2 + [("reset", k) for k in KEYS] + EVERY_CALLER, max_keys=8192)
def test_the_limiter_matches_a_fixed_window_model(
    mode: str, steps: list[tuple[object, ...]], max_keys: int
) -> None:
    """Per key, under every key mode: calls 1..CAP of a window pass, later ones wait with
    the exact retry-after; a call refused for any reason spends nothing; reset clears
    exactly the named key; at most ``max_keys`` windows are kept, the least recently
    charged dropped first; ``used`` reads every key by its spelling."""
    k, clock = limited(CAP, key=mode)
    limiter = k.rate_limiter
    assert limiter is not None
    limiter.max_keys = max_keys
    windows: dict[str, tuple[float, int]] = {}  # key -> (window start, calls charged), LRU first
    for step in steps:
        if step[0] == "tick":
            clock.now += float(step[1])  # type: ignore[arg-type]
        elif step[0] == "reset":
            key = None if step[1] is None else str(step[1])
            limiter.reset(key)
            if key is None:
                windows.clear()
            else:
                windows.pop(key, None)
        else:
            _check_call(k, mode, clock.now, windows, max_keys, step)
        for key in KEYS:
            s0, u0 = windows.get(key, (0.0, 0))
            assert limiter.used(key) == (u0 if clock.now - s0 < WINDOW else 0), (key, step)


def _check_call(
    k: Kernel,
    mode: str,
    now: float,
    windows: dict[str, tuple[float, int]],
    max_keys: int,
    step: tuple[object, ...],
) -> None:
    _, caller, what = step
    trace, principal, client, credential = caller  # type: ignore[misc]
    tool, args = TOOLS[str(what)]
    key = model_key(mode, tool, (trace, principal, client, credential))
    start, used = windows.get(key, (now, 0))
    if now - start >= WINDOW:
        start, used = now, 0
    meta = {name: v for name, v in (("client", client), ("credential", credential)) if v}
    v = k.decide(ToolCall.make(tool, args, trace, principal, meta))
    if used >= CAP:
        assert (v.kind, v.reason) == (VerdictKind.DENY, Reason.RATE_LIMITED), step
        wait = _expected_wait(start, now)
        assert (v.meta["retry_after_ms"], v.meta["retry_after"]) == (wait, wait + "ms")
        return
    # charged before the other adjudicators run (and refunded if they refuse): the key
    # becomes the most recently charged either way
    allowed = what in ("ok", "ok_b")
    windows.pop(key, None)
    windows[key] = (start, used + 1 if allowed else used)
    while len(windows) > max_keys:
        del windows[next(iter(windows))]
    if allowed:
        assert v.kind == VerdictKind.ALLOW, (step, v)
    else:
        assert v.kind == VerdictKind.DENY and v.reason != Reason.RATE_LIMITED, (step, v)


@pytest.mark.fak_theorem("D9")
def test_a_refund_never_reaches_past_its_window() -> None:
    """A refused call settled late gives nothing back to a later window, nor below zero."""
    from fak_core import CallView
    from fak_core.ratelimit import RateLimiter

    clock = Clock()
    clock.now = 0.0  # an unseen key's count is 0 at any clock reading, even within W of 0
    lim = RateLimiter(RateLimit(2, 10.0, "trace"), clock=clock)
    assert lim.used("trace:never") == 0
    clock.now = 100.0
    first = CallView(ToolCall("get_a", "{}", "t"))
    assert lim.adjudicate(first).kind == VerdictKind.DEFER
    clock.now += 10.0  # the window ends before the first call is settled
    second = CallView(ToolCall("get_a", "{}", "t"))
    lim.adjudicate(second)
    second.settle(True)
    first.settle(False)  # its window is gone: the new window keeps its charge
    assert lim.used("trace:t") == 1
    # a key reset while a call is pending, then charged again in the same instant
    third = CallView(ToolCall("get_a", "{}", "t"))
    lim.adjudicate(third)
    lim.reset("trace:t")
    fourth = CallView(ToolCall("get_a", "{}", "t"))
    lim.adjudicate(fourth)
    third.settle(False)  # same start: it refunds the fourth's slot (the count is 1 → 0)
    fourth.settle(False)  # nothing left to refund: the count stays at 0, never -1
    assert lim.used("trace:t") == 0
    allowed = 0
    for _ in range(4):
        view = CallView(ToolCall("get_a", "{}", "t"))
        if lim.adjudicate(view).kind == VerdictKind.DEFER:
            allowed += 1
            view.settle(True)
    assert allowed == 2


@pytest.mark.fak_theorem("D9")
def test_calls_released_together_never_overspend() -> None:
    """Threads start on a barrier so their calls contend for the last slots."""
    k, _ = limited(10, key="global")
    allowed: list[int] = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait(timeout=10)
        for _ in range(5):
            if k.decide(ToolCall("get_a", "{}", "t")).kind == VerdictKind.ALLOW:
                allowed.append(1)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(allowed) == 10
    assert k.rate_limiter is not None and k.rate_limiter.used("global") == 10
