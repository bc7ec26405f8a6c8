"""Mutants of the rate limit (theorems/ratelimit.md): plausible wrong implementations."""

from __future__ import annotations

from typing import Any
from unittest import mock

from fak_core.ratelimit import RateLimiter
from pytest_fak.mutants import mutant
from tests.mutants.sourcepatch import edited

__all__: list[str] = []


@mutant("D9/charges-denied")
def charges_denied() -> Any:
    """A reserved slot is never given back, so a call the chain refuses still spends budget."""
    return mock.patch.object(RateLimiter, "_release", return_value=None)


@mutant("D9/off-by-one")
def off_by_one() -> Any:
    """The cap check lets call N+1 through."""
    return edited(RateLimiter.adjudicate, ("if used >= lim.max_calls:", "if used > lim.max_calls:"))


@mutant("D9/unlocked-check")
def unlocked_check() -> Any:
    """Check and charge are not one critical section: the check reads the count under the
    lock, the charge happens after it is released (with a thread switch in between)."""
    return edited(
        RateLimiter.adjudicate,
        (
            "        self._windows[key] = (start, used + 1)\n",
            "    time.sleep(0.001)\n"
            "    with self._lock:\n"
            "        self._windows[key] = (start, used + 1)\n",
        ),
    )


@mutant("D9/reset-clears-all")
def reset_clears_all() -> Any:
    """Resetting one key clears every key's window."""
    return edited(RateLimiter.reset, ("if key is None:", "if True:"))


@mutant("D9/retry-after-full-window")
def retry_after_full_window() -> Any:
    """``retry_after`` is always the whole window, not the time left in it."""
    return edited(
        RateLimiter.adjudicate,
        (
            "wait_ms = max(1, int((lim.window_s - (now - start)) * 1000))",
            "wait_ms = max(1, int(lim.window_s * 1000))",
        ),
    )


@mutant("D9.1/keyed-by-trace-only")
def keyed_by_trace_only() -> Any:
    """Every limit is keyed by the trace, as the default once was: a client that sends no
    trace id gets a fresh budget every turn."""

    def key(self: RateLimiter, view: Any) -> str:
        return "trace:" + view.call.trace_id

    return mock.patch.object(RateLimiter, "_key", key)
