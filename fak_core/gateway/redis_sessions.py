"""Session owners in the shared Redis: one owner per trace across every replica.

The same rules as :class:`~fak_core.gateway.sessions.Sessions` (first credential to use a
trace owns it; only SHA-256 digests are stored and compared in constant time), with the
owner table in Redis (``fak:owner:<trace>``, claimed with ``SET NX`` under the epoch
guard). Nothing is evicted (the Redis must not evict: checked at start), so no trace is
ever orphaned. When Redis cannot be reached, nobody can tell who owns a trace, so a claim,
a read and a reset all raise :class:`~fak_core.statedown.StateUnavailable` (a 503 naming
the trace): unknown ownership is never taken for the owner's, and no token is handed out.
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
)
from fak_core.redis_state import RedisState
from fak_core.statedown import StateUnavailable

__all__ = ["RedisSessions"]

_CLAIM = """
local cur = redis.call('GET', KEYS[2])
if cur then return {0, cur} end
redis.call('SET', KEYS[2], ARGV[2])
return {1, ARGV[2]}
"""
_OWNER = """
return redis.call('GET', KEYS[2])
"""
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
            won, owner = self.state.run(self._claim, [PREFIX + trace], [given.hex()])
        except StateUnavailable as exc:
            # Who owns the trace is unknown: refused (a 503), never taken for the owner's.
            with self._lock:
                self.state_down += 1
            raise StateUnavailable(
                f"{exc}; who owns trace {trace!r} cannot be checked, so the request was "
                "refused: retry once the shared state is back"
            ) from None
        if int(won):
            return token
        owner_hex = owner.decode() if isinstance(owner, bytes) else str(owner)
        if op or (not minted and hmac.compare_digest(given.hex(), owner_hex)):
            return None
        with self._lock:
            self.refused += 1
        raise SessionError(403, not_yours(trace, None if minted else token))

    def permits(self, trace: str, token: str | None, operator: str | None) -> str | None:
        tok = _digest(token or "").hex()
        owner = self.state.run(self._owner, [PREFIX + trace], [])
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
            return {"session_refusals": self.refused, "session_claims_state_down": self.state_down}

    def __len__(self) -> int:
        return 0
