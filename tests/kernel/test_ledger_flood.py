"""C4.11: a flood by some credentials cannot taint, evict or refuse another's sessions.

Generated floods: one to four flooding owners (one of them the in-process user ``""``,
who raises marks without opening sessions), interleaved with a victim that opens at most
three sessions, raises and resets them; ledgers with tombstone arrays of 1 to 65 536
buckets (one bucket: every evicted tainted mark is read by every trace that consults the
tombstones) and a byte bound that leaves the victim its fair share, ``max_bytes / n`` with
``n`` the owners that may hold marks. After every step: each victim session reads exactly
the mark the victim gave it (a fresh one reads TRUSTED, a reset one TRUSTED again), and
every flooder trace reads at least the join of the marks raised on it since a reset that
found it live (an evicted tainted trace still reads tainted). The byte count and each
owner's share are the sums of the live marks' costs.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fak_core.ledger import ENTRY_OVERHEAD, OWNER_OVERHEAD, TOMBSTONE_BUCKETS, MemoryLedger
from fak_core.taint import Taint

VICTIM = "victim-credential"
VICTIM_SESSIONS = ("v0", "v1", "v2")
#: What the victim can hold at most: its three sessions' marks, and itself as an owner.
VICTIM_BYTES = OWNER_OVERHEAD + len(VICTIM) + sum(ENTRY_OVERHEAD + len(v) for v in VICTIM_SESSIONS)


def _owner_cost(owner: str) -> int:
    return OWNER_OVERHEAD + len(owner.encode("utf-8"))


STEP = st.tuples(
    st.integers(0, 4),  # who: 0 the victim, k the k-th flooder (k > flooders: the victim)
    st.sampled_from(["open", "raise", "raise", "reset"]),
    st.sampled_from(Taint),
    st.integers(0, 30),  # which session (a flooder's "open" always takes a fresh id)
)


def _owner(k: int) -> str:
    return "" if k == 1 else f"cred-{k}"  # flooder 1 is the in-process user: no sessions


@pytest.mark.fak_theorem("C4.11", "C4.1")
@given(
    st.integers(1, 4),
    st.sampled_from([1, 2, 7, TOMBSTONE_BUCKETS]),
    st.integers(0, 400),
    st.lists(STEP, min_size=1, max_size=90),
)
@example(  # one bucket, a flood of tainted fresh sessions, then the victim opens one
    2,
    1,
    0,
    [(k, "open", Taint.TAINTED, 0) for k in (1, 2) * 12] + [(0, "open", Taint.TRUSTED, 0)],
)
@example(  # the victim tainted and reset while a flood evicts around it
    3,
    1,
    0,
    [(0, "open", Taint.TRUSTED, 0), (0, "raise", Taint.QUARANTINED, 0)]
    + [(k, "open", Taint.QUARANTINED, 0) for k in (2, 3) * 10]
    + [(0, "reset", Taint.TRUSTED, 0), (0, "open", Taint.TRUSTED, 0)],
)
def test_a_flood_costs_only_the_flooders(
    flooders: int, buckets: int, slack: int, steps: list[tuple[int, str, Taint, int]]
) -> None:
    owners = flooders + 1  # the victim and every flooder may hold marks
    max_bytes = owners * VICTIM_BYTES + slack
    ledger = MemoryLedger(limit=10_000, max_bytes=max_bytes, buckets=buckets)
    victim: dict[str, Taint] = {}  # the victim's open sessions and their marks
    floor: dict[str, Taint] = {}  # each flooder trace: the least it may read
    opened: dict[int, list[str]] = {k: [] for k in range(1, flooders + 1)}
    made = 0
    for who, op, taint, pick in steps:
        k = who if 1 <= who <= flooders else 0
        if k == 0:
            if op == "open" and len(victim) < len(VICTIM_SESSIONS):
                trace = VICTIM_SESSIONS[len(victim)]
                ledger.begin(trace, VICTIM)
                victim[trace] = Taint.TRUSTED
            elif victim:
                trace = list(victim)[pick % len(victim)]
                if op == "reset":
                    ledger.reset(trace)
                    victim[trace] = Taint.TRUSTED
                else:
                    got = ledger.raise_to(trace, taint)
                    victim[trace] = max(victim[trace], taint)
                    assert got == victim[trace], (trace, got)
        else:
            mine = opened[k]
            if op == "open" or not mine:
                made += 1
                trace = f"f{k}-{made}"
                if k != 1:  # the gateway opens every session it hands out
                    ledger.begin(trace, _owner(k))
                mine.append(trace)
                ledger.raise_to(trace, taint, _owner(k))
            else:
                trace = mine[pick % len(mine)]
                if op == "reset":
                    live = trace in ledger._marks
                    ledger.reset(trace)
                    if live:
                        floor[trace] = Taint.TRUSTED
                    continue
                ledger.raise_to(trace, taint, _owner(k))
            floor[trace] = max(floor.get(trace, Taint.TRUSTED), taint)
        for trace, mark in victim.items():  # the victim's sessions: exactly its own marks
            assert ledger.level(trace) == mark, (trace, ledger.stats())
        for trace, least in floor.items():  # an evicted mark never reads cleaner
            assert ledger.level(trace) >= least, trace
        live = ledger._marks
        holders = {ledger._owner[t] for t in live}
        assert ledger.stats()["ledger_bytes"] == sum(ENTRY_OVERHEAD + len(t) for t in live) + sum(
            map(_owner_cost, holders)
        )
        assert ledger.stats()["ledger_bytes"] <= max_bytes or len(live) == 1
        for owner in {VICTIM, *map(_owner, opened)}:
            held = [t for t in live if ledger._owner[t] == owner]
            own = _owner_cost(owner) if held else 0
            assert ledger.owner_bytes(owner) == own + sum(ENTRY_OVERHEAD + len(t) for t in held)
        assert ledger.stats()["ledger_owners"] == len({ledger._owner[t] for t in live})


@pytest.mark.fak_theorem("C4.11")
@given(st.sampled_from([1, 3, TOMBSTONE_BUCKETS]), st.integers(1, 40))
def test_a_fresh_session_reads_only_its_own_mark(buckets: int, flood: int) -> None:
    """However many tainted marks one owner pushed into the tombstones, a begun trace of
    another reads TRUSTED, and one already held (raised before it was begun) keeps what
    it read, its bucket included."""
    ledger = MemoryLedger(limit=2, max_bytes=10_000, buckets=buckets)
    ledger.raise_to("early", Taint.TAINTED, "other")
    for n in range(flood):
        ledger.raise_to(f"flood-{n}", Taint.QUARANTINED, "flooder")
    ledger.begin("fresh", "victim")
    assert ledger.level("fresh") == Taint.TRUSTED
    before = ledger.level("early")
    ledger.begin("early", "other")
    assert ledger.level("early") == before


class OwnersModel:
    """C4.11's ledger as its text states it: marks charged to owners, each owner's marks in
    least-recently-raised order, the heaviest owner's oldest evicted first (ties to the
    least owner string) into its bucket; begun traces read their own mark only."""

    def __init__(self, ledger: MemoryLedger) -> None:
        self.ledger = ledger  # its bucket function (keyed hash; C4.4's model checks it)
        self.marks: dict[str, Taint] = {}
        self.order: list[str] = []  # least recently raised first
        self.owner: dict[str, str] = {}
        self.born: set[str] = set()
        self.tomb: dict[int, Taint] = {}
        self.evicted = 0

    def cost(self, trace: str) -> int:
        return ENTRY_OVERHEAD + len(trace.encode("utf-8"))

    def spent(self, owner: str) -> int:
        held = [t for t in self.marks if self.owner[t] == owner]
        return (_owner_cost(owner) if held else 0) + sum(map(self.cost, held))

    def total(self) -> int:
        return sum(map(self.spent, set(self.owner.values())))

    def level(self, trace: str) -> Taint:
        live = self.marks.get(trace, Taint.TRUSTED)
        if trace in self.born:
            return live
        return max(live, self.tomb.get(self.ledger._bucket(trace), Taint.TRUSTED))

    def touch(self, trace: str) -> None:
        if trace in self.order:
            self.order.remove(trace)
        self.order.append(trace)

    def bound(self) -> None:
        while len(self.marks) > self.ledger.limit or (
            self.total() > self.ledger.max_bytes and len(self.marks) > 1
        ):
            owners = {self.owner[t] for t in self.marks}
            heavy = min(owners, key=lambda o: (-self.spent(o), o))
            old = next(t for t in self.order if self.owner[t] == heavy)
            mark = self.marks.pop(old)
            self.order.remove(old)
            del self.owner[old]
            self.born.discard(old)
            b = self.ledger._bucket(old)
            self.tomb[b] = max(self.tomb.get(b, Taint.TRUSTED), mark)
            self.evicted += 1

    def begin(self, trace: str, owner: str) -> None:
        if trace not in self.marks:
            self.marks[trace] = Taint.TRUSTED
            self.owner[trace] = owner
        elif trace not in self.born:
            self.marks[trace] = self.level(trace)
        self.born.add(trace)
        self.touch(trace)
        self.bound()

    def raise_to(self, trace: str, taint: Taint, owner: str) -> Taint:
        current = self.marks.get(trace)
        if current is None and taint == Taint.TRUSTED:
            return self.level(trace)
        if current is None:
            self.owner[trace] = owner
        self.marks[trace] = max(current or Taint.TRUSTED, taint)
        self.touch(trace)
        self.bound()
        return self.level(trace)

    def reset(self, trace: str) -> None:
        if trace in self.born:
            self.marks[trace] = Taint.TRUSTED
        elif trace in self.marks:
            del self.marks[trace]
            self.order.remove(trace)
            del self.owner[trace]


OWNERS = ("", "a", "b", "zz")
IDS = ("t0", "t1", "t2", "é€", "t4", "longer-trace-id", "t6")


@pytest.mark.fak_theorem("C4.4", "C4.11")
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["begin", "raise", "raise", "reset"]),
            st.sampled_from(IDS),
            st.sampled_from(Taint),
            st.sampled_from(OWNERS),
        ),
        min_size=1,
        max_size=60,
    ),
    st.integers(1, 6),
    # from under one mark's cost to room for every id of two owners (a mark and an owner
    # cost ENTRY_OVERHEAD and OWNER_OVERHEAD beyond their names): order and eviction both
    st.integers(1, 4 * (ENTRY_OVERHEAD + OWNER_OVERHEAD)),
    st.sampled_from([1, 3, TOMBSTONE_BUCKETS]),
)
@example(  # each raise moves its mark to the end; an equal one too
    [
        ("raise", "t0", Taint.TAINTED, "a"),
        ("raise", "t1", Taint.TAINTED, "a"),
        ("raise", "t0", Taint.TAINTED, "a"),
        ("raise", "t1", Taint.QUARANTINED, "a"),
        ("begin", "t0", Taint.TRUSTED, "a"),
        ("reset", "t1", Taint.TRUSTED, "a"),
    ],
    6,
    10_000,  # room for both marks: the order is what is checked
    TOMBSTONE_BUCKETS,
)
@example(  # exactly at the byte bound: nothing evicted
    [("raise", "t0", Taint.TAINTED, "a"), ("raise", "t1", Taint.TAINTED, "b")],
    6,
    2 * (ENTRY_OVERHEAD + 2 + OWNER_OVERHEAD + 1),
    1,
)
def test_the_ledger_matches_its_owners_model(
    ops: list[tuple[str, str, Taint, str]], limit: int, max_bytes: int, buckets: int
) -> None:
    ledger = MemoryLedger(limit=limit, max_bytes=max_bytes, buckets=buckets)
    model = OwnersModel(ledger)
    for op, trace, taint, owner in ops:
        if op == "begin":
            ledger.begin(trace, owner)
            model.begin(trace, owner)
        elif op == "raise":
            assert ledger.raise_to(trace, taint, owner) == model.raise_to(trace, taint, owner)
        else:
            ledger.reset(trace)
            model.reset(trace)
        assert list(ledger._marks) == model.order
        assert dict(ledger._marks) == model.marks
        assert ledger._owner == model.owner and ledger._born == model.born
        for o in OWNERS:
            assert ledger.owner_bytes(o) == model.spent(o), o
            assert list(ledger._queues.get(o, ())) == [
                t for t in model.order if model.owner[t] == o
            ]
        assert set(ledger._queues) == set(model.owner.values())  # no empty queue kept
        assert ledger.stats() == {
            "ledger_marks": len(model.marks),
            "ledger_bytes": model.total(),
            "ledger_bytes_limit": max_bytes,
            "ledger_evicted": model.evicted,
            "ledger_tombstones": sum(1 for m in model.tomb.values() if m > Taint.TRUSTED),
            "ledger_owners": len(set(model.owner.values())),
        }
        for t in IDS:
            assert ledger.level(t) == model.level(t), t


@pytest.mark.fak_theorem("C4.11")
@given(st.integers(1, 4), st.integers(100, 400))
def test_the_owners_heap_stays_bounded(owners: int, raises: int) -> None:
    """The heap of owners' byte counts keeps at most four entries per owner holding marks
    and 64 more, however many raises and evictions changed the counts; every owner that
    holds marks is in it with its current count."""
    ledger = MemoryLedger(limit=8, max_bytes=1 << 20)
    for n in range(raises):
        ledger.raise_to(f"t{n}", Taint.TAINTED, f"o{n % owners}")
        assert len(ledger._heap) <= 4 * len(ledger._owner_bytes) + 64
        current = {(-b, o) for o, b in ledger._owner_bytes.items()}
        assert current <= set(ledger._heap)
    assert ledger.stats()["ledger_owners"] == min(owners, 8)


@pytest.mark.fak_theorem("C4.4", "C4.11")
@pytest.mark.parametrize(
    ("given_buckets", "kept"), [(-1, TOMBSTONE_BUCKETS), (0, TOMBSTONE_BUCKETS), (1, 1), (7, 7)]
)
def test_the_tombstone_array_has_the_size_asked_for(given_buckets: int, kept: int) -> None:
    """A bucket count below 1 is the default (65 536), as the other bounds."""
    ledger = MemoryLedger(buckets=given_buckets)
    assert ledger.buckets == kept and len(ledger._tomb) == kept
    assert all(0 <= ledger._bucket(f"t{n}") < kept for n in range(50))
