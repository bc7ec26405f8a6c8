"""Session owners in the shared Redis: one owner per trace across every replica.

The same rules as :class:`~fak_core.gateway.sessions.Sessions` (first credential to use a
trace owns it; only SHA-256 digests are stored and compared in constant time), with the
owner table in Redis (``fak:owner:<trace>``, claimed by one script under the epoch
guard). An owner key expires with its trace's taint mark (one sliding expiry, refreshed
on every claim, read and decision; :mod:`fak_core.redis_state`); a trace that was raised
above TRUSTED and whose keys expired is *orphaned* (its bit in the shared orphan bitmap),
so nobody may claim it afresh, as an evicted owner in one process. A minted trace id is
new by construction and is never taken for an orphan. A new session is refused (503)
while Redis is near its ``maxmemory`` (:meth:`RedisState.full`), so that the sessions
already open keep the room left. When Redis cannot be reached, a claim is put off (no
token is handed out; every decision that needs the shared state is refused
DENY/STATE_DOWN anyway) and a read or reset of a trace raises
:class:`~fak_core.statedown.StateUnavailable` (a 503).
"""

from __future__ import annotations

import hmac
import secrets

from fak_core.gateway.sessions import (
    _MAX_TOKEN,
    _MIN_TOKEN,
    SESSION_HEADER,
    SessionError,
    Sessions,
    _digest,
)
from fak_core.redis_state import TRACE_LUA, RedisState
from fak_core.statedown import StateUnavailable

__all__ = ["RedisSessions"]

# ARGV: the epoch, the digest, the trace, its expiry (ms), 1 when minted, 1 when full.
# {0, owner}: owned; {1, digest}: claimed; {2}: orphaned; {3}: Redis is full.
_CLAIM = (
    TRACE_LUA
    + """
local t = ARGV[3]
local cur = redis.call('GET', KEYS[2])
if cur then
  life(t, ARGV[4])
  return {0, cur}
end
if ARGV[5] ~= '1' and orphaned(t) then return {2, ''} end
if ARGV[6] == '1' then return {3, ''} end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[4])
life(t, ARGV[4])
return {1, ARGV[2]}
"""
)
_OWNER = (
    TRACE_LUA
    + """
local cur = redis.call('GET', KEYS[2])
if cur then life(ARGV[2], ARGV[3]) end
return cur
"""
)
PREFIX = "fak:owner:"


class RedisSessions(Sessions):
    """:class:`Sessions` whose owner table lives in Redis."""

    def __init__(self, state: RedisState, operator_key: str | None = None) -> None:
        super().__init__(operator_key=operator_key)
        self.state = state
        self._claim = state.script(_CLAIM)
        self._owner = state.script(_OWNER)
        #: Claims put off because Redis could not be reached.
        self.deferred = 0
        #: Claims of a forgotten (expired, once tainted) trace, refused.
        self.orphaned = 0
        #: New sessions refused because Redis was near its maxmemory.
        self.full_refusals = 0

    def claim(self, trace: str, token: str | None, *, fresh: bool = False) -> str | None:
        if token is not None and not _MIN_TOKEN <= len(token) <= _MAX_TOKEN:
            raise SessionError(
                400,
                f"{SESSION_HEADER}: a session token is {_MIN_TOKEN} to {_MAX_TOKEN} "
                "characters; drop the header and the gateway mints one",
            )
        minted = token is None
        if token is None:
            token = secrets.token_urlsafe(24)
        given = _digest(token)
        try:
            full = self.state.full()
            args = [given.hex(), trace, self.state.ttl_ms, int(fresh), int(full is not None)]
            won, owner = self.state.run(self._claim, [PREFIX + trace], args)
        except StateUnavailable:
            # Put off, not failed open: the request goes on without a token and anything it
            # asks of the shared state is refused STATE_DOWN; a later request claims.
            self.deferred += 1
            return None
        status = int(won)
        if status == 1:
            return token
        if status == 2:  # forgotten: nobody claims it afresh (the ledger reads it tainted)
            with self._lock:
                self.orphaned += 1
            return None
        if status == 3:
            with self._lock:
                self.full_refusals += 1
            raise SessionError(503, f"no new session: {full}")
        owner_hex = owner.decode() if isinstance(owner, bytes) else str(owner)
        if not minted and not hmac.compare_digest(given.hex(), owner_hex):
            raise SessionError(
                403,
                f"trace {trace!r} belongs to another session: send its own "
                f"{SESSION_HEADER} token, or use a trace id of your own",
            )
        return None

    def permits(self, trace: str, token: str | None, operator: str | None) -> str | None:
        op = _digest(operator or "")
        tok = _digest(token or "").hex()
        owner = self.state.run(self._owner, [PREFIX + trace], [trace, self.state.ttl_ms])
        owner_hex = "" if owner is None else (owner.decode() if isinstance(owner, bytes) else "")
        expected = self._operator
        operator_ok = expected is not None and hmac.compare_digest(op, expected) and bool(operator)
        owner_ok = bool(owner_hex) and hmac.compare_digest(tok, owner_hex) and bool(token)
        if operator_ok:
            return "operator"
        if owner_ok:
            return "owner"
        with self._lock:
            self.refused += 1
        return None

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "session_refusals": self.refused,
                "session_claims_deferred": self.deferred,
                "sessions_orphaned": self.orphaned,
                "sessions_refused_full": self.full_refusals,
                "session_ttl_ms": self.state.ttl_ms,
            }

    def __len__(self) -> int:
        return 0
