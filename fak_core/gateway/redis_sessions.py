"""Session owners in the shared Redis: one owner per trace across every replica.

The same rules as :class:`~fak_core.gateway.sessions.Sessions` (first credential to use a
trace owns it; only SHA-256 digests are stored and compared in constant time), with the
owner table in Redis (``fak:owner:<trace>``, claimed by one script under the epoch
guard). An owner key expires with its trace's taint mark (one sliding expiry, refreshed
on every claim, read and decision; :mod:`fak_core.redis_state`); a trace that was raised
above TRUSTED and whose keys expired is *orphaned* (its bit in the shared orphan bitmap):
as an evicted owner in one process, it is refused (403) to everyone but the operator and
nobody claims it afresh. A minted trace id is new by construction and is never taken for
an orphan. A new session is refused (503) while Redis is near its ``maxmemory``
(:meth:`RedisState.full`), so that the sessions already open keep the room left. When
Redis cannot be reached, nobody can tell who owns a trace, so a claim, a read and a reset
all raise :class:`~fak_core.statedown.StateUnavailable` (a 503 naming the trace):
unknown ownership is never taken for the owner's, and no token is handed out.
"""

from __future__ import annotations

import hmac
import secrets

from fak_core.gateway.sessions import (
    SessionError,
    Sessions,
    _check_token,
    _digest,
    not_yours,
    orphaned,
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
        #: Requests refused because Redis could not be reached to check the trace's owner.
        self.state_down = 0
        #: Claims of a forgotten (expired, once tainted) trace, refused.
        self.orphaned = 0
        #: New sessions refused because Redis was near its maxmemory.
        self.full_refusals = 0

    def claim(
        self,
        trace: str,
        token: str | None,
        *,
        fresh: bool = False,
        operator: str | None = None,
    ) -> str | None:
        _check_token(token)
        op = self.is_operator(operator)
        minted = token is None
        if token is None:
            token = secrets.token_urlsafe(24)
        given = _digest(token)
        try:
            full = self.state.full()
            args = [given.hex(), trace, self.state.ttl_ms, int(fresh), int(full is not None)]
            won, owner = self.state.run(self._claim, [PREFIX + trace], args)
        except StateUnavailable as exc:
            # Who owns the trace is unknown: refused (a 503), never taken for the owner's.
            with self._lock:
                self.state_down += 1
            raise StateUnavailable(
                f"{exc}; who owns trace {trace!r} cannot be checked, so the request was "
                "refused: retry once the shared state is back"
            ) from None
        status = int(won)
        if status == 1:
            return token
        if status == 2:  # forgotten: nobody claims it afresh (the ledger reads it tainted)
            if op:
                return None
            with self._lock:
                self.orphaned += 1
                self.refused += 1
            raise SessionError(403, orphaned(trace))
        if status == 3:
            with self._lock:
                self.full_refusals += 1
            raise SessionError(503, f"no new session: {full}")
        owner_hex = owner.decode() if isinstance(owner, bytes) else str(owner)
        if op or (not minted and hmac.compare_digest(given.hex(), owner_hex)):
            return None
        with self._lock:
            self.refused += 1
        raise SessionError(403, not_yours(trace, None if minted else token))

    def permits(self, trace: str, token: str | None, operator: str | None) -> str | None:
        tok = _digest(token or "").hex()
        owner = self.state.run(self._owner, [PREFIX + trace], [trace, self.state.ttl_ms])
        owner_hex = "" if owner is None else (owner.decode() if isinstance(owner, bytes) else "")
        operator_ok = self.is_operator(operator)
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
                "session_claims_state_down": self.state_down,
                "sessions_orphaned": self.orphaned,
                "sessions_refused_full": self.full_refusals,
                "session_ttl_ms": self.state.ttl_ms,
            }

    def __len__(self) -> int:
        return 0
