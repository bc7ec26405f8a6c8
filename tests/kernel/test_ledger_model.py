"""C4.4: the taint ledger against a model of what it promises.

The model is written from the ledger's documentation: live marks in least-recently-raised
order, bounded in count and (beyond a single mark) in bytes (the trace id's UTF-8 plus a
fixed cost per mark), the oldest evicted first into a tombstone bucket chosen by a keyed
BLAKE2b of the trace id (computed here with `hashlib` from the ledger's key), joined never
lowered; a lookup joins the live mark and the bucket; `reset` forgets the live mark only.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fak_core.ledger import ENTRY_OVERHEAD, OWNER_OVERHEAD, TOMBSTONE_BUCKETS, MemoryLedger
from fak_core.taint import Taint

#: ids that collide in no bucket and ids of 1..4-byte characters
TRACES = ("a", "b", "c", "é" * 3, "€€", "𐍈", "d" * 40, "victim")


class LedgerModel:
    def __init__(self, key: bytes, limit: int, max_bytes: int) -> None:
        self.key, self.limit, self.max_bytes = key, limit, max_bytes
        self.marks: OrderedDict[str, Taint] = OrderedDict()
        self.tomb: dict[int, Taint] = {}
        self.evicted = 0

    def bucket(self, trace: str) -> int:
        digest = hashlib.blake2b(
            trace.encode("utf-8", "surrogatepass"), key=self.key, digest_size=4
        ).digest()
        return int.from_bytes(digest, "little") % TOMBSTONE_BUCKETS

    def size(self) -> int:
        own = OWNER_OVERHEAD if self.marks else 0  # the in-process owner "" holds them
        return own + sum(ENTRY_OVERHEAD + len(t.encode("utf-8")) for t in self.marks)

    def level(self, trace: str) -> Taint:
        buried = self.tomb.get(self.bucket(trace), Taint.TRUSTED)
        return max(self.marks.get(trace, Taint.TRUSTED), buried)

    def raise_to(self, trace: str, taint: Taint) -> Taint:
        current = self.marks.get(trace)
        if current is not None:
            self.marks[trace] = max(current, taint)
            self.marks.move_to_end(trace)
        elif taint > Taint.TRUSTED:
            self.marks[trace] = taint
        while len(self.marks) > self.limit or (
            self.size() > self.max_bytes and len(self.marks) > 1
        ):
            old, mark = self.marks.popitem(last=False)
            b = self.bucket(old)
            self.tomb[b] = max(self.tomb.get(b, Taint.TRUSTED), mark)
            self.evicted += 1
        return self.level(trace)

    def stats(self) -> dict[str, int]:
        return {
            "ledger_marks": len(self.marks),
            "ledger_bytes": self.size(),
            "ledger_bytes_limit": self.max_bytes,
            "ledger_evicted": self.evicted,
            "ledger_tombstones": sum(1 for m in self.tomb.values() if m > Taint.TRUSTED),
            "ledger_owners": 1 if self.marks else 0,  # one owner: the in-process user
        }


OPS = st.lists(
    st.tuples(
        st.sampled_from(["raise", "raise", "reset"]),
        st.sampled_from(TRACES),
        st.sampled_from(Taint),
    ),
    min_size=1,
    max_size=60,
)


@pytest.mark.fak_theorem("C4.4")
@given(OPS, st.integers(1, 5), st.integers(1, 400))
@example(
    [
        ("raise", "a", Taint.TAINTED),
        ("raise", "b", Taint.TAINTED),
        ("raise", "a", Taint.QUARANTINED),
    ],
    1,
    10_000,
)
@example(
    [("raise", t, Taint.TAINTED) for t in TRACES] + [("raise", "a", Taint.QUARANTINED)], 2, 100
)
@example([("raise", t, Taint.TAINTED) for t in ("a", "b", "a", "b", "a")], 1, 10_000)
def test_the_ledger_matches_its_model(
    ops: list[tuple[str, str, Taint]], limit: int, max_bytes: int
) -> None:
    ledger = MemoryLedger(limit=limit, max_bytes=max_bytes)
    model = LedgerModel(ledger._key, limit, max_bytes)
    for op, trace, taint in ops:
        if op == "raise":
            assert ledger.raise_to(trace, taint) == model.raise_to(trace, taint), (op, trace)
        else:
            ledger.reset(trace)
            model.marks.pop(trace, None)
        assert list(ledger._marks.items()) == list(model.marks.items())
        assert ledger.stats() == model.stats()
        for t in TRACES:  # a session never reads below what the model says it holds
            assert ledger.level(t) == model.level(t), t
