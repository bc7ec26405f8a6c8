"""Session owners in the shared Redis: one owner per trace across every replica.

The same rules as :class:`~fak_core.gateway.sessions.Sessions` (first credential to use a
trace owns it; only SHA-256 digests are stored and compared in constant time), with the
owner table in Redis (``fak:owner:<trace>``, claimed with ``SET NX`` under the epoch
guard). Nothing is evicted (the Redis must not evict: checked at start), so no trace is
ever orphaned. When Redis cannot be reached, a claim is put off (no token is handed out;
every decision that needs the shared state is refused DENY/STATE_DOWN anyway) and a read
or reset of a trace raises :class:`~fak_core.statedown.StateUnavailable` (a 503).
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
        #: Claims put off because Redis could not be reached.
        self.deferred = 0

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
            won, owner = self.state.run(self._claim, [PREFIX + trace], [given.hex()])
        except StateUnavailable:
            # Put off, not failed open: the request goes on without a token and anything it
            # asks of the shared state is refused STATE_DOWN; a later request claims.
            self.deferred += 1
            return None
        if int(won):
            return token
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
        owner = self.state.run(self._owner, [PREFIX + trace], [])
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
            return {"session_refusals": self.refused, "session_claims_deferred": self.deferred}

    def __len__(self) -> int:
        return 0
