"""Per-trace taint high-water marks, behind an interface a shared store can implement.

A mark only rises (by the lattice join) until an explicit reset. The in-memory ledger is
LRU-bounded: past ``limit`` traces the least recently raised one is forgotten and reads
TRUSTED again, which is counted in ``evicted`` (size the limit above your live sessions).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Protocol, runtime_checkable

from fak_core.nonblocking import nonblocking
from fak_core.taint import Taint

__all__ = ["DEFAULT_LEDGER_LIMIT", "MemoryLedger", "TaintLedger"]

DEFAULT_LEDGER_LIMIT = 8192


@runtime_checkable
class TaintLedger(Protocol):
    """Where session taint lives. Implementations must make ``raise_to`` monotone."""

    def level(self, trace_id: str) -> Taint: ...

    def raise_to(self, trace_id: str, taint: Taint) -> Taint: ...

    def reset(self, trace_id: str) -> None: ...

    def __len__(self) -> int: ...


@nonblocking
class MemoryLedger:
    """An LRU-bounded, thread-safe, in-process :class:`TaintLedger`."""

    __slots__ = ("_lock", "_marks", "evicted", "limit")

    def __init__(self, limit: int = DEFAULT_LEDGER_LIMIT) -> None:
        self.limit = limit if limit >= 1 else DEFAULT_LEDGER_LIMIT
        self._marks: OrderedDict[str, Taint] = OrderedDict()
        self._lock = threading.Lock()
        self.evicted = 0

    def level(self, trace_id: str) -> Taint:
        return self._marks.get(trace_id, Taint.TRUSTED)

    def raise_to(self, trace_id: str, taint: Taint) -> Taint:
        """Raise the trace's mark to at least ``taint``; return the new mark."""
        taint = Taint(taint)
        with self._lock:
            marks = self._marks
            current = marks.get(trace_id, Taint.TRUSTED)
            if taint <= current:
                if trace_id in marks:
                    marks.move_to_end(trace_id)
                return current
            marks[trace_id] = taint
            marks.move_to_end(trace_id)
            while len(marks) > self.limit:
                marks.popitem(last=False)
                self.evicted += 1
            return taint

    def reset(self, trace_id: str) -> None:
        """The one way down: forget the trace's mark (it reads TRUSTED again)."""
        with self._lock:
            self._marks.pop(trace_id, None)

    def __len__(self) -> int:
        return len(self._marks)
