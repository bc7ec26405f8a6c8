"""Per-trace taint high-water marks, behind an interface a shared store can implement.

A mark only rises (by the lattice join) until an explicit reset. The in-memory ledger is
bounded in entries (``limit``) and in bytes (``max_bytes``: trace ids plus a fixed
overhead per mark). Past either bound the least recently raised mark leaves the table,
but it is not forgotten: it is folded into a fixed-size *tombstone* array (one byte per
bucket, buckets chosen by a keyed hash of the trace id, so an attacker cannot aim at a
bucket), and a lookup reads the join of the live mark and its bucket. An evicted tainted
trace therefore still reads at least as tainted as it was: forgotten state fails closed.
The price is shared buckets: once marks are evicted, a trace that shares a bucket with an
evicted tainted one reads tainted too (``tombstones`` counts the buckets in use), and a
reset clears only the live mark, never a bucket.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from collections import OrderedDict
from typing import Protocol, runtime_checkable

from fak_core.nonblocking import nonblocking
from fak_core.taint import Taint

__all__ = [
    "DEFAULT_LEDGER_BYTES",
    "DEFAULT_LEDGER_LIMIT",
    "MemoryLedger",
    "TOMBSTONE_BUCKETS",
    "TaintLedger",
]

DEFAULT_LEDGER_LIMIT = 1 << 20
#: Bytes of live marks (trace ids plus ``ENTRY_OVERHEAD`` each) before the oldest is evicted.
DEFAULT_LEDGER_BYTES = 64 << 20
#: What one live mark costs beyond its trace id (the table's bookkeeping, estimated).
ENTRY_OVERHEAD = 96
#: Buckets in the tombstone array (one byte each).
TOMBSTONE_BUCKETS = 1 << 16


@runtime_checkable
class TaintLedger(Protocol):
    """Where session taint lives. Implementations must make ``raise_to`` monotone."""

    def level(self, trace_id: str) -> Taint: ...

    def raise_to(self, trace_id: str, taint: Taint) -> Taint: ...

    def reset(self, trace_id: str) -> None: ...

    def __len__(self) -> int: ...


def _cost(trace_id: str) -> int:
    return ENTRY_OVERHEAD + len(trace_id.encode("utf-8", "surrogatepass"))


@nonblocking
class MemoryLedger:
    """A bounded, thread-safe, in-process :class:`TaintLedger` that fails closed on eviction."""

    __slots__ = (
        "_bytes",
        "_key",
        "_lock",
        "_marks",
        "_tomb",
        "evicted",
        "limit",
        "max_bytes",
        "tombstones",
    )

    def __init__(self, limit: int = DEFAULT_LEDGER_LIMIT, max_bytes: int = DEFAULT_LEDGER_BYTES):
        self.limit = limit if limit >= 1 else DEFAULT_LEDGER_LIMIT
        self.max_bytes = max_bytes if max_bytes >= 1 else DEFAULT_LEDGER_BYTES
        self._marks: OrderedDict[str, Taint] = OrderedDict()
        self._lock = threading.Lock()
        self._bytes = 0
        self._tomb = bytearray(TOMBSTONE_BUCKETS)
        self._key = secrets.token_bytes(16)
        #: Marks moved from the table to the tombstones.
        self.evicted = 0
        #: Tombstone buckets holding a mark above TRUSTED.
        self.tombstones = 0

    def _bucket(self, trace_id: str) -> int:
        digest = hashlib.blake2b(
            trace_id.encode("utf-8", "surrogatepass"), key=self._key, digest_size=4
        ).digest()
        return int.from_bytes(digest, "little") % TOMBSTONE_BUCKETS

    def level(self, trace_id: str) -> Taint:
        live = self._marks.get(trace_id, Taint.TRUSTED)
        if not self.evicted:  # nothing was ever evicted: no tombstone to read, no hash
            return live
        buried = Taint(self._tomb[self._bucket(trace_id)])
        return live if live >= buried else buried

    def raise_to(self, trace_id: str, taint: Taint) -> Taint:
        """Raise the trace's mark to at least ``taint``; return the new level."""
        taint = Taint(taint)
        with self._lock:
            marks = self._marks
            current = marks.get(trace_id)
            if current is not None and taint <= current:
                marks.move_to_end(trace_id)
                return self.level(trace_id)
            if current is None:
                if taint == Taint.TRUSTED:
                    return self.level(trace_id)
                self._bytes += _cost(trace_id)
            marks[trace_id] = taint
            marks.move_to_end(trace_id)
            while len(marks) > self.limit or (self._bytes > self.max_bytes and len(marks) > 1):
                self._evict()
            return self.level(trace_id)

    def _evict(self) -> None:
        old, mark = self._marks.popitem(last=False)
        self._bytes -= _cost(old)
        bucket = self._bucket(old)
        if self._tomb[bucket] == 0 and mark > 0:
            self.tombstones += 1
        if mark > self._tomb[bucket]:
            self._tomb[bucket] = int(mark)
        self.evicted += 1

    def reset(self, trace_id: str) -> None:
        """The one way down: forget the trace's live mark. A mark already evicted to the
        tombstones stays (its bucket may be shared), so an evicted trace stays tainted."""
        with self._lock:
            if self._marks.pop(trace_id, None) is not None:
                self._bytes -= _cost(trace_id)

    def stats(self) -> dict[str, int]:
        """Counters for ``/healthz``: live marks, their bytes and bound, evictions, tombstones."""
        return {
            "ledger_marks": len(self._marks),
            "ledger_bytes": self._bytes,
            "ledger_bytes_limit": self.max_bytes,
            "ledger_evicted": self.evicted,
            "ledger_tombstones": self.tombstones,
        }

    def __len__(self) -> int:
        return len(self._marks)
