"""Which sessions share a forgotten bucket (C4.10): the theorem's bucket of a trace id
(the first 8 bytes of the BLAKE2b digest of its UTF-8 bytes, lone surrogates as
``surrogatepass`` writes them, big-endian, modulo 4096) computed here with ``hashlib``
from that text, for ids of ASCII, of multi-byte letters and with a lone surrogate. A
store that keeps one session evicts the first id of each pair; then an id the store never
held reads as forgotten exactly when its bucket is the evicted id's.
"""

from __future__ import annotations

import hashlib
import itertools

import pytest

from fak_core.confidential import ConfidentialStore

FORGOTTEN = ("", "a session whose confidential values may have been forgotten")


def _bucket(trace_id: str) -> int:
    data = trace_id.encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big") % 4096


def _ids(stem: str) -> list[str]:
    """The stem, an id sharing its bucket and one that does not (of the same spelling)."""
    first = _bucket(stem)
    same = next(f"{stem}{i}" for i in itertools.count() if _bucket(f"{stem}{i}") == first)
    other = next(f"{stem}{i}" for i in itertools.count() if _bucket(f"{stem}{i}") != first)
    return [stem, same, other]


@pytest.mark.fak_theorem("C4.10")
@pytest.mark.parametrize("stem", ["trace", "séance-日本", "s\udc80", "\U0001f600\udfff-x"])
def test_an_id_reads_as_forgotten_exactly_when_it_shares_the_evicted_ids_bucket(
    stem: str,
) -> None:
    evicted, same, other = _ids(stem)
    store = ConfidentialStore(max_sessions=1)
    store.record(evicted, ["AAA111"], "bank")
    store.record("kept", ["BBB222"], "bank")  # evicts the first: its bucket is marked
    assert store.carried(evicted, {"body": "hello"}) == FORGOTTEN
    assert store.carried(same, {"body": "hello"}) == FORGOTTEN
    assert store.carried(other, {"body": "hello"}) is None
    store.record(other, ["CCC333"], "bank")  # evicts "kept"; made in a clean bucket
    assert store.carried(other, {"body": "hello"}) is None
    assert store.carried(other, {"body": "ccc333"}) == ("/body", "bank")
    store.record(same, ["DDD444"], "bank")  # made in the marked bucket
    assert store.carried(same, {"body": "hello"}) == FORGOTTEN
