"""The shared rate limiter (``RedisRateLimiter``) keeps D9's budget, against a model.

Two witnesses of the same claim. One drives a kernel whose limiter lives in a real
redis-server of our own through generated calls (allowed, forbidden, malformed) and
resets, against a model of D9 that keeps each key's charged count, and bounds every
``retry_after_ms`` by the wall-clock time since the key's window began. The other puts the
limiter on a stand-in for Redis that runs the three scripts' rules on a clock the test
moves in milliseconds, so window ends, sub-millisecond windows and a refund that cannot
reach Redis are exact; its verdicts are checked against the same model, which knows only
the theorem (a window of W seconds in whole milliseconds, at least one).
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fak_core import Kernel, Policy, Reason, ToolCall, VerdictKind
from fak_core.ratelimit import RateLimit
from fak_core.redis_state import RedisState, StateUnavailable
from fak_core.redis_stores import _RELEASE, _RESERVE, _RESET, _USED, RedisRateLimiter

from .support import RedisServer

TRACES = ("t0", "t1", "t2")
KINDS = ("ok", "forbidden", "malformed")


def _call(trace: str, kind: str) -> ToolCall:
    tool = "rm_rf" if kind == "forbidden" else "get_a"
    return ToolCall(tool, "{bad" if kind == "malformed" else "{}", trace)


# ------------------------------------------------------------------------ the model of D9
@dataclass
class Model:
    """Per key: the window's start (ms) and the calls charged in it."""

    cap: int
    window_ms: int
    windows: dict[str, tuple[int, int]] = field(default_factory=dict)

    def current(self, key: str, now: int) -> tuple[int, int] | None:
        w = self.windows.get(key)
        return None if w is None or now - w[0] >= self.window_ms else w

    def call(self, key: str, kind: str, now: int) -> tuple[bool, bool, int]:
        """(allowed, rate limited, retry_after_ms) of one call at ``now``."""
        w = self.current(key, now) or (now, 0)
        if w[1] >= self.cap:
            self.windows[key] = w
            return False, True, max(1, w[0] + self.window_ms - now)
        # a refused call reaches the limiter, starts a window, and gets its slot back
        self.windows[key] = (w[0], w[1] + (kind == "ok"))
        return kind == "ok", False, 0

    def used(self, key: str, now: int) -> int:
        w = self.current(key, now)
        return 0 if w is None else w[1]


# ------------------------------------------------------------- a real Redis, a real clock
@pytest.fixture
def shared(redis_server: RedisServer) -> Iterator[RedisState]:
    state = RedisState(redis_server.url)
    state.check()
    try:
        yield state
    finally:
        state.close()


REAL_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("call"), st.sampled_from(TRACES), st.sampled_from(KINDS)),
        st.tuples(st.just("reset"), st.sampled_from(TRACES), st.just("")),
    ),
    min_size=1,
    max_size=14,
)


@pytest.mark.fak_theorem("D9")
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(cap=st.integers(1, 3), steps=REAL_STEPS)
@example(cap=1, steps=[("call", "t0", "ok")] * 3 + [("reset", "t0", ""), ("call", "t0", "ok")])
def test_the_shared_limiter_keeps_the_budget_of_each_key(
    shared: RedisState, cap: int, steps: list[tuple[str, str, str]]
) -> None:
    window_s = 60.0
    k = Kernel(
        Policy(allow=("get_a",), rate_limit=RateLimit(cap, window_s, "trace")),
        rate_limiter=lambda lim: RedisRateLimiter(lim, shared),
    )
    limiter = k.rate_limiter
    assert isinstance(limiter, RedisRateLimiter)
    run = uuid.uuid4().hex  # keys of this example only
    model = Model(cap, 60_000)
    began: dict[str, tuple[float, float]] = {}  # key -> wall clock around its first call
    for op, name, kind in steps:
        trace = f"{run}-{name}"
        key = "trace:" + trace
        if op == "reset":
            limiter.reset(key)
            model.windows.pop(key, None)
            began.pop(key, None)
        else:
            before = time.time()
            v = k.decide(_call(trace, kind))
            after = time.time()
            began.setdefault(key, (before, after))
            allowed, limited, _ = model.call(key, kind, 0)
            assert (v.kind == VerdictKind.ALLOW) == allowed, (op, name, kind, v)
            assert (v.reason == Reason.RATE_LIMITED) == limited, (op, name, kind, v)
            if limited:
                wait = int(v.meta["retry_after_ms"])
                assert v.meta["retry_after"] == f"{wait}ms"
                first_before, first_after = began[key]
                most = window_s * 1000 - (before - first_after) * 1000
                least = window_s * 1000 - (after - first_before) * 1000
                assert least - 2 <= wait <= most + 2, (least, wait, most)
        for other in TRACES:
            okey = f"trace:{run}-{other}"
            assert limiter.used(okey) == model.used(okey, 0), (op, name, other)
    with pytest.raises(ValueError, match="one key at a time"):
        limiter.reset()


# ------------------------------------------------- a stand-in for Redis on a test clock
class FakeRedis:
    """The three scripts' rules on ``now`` (ms); what Redis would answer, no more."""

    def __init__(self) -> None:
        self.now = 1_000_000
        self.hashes: dict[str, dict[str, int]] = {}
        self.expire: dict[str, int] = {}
        self.down = False
        self.client = self

    def script(self, body: str) -> str:
        return body

    def _live(self, key: str) -> dict[str, int] | None:
        if key in self.expire and self.now >= self.expire[key]:
            self.hashes.pop(key, None)
            self.expire.pop(key)
        return self.hashes.get(key)

    def run(self, script: str, keys: list[str], args: list[Any]) -> Any:
        if self.down:
            raise StateUnavailable("shared state unavailable (stand-in)")
        (key,) = keys
        h = self._live(key) or {}
        start, used = h.get("start", -1), h.get("used", 0)
        if script is _RESERVE:
            window, cap = int(args[0]), int(args[1])
            if start < 0 or self.now - start >= window:
                start, used = self.now, 0
            if used >= cap:
                return [0, start + window - self.now, start]
            self.hashes[key] = {"start": start, "used": used + 1}
            self.expire[key] = start + window
            return [1, 0, start]
        if script is _RESET:  # a reset runs under the epoch guard, as every write
            self.hashes.pop(key, None)
            return 1
        if script is _RELEASE:
            if start == int(args[0]) and used > 0:
                self.hashes[key]["used"] = used - 1
            return 1
        assert script is _USED
        return 0 if start < 0 or self.now - start >= int(args[0]) else used


FAKE_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("call"), st.sampled_from(TRACES), st.sampled_from(KINDS)),
        st.tuples(st.just("tick"), st.integers(0, 3), st.just("")),
        st.tuples(st.just("tick"), st.sampled_from([-1, 0, 1]), st.just("window")),
        st.tuples(st.just("reset"), st.sampled_from(TRACES), st.just("")),
        st.tuples(st.just("down"), st.just(""), st.just("")),
    ),
    min_size=1,
    max_size=24,
)
WINDOWS = st.sampled_from([0.0004, 0.001, 0.0019, 0.002, 0.0025, 0.003, 1.0, 2.5])


@pytest.mark.fak_theorem("D9")
@settings(max_examples=60, deadline=None)
@given(cap=st.integers(1, 3), window_s=WINDOWS, steps=FAKE_STEPS)
@example(cap=1, window_s=0.0004, steps=[("call", "t0", "ok"), ("call", "t0", "ok")])
@example(cap=1, window_s=1.0, steps=[("call", "t0", "ok"), ("call", "t0", "ok")])
@example(
    cap=2, window_s=2.5, steps=[("call", "t0", "ok"), ("down", "", ""), ("call", "t0", "forbidden")]
)
def test_the_shared_limiter_windows_are_whole_milliseconds(
    cap: int, window_s: float, steps: list[tuple[str, Any, str]]
) -> None:
    fake = FakeRedis()
    state: Any = fake
    k = Kernel(
        Policy(allow=("get_a",), rate_limit=RateLimit(cap, window_s, "trace")),
        rate_limiter=lambda lim: RedisRateLimiter(lim, state),
    )
    limiter = k.rate_limiter
    assert isinstance(limiter, RedisRateLimiter)
    window_ms = max(1, math.floor(window_s * 1000))
    model = Model(cap, window_ms)
    for op, arg, kind in steps:
        if op == "tick":
            fake.now += window_ms + arg if kind == "window" else arg
        elif op == "reset":
            limiter.reset("trace:" + arg)
            model.windows.pop("trace:" + arg, None)
        elif op == "down":
            _refund_is_lost(k, fake, model)
        else:
            v = k.decide(_call(arg, kind))
            allowed, limited, wait = model.call("trace:" + arg, kind, fake.now)
            assert (v.kind == VerdictKind.ALLOW) == allowed, (op, arg, kind, v)
            assert (v.reason == Reason.RATE_LIMITED) == limited, (op, arg, kind, v)
            if limited:
                assert v.meta["retry_after_ms"] == str(wait)
        for t in TRACES:
            assert limiter.used("trace:" + t) == model.used("trace:" + t, fake.now), (op, t)


def _refund_is_lost(k: Kernel, fake: FakeRedis, model: Model) -> None:
    """Redis answers the reservation of a forbidden call and is gone for its refund: the
    call is denied all the same and its slot stays spent (the safe direction)."""
    script = fake.run

    def reserve_only(s: str, keys: list[str], args: list[Any]) -> Any:
        out = script(s, keys, args)
        fake.down = s is _RESERVE
        return out

    fake.run = reserve_only  # type: ignore[method-assign]
    try:
        v = k.decide(_call("t0", "forbidden"))
    finally:
        fake.run = script  # type: ignore[method-assign]
        fake.down = False
    _, limited, _ = model.call("trace:t0", "ok", fake.now)  # charged, never refunded
    assert v.kind == VerdictKind.DENY
    assert (v.reason == Reason.RATE_LIMITED) == limited
    limiter = k.rate_limiter
    assert limiter is not None
    fake.down = True
    try:
        with pytest.raises(StateUnavailable):
            limiter.reset("trace:t0")
    finally:
        fake.down = False
