"""C4.10: the confidential store keeps its most recently recorded sessions.

Recording into a session that is already kept makes it the most recent one, so the next
eviction takes another: the one recorded longest ago. Every order of re-recording is
driven, against a list of ids ordered by hand (the oracle) and trace ids whose forgotten
buckets are distinct, so an id reads as forgotten exactly when it was evicted.
"""

from __future__ import annotations

import itertools

import pytest

from fak_core.confidential import ConfidentialStore, _bucket

FORGOTTEN = ("", "a session whose confidential values may have been forgotten")


def _ids(n: int) -> list[str]:
    """``n`` trace ids in distinct buckets."""
    out: list[str] = []
    for i in itertools.count():
        tid = f"s{i}"
        if _bucket(tid) not in {_bucket(t) for t in out}:
            out.append(tid)
        if len(out) == n:
            return out
    raise AssertionError("unreachable")


IDS = _ids(4)
SECRET = {tid: f"SECRET{n}{n}{n}000" for n, tid in enumerate(IDS)}


@pytest.mark.fak_theorem("C4.10")
@pytest.mark.parametrize("again", list(itertools.permutations(IDS[:3], 2)))
@pytest.mark.parametrize("same_values", [True, False])
def test_a_session_recorded_again_is_kept_over_one_recorded_before_it(
    again: tuple[str, str], same_values: bool
) -> None:
    store = ConfidentialStore(max_sessions=3)
    order: list[str] = []  # least recently recorded first

    def record(tid: str, values: list[str]) -> None:
        store.record(tid, values, "profile")
        if tid in order:
            order.remove(tid)
        order.append(tid)

    for tid in IDS[:3]:
        record(tid, [SECRET[tid]])
    for tid in again:  # recorded again while kept
        record(tid, [SECRET[tid]] if same_values else [SECRET[tid], f"OTHER{tid}999"])
    record(IDS[3], [SECRET[IDS[3]]])  # one too many: the least recent leaves
    gone = order.pop(0)
    assert store.carried(gone, {"to": "hello"}) == FORGOTTEN
    for tid in order:
        assert store.carried(tid, {"to": "hello"}) is None, tid
        assert store.carried(tid, {"to": SECRET[tid].lower()}) == ("/to", "profile"), tid
