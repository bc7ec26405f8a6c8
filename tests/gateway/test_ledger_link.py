"""C4.11 through the gateway's owner table: a claim that binds a new owner begins the
trace in the ledger, charged to the caller's credential (else its address), so a fresh
session reads TRUSTED however many tainted marks another credential pushed out (and D12's:
the session's marks are charged to whoever opened it)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core.gateway.sessions import CALLER, Sessions
from fak_core.gateway.state import GatewayState
from fak_core.kernel import Kernel
from fak_core.ledger import ENTRY_OVERHEAD, OWNER_OVERHEAD, MemoryLedger
from fak_core.taint import Taint


@pytest.mark.fak_theorem("C4.11", "D12")
@given(
    st.integers(1, 60),
    st.booleans(),
    st.sampled_from(["", "cred-digest"]),
    st.sampled_from(["", "198.51.100.7"]),
)
def test_a_claimed_session_starts_clean_after_a_flood(
    flood: int, minted: bool, victim_credential: str, victim_address: str
) -> None:
    ledger = MemoryLedger(limit=4, max_bytes=100_000, buckets=1)
    state = GatewayState(Kernel(ledger=ledger))
    state.sessions = Sessions()  # a table given later is wired to the ledger too
    token = CALLER.set(("203.0.113.9", "flooder-digest"))
    try:
        for n in range(flood):
            assert state.sessions.claim(f"flood-{n}", None, fresh=True) is not None
            ledger.raise_to(f"flood-{n}", Taint.QUARANTINED)
    finally:
        CALLER.reset(token)
    assert ledger.owner_bytes("flooder-digest") > 0
    token = CALLER.set((victim_address, victim_credential))
    try:
        victim = state.sessions.claim("victim", None, fresh=minted)
        assert victim is not None
        assert state.sessions.claim("victim", victim) is None  # already owned: no new begin
    finally:
        CALLER.reset(token)
    # the credential, else the address, else the in-process owner ""
    owner = victim_credential or (f"client:{victim_address}" if victim_address else "")
    own = OWNER_OVERHEAD + len(owner)  # the owner's own bookkeeping, and its one mark
    assert ledger.owner_bytes(owner) == own + ENTRY_OVERHEAD + len("victim")
    assert ledger.level("victim") == Taint.TRUSTED
    if flood > 4:  # the flood evicted its own marks: they still read tainted
        assert ledger.level("flood-0") == Taint.QUARANTINED


@pytest.mark.fak_theorem("C4.11")
def test_a_ledger_without_begin_still_claims() -> None:
    """A ledger that cannot begin sessions (a shared one expires instead) is left alone."""

    class Plain(MemoryLedger):
        begin = None  # type: ignore[assignment]

    ledger = Plain(limit=4, max_bytes=100_000)
    state = GatewayState(Kernel(ledger=ledger))
    assert state.sessions.claim("t", None, fresh=True) is not None
    assert len(ledger) == 0 and ledger.level("t") == Taint.TRUSTED
