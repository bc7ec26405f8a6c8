"""Who owns a session: unguessable trace ids, per-trace owner tokens, bounded in bytes.

A trace (session) belongs to the first credential that uses it. When a request names a
trace nobody owns, the gateway binds it to the session token the request presents in
``X-Fak-Session`` or, if it presents none, to a token it mints (``secrets.token_urlsafe``,
192 bits) and sends back in the ``X-Fak-Session`` response header. From then on every
request that names the trace (deciding, admitting, recording trusted context, a proxied
turn, an MCP tool call, reading, resetting) must present that token or the operator key
(``X-Fak-Operator-Key``, ``fak serve --operator-key-env``): a request without a token or
with another one is a 403 that says what to send. Grounding lets a session *widen* what it
may do, so nobody but its owner may act in it; and a client that names a trace someone
else opened learns so at once (no session fixation).

Only SHA-256 digests of tokens are stored and they are compared with
``hmac.compare_digest``. The owner table is bounded in bytes; past the bound the least
recently used owner is dropped and the trace is remembered as *orphaned* in a fixed-size
salted bitmap: nobody but the operator may use it again (a 403), so a forgotten owner fails
closed. A trace id the gateway minted itself is new by construction and is never taken for
an orphan.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable
from contextvars import ContextVar

__all__ = [
    "CALLER",
    "DEFAULT_SESSION_BYTES",
    "MAX_TRACE_BYTES",
    "OPERATOR_HEADER",
    "SESSION_HEADER",
    "SessionError",
    "Sessions",
    "new_trace_id",
    "not_yours",
    "orphaned",
    "trace_id_problem",
]

SESSION_HEADER = "x-fak-session"
OPERATOR_HEADER = "x-fak-operator-key"
#: A trace id longer than this many characters (so at most 4 times as many bytes of UTF-8)
#: is refused with a 400. Characters, not bytes, so that the OpenAPI ``maxLength`` (which
#: counts characters) says exactly what is accepted.
MAX_TRACE_BYTES = 128
#: Bytes the owner table may hold (trace ids, digests and a fixed overhead per entry).
DEFAULT_SESSION_BYTES = 32 << 20
#: What one owner entry costs beyond its trace id's UTF-8 bytes: the token's digest, the
#: table's entry and the id's string object, measured with ``tracemalloc`` on CPython 3.11
#: at every size where the table grows (at most 396 bytes); rounded up.
ENTRY_OVERHEAD = 416
#: Bits in the orphan bitmap (fixed size: 2**20 bits is 128 KiB).
ORPHAN_BITS = 1 << 20
#: Who sent the request being served: (client address, digest of its verified credential),
#: set by the gateway's middleware; :meth:`GatewayState.build_call` stamps both on the call
#: (``meta["client"]``, ``meta["credential"]``) so a rate limit can be keyed by them.
CALLER: ContextVar[tuple[str, str]] = ContextVar("fak_caller", default=("", ""))
_MIN_TOKEN = 16
_MAX_TOKEN = 256


def new_trace_id() -> str:
    """A fresh trace id: ``gw-`` and 128 random bits (URL-safe base64)."""
    return "gw-" + secrets.token_urlsafe(16)


def trace_id_problem(trace: str) -> str | None:
    """Why ``trace`` cannot be a trace id (too long), or None."""
    if len(trace) > MAX_TRACE_BYTES:
        return (
            f"trace id is {len(trace)} characters; the limit is {MAX_TRACE_BYTES} characters: "
            "send a shorter trace id (or none, and the gateway mints one)"
        )
    return None


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def _check_token(token: str | None) -> None:
    if token is not None and not _MIN_TOKEN <= len(token) <= _MAX_TOKEN:
        raise SessionError(
            400,
            f"{SESSION_HEADER}: a session token is {_MIN_TOKEN} to {_MAX_TOKEN} "
            "characters; drop the header and the gateway mints one",
        )


def not_yours(trace: str, token: str | None) -> str:
    """The 403 message for a request on an owned trace without its owner's token."""
    sent = "without a session token" if token is None else "with another session's token"
    return (
        f"trace {trace!r} belongs to another session and this request came {sent}: send "
        f"that session's own {SESSION_HEADER} token (the one the trace's first answer "
        "carried, or the one its first request sent), or omit the trace id (the gateway "
        "mints one) or use an id of your own"
    )


def orphaned(trace: str) -> str:
    """The 403 message for a request on a trace whose owner the table dropped."""
    return (
        f"trace {trace!r} belonged to a session the gateway no longer remembers (its owner "
        "table is full): nobody but the operator may use it now; omit the trace id (the "
        "gateway mints one) or use a new id of your own"
    )


class SessionError(Exception):
    """A request the session rules refuse: ``status`` (400 or 403) and a message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Sessions:
    """The owner table: trace id → digest of its owner's token."""

    def __init__(self, max_bytes: int = DEFAULT_SESSION_BYTES, operator_key: str | None = None):
        if max_bytes < ENTRY_OVERHEAD + MAX_TRACE_BYTES:
            raise ValueError(f"max_bytes must be at least {ENTRY_OVERHEAD + MAX_TRACE_BYTES}")
        self.max_bytes = max_bytes
        self._operator = _digest(operator_key) if operator_key else None
        self._owners: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0
        self._orphans = bytearray(ORPHAN_BITS // 8)
        self._salt = secrets.token_bytes(16)
        self._lock = threading.Lock()
        #: Owners dropped at the byte bound (their traces are orphaned).
        self.evicted = 0
        #: Requests refused for want of the owner's token or the operator key.
        self.refused = 0
        #: Called with each trace a claim binds to a new owner (the gateway begins it in
        #: the taint ledger: a new session reads its own mark only, C4.11).
        self.on_open: Callable[[str], None] | None = None

    def set_operator_key(self, key: str | None) -> None:
        self._operator = _digest(key) if key else None

    def _bit(self, trace: str) -> tuple[int, int]:
        h = hashlib.blake2b(trace.encode("utf-8", "surrogatepass"), key=self._salt, digest_size=8)
        n = int.from_bytes(h.digest(), "little") % ORPHAN_BITS
        return n >> 3, 1 << (n & 7)

    def _orphaned(self, trace: str) -> bool:
        byte, mask = self._bit(trace)
        return bool(self._orphans[byte] & mask)

    def is_operator(self, operator: str | None) -> bool:
        """Whether ``operator`` is the configured operator key (compared in constant time;
        an empty or absent key, or none configured, never is)."""
        expected = self._operator
        given = _digest(operator or "")
        return expected is not None and hmac.compare_digest(given, expected) and bool(operator)

    def claim(
        self,
        trace: str,
        token: str | None,
        *,
        fresh: bool = False,
        operator: str | None = None,
    ) -> str | None:
        """The session rule for a request that names ``trace``: bind an unowned trace to
        ``token`` (or a minted one) and return the token the client should keep; return
        None when the request may act on the trace it does not newly own (it presents the
        owner's token, or the operator key). Anything else is a :class:`SessionError`:
        403 on an owned trace without its token (none, or another) and on an orphaned one
        (its owner was dropped) for all but the operator; 400 for a token outside 16 to
        256 characters. ``fresh``: the gateway minted ``trace`` for this request, so it
        cannot be an orphan."""
        _check_token(token)
        given = _digest(token) if token is not None else None
        op = self.is_operator(operator)
        with self._lock:
            owner = self._owners.get(trace)
            if owner is not None:
                if op or (given is not None and hmac.compare_digest(given, owner)):
                    self._owners.move_to_end(trace)  # only its owner's use keeps it
                    return None
                self.refused += 1
                raise SessionError(403, not_yours(trace, token))
            if not fresh and self._orphaned(trace):
                if op:
                    return None
                self.refused += 1
                raise SessionError(403, orphaned(trace))
            if token is None:
                token = secrets.token_urlsafe(24)
                given = _digest(token)
            assert given is not None
            self._owners[trace] = given
            if self.on_open is not None:
                self.on_open(trace)
            self._bytes += ENTRY_OVERHEAD + len(trace.encode("utf-8", "surrogatepass"))
            while self._bytes > self.max_bytes and self._owners:
                old, _ = self._owners.popitem(last=False)
                self._bytes -= ENTRY_OVERHEAD + len(old.encode("utf-8", "surrogatepass"))
                byte, mask = self._bit(old)
                self._orphans[byte] |= mask
                self.evicted += 1
            return token

    def permits(self, trace: str, token: str | None, operator: str | None) -> str | None:
        """Who may read or reset ``trace``: ``"operator"``, ``"owner"``, or None (refused).
        Both digests are always computed and compared in constant time."""
        tok = _digest(token or "")
        with self._lock:
            owner = self._owners.get(trace)
        operator_ok = self.is_operator(operator)
        owner_ok = owner is not None and hmac.compare_digest(tok, owner) and bool(token)
        if operator_ok:
            return "operator"
        if owner_ok:
            return "owner"
        with self._lock:
            self.refused += 1
        return None

    def stats(self) -> dict[str, int]:
        """Counters for ``/healthz``."""
        with self._lock:
            return {
                "sessions": len(self._owners),
                "session_bytes": self._bytes,
                "session_bytes_limit": self.max_bytes,
                "sessions_evicted": self.evicted,
                "session_refusals": self.refused,
            }

    def __len__(self) -> int:
        return len(self._owners)
