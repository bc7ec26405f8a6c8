"""The bounds of forgotten state (C4.4): default bounds, the tombstone key, and trace ids
holding lone surrogates, against the ledger model of ``test_ledger_model`` and values
written here (the documented defaults)."""

from __future__ import annotations

import hashlib
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core.admission import HeldStore
from fak_core.ledger import ENTRY_OVERHEAD, OWNER_OVERHEAD, MemoryLedger
from fak_core.taint import Taint

from .test_ledger_model import LedgerModel

#: ids a host's ``str`` may carry: lone surrogates, alone and beside other characters
SURROGATE_TRACES = ("\ud800", "a\udfff", "\udc00\ud83d", "é\ud800€", "plain")


class SurrogateModel(LedgerModel):
    """The ledger model, counting a trace id's bytes as UTF-8 with surrogates passed."""

    def size(self) -> int:
        own = OWNER_OVERHEAD if self.marks else 0  # the in-process owner "" holds them
        return own + sum(
            ENTRY_OVERHEAD + len(t.encode("utf-8", "surrogatepass")) for t in self.marks
        )


@pytest.mark.fak_theorem("C4.4")
@given(
    st.lists(st.tuples(st.sampled_from(SURROGATE_TRACES), st.sampled_from(Taint)), max_size=30),
    st.integers(1, 3),
    st.integers(1, 300),
)
def test_trace_ids_with_lone_surrogates_are_counted_and_buried(
    ops: list[tuple[str, Taint]], limit: int, max_bytes: int
) -> None:
    ledger = MemoryLedger(limit=limit, max_bytes=max_bytes)
    model = SurrogateModel(ledger._key, limit, max_bytes)
    for trace, taint in ops:
        assert ledger.raise_to(trace, taint) == model.raise_to(trace, taint), trace
        assert ledger.stats() == model.stats()
        for t in SURROGATE_TRACES:
            assert ledger.level(t) == model.level(t), t


@pytest.mark.fak_theorem("C4.4")
@pytest.mark.parametrize("bound", [0, -1, -(2**40)])
def test_a_bound_below_one_is_the_default(bound: int) -> None:
    ledger = MemoryLedger(limit=bound, max_bytes=bound)
    assert (ledger.limit, ledger.max_bytes) == (1_048_576, 64 * 1024 * 1024)
    assert ledger.stats()["ledger_bytes_limit"] == 64 * 1024 * 1024
    for i in range(3):  # nothing is evicted at the default bounds
        ledger.raise_to(f"t{i}", Taint.TAINTED)
    assert len(ledger) == 3 and ledger.evicted == 0
    held = HeldStore(limit=bound, max_bytes=bound)
    assert (held.limit, held.max_bytes) == (8192, 256 * 1024 * 1024)
    assert [held.hold("x" * 100) for _ in range(3)] == ["q1", "q2", "q3"]
    assert held.stats() == {
        "held": 3,
        "held_bytes": 3 * (100 + 2),
        "held_bytes_limit": 256 * 1024 * 1024,
        "held_evicted": 0,
    }


@pytest.mark.fak_theorem("C4.4")
def test_the_smallest_bounds_are_kept() -> None:
    ledger = MemoryLedger(limit=1, max_bytes=1)
    assert (ledger.limit, ledger.max_bytes) == (1, 1)
    held = HeldStore(limit=1, max_bytes=1)
    assert (held.limit, held.max_bytes) == (1, 1)


@pytest.mark.fak_theorem("C4.4")
def test_each_ledger_draws_its_own_sixteen_byte_key() -> None:
    keys = {MemoryLedger()._key for _ in range(8)}
    assert len(keys) == 8 and {len(k) for k in keys} == {16}


def _bucket(key: bytes, trace: str) -> int:
    """The documented bucket: a 4-byte BLAKE2b of the id keyed with the ledger's key, read
    little-endian, modulo the 65 536 buckets."""
    digest = hashlib.blake2b(trace.encode("utf-8", "surrogatepass"), key=key, digest_size=4)
    return int.from_bytes(digest.digest(), "little") % 65_536


def _colliding(key: bytes) -> tuple[str, str, str]:
    """Two ids sharing a bucket under ``key``, and a third in another bucket."""
    seen: dict[int, str] = {}
    for i in itertools.count():
        trace = f"t{i}\ud800" if i % 2 else f"t{i}"
        b = _bucket(key, trace)
        if b in seen:
            other = next(t for t in seen.values() if _bucket(key, t) != b)
            return seen[b], trace, other
        seen[b] = trace
    raise AssertionError("unreachable")


@pytest.mark.fak_theorem("C4.4")
@pytest.mark.parametrize("mark", [Taint.TAINTED, Taint.QUARANTINED])
def test_an_evicted_mark_is_read_by_every_id_of_its_bucket_only(mark: Taint) -> None:
    ledger = MemoryLedger(limit=1)
    buried, sharer, apart = _colliding(ledger._key)
    ledger.raise_to(buried, mark)
    ledger.raise_to("pusher", Taint.TAINTED)  # evicts ``buried`` at the bound of one mark
    assert ledger.evicted == 1 and ledger.tombstones == 1
    assert ledger.level(buried) is mark and ledger.level(sharer) is mark
    assert ledger.level(apart) is Taint.TRUSTED
