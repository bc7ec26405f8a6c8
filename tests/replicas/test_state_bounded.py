"""C4.12: the shared state is bounded and expires closed, on a real ``redis-server``.

Generated scripts of claims (minted or client-chosen ids, with or without a token),
raises, reads and resets over four traces, each step sent to one of two replicas (two
connections), with idle spells longer than the expiry. After every step every owner and
taint key carries an expiry no longer than the configured one, a trace's two keys carry
the same one, and each trace reads (on both replicas) at least the join of the marks
raised on it since its last reset; after an idle spell every trace raised above TRUSTED
reads QUARANTINED on both replicas and no client may claim its id afresh, while a trace
never raised is new again. Memory: a Redis at 90 % of its ``maxmemory`` refuses the
start, refuses new sessions (503, naming it) while an open session still claims, reads
and raises, and ``/healthz`` says why.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fak_core.admission import HeldStore
from fak_core.gateway.bootstrap import BootstrapError
from fak_core.gateway.redis_sessions import PREFIX, RedisSessions
from fak_core.gateway.replicas import open_shared
from fak_core.gateway.sessions import SessionError, orphaned
from fak_core.redis_state import ORPHAN_KEY, RedisState, memory_problem
from fak_core.redis_stores import RedisHeldStore, RedisLedger
from fak_core.statedown import StateUnavailable
from fak_core.taint import Taint

from .support import RedisServer, close_states, closing  # noqa: F401 (autouse fixture)

#: What a Redis at 90 % of its maxmemory is told, with any figures.
FULL = (
    r"Redis holds \d+ bytes of its maxmemory \d+ \(at least 90%\): new sessions are "
    r"refused so that open ones keep working; raise maxmemory, lower --state-ttl, or wait "
    r"for idle sessions to expire"
)
TTL = 0.4  # seconds: long enough for a step on a loaded machine, short to wait out
TRACES = ("t0", "t1", "t2", "t3")
STEP = st.tuples(
    st.integers(0, 1),  # the replica
    st.sampled_from(["claim", "claim-minted", "raise", "raise", "level", "reset", "idle"]),
    st.integers(0, len(TRACES) - 1),
    st.sampled_from(Taint),
)
_PTTLS = """
local out = {}
for i, k in ipairs(KEYS) do
  out[2 * i - 1] = redis.call('PTTL', k)
  out[2 * i] = redis.call('PEXPIRETIME', k)
end
return out
"""


OPERATOR = "operator-key-of-this-test"


class Replica:
    def __init__(self, url: str) -> None:
        self.state = closing(RedisState(url, ttl=TTL))
        self.state.check()
        self.ledger = RedisLedger(self.state)
        self.sessions = RedisSessions(self.state, operator_key=OPERATOR)


def _keys(state: RedisState, trace: str) -> list[int]:
    """The PTTL of ``trace``'s owner and mark keys (-2: none)."""
    return _expiry(state, trace)[0::2]


def _expiry(state: RedisState, trace: str) -> list[int]:
    """Owner PTTL, owner PEXPIRETIME (the instant, in ms), mark PTTL, mark PEXPIRETIME."""
    keys = [PREFIX + trace, RedisLedger.PREFIX + trace]
    return [int(n) for n in state.client.eval(_PTTLS, len(keys), *keys)]


class Model:
    """C4.12's trace keys as its text states them: a live mark (None: no key), a live
    owner, and the orphan bit of every trace ever raised above TRUSTED."""

    def __init__(self) -> None:
        self.mark: dict[str, Taint] = {}
        self.owned: set[str] = set()
        self.bit: set[str] = set()

    def level(self, t: str) -> Taint:
        if t in self.mark:
            return self.mark[t]
        if t in self.owned or t not in self.bit:
            return Taint.TRUSTED
        return Taint.QUARANTINED

    def raise_to(self, t: str, taint: Taint) -> Taint:
        cur = self.level(t)
        new = max(cur, taint)
        if new > Taint.TRUSTED:
            self.mark[t] = new
            self.bit.add(t)
        return new

    def expire(self) -> None:
        self.mark.clear()
        self.owned.clear()


@pytest.mark.fak_theorem("C4.12")
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(STEP, min_size=1, max_size=12))
@example(
    [
        (0, "claim", 0, Taint.TRUSTED),
        (0, "raise", 0, Taint.TAINTED),
        (1, "claim", 1, Taint.TRUSTED),
        (0, "claim", 1, Taint.TRUSTED),  # owned by another token: 403
        (1, "claim-minted", 2, Taint.TRUSTED),
        (1, "idle", 0, Taint.TRUSTED),
        (1, "claim", 0, Taint.TRUSTED),
        (0, "level", 0, Taint.TRUSTED),
        (0, "reset", 0, Taint.TRUSTED),
        (1, "level", 0, Taint.TRUSTED),
        (0, "claim", 1, Taint.TRUSTED),
        (0, "idle", 0, Taint.TRUSTED),
        (1, "raise", 0, Taint.TRUSTED),
    ]
)
def test_a_trace_expires_whole_and_a_forgotten_mark_reads_tainted(
    redis_server: RedisServer, steps: list[tuple[int, str, int, Taint]]
) -> None:
    replicas = (Replica(redis_server.url), Replica(redis_server.url))
    run = uuid.uuid4().hex[:8]  # ids of this example's own
    names = [f"{run}-{name}" for name in TRACES]
    model = Model()
    for side, op, pick, taint in steps:
        r = replicas[side]
        trace = names[pick]
        if op == "idle":
            time.sleep(TTL + 0.1)
            model.expire()
            for t in names:
                assert _keys(r.state, t) == [-2, -2]  # both gone
        elif op == "claim":
            status = 0
            try:
                got = r.sessions.claim(trace, f"token-{uuid.uuid4().hex}")
            except SessionError as exc:
                status = exc.status
            if trace in model.owned:
                assert status == 403  # owned by another token
            elif trace in model.bit:  # raised, and no owner (expired, or never claimed)
                assert status == 403  # an orphan: refused to all but the operator
            else:
                assert status == 0 and got is not None
                model.owned.add(trace)
        elif op == "claim-minted":
            fresh = f"{run}-gw-{uuid.uuid4().hex}"
            minted = r.sessions.claim(fresh, None, fresh=True)
            assert minted is not None and len(minted) == 32  # 192 bits, URL-safe
            assert r.ledger.level(fresh) == Taint.TRUSTED
            assert _keys(r.state, fresh)[1] == -2  # no mark written for a read
        elif op == "raise":
            assert r.ledger.raise_to(trace, taint) == model.raise_to(trace, taint)
        elif op == "reset":
            r.ledger.reset(trace)
            model.mark[trace] = Taint.TRUSTED
        else:
            assert r.ledger.level(trace) == model.level(trace)
        for t in names:  # both replicas read what the model holds
            for other in replicas:
                assert other.ledger.level(t) == model.level(t), (t, op)
        for t in names:  # every key lives at most the expiry, a trace's two together
            owner, owner_at, mark, mark_at = _expiry(r.state, t)
            assert (owner != -2) is (t in model.owned), t
            assert (mark != -2) is (t in model.mark), t
            for pttl in (owner, mark):
                assert pttl == -2 or 0 < pttl <= r.state.ttl_ms, (t, owner, mark)
            # one instant (not two PTTLs read a millisecond apart)
            assert -2 in (owner, mark) or owner_at == mark_at, (t, owner_at, mark_at)


@pytest.mark.fak_theorem("C4.12", "D12")
@settings(max_examples=4, deadline=None)
@given(st.booleans())
def test_an_expired_tainted_trace_is_orphaned_but_a_minted_id_never_is(
    redis_server: RedisServer, minted_first: bool
) -> None:
    a, b = Replica(redis_server.url), Replica(redis_server.url)
    trace = f"orphan-{uuid.uuid4().hex}"
    token = a.sessions.claim(trace, None, fresh=minted_first)
    assert token is not None
    a.ledger.raise_to(trace, Taint.TAINTED)
    assert b.sessions.claim(trace, token) is None  # the owner, on the other replica
    time.sleep(TTL + 0.1)
    assert b.ledger.level(trace) == Taint.QUARANTINED
    for table, sent in ((a.sessions, token), (b.sessions, None)):  # not even its old token
        with pytest.raises(SessionError) as refused:
            table.claim(trace, sent)
        assert refused.value.status == 403
        assert refused.value.message == orphaned(trace)
    assert a.sessions.claim(trace, None, operator=OPERATOR) is None  # the operator acts on it
    assert a.sessions.stats() == {
        "session_refusals": 1,
        "session_claims_state_down": 0,
        "sessions_orphaned": 1,
        "sessions_refused_full": 0,
        "session_ttl_ms": 400,
    }
    assert b.ledger.raise_to(trace, Taint.TRUSTED) == Taint.QUARANTINED  # starts there
    # the gateway mints ids it never handed out: one that shares the bit still claims
    assert b.sessions.claim(trace + "-x", None, fresh=True) is not None
    bits = int(a.state.client.bitcount(ORPHAN_KEY))
    assert 1 <= bits <= a.state.client.strlen(ORPHAN_KEY) * 8


def _used(server: RedisServer) -> int:
    info = server.command("INFO", "memory")
    return int(next(ln for ln in info.splitlines() if ln.startswith("used_memory:"))[12:])


@pytest.mark.fak_theorem("C4.4", "C4.12", "D12")
@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.one_of(st.floats(1.03, 1.08), st.floats(1.2, 3.0)))
def test_a_redis_near_its_maxmemory_refuses_new_sessions_first(
    own_redis: RedisServer, factor: float
) -> None:
    full = factor < 1 / 0.9
    url = own_redis.url
    open_shared(url).close()  # the epoch, written before the limit
    a = Replica(url)
    owned = f"open-{uuid.uuid4().hex}"
    token = a.sessions.claim(owned, None)
    assert token is not None
    own_redis.command("CONFIG", "SET", "maxmemory", str(int(_used(own_redis) * factor)))
    try:
        if full:
            with pytest.raises(BootstrapError) as start:
                open_shared(url)
            assert re.fullmatch(f"--state {re.escape(url)}: {FULL}", str(start.value))
        else:
            open_shared(url).close()
        a.state._memory = (float("-inf"), 0, 0)  # read the figures now, not in a second
        if full:
            with pytest.raises(SessionError) as info:
                a.sessions.claim(f"new-{uuid.uuid4().hex}", None)
            assert info.value.status == 503
            assert re.fullmatch(f"no new session: {FULL}", info.value.message)
            assert a.sessions.stats()["sessions_refused_full"] == 1
        else:
            assert a.sessions.claim(f"new-{uuid.uuid4().hex}", None) is not None
        assert a.sessions.claim(owned, token) is None  # the open session goes on
        assert a.ledger.raise_to(owned, Taint.TAINTED) == Taint.TAINTED
        probe: dict[str, Any] = asyncio.run(_probe(a.state))
        assert probe["ok"] is not full, probe
        assert probe["maxmemory"] == int(own_redis.command("CONFIG", "GET", "maxmemory").split()[1])
        if full:
            assert re.fullmatch(FULL, probe["error"])
        else:
            assert "error" not in probe
    finally:
        own_redis.command("CONFIG", "SET", "maxmemory", "0")
    own_redis.stop()  # a claim that cannot read the figures is refused (503), counted
    a.state._memory = (float("-inf"), 0, 0)
    failures = a.state.failures
    lost = f"new-{uuid.uuid4().hex}"
    with pytest.raises(StateUnavailable) as down:
        a.sessions.claim(lost, None)
    assert f"who owns trace {lost!r} cannot be checked" in str(down.value)
    assert a.sessions.stats()["session_claims_state_down"] == 1
    assert a.state.failures == failures + 1
    assert a.state.last_error.startswith("shared state unavailable (ConnectionError")
    own_redis.start()


@pytest.mark.fak_theorem("C4.4", "C4.12")
@pytest.mark.parametrize("denied", ["info", "setbit", "strlen"])
def test_a_redis_that_hides_its_memory_refuses_the_start(
    own_redis: RedisServer, denied: str
) -> None:
    own_redis.command("ACL", "SETUSER", "u", "on", ">pw", "~*", "&*", "+@all", f"-{denied}")
    url = f"redis://u:pw@127.0.0.1:{own_redis.port}/0"
    with pytest.raises(BootstrapError) as info:
        open_shared(url)
    message = str(info.value)
    assert message.startswith(f"--state {url}: cannot size the orphan bitmap or read the ")
    assert "no permissions" in message
    assert message.endswith("; STRLEN, SETBIT and INFO must be allowed")
    assert own_redis.command("EXISTS", "fak:epoch") == "0"  # refused before the epoch


async def _probe(state: RedisState) -> dict[str, Any]:
    try:
        return await state.aprobe()
    finally:
        if state._aclient is not None:
            await state._aclient.aclose()
            state._aclient = None


PAYLOADS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300)


@pytest.mark.fak_theorem("C4.7", "C4.12")
@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["p1", "p2", "p3", "p4"]), PAYLOADS), max_size=12),
    st.integers(1, 900),
)
def test_held_results_in_redis_are_bounded_in_bytes_as_in_one_process(
    redis_server: RedisServer, holds: list[tuple[str, str]], max_bytes: int
) -> None:
    state = closing(RedisState(redis_server.url))
    state.check()
    state.client.delete("fak:heldq", "fak:heldbytes")  # one store per example
    run = uuid.uuid4().hex[:6]  # keys of this example's own (same length each time)
    shared = RedisHeldStore(state, limit=3, max_bytes=max_bytes)
    local = HeldStore(limit=3, max_bytes=max_bytes)
    for key, payload in holds:
        shared.hold(payload, run + key)
        local.hold(payload, run + key)
        for k in ("p1", "p2", "p3", "p4"):
            assert shared.get(run + k) == local.get(run + k), k
        assert int(state.client.get("fak:heldbytes") or 0) == local.stats()["held_bytes"]


@pytest.mark.fak_theorem("C4.12")
@pytest.mark.parametrize(("length", "ok"), [(15, False), (16, True), (256, True), (257, False)])
def test_a_session_token_is_16_to_256_characters(
    redis_server: RedisServer, length: int, ok: bool
) -> None:
    r = Replica(redis_server.url)
    trace = f"tok-{uuid.uuid4().hex}"
    if ok:
        assert r.sessions.claim(trace, "t" * length) == "t" * length
        return
    with pytest.raises(SessionError) as info:
        r.sessions.claim(trace, "t" * length)
    assert info.value.status == 400
    assert info.value.message == (
        "x-fak-session: a session token is 16 to 256 characters; drop the header and the "
        "gateway mints one"
    )


@pytest.mark.fak_theorem("C4.12")
@given(st.integers(0, 1 << 40), st.integers(0, 1 << 40))
@example(9, 10)  # exactly 90 %
@example(1, 1)
@example(5, 0)  # no maxmemory: never full
def test_full_is_90_percent_of_a_set_maxmemory(used: int, most: int) -> None:
    problem = memory_problem(used, most)
    if most > 0 and used * 10 >= most * 9:
        assert problem is not None and re.fullmatch(FULL, problem)
        assert f"Redis holds {used} bytes of its maxmemory {most} " in problem
    else:
        assert problem is None
