"""C4.8's resolver as built: its key, its clock and its nonce store.

An approval resolver refuses a key under 32 bytes (so nothing is minted or checked under a
short key), checks expiry against the clock it is given, and spends nonces in the store it
is given (the shared one across replicas), else in one of its own. The oracles are the
byte length the test wrote, the test's own clock, and a recording store written here.
"""

from __future__ import annotations

import pytest

from fak_core import ToolCall
from fak_core.adjudicators import WitnessOutcome
from fak_core.approvals import ApprovalResolver, MemoryNonces, mint_approval

NOW = 2_000_000.0


class _Recording:
    """A nonce store that records every spend and refuses a second one."""

    def __init__(self) -> None:
        self.spent: list[tuple[str, int, float]] = []

    def spend(self, nonce: str, expires: int, now: float) -> str | None:
        seen = any(n == nonce for n, _, _ in self.spent)
        self.spent.append((nonce, expires, now))
        return "spent" if seen else None

    def remembers_since(self) -> None:
        return None  # as a shared store: it outlives any one resolver


def _call(token: str) -> ToolCall:
    return ToolCall.make("pay", '{"to": "x"}', "s", meta={"witness": token})


@pytest.mark.fak_theorem("C4.8")
@pytest.mark.parametrize("size", [0, 1, 16, 31, 32, 33, 64])
def test_a_key_under_32_bytes_is_refused(size: int) -> None:
    key = b"k" * size
    if size < 32:
        with pytest.raises(ValueError, match="32 bytes"):
            ApprovalResolver(key)
        return
    resolver = ApprovalResolver(key, clock=lambda: NOW)
    token = mint_approval(key, "s", "pay", {"to": "x"}, 60, NOW)
    assert resolver.resolve(_call(token), "claim") == WitnessOutcome.CONFIRMED
    other = ApprovalResolver(b"o" * size, clock=lambda: NOW)
    assert other.resolve(_call(token), "claim") == WitnessOutcome.REFUTED


@pytest.mark.fak_theorem("C4.8")
@pytest.mark.parametrize("age", [0, 59, 60, 61, 3600])
def test_expiry_is_read_on_the_resolvers_clock(age: int) -> None:
    key = b"c" * 32
    token = mint_approval(key, "s", "pay", {"to": "x"}, 60, NOW)
    # the store started before the mint (the gateway was running): only expiry decides
    store = MemoryNonces(started=NOW)
    resolver = ApprovalResolver(key, clock=lambda: NOW + age, nonces=store)
    expected = WitnessOutcome.CONFIRMED if age < 60 else WitnessOutcome.REFUTED
    assert resolver.resolve(_call(token), "claim") == expected


@pytest.mark.fak_theorem("C4.8")
def test_nonces_are_spent_in_the_store_given_else_its_own() -> None:
    key = b"n" * 32
    store = _Recording()
    shared = ApprovalResolver(key, clock=lambda: NOW, nonces=store)
    token = mint_approval(key, "s", "pay", {"to": "x"}, 60, NOW)
    assert shared.resolve(_call(token), "claim") == WitnessOutcome.CONFIRMED
    assert [(e, n) for _, e, n in store.spent] == [(int(NOW) + 60, NOW)]
    # another resolver on the same store sees the spend (replicas share it)
    again = ApprovalResolver(key, clock=lambda: NOW, nonces=store)
    assert again.resolve(_call(token), "claim") == WitnessOutcome.REFUTED
    # two resolvers with their own stores do not share: each spends once
    fresh = mint_approval(key, "s", "pay", {"to": "x"}, 60, NOW)
    a = ApprovalResolver(key, clock=lambda: NOW)
    b = ApprovalResolver(key, clock=lambda: NOW)
    assert a.resolve(_call(fresh), "claim") == WitnessOutcome.CONFIRMED
    assert a.resolve(_call(fresh), "claim") == WitnessOutcome.REFUTED
    assert b.resolve(_call(fresh), "claim") == WitnessOutcome.CONFIRMED
    assert len(store.spent) == 2
