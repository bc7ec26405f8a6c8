"""The kernel's session stores in a shared Redis (:mod:`fak_core.redis_state`).

Each implements the interface of its in-memory sibling, so the kernel decides exactly as
it does in one process:

* :class:`RedisLedger` (a :class:`~fak_core.ledger.TaintLedger`): ``raise_to`` is one Lua
  script, an atomic maximum; marks carry no expiry and the Redis must not evict
  (checked at start), so a missing mark means "never raised" within an epoch.
* :class:`RedisRateLimiter` (a :class:`~fak_core.ratelimit.RateLimiter`): reserve and
  release are Lua scripts on a fixed window timed by Redis's own clock, so replicas share
  one budget and concurrent calls cannot overspend.
* :class:`RedisHeldStore` (a :class:`~fak_core.admission.HeldStore`): the held payload,
  its id and its stub are written by one script before the kernel returns the stub.
* :class:`RedisNonces` (a :class:`~fak_core.approvals.NonceStore`): spending an approval
  token's nonce is one ``SET NX``, so a token approves one call across all replicas.

Every operation that cannot reach Redis (or finds the epoch gone) raises
:class:`~fak_core.redis_state.StateUnavailable`: a refusal, never a local fallback.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable

from fak_core.admission import DEFAULT_HELD_BYTES, DEFAULT_HELD_LIMIT, HeldStore
from fak_core.ratelimit import BY, RateLimit, RateLimiter
from fak_core.reasons import Reason
from fak_core.redis_state import RedisState, StateUnavailable
from fak_core.taint import Taint
from fak_core.verdicts import Verdict
from fak_core.view import CallView

__all__ = ["RedisHeldStore", "RedisLedger", "RedisNonces", "RedisRateLimiter"]

_OK = Verdict.defer(BY)
#: No stub the kernel issues is longer (a quarantine or page stub is about 150 characters).
MAX_STUB_CHARS = 1024


def _key(prefix: str, name: str) -> str:
    return prefix + name


_LEVEL = """
return tonumber(redis.call('GET', KEYS[2]) or '0')
"""
_RAISE = """
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
local want = tonumber(ARGV[2])
if want > cur then
  redis.call('SET', KEYS[2], want)
  return want
end
return cur
"""
_RESET = """
redis.call('DEL', KEYS[2])
return 1
"""


class RedisLedger:
    """Taint marks in Redis: ``fak:taint:<trace>``; raising is an atomic maximum.

    Not declared non-blocking: reading it is a network round trip, so the gateway decides
    on a worker thread under its deadline."""

    PREFIX = "fak:taint:"

    def __init__(self, state: RedisState) -> None:
        self.state = state
        self._level = state.script(_LEVEL)
        self._raise = state.script(_RAISE)
        self._reset = state.script(_RESET)

    def level(self, trace_id: str) -> Taint:
        out = self.state.run(self._level, [self.PREFIX + trace_id], [])
        return Taint(min(int(out), Taint.QUARANTINED))

    def raise_to(self, trace_id: str, taint: Taint) -> Taint:
        """Raise the trace's mark to at least ``taint`` (atomically); the new level."""
        out = self.state.run(self._raise, [self.PREFIX + trace_id], [int(Taint(taint))])
        return Taint(min(int(out), Taint.QUARANTINED))

    def reset(self, trace_id: str) -> None:
        self.state.run(self._reset, [self.PREFIX + trace_id], [])

    def stats(self) -> dict[str, int]:
        """Counters for ``/healthz`` (integers, as every store's): the marks are shared."""
        return {"ledger_shared": 1}

    def __len__(self) -> int:
        return 0  # not counted: a SCAN per call would be linear in every session


# A fixed window per key, timed by Redis (TIME), so every replica agrees on it. The hash
# holds the window's start (ms) and the calls charged; it expires when the window ends.
_RESERVE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[2])
local cap = tonumber(ARGV[3])
local start = tonumber(redis.call('HGET', KEYS[2], 'start') or '-1')
local used = tonumber(redis.call('HGET', KEYS[2], 'used') or '0')
if start < 0 or now - start >= window then
  start = now
  used = 0
end
if used >= cap then
  return {0, start + window - now, start}
end
redis.call('HSET', KEYS[2], 'start', start, 'used', used + 1)
redis.call('PEXPIREAT', KEYS[2], start + window)
return {1, 0, start}
"""
_RELEASE = """
local start = tonumber(redis.call('HGET', KEYS[2], 'start') or '-1')
local used = tonumber(redis.call('HGET', KEYS[2], 'used') or '0')
if start == tonumber(ARGV[2]) and used > 0 then
  redis.call('HSET', KEYS[2], 'used', used - 1)
end
return 1
"""
_USED = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local start = tonumber(redis.call('HGET', KEYS[2], 'start') or '-1')
if start < 0 or now - start >= tonumber(ARGV[2]) then return 0 end
return tonumber(redis.call('HGET', KEYS[2], 'used') or '0')
"""


class RedisRateLimiter(RateLimiter):
    """:class:`RateLimiter` whose windows live in Redis (``fak:rl:<key>``)."""

    PREFIX = "fak:rl:"
    #: Not the in-memory limiter's promise: every call is a round trip to Redis.
    __fak_nonblocking__ = False

    def __init__(self, limit: RateLimit, state: RedisState) -> None:
        super().__init__(limit)
        self.state = state
        self._reserve = state.script(_RESERVE)
        self._release_script = state.script(_RELEASE)
        self._used = state.script(_USED)

    def _window_ms(self) -> int:
        return max(1, int(self.limit.window_s * 1000))

    def used(self, key: str) -> int:
        return int(self.state.run(self._used, [self.PREFIX + key], [self._window_ms()]))

    def reset(self, key: str | None = None) -> None:
        if key is None:
            raise ValueError("a shared rate limiter resets one key at a time")
        try:
            self.state.client.delete(self.PREFIX + key)
        except Exception as exc:
            raise StateUnavailable(f"shared state unavailable ({exc})") from None

    def adjudicate(self, view: CallView) -> Verdict:
        key = self._key(view)
        lim = self.limit
        ok, wait_ms, start = self.state.run(
            self._reserve, [self.PREFIX + key], [self._window_ms(), lim.max_calls]
        )
        if not int(ok):
            wait = max(1, int(wait_ms))
            return Verdict.deny(
                Reason.RATE_LIMITED,
                BY,
                claim=f"{lim.max_calls} calls per {lim.window_s:g} s per {lim.key} used up",
                meta={"retry_after_ms": str(wait), "retry_after": f"{wait}ms"},
            )
        view.on_settle(lambda allowed: None if allowed else self._give_back(key, int(start)))
        return _OK

    def _give_back(self, key: str, start: int) -> None:
        # A release that cannot reach Redis keeps the slot spent: the safe direction.
        with contextlib.suppress(StateUnavailable):
            self.state.run(self._release_script, [self.PREFIX + key], [start])


_HOLD = """
local id = ARGV[2]
if id == '' then id = 'q' .. redis.call('INCR', KEYS[2]) end
local item = KEYS[3] .. id
local old = redis.call('HGET', item, 'stub')
if old then redis.call('DEL', KEYS[4] .. redis.sha1hex(old)) end
redis.call('DEL', item)
redis.call('HSET', item, 'payload', ARGV[3])
local stub = ARGV[4]
if stub ~= '' then
  if ARGV[2] == '' then stub = string.gsub(stub, '{id}', id) end
  redis.call('HSET', item, 'stub', stub)
  redis.call('SET', KEYS[4] .. redis.sha1hex(stub), id)
end
redis.call('LREM', KEYS[5], 0, id)
redis.call('RPUSH', KEYS[5], id)
while redis.call('LLEN', KEYS[5]) > tonumber(ARGV[5]) do
  local gone = redis.call('LPOP', KEYS[5])
  local s = redis.call('HGET', KEYS[3] .. gone, 'stub')
  if s then redis.call('DEL', KEYS[4] .. redis.sha1hex(s)) end
  redis.call('DEL', KEYS[3] .. gone)
  redis.call('INCR', KEYS[6])
end
return {id, stub}
"""
_MINTED = """
local id = redis.call('GET', KEYS[2] .. ARGV[2])
if not id then return 0 end
if redis.call('HGET', KEYS[3] .. id, 'stub') == ARGV[3] then return 1 end
return 0
"""
_GET = """
return redis.call('HGET', KEYS[2], ARGV[2])
"""


class RedisHeldStore(HeldStore):
    """Held (quarantined, paged-out) payloads in Redis, bounded in count (oldest first).

    ``hold`` writes the payload, its id (``q<n>`` from one shared counter) and its stub in
    one script, before the kernel hands the stub out; ``minted`` asks Redis, so a stub
    issued by any replica is recognised by every replica."""

    def __init__(
        self,
        state: RedisState,
        limit: int = DEFAULT_HELD_LIMIT,
        max_bytes: int = DEFAULT_HELD_BYTES,
    ) -> None:
        super().__init__(limit, max_bytes)
        self.state = state
        self._hold = state.script(_HOLD)
        self._minted = state.script(_MINTED)
        self._get = state.script(_GET)
        self._keys = ["fak:heldseq", "fak:held:", "fak:stub:", "fak:heldq", "fak:heldevicted"]

    def hold(
        self, payload: str, key: str | None = None, *, stub: Callable[[str], str] | None = None
    ) -> str:
        template = ""
        if stub is not None:
            # A stub names its id, which Redis assigns when no key is given: render it
            # around a marker (an id is q<n>, never the marker) and the script puts it in.
            template = stub(key) if key else stub("{id}")
        held_id, _ = self.state.run(
            self._hold, self._keys, [key or "", payload, template, self.limit]
        )
        return held_id.decode() if isinstance(held_id, bytes) else str(held_id)

    def minted(self, text: str) -> bool:
        # Every stub the kernel issues is a short JSON object; anything else is not one, and
        # answering "not minted" without asking can only send it through the screen.
        if not text.startswith("{") or len(text) > MAX_STUB_CHARS:
            return False
        digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
        return bool(self.state.run(self._minted, ["fak:stub:", "fak:held:"], [digest, text]))

    def stub(self, key: str) -> str | None:
        out = self.state.run(self._get, ["fak:held:" + key], ["stub"])
        return None if out is None else out.decode("utf-8", "surrogatepass")

    def get(self, key: str) -> str | None:
        out = self.state.run(self._get, ["fak:held:" + key], ["payload"])
        return None if out is None else out.decode("utf-8", "surrogatepass")

    def stats(self) -> dict[str, int]:
        return {"held_limit": self.limit}

    def __len__(self) -> int:
        return 0


# A spent nonce is a key that lives until its token expires (plus the clock-skew margin):
# SET NX is the atomic "was it spent before?".
_SPEND = """
if redis.call('SET', KEYS[2], '1', 'NX', 'EXAT', tonumber(ARGV[2])) then return 1 end
return 0
"""


class RedisNonces:
    """Spent approval nonces in Redis (``fak:nonce:<sha256>``), shared by every replica:
    a token spent on one replica is refused on the others. A key outlives its token by
    :attr:`SKEW_S` seconds, so a replica whose clock runs behind Redis's cannot see the
    nonce forgotten while it still reads the token as unexpired."""

    PREFIX = "fak:nonce:"
    #: How long a spent nonce outlives its token's expiry (seconds): the clock skew tolerated.
    SKEW_S = 3600

    def __init__(self, state: RedisState) -> None:
        self.state = state
        self._spend = state.script(_SPEND)

    def spend(self, nonce: str, expires: int, now: float) -> str | None:
        key = self.PREFIX + hashlib.sha256(nonce.encode("utf-8", "surrogatepass")).hexdigest()
        fresh = self.state.run(self._spend, [key], [int(expires) + self.SKEW_S])
        return None if int(fresh) else "the approval was already used"
