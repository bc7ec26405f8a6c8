"""The shared grounding store's untrusted content at its byte bound (C4.7), against a real
redis-server: an untrusted text of plain words costs the UTF-8 bytes of its words joined
and padded by one space, of its specials other than words written one a line between
newlines (none here: two newlines), of its origin, and 96. Two texts are recorded under
bounds one byte under, at and one byte over each text's cost and their sum; the texts
kept are the newest that fit, and a refusal names the origin of a kept text only.
"""

from __future__ import annotations

import uuid

import pytest

from fak_core.redis_state import RedisState
from fak_core.redis_stores import RedisGroundingStore

from .support import RedisServer

FIRST = ("alpha beta", "o1")
SECOND = ("gamma", "s\u00e9arch")  # an origin of 6 characters and 7 bytes


def _cost(text: str, origin: str) -> int:
    return len(f" {text} ".encode()) + 2 + len(origin.encode()) + 96


def _bounds() -> list[int]:
    one, two = _cost(*FIRST), _cost(*SECOND)
    return sorted({b + d for b in (one, two, one + two) for d in (-1, 0, 1)})


@pytest.mark.fak_theorem("C4.7")
def test_untrusted_texts_are_kept_while_their_bytes_fit_the_bound(
    redis_server: RedisServer,
) -> None:
    state = RedisState(redis_server.url, timeout=0.5)
    state.check()
    try:
        for bound in _bounds():
            store = RedisGroundingStore(state, 10**6, bound, 10**9)
            trace = "u-" + uuid.uuid4().hex
            store.record_untrusted(trace, *FIRST)
            store.record_untrusted(trace, *SECOND)
            one, two = _cost(*FIRST), _cost(*SECOND)
            second_kept = two <= bound
            first_kept = one + two <= bound
            assert store.origin_of(trace, "gamma") == (SECOND[1] if second_kept else None), bound
            assert store.origin_of(trace, "alpha") == (FIRST[1] if first_kept else None), bound
            alone = "u-" + uuid.uuid4().hex
            store.record_untrusted(alone, *FIRST)
            assert store.origin_of(alone, "beta") == (FIRST[1] if one <= bound else None), bound
    finally:
        state.close()
