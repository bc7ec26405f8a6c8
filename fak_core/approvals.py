"""Human approvals: signed, single-use tokens bound to one call.

A token is ``fak1.<payload>.<mac>`` (URL-safe base64 without padding): the payload is the
JSON ``{"t": trace, "tool": tool, "d": args digest, "iat": minted at, "exp": unix seconds,
"n": nonce}`` and
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

A store in process memory forgets on restart, so it remembers spends only since it was
made (:meth:`NonceStore.remembers_since`: the start of the gateway): a token minted before
then (its ``iat``, the minting host's clock) may have been spent on the process before, and
is refused (:class:`StaleApproval`, "minted before this gateway started at ...; mint a new
one"). This start epoch needs no state. Clock skew: a token spent before a restart is
refused after it as long as the minting host's clock is not ahead of the gateway's by
more than the restart took (the old process stopped before the new one started; a
``mint_skew_s`` of slack widens that margin, refusing tokens minted that long after the
start); a minting clock behind the gateway's only refuses fresh tokens for that long.
A shared store (Redis) remembers across restarts, and no epoch applies.

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
from fak_core.reasons import Reason

__all__ = [
    "APPROVAL_ENV",
    "ApprovalResolver",
    "MemoryNonces",
    "NonceStore",
    "StaleApproval",
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
    minted = time.time() if now is None else now
    payload = {
        "t": trace_id,
        "tool": tool,
        "d": canonical_args_digest(args),
        "iat": minted,
        "exp": int(minted + ttl_s),
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

    def remembers_since(self) -> float | None:
        """The time (unix seconds) from which this store remembers every spend: a token
        minted before it is refused. None: it remembers spends for as long as a token
        lives, across restarts of this process (a shared store)."""
        ...


class MemoryNonces:
    """Spent nonces in this process, at most ``max_used`` live ones, remembered since
    ``started`` (unix seconds; by default the time it is made)."""

    def __init__(self, max_used: int = 65536, started: float | None = None) -> None:
        self._used: dict[str, float] = {}
        self._max_used = max_used
        self._lock = threading.Lock()
        self._started = time.time() if started is None else started

    def remembers_since(self) -> float:
        return self._started

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


class StaleApproval(Exception):
    """A token minted before the nonce store started remembering: refused with this reason
    (the kernel's refusal carries the message)."""

    deny_reason = int(Reason.TRUST_VIOLATION)
    witness = "refuted"


_STALE = "the approval was minted before this gateway started at "


def _system_time() -> float:
    return time.time()


def _utc(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


class ApprovalResolver:
    """Confirms a REQUIRE_WITNESS whose call carries a valid approval token, once.

    ``mint_skew_s`` (seconds, default 0) widens the start epoch: tokens minted that long
    after the store started are refused too, for a minting host whose clock runs ahead."""

    def __init__(
        self,
        key: bytes,
        max_used: int = 65536,
        clock: Callable[[], float] | None = None,
        nonces: NonceStore | None = None,
        mint_skew_s: float = 0.0,
    ) -> None:
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(f"an approval key needs at least {MIN_KEY_BYTES} bytes")
        if not 0 <= mint_skew_s < 86400:
            raise ValueError("mint_skew_s is a number of seconds from 0 to under 86400")
        self._key = key
        # the system clock, read at each use (None), or the one given
        self._clock: Callable[[], float] = clock if clock is not None else _system_time
        self._skew = mint_skew_s
        self.nonces: NonceStore = (
            nonces if nonces is not None else MemoryNonces(max_used, started=self._clock())
        )

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
        since = self.nonces.remembers_since()
        if since is not None:
            minted = payload.get("iat")
            if type(minted) is not int and type(minted) is not float:
                return (
                    "the approval token has no minting time (an older fak approve); mint a new one"
                )
            if minted < since + self._skew:
                return (
                    f"{_STALE}{_utc(since)} (spent approvals are not kept across a "
                    "restart); mint a new one"
                )
        return self.nonces.spend(nonce, exp, now)

    def resolve(self, call: ToolCall, claim: str) -> WitnessOutcome:
        """CONFIRMED for a call whose token :meth:`verify` accepts (and spends), REFUTED for
        one it refuses, ABSTAIN without a token; a token minted before the start epoch
        raises :class:`StaleApproval`, so the refusal says why and what to do."""
        token = call.meta.get("witness", "")
        if not token:
            return WitnessOutcome.ABSTAIN
        why = self.verify(call, token)
        if why is None:
            return WitnessOutcome.CONFIRMED
        if why.startswith(_STALE):
            raise StaleApproval(why)
        return WitnessOutcome.REFUTED
