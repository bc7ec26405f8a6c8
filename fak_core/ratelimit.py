"""The rate-limit adjudicator: at most ``max_calls`` per window, per caller, trace, tool,
or globally.

``key`` says whose budget a call spends: ``credential`` (the default) is the verified
credential the gateway stamped on the call (``meta["credential"]``, a digest of the API key
when the gateway requires one), else the client address (``meta["client"]``), else (in
process, with no wire) the principal, else the trace; ``client`` is the client address,
else the trace; ``trace``, ``tool`` and ``global`` are what they say. A client cannot
escape a ``credential`` or ``client`` limit by dropping or changing its trace id, which a
``trace`` limit allows.

A call over the cap is DENY/RATE_LIMITED with the WAIT disposition and ``retry_after_ms``
(time until its window reopens). A call reserves its slot while the chain is folded and
the kernel settles the reservation afterwards: a call the fold refuses gives its slot
back, so a denied call spends no budget, and concurrent calls can never overspend.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from fak_core.nonblocking import nonblocking
from fak_core.reasons import Reason
from fak_core.verdicts import Verdict
from fak_core.view import CallView

__all__ = ["RateLimit", "RateLimiter"]

BY = "rate-limit"
_OK = Verdict.defer(BY)
KEYS = ("credential", "client", "trace", "tool", "global")
#: The key of a ``rate_limit`` table that names none.
DEFAULT_KEY = "credential"


@dataclass(frozen=True, slots=True)
class RateLimit:
    """The policy's ``rate_limit`` table."""

    max_calls: int
    window_s: float = 60.0
    key: str = DEFAULT_KEY


@nonblocking
class RateLimiter:
    """Fixed-window call budgets, bounded to ``max_keys`` live windows (LRU)."""

    def __init__(
        self,
        limit: RateLimit,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 8192,
    ) -> None:
        if limit.key not in KEYS:
            raise ValueError(f"rate_limit.key must be one of {', '.join(KEYS)}")
        self.limit = limit
        self.clock = clock
        self.max_keys = max_keys
        self._windows: OrderedDict[str, tuple[float, int]] = OrderedDict()
        self._lock = threading.Lock()

    def _key(self, view: CallView) -> str:
        k = self.limit.key
        call = view.call
        if k == "tool":
            return "tool:" + call.tool
        if k == "global":
            return "global"
        meta = call.meta
        if k == "credential" and meta.get("credential"):
            return "credential:" + meta["credential"]
        if k in ("credential", "client") and meta.get("client"):
            return "client:" + meta["client"]
        if k == "credential" and call.principal:  # in process: no wire, no address
            return "principal:" + call.principal
        return "trace:" + call.trace_id

    def used(self, key: str) -> int:
        """Calls charged in the key's current window."""
        with self._lock:
            start, used = self._windows.get(key, (0.0, 0))
            return used if self.clock() - start < self.limit.window_s else 0

    def reset(self, key: str | None = None) -> None:
        """Clear one key's window (``None``: all of them)."""
        with self._lock:
            if key is None:
                self._windows.clear()
            else:
                self._windows.pop(key, None)

    def adjudicate(self, view: CallView) -> Verdict:
        key = self._key(view)
        now = self.clock()
        lim = self.limit
        with self._lock:
            start, used = self._windows.get(key, (now, 0))
            if now - start >= lim.window_s:
                start, used = now, 0
            if used >= lim.max_calls:
                wait_ms = max(1, int((lim.window_s - (now - start)) * 1000))
                return Verdict.deny(
                    Reason.RATE_LIMITED,
                    BY,
                    claim=f"{lim.max_calls} calls per {lim.window_s:g} s per {lim.key} used up",
                    meta={"retry_after_ms": str(wait_ms), "retry_after": f"{wait_ms}ms"},
                )
            self._windows[key] = (start, used + 1)
            self._windows.move_to_end(key)
            while len(self._windows) > self.max_keys:
                self._windows.popitem(last=False)
        view.on_settle(lambda allowed: None if allowed else self._release(key, start))
        return _OK

    def _release(self, key: str, start: float) -> None:
        with self._lock:
            window = self._windows.get(key)
            if window is not None and window[0] == start and window[1] > 0:
                self._windows[key] = (start, window[1] - 1)
