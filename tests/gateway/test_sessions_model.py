"""D12 on the owner table itself: generated runs of claims and permission checks against a
model written here from the theorem and its caveats.

The model: a trace is bound to the first token that claims it (one the client sends, 16 to
256 characters, else a minted one of 32 URL-safe characters, 192 bits); a later claim
passes with the owner's token or the operator key and is a 403 otherwise (no token or
another one: the message names the trace and the header to send); the table holds owners
within its byte bound (each entry its overhead plus the trace's UTF-8 bytes, lone
surrogates included), dropping the least recently used first (a claim that passes on an
owned trace uses it; a refused one does not); a dropped trace is orphaned: every claim on
it is a 403 but the operator's, and none binds it again unless the gateway minted the id
for that very request (an orphan is remembered by its bit in a bitmap, so the model asks
the table which bit a trace has: only that hash is shared, not the rules); reading or
resetting is permitted to the owner's token or the operator key, never to a wrong or empty
one, and each refusal (of a claim, a read or a reset) is counted.
"""

from __future__ import annotations

import string
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fak_core.gateway.sessions import (
    ENTRY_OVERHEAD,
    MAX_TRACE_BYTES,
    SESSION_HEADER,
    SessionError,
    Sessions,
)

OPERATOR = "operator-key-0123456789"
TRACES = st.sampled_from(["a", "b", "trace-c", "\u00e9t\u00e9", "x" * 40, "lone-\ud800", "d"])
TOKENS = st.one_of(
    st.none(),
    st.sampled_from([15, 16, 17, 255, 256, 257]).map(lambda n: "t" * n),
    st.sampled_from(["token-one-0123456", "token-two-0123456", "token-three-01234"]),
)


def operations(
    traces: st.SearchStrategy[str], presented: st.SearchStrategy[str | None], max_size: int
) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    """Sequences of ``claim`` (trace, token or ``<owner>``, (fresh, operator key)) and
    ``permits`` (trace, presented token or ``<owner>``, operator key) operations on a
    session table."""
    keys = st.sampled_from([None, "", OPERATOR, "wrong-operator-key"])
    return st.lists(
        st.one_of(
            st.tuples(
                st.just("claim"),
                traces,
                st.one_of(TOKENS, st.just("<owner>")),
                st.tuples(st.booleans(), keys),
            ),
            st.tuples(
                st.just("permits"),
                traces,
                st.one_of(presented, st.just("<owner>")),
                keys,
            ),
        ),
        max_size=max_size,
    )


OPS = operations(TRACES, TOKENS, 30)
URLSAFE = set(string.ascii_letters + string.digits + "-_")


def _size(trace: str) -> int:
    return ENTRY_OVERHEAD + len(trace.encode("utf-8", "surrogatepass"))


class Model:
    def __init__(self, table: Sessions, max_bytes: int, operator: str | None) -> None:
        self.table = table
        self.max_bytes = max_bytes
        self.operator = operator
        self.owners: OrderedDict[str, str] = OrderedDict()
        self.orphan_bits: set[tuple[int, int]] = set()
        self.evicted = 0
        self.refused = 0

    def used(self) -> int:
        return sum(_size(t) for t in self.owners)

    def claim(self, trace: str, token: str | None, fresh: bool, operator: str | None) -> None:
        if token == "<owner>":
            token = self.owners.get(trace)
        if token is not None and not 16 <= len(token) <= 256:
            with pytest.raises(SessionError) as bad:
                self.table.claim(trace, token, fresh=fresh, operator=operator)
            assert bad.value.status == 400
            return
        op = bool(self.operator) and operator == self.operator
        if trace in self.owners:
            if op or token == self.owners[trace]:
                self.owners.move_to_end(trace)
                assert self.table.claim(trace, token, fresh=fresh, operator=operator) is None
                return
            self.refused += 1
            with pytest.raises(SessionError) as other:
                self.table.claim(trace, token, fresh=fresh, operator=operator)
            assert other.value.status == 403
            sent = "without a session token" if token is None else "with another session's token"
            assert other.value.message == (  # whose it is and what to send
                f"trace {trace!r} belongs to another session and this request came {sent}: "
                f"send that session's own {SESSION_HEADER} token (the one the trace's first "
                "answer carried, or the one its first request sent), or omit the trace id "
                "(the gateway mints one) or use an id of your own"
            )
            return
        if not fresh and self.table._bit(trace) in self.orphan_bits:
            if op:
                assert self.table.claim(trace, token, fresh=fresh, operator=operator) is None
                return
            self.refused += 1
            with pytest.raises(SessionError) as gone:
                self.table.claim(trace, token, fresh=fresh, operator=operator)
            assert gone.value.status == 403, "an orphaned trace was let through"
            assert gone.value.message == (
                f"trace {trace!r} belonged to a session the gateway no longer remembers (its "
                "owner table is full): nobody but the operator may use it now; omit the trace "
                "id (the gateway mints one) or use a new id of your own"
            )
            return
        got = self.table.claim(trace, token, fresh=fresh, operator=operator)
        if token is None:
            assert got is not None and len(got) == 32 and set(got) <= URLSAFE, got
            token = got
        else:
            assert got == token
        self.owners[trace] = token
        while self.used() > self.max_bytes:
            old, _ = self.owners.popitem(last=False)
            self.orphan_bits.add(self.table._bit(old))
            self.evicted += 1

    def permits(self, trace: str, token: str | None, operator: str | None) -> None:
        if token == "<owner>":
            token = self.owners.get(trace)
        want = None
        if self.operator and operator == self.operator:
            want = "operator"
        elif token and self.owners.get(trace) == token:
            want = "owner"
        if want is None:
            self.refused += 1
        assert self.table.permits(trace, token, operator) == want, (trace, token, operator)

    def check(self) -> None:
        stats = self.table.stats()
        assert stats["sessions"] == len(self.owners) == len(self.table)
        assert stats["session_bytes"] == self.used() <= self.max_bytes
        assert stats["sessions_evicted"] == self.evicted
        assert stats["session_refusals"] == self.refused


def run(ops: list[tuple[Any, ...]], room: int, operator: str | None) -> None:
    # room for `room` entries of the longest trace id, so the bound is met exactly at times
    max_bytes = (ENTRY_OVERHEAD + MAX_TRACE_BYTES) * room
    model = Model(Sessions(max_bytes, operator_key=operator), max_bytes, operator)
    for op, trace, token, extra in ops:
        if op == "claim":
            fresh, key = extra if isinstance(extra, tuple) else (extra, None)
            model.claim(trace, token, fresh, key)
        else:
            model.permits(trace, token, extra)
        model.check()


@pytest.mark.fak_theorem("D12")
@settings(deadline=None)
@given(ops=OPS, room=st.integers(1, 3), operator=st.sampled_from([None, OPERATOR]))
@example(
    ops=[
        ("claim", "x" * 40, None, False),
        ("claim", "a", "token-one-0123456", False),
        ("claim", "x" * 40, "<owner>", False),  # uses it: "a" is now the oldest
        ("claim", "x" * 40, None, False),  # no token on an owned trace: a 403
        ("claim", "a", "token-two-0123456", False),  # another token: a 403, not a use
        ("claim", "\u00e9t\u00e9", "t" * 16, False),
        ("claim", "lone-\ud800", "t" * 256, False),
        ("claim", "b", "t" * 257, False),
        ("claim", "a", "token-one-0123456", False),  # dropped: orphaned, a 403
        ("claim", "a", None, (False, OPERATOR)),  # but the operator passes
        ("claim", "a", None, (False, "wrong-operator-key")),
        ("claim", "a", None, True),  # and it binds if the gateway minted it just now
        ("claim", "a", None, (False, OPERATOR)),
        ("claim", "\u00e9t\u00e9", "t" * 17, (False, OPERATOR)),
        ("permits", "a", "<owner>", None),
        ("permits", "a", "token-two-0123456", "wrong-operator-key"),
        ("permits", "a", None, OPERATOR),
        ("permits", "a", None, ""),
        ("claim", "a", "token-two-0123456", False),
    ],
    room=2,
    operator=OPERATOR,
)
@example(  # a trace whose id is not valid UTF-8 (a lone surrogate) is dropped like any
    ops=[
        ("claim", "lone-\ud800", "t" * 256, False),
        ("claim", "x" * 40, None, False),
        ("claim", "a", None, False),
        ("claim", "lone-\ud800", "t" * 256, False),
    ],
    room=1,
    operator=None,
)
def test_the_owner_table_follows_the_model(
    ops: list[tuple[Any, ...]], room: int, operator: str | None
) -> None:
    run(ops, room, operator)


@pytest.mark.fak_theorem("D12")
def test_the_table_is_exactly_full_at_its_bound() -> None:
    """Entries that fill the bound to the byte all stay; one byte more drops the oldest."""
    size = _size("x" * 40)
    table = Sessions(size * 3, operator_key=None)
    for t in ("x" * 39 + "1", "x" * 39 + "2", "x" * 39 + "3"):
        assert table.claim(t, None) is not None
    assert table.stats()["session_bytes"] == size * 3 and table.stats()["sessions_evicted"] == 0
    assert table.claim("x" * 39 + "4", None) is not None
    assert table.stats()["sessions_evicted"] == 1
    with pytest.raises(SessionError) as gone:  # the oldest went, orphaned
        table.claim("x" * 39 + "1", None)
    assert gone.value.status == 403


LEAST = ENTRY_OVERHEAD + MAX_TRACE_BYTES  # one entry of the longest trace id


@pytest.mark.fak_theorem("D12")
@pytest.mark.parametrize("max_bytes", [LEAST - 1, ENTRY_OVERHEAD, 1, 0, -1])
def test_a_bound_too_small_for_one_entry_is_refused(max_bytes: int) -> None:
    with pytest.raises(ValueError, match=rf"\bat least {LEAST}\b"):
        Sessions(max_bytes)


@pytest.mark.fak_theorem("D12")
def test_the_least_bound_holds_one_entry_of_the_longest_trace() -> None:
    table = Sessions(LEAST)
    first, second = "a" * MAX_TRACE_BYTES, "b" * MAX_TRACE_BYTES
    token = table.claim(first, None)
    assert token is not None and table.permits(first, token, None) == "owner"
    assert table.claim(second, None) is not None  # the first is dropped to make room
    assert table.stats()["session_bytes"] == LEAST and table.stats()["sessions_evicted"] == 1


@pytest.mark.fak_theorem("D12")
def test_every_trace_id_can_be_bound_whatever_its_orphan_bit() -> None:
    """4,096 distinct ids land all over the salted bitmap: each is bound and read back by
    its owner. A bitmap short by a ninth (``ORPHAN_BITS // 9`` bytes) would go unnoticed
    with odds of about 1e-209."""
    table = Sessions()
    for i in range(4096):
        trace = f"trace-{i}"
        token = table.claim(trace, None)
        assert token is not None, trace
        assert table.permits(trace, token, None) == "owner", trace
