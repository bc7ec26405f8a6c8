"""C4.11 and D12: the byte bounds count at least what the tables really hold.

The in-memory ledger and the gateway's owner table are bounded in bytes, and the figure
they count is what their bounds compare: so it must cover the memory their entries hold,
measured here with ``tracemalloc`` (what the table's code and the test allocated while
the entries went in and still holds: the tables' growth, the ids' and owners' strings, the
digests; other threads' allocations are left out). The ids are drawn over the
lengths and alphabets a trace id may have (up to 128 characters; ASCII, two-, three- and
four-byte UTF-8, whose strings CPython stores one, two or four bytes a character), the
owners over the credential digests and client addresses the gateway charges, one owner
for every mark or many marks to one, begun or raised.
"""

from __future__ import annotations

import gc
import tracemalloc

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import fak_core.gateway.sessions as sessions_mod
import fak_core.ledger as ledger_mod
from fak_core.gateway.sessions import Sessions
from fak_core.ledger import MemoryLedger
from fak_core.taint import Taint

#: The tables' fixed costs (their first, smallest allocations), not per entry.
SLACK = 32 << 10


def _held(table_file: str) -> int:
    """The bytes still allocated by the table's code and by this test (the ids and owners
    it made), not by other threads of the process or by the test framework."""
    keep = [tracemalloc.Filter(True, table_file), tracemalloc.Filter(True, __file__)]
    snapshot = tracemalloc.take_snapshot().filter_traces(keep)
    return sum(stat.size for stat in snapshot.statistics("filename"))


ALPHABETS = ("x", "é", "中", "😀")


def _id(i: int, length: int, alphabet: str) -> str:
    head = f"{i:08d}-"
    return head + alphabet * (length - len(head)) if length > len(head) else head


@pytest.mark.fak_theorem("C4.11")
@settings(max_examples=12, deadline=None)
@given(
    st.integers(300, 3000),
    st.integers(1, 3000),
    st.integers(1, 128),
    st.sampled_from(ALPHABETS),
    st.integers(0, 64),
    st.booleans(),
)
@example(3000, 3000, 128, "😀", 64, True).via("every mark its own owner, the widest ids")
@example(2731, 1, 16, "x", 0, True).via("one owner, the table just grown")
@example(3000, 2, 128, "😀", 64, True).via("two long-named owners, each request its own copy")
@example(2731, 2731, 9, "x", 19, False).via("raised, an owner per mark")
def test_the_ledger_counts_the_memory_its_marks_hold(
    n: int, owners: int, length: int, alphabet: str, owner_len: int, begun: bool
) -> None:
    ledger = MemoryLedger(max_bytes=1 << 40)  # its tombstones are made before tracing
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(n):
            owner = f"client:{i % owners:0{owner_len}d}"  # a new string per request
            trace = _id(i, length, alphabet)
            if begun:
                ledger.begin(trace, owner)
            else:
                ledger.raise_to(trace, Taint.TAINTED, owner)
        used = _held(ledger_mod.__file__)
    finally:
        tracemalloc.stop()
    counted = ledger.stats()["ledger_bytes"]
    assert used <= counted + SLACK, (used, counted, used / n, counted / n)


@pytest.mark.fak_theorem("D12")
@settings(max_examples=8, deadline=None)
@given(st.integers(300, 3000), st.integers(1, 128), st.sampled_from(ALPHABETS), st.booleans())
@example(2731, 128, "😀", True).via("minted tokens, the widest ids")
@example(2731, 9, "x", False).via("client tokens, short ids, the table just grown")
def test_the_owner_table_counts_the_memory_its_owners_hold(
    n: int, length: int, alphabet: str, minted: bool
) -> None:
    table = Sessions(max_bytes=1 << 40)
    tokens = [f"token-of-client-{i:016d}" for i in range(n)]  # the client's, not the table's
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(n):
            table.claim(_id(i, length, alphabet), None if minted else tokens[i])
        used = _held(sessions_mod.__file__)
    finally:
        tracemalloc.stop()
    counted = table._bytes
    assert used <= counted + SLACK, (used, counted, used / n, counted / n)
