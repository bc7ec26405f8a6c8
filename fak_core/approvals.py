"""Human approvals: signed, single-use tokens bound to one call.

A token is ``fak1.<payload>.<mac>`` (URL-safe base64 without padding): the payload is the
JSON ``{"t": trace, "tool": tool, "d": args digest, "exp": unix seconds, "n": nonce}`` and
the MAC is HMAC-SHA256 under the operator's key over ``fak1.<payload>``. The arguments'
digest is SHA-256 of their canonical JSON (keys sorted, no white space), so a token
approves exactly one tool on one session with exactly those arguments, whatever order
the keys arrive in. :class:`ApprovalResolver` is a witness resolver: a call carrying a
valid, unexpired, unused token in its ``witness`` (the wire's ``witness`` field) is
CONFIRMED once; a token that fails any check is REFUTED; no token ABSTAINS. Used nonces are
kept until their token expires, in a :class:`NonceStore`: :class:`MemoryNonces` in one
process (bounded: when full, new approvals are refused), or one every replica shares
(:class:`fak_core.redis_stores.RedisNonces`), so a token spent on one replica is spent on
all of them.

The key comes from the host (:func:`approval_key_from_env` reads ``FAK_APPROVAL_KEY``);
``fak approve`` mints a token with it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import orjson

from fak_core.adjudicators import WitnessOutcome
from fak_core.calls import ToolCall

__all__ = [
    "APPROVAL_ENV",
    "ApprovalResolver",
    "MemoryNonces",
    "NonceStore",
    "approval_key_from_env",
    "canonical_args_digest",
    "mint_approval",
]

APPROVAL_ENV = "FAK_APPROVAL_KEY"
_PREFIX = "fak1."
#: The shortest key accepted (bytes): HMAC-SHA256 wants at least 32.
MIN_KEY_BYTES = 32
#: A token longer than this is refused unread.
MAX_TOKEN_CHARS = 2048


def approval_key_from_env(env: dict[str, str] | None = None) -> bytes | None:
    """The approval key from ``FAK_APPROVAL_KEY`` (at least 32 bytes), or None if unset."""
    raw = (env if env is not None else os.environ).get(APPROVAL_ENV)
    if raw is None:
        return None
    key = raw.encode("utf-8")
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(f"{APPROVAL_ENV} must hold at least {MIN_KEY_BYTES} bytes")
    return key


def canonical_args_digest(args: str | bytes | Any) -> str:
    """SHA-256 (hex) of the arguments' canonical JSON; raw text that is not JSON is hashed
    as it is (it can be approved, but only byte for byte)."""
    if isinstance(args, str | bytes):
        raw = args.encode("utf-8", "surrogatepass") if isinstance(args, str) else args
        try:
            value = orjson.loads(raw) if raw.strip() else {}
        except orjson.JSONDecodeError:
            return "raw:" + hashlib.sha256(raw).hexdigest()
    else:
        value = args
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, signed: str) -> bytes:
    return hmac.new(key, signed.encode("ascii"), hashlib.sha256).digest()


def mint_approval(
    key: bytes,
    trace_id: str,
    tool: str,
    args: str | bytes | Any,
    ttl_s: float = 300.0,
    now: float | None = None,
) -> str:
    """A token approving ``tool(args)`` once on ``trace_id`` for ``ttl_s`` seconds."""
    if not 0 < ttl_s <= 86400:
        raise ValueError("an approval lives between 0 and 86400 seconds")
    payload = {
        "t": trace_id,
        "tool": tool,
        "d": canonical_args_digest(args),
        "exp": int((time.time() if now is None else now) + ttl_s),
        "n": secrets.token_hex(16),
    }
    signed = _PREFIX + _b64(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS))
    return signed + "." + _b64(_mac(key, signed))


class NonceStore(Protocol):
    """Where spent approval nonces are kept until their token expires."""

    def spend(self, nonce: str, expires: int, now: float) -> str | None:
        """Mark ``nonce`` spent until ``expires`` (unix seconds), atomically: None when it
        was not spent before, else why the approval is refused. A store it cannot reach
        raises (the resolver then refuses the call)."""
        ...


class MemoryNonces:
    """Spent nonces in this process, at most ``max_used`` live ones."""

    def __init__(self, max_used: int = 65536) -> None:
        self._used: dict[str, float] = {}
        self._max_used = max_used
        self._lock = threading.Lock()

    def spend(self, nonce: str, expires: int, now: float) -> str | None:
        with self._lock:
            if nonce in self._used:
                return "the approval was already used"
            if len(self._used) >= self._max_used:
                self._used = {n: e for n, e in self._used.items() if e > now}
                if len(self._used) >= self._max_used:
                    return "too many live approvals; try again later"
            self._used[nonce] = float(expires)
        return None


class ApprovalResolver:
    """Confirms a REQUIRE_WITNESS whose call carries a valid approval token, once."""

    def __init__(
        self,
        key: bytes,
        max_used: int = 65536,
        clock: Callable[[], float] = time.time,
        nonces: NonceStore | None = None,
    ) -> None:
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(f"an approval key needs at least {MIN_KEY_BYTES} bytes")
        self._key = key
        self._clock = clock
        self.nonces: NonceStore = nonces if nonces is not None else MemoryNonces(max_used)

    def verify(self, call: ToolCall, token: str) -> str | None:
        """None when ``token`` approves ``call`` now (and spends it); else why not."""
        if len(token) > MAX_TOKEN_CHARS or not token.startswith(_PREFIX):
            return "not an approval token"
        signed, _, mac = token.rpartition(".")
        # the MAC first, so nothing an unauthenticated party wrote is decoded (a minted
        # token is ASCII); and its own text, not its decoding: base64 decoding is lenient
        # (it ignores stray characters and the last character's spare bits, and reads '+'
        # as '-'), so comparing decoded bytes would accept other spellings of a token
        if not token.isascii() or not hmac.compare_digest(
            mac.encode(), _b64(_mac(self._key, signed)).encode()
        ):
            return "the approval token's signature does not match"
        try:
            payload = orjson.loads(_unb64(signed[len(_PREFIX) :]))
        except (ValueError, orjson.JSONDecodeError):
            return "a malformed approval token"
        if not isinstance(payload, dict):
            return "a malformed approval token"
        now = self._clock()
        if payload.get("t") != call.trace_id or payload.get("tool") != call.tool:
            return "the approval is for another session or tool"
        if payload.get("d") != canonical_args_digest(call.args):
            return "the approval is for other arguments"
        exp = payload.get("exp")
        if not isinstance(exp, int) or exp <= now:
            return "the approval has expired"
        nonce = payload.get("n")
        if not isinstance(nonce, str):
            return "a malformed approval token"
        return self.nonces.spend(nonce, exp, now)

    def resolve(self, call: ToolCall, claim: str) -> WitnessOutcome:
        token = call.meta.get("witness", "")
        if not token:
            return WitnessOutcome.ABSTAIN
        return (
            WitnessOutcome.CONFIRMED
            if self.verify(call, token) is None
            else (WitnessOutcome.REFUTED)
        )
