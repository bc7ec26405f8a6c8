"""Per-trace taint high-water marks, behind an interface a shared store can implement.

A mark only rises (by the lattice join) until an explicit reset. The in-memory ledger is
bounded in entries (``limit``) and in bytes (``max_bytes``: trace ids plus an overhead per
mark, and owner names plus an overhead per owner, each measured as what CPython holds).
Past either bound a mark leaves the table, but it is not forgotten:
it is folded into a fixed-size *tombstone* array (one byte per bucket, buckets chosen by a
keyed hash of the trace id, so an attacker cannot aim at a bucket), and a lookup of a
trace the table does not vouch for reads the join of its live mark and its bucket. An
evicted tainted trace therefore still reads at least as tainted as it was: forgotten
state fails closed.

No client can spend what others share (C4.11). Each mark is charged to an *owner* (the
credential, or the client address, that opened the session; ``""`` for in-process users),
and the mark evicted is the least recently raised one of the owner holding the most bytes:
a flood evicts the flooder's own marks first, and an owner holding at most
``max_bytes / n`` bytes while ``n`` owners hold marks loses none. A session the gateway
opens is *begun* (:meth:`MemoryLedger.begin`: its id is new, nobody used it before), and a
begun trace's live mark is its whole history, so its lookups read that mark alone, never
the shared buckets: however many marks others pushed into the tombstones, a fresh
session starts clean, and a reset of it lowers it. Once a begun trace's own mark is
evicted it reads its bucket like any other (at least as tainted as it was).
"""

from __future__ import annotations

import hashlib
import heapq
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
    "OWNER_OVERHEAD",
    "TOMBSTONE_BUCKETS",
    "TaintLedger",
]

DEFAULT_LEDGER_LIMIT = 1 << 20
#: Bytes of live marks (trace ids plus ``ENTRY_OVERHEAD`` each, and ``OWNER_OVERHEAD`` plus
#: the name of each owner holding marks) before the heaviest owner's oldest is evicted.
DEFAULT_LEDGER_BYTES = 64 << 20
#: What one live mark costs beyond its trace id's UTF-8 bytes: its entries in the table,
#: its owner's queue and the begun set, and the id's string object. Measured with
#: ``tracemalloc`` on CPython 3.11 at every size where a table grows: at most 461 bytes a
#: mark; rounded up. (``tests/kernel/test_ledger_memory.py`` holds the count to it.)
ENTRY_OVERHEAD = 480
#: What an owner holding marks costs beyond its name's UTF-8 bytes (its queue, its byte
#: count, its heap entries, its name's string object), measured the same way: about 540.
OWNER_OVERHEAD = 640
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


def _owner_cost(owner: str) -> int:
    return OWNER_OVERHEAD + len(owner.encode("utf-8", "surrogatepass"))


@nonblocking
class MemoryLedger:
    """A bounded, thread-safe, in-process :class:`TaintLedger` that fails closed on eviction
    and evicts the marks of the owner holding the most bytes first."""

    __slots__ = (
        "_born",
        "_bytes",
        "_heap",
        "_key",
        "_lock",
        "_marks",
        "_owner",
        "_owner_bytes",
        "_queues",
        "_tomb",
        "buckets",
        "evicted",
        "limit",
        "max_bytes",
        "tombstones",
    )

    def __init__(
        self,
        limit: int = DEFAULT_LEDGER_LIMIT,
        max_bytes: int = DEFAULT_LEDGER_BYTES,
        buckets: int = TOMBSTONE_BUCKETS,
    ):
        self.limit = limit if limit >= 1 else DEFAULT_LEDGER_LIMIT
        self.max_bytes = max_bytes if max_bytes >= 1 else DEFAULT_LEDGER_BYTES
        self.buckets = buckets if buckets >= 1 else TOMBSTONE_BUCKETS
        self._marks: OrderedDict[str, Taint] = OrderedDict()
        self._owner: dict[str, str] = {}
        self._born: set[str] = set()
        self._queues: dict[str, OrderedDict[str, None]] = {}
        self._owner_bytes: dict[str, int] = {}
        self._heap: list[tuple[int, str]] = []
        self._lock = threading.Lock()
        self._bytes = 0
        self._tomb = bytearray(self.buckets)
        self._key = secrets.token_bytes(16)
        #: Marks moved from the table to the tombstones.
        self.evicted = 0
        #: Tombstone buckets holding a mark above TRUSTED.
        self.tombstones = 0

    def _bucket(self, trace_id: str) -> int:
        digest = hashlib.blake2b(
            trace_id.encode("utf-8", "surrogatepass"), key=self._key, digest_size=4
        ).digest()
        return int.from_bytes(digest, "little") % self.buckets

    def level(self, trace_id: str) -> Taint:
        live = self._marks.get(trace_id, Taint.TRUSTED)
        if not self.evicted or trace_id in self._born:  # no tombstone to read, or its own
            return live
        buried = Taint(self._tomb[self._bucket(trace_id)])
        return live if live >= buried else buried

    def begin(self, trace_id: str, owner: str = "") -> None:
        """Open a session nobody used before (the gateway's new owner, or a minted id),
        charged to ``owner``: its lookups read its own mark, never the shared buckets.
        The caller vouches that the id is new; a trace the table already holds keeps its
        owner, and its mark takes in its bucket first, so it reads no lower than before."""
        with self._lock:
            if trace_id not in self._marks:
                self._add(trace_id, Taint.TRUSTED, owner)
            elif trace_id not in self._born:
                self._marks[trace_id] = self.level(trace_id)
            self._born.add(trace_id)
            self._touch(trace_id)
            self._bound()

    def raise_to(self, trace_id: str, taint: Taint, owner: str = "") -> Taint:
        """Raise the trace's mark to at least ``taint``; return the new level. A new mark
        is charged to ``owner`` (a begun one keeps its owner)."""
        taint = Taint(taint)
        with self._lock:
            marks = self._marks
            current = marks.get(trace_id)
            if current is not None and taint <= current:
                self._touch(trace_id)
                return self.level(trace_id)
            if current is None:
                if taint == Taint.TRUSTED:
                    return self.level(trace_id)
                self._add(trace_id, taint, owner)
            marks[trace_id] = taint
            self._touch(trace_id)
            self._bound()
            return self.level(trace_id)

    def _add(self, trace_id: str, taint: Taint, owner: str) -> None:
        cost = _cost(trace_id)
        self._marks[trace_id] = taint
        self._owner[trace_id] = owner
        queue = self._queues.get(owner)
        if queue is None:  # an owner's first mark: the owner's own bookkeeping too
            queue = self._queues[owner] = OrderedDict()
            cost += _owner_cost(owner)
        queue[trace_id] = None
        self._bytes += cost
        self._charge(owner, cost)

    def _release(self, owner: str, trace_id: str) -> None:
        """Take a mark's cost off the count and off ``owner``; an owner left without
        marks costs nothing more (its queue and count are dropped)."""
        cost = _cost(trace_id)
        if not self._queues[owner]:
            cost += _owner_cost(owner)
        self._bytes -= cost
        self._charge(owner, -cost)

    def _charge(self, owner: str, delta: int) -> None:
        spent = self._owner_bytes.get(owner, 0) + delta
        if spent > 0:
            self._owner_bytes[owner] = spent
            heapq.heappush(self._heap, (-spent, owner))
        else:
            self._owner_bytes.pop(owner, None)
            self._queues.pop(owner, None)
        if len(self._heap) > 4 * len(self._owner_bytes) + 64:  # drop the stale entries
            self._heap = [(-b, o) for o, b in self._owner_bytes.items()]
            heapq.heapify(self._heap)

    def _touch(self, trace_id: str) -> None:
        self._marks.move_to_end(trace_id)
        self._queues[self._owner[trace_id]].move_to_end(trace_id)

    def _bound(self) -> None:
        marks = self._marks
        while len(marks) > self.limit or (self._bytes > self.max_bytes and len(marks) > 1):
            self._evict()

    def _heaviest(self) -> str:
        """The owner holding the most bytes (the heap's top that is still current)."""
        heap = self._heap
        while heap:
            spent, owner = heap[0]
            if self._owner_bytes.get(owner) == -spent:
                return owner
            heapq.heappop(heap)
        raise AssertionError("a ledger over its bound holds marks")  # pragma: no cover

    def _evict(self) -> None:
        owner = self._heaviest()
        old, _ = self._queues[owner].popitem(last=False)
        mark = self._marks.pop(old)
        del self._owner[old]
        self._born.discard(old)
        self._release(owner, old)
        bucket = self._bucket(old)
        if self._tomb[bucket] == 0 and mark > 0:
            self.tombstones += 1
        if mark > self._tomb[bucket]:
            self._tomb[bucket] = int(mark)
        self.evicted += 1

    def reset(self, trace_id: str) -> None:
        """The one way down. A begun trace's mark goes back to TRUSTED (its history is all
        in it); any other trace's live mark is forgotten, and a mark already evicted to
        the tombstones stays (its bucket may be shared), so an evicted trace stays
        tainted."""
        with self._lock:
            if trace_id in self._born:
                self._marks[trace_id] = Taint.TRUSTED
            elif self._marks.pop(trace_id, None) is not None:
                owner = self._owner.pop(trace_id)
                del self._queues[owner][trace_id]
                self._release(owner, trace_id)

    def owner_bytes(self, owner: str) -> int:
        """The bytes of live marks charged to ``owner``."""
        return self._owner_bytes.get(owner, 0)

    def stats(self) -> dict[str, int]:
        """Counters for ``/healthz``: live marks, their bytes and bound, evictions,
        tombstones, and how many owners hold marks."""
        return {
            "ledger_marks": len(self._marks),
            "ledger_bytes": self._bytes,
            "ledger_bytes_limit": self.max_bytes,
            "ledger_evicted": self.evicted,
            "ledger_tombstones": self.tombstones,
            "ledger_owners": len(self._owner_bytes),
        }

    def __len__(self) -> int:
        return len(self._marks)
