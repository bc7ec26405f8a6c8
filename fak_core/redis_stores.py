"""The kernel's session stores in a shared Redis (:mod:`fak_core.redis_state`).

Each implements the interface of its in-memory sibling, so the kernel decides exactly as
it does in one process:

* :class:`RedisLedger` (a :class:`~fak_core.ledger.TaintLedger`): ``raise_to`` is one Lua
  script, an atomic maximum; a mark expires with its trace's owner key (one sliding
  expiry), the Redis must not evict (checked at start), and a mark that expired reads
  QUARANTINED (the orphan bitmap of :mod:`fak_core.redis_state`): a missing mark means
  "never raised" only for a trace never raised.
* :class:`RedisRateLimiter` (a :class:`~fak_core.ratelimit.RateLimiter`): reserve and
  release are Lua scripts on a fixed window timed by Redis's own clock, so replicas share
  one budget and concurrent calls cannot overspend.
* :class:`RedisHeldStore` (a :class:`~fak_core.admission.HeldStore`): the held payload,
  its id and its stub are written by one script before the kernel returns the stub.
* :class:`RedisNonces` (a :class:`~fak_core.approvals.NonceStore`): spending an approval
  token's nonce is one ``SET NX``, so a token approves one call across all replicas.
* :class:`RedisGroundingStore` (a :class:`~fak_core.grounding.GroundingStore`): each
  session's trusted context and untrusted content (policy v2), recorded by one script
  each and bounded in bytes as in one process; a replica grounds on what any recorded.

Every operation that cannot reach Redis (or finds the epoch gone) raises
:class:`~fak_core.redis_state.StateUnavailable`: a refusal, never a local fallback.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable

from fak_core.admission import DEFAULT_HELD_BYTES, DEFAULT_HELD_LIMIT, HeldStore
from fak_core.grounding import (
    _OVERHEAD,
    DEFAULT_GROUNDING_BYTES,
    DEFAULT_TRUSTED_BYTES,
    DEFAULT_UNTRUSTED_BYTES,
    GroundingStore,
    _digest,
    _scan,
    _specials_cost,
    looked_up,
)
from fak_core.ratelimit import BY, RateLimit, RateLimiter
from fak_core.reasons import Reason
from fak_core.redis_state import TRACE_LUA, RedisState, StateUnavailable
from fak_core.taint import Taint
from fak_core.verdicts import Verdict
from fak_core.view import CallView

__all__ = [
    "RedisGroundingStore",
    "RedisHeldStore",
    "RedisLedger",
    "RedisNonces",
    "RedisRateLimiter",
]

_OK = Verdict.defer(BY)
#: No stub the kernel issues is longer (a quarantine or page stub is about 150 characters).
MAX_STUB_CHARS = 1024


def _key(prefix: str, name: str) -> str:
    return prefix + name


# KEYS[2] is fak:taint:<t>; ARGV: the epoch, the trace, its expiry (ms), then the label.
# A missing mark of a trace whose owner key is gone and whose orphan bit is set was
# forgotten (expired): it reads FORGOT, and a raise starts from there.
_LEVEL = (
    TRACE_LUA
    + """
local t = ARGV[2]
local cur = redis.call('GET', KEYS[2])
if cur then
  life(t, ARGV[3])
  return tonumber(cur)
end
if redis.call('EXISTS', 'fak:owner:'..t) == 1 then
  life(t, ARGV[3])
  return 0
end
if orphaned(t) then return FORGOT end
return 0
"""
)
_RAISE = (
    TRACE_LUA
    + """
local t = ARGV[2]
local cur = tonumber(redis.call('GET', KEYS[2]) or '-1')
if cur < 0 then
  cur = 0
  if redis.call('EXISTS', 'fak:owner:'..t) == 0 and orphaned(t) then cur = FORGOT end
end
local want = tonumber(ARGV[4])
if cur > want then want = cur end
if want > 0 then
  redis.call('SET', KEYS[2], want, 'PX', ARGV[3])
  orphan(t)
end
life(t, ARGV[3])
return want
"""
)
# A reset writes a clean mark (so a trace raised once reads TRUSTED, not forgotten, while
# its keys live); who may reset is the gateway's to say (the owner, or the operator).
_LEDGER_RESET = (
    TRACE_LUA
    + """
redis.call('SET', KEYS[2], 0, 'PX', ARGV[3])
life(ARGV[2], ARGV[3])
return 1
"""
)
_RESET = """
redis.call('DEL', KEYS[2])
return 1
"""


class RedisLedger:
    """Taint marks in Redis: ``fak:taint:<trace>``; raising is an atomic maximum.

    A mark expires with its trace's owner key (one sliding expiry, refreshed on every
    read and raise); a forgotten mark reads QUARANTINED (:mod:`fak_core.redis_state`).
    Not declared non-blocking: reading it is a network round trip, so the gateway decides
    on a worker thread under its deadline."""

    PREFIX = "fak:taint:"

    def __init__(self, state: RedisState) -> None:
        self.state = state
        self._level = state.script(_LEVEL)
        self._raise = state.script(_RAISE)
        self._reset = state.script(_LEDGER_RESET)

    def _args(self, trace_id: str) -> list[object]:
        return [trace_id, self.state.ttl_ms]

    def level(self, trace_id: str) -> Taint:
        out = self.state.run(self._level, [self.PREFIX + trace_id], self._args(trace_id))
        return Taint(min(int(out), Taint.QUARANTINED))

    def raise_to(self, trace_id: str, taint: Taint) -> Taint:
        """Raise the trace's mark to at least ``taint`` (atomically); the new level."""
        args = [*self._args(trace_id), int(Taint(taint))]
        out = self.state.run(self._raise, [self.PREFIX + trace_id], args)
        return Taint(min(int(out), Taint.QUARANTINED))

    def reset(self, trace_id: str) -> None:
        self.state.run(self._reset, [self.PREFIX + trace_id], self._args(trace_id))

    def stats(self) -> dict[str, int]:
        """Counters for ``/healthz`` (integers, as every store's): the marks are shared."""
        return {"ledger_shared": 1, "ledger_ttl_ms": self.state.ttl_ms}

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
        self._reset = state.script(_RESET)

    def _window_ms(self) -> int:
        return max(1, int(self.limit.window_s * 1000))

    def used(self, key: str) -> int:
        return int(self.state.run(self._used, [self.PREFIX + key], [self._window_ms()]))

    def reset(self, key: str | None = None) -> None:
        if key is None:
            raise ValueError("a shared rate limiter resets one key at a time")
        self.state.run(self._reset, [self.PREFIX + key], [])

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
redis.call('DECRBY', KEYS[7], tonumber(redis.call('HGET', item, 'size') or '0'))
redis.call('DEL', item)
local size = string.len(ARGV[3]) + string.len(id)
redis.call('HSET', item, 'payload', ARGV[3], 'size', size)
redis.call('INCRBY', KEYS[7], size)
local stub = ARGV[4]
if stub ~= '' then
  if ARGV[2] == '' then stub = string.gsub(stub, '{id}', id) end
  redis.call('HSET', item, 'stub', stub)
  redis.call('SET', KEYS[4] .. redis.sha1hex(stub), id)
end
redis.call('LREM', KEYS[5], 0, id)
redis.call('RPUSH', KEYS[5], id)
while redis.call('LLEN', KEYS[5]) > 0 and (redis.call('LLEN', KEYS[5]) > tonumber(ARGV[5])
    or tonumber(redis.call('GET', KEYS[7]) or '0') > tonumber(ARGV[6])) do
  local gone = redis.call('LPOP', KEYS[5])
  local s = redis.call('HGET', KEYS[3] .. gone, 'stub')
  if s then redis.call('DEL', KEYS[4] .. redis.sha1hex(s)) end
  redis.call('DECRBY', KEYS[7], tonumber(redis.call('HGET', KEYS[3] .. gone, 'size') or '0'))
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
    """Held (quarantined, paged-out) payloads in Redis, bounded in count and in bytes (the
    payload's UTF-8 and its id, as in one process: ``fak:heldbytes``), oldest first.

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
        self._keys = [
            "fak:heldseq",
            "fak:held:",
            "fak:stub:",
            "fak:heldq",
            "fak:heldevicted",
            "fak:heldbytes",
        ]

    def hold(
        self, payload: str, key: str | None = None, *, stub: Callable[[str], str] | None = None
    ) -> str:
        template = ""
        if stub is not None:
            # A stub names its id, which Redis assigns when no key is given: render it
            # around a marker (an id is q<n>, never the marker) and the script puts it in.
            template = stub(key) if key else stub("{id}")
        held_id, _ = self.state.run(
            self._hold, self._keys, [key or "", payload, template, self.limit, self.max_bytes]
        )
        return (
            held_id.decode("utf-8", "surrogatepass") if isinstance(held_id, bytes) else str(held_id)
        )

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
        return {"held_limit": self.limit, "held_bytes_limit": self.max_bytes}

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

    def remembers_since(self) -> None:
        """Redis outlives a replica's restart: every spend is remembered while it matters."""
        return None


# Destination grounding (policy v2) in Redis. Per session <t>: ``fak:g:<t>`` (a hash:
# base, tc, uc, n: the session's own bytes, the trusted and untrusted bytes, the chunk
# counter), ``fak:gt:<t>`` and ``fak:gu:<t>`` (the trusted and untrusted chunk ids, oldest
# first), ``fak:gc:<t>`` (each chunk: its words, its specials, its cost, its digest or
# origin), ``fak:gd:<t>`` (the trusted texts' digests: a text seen is skipped) and
# ``fak:gp:<t>`` (how many trusted chunks hold each canonical special "kind:canon").
# Across sessions: ``fak:gbytes`` (the bytes held), ``fak:glru`` (sessions by last use),
# ``fak:gseq`` and ``fak:gevicted``. The keys are in this order after the epoch key.
_G_COMMON = r"""
local function gkeys(t)
  return {'fak:g:'..t, 'fak:gt:'..t, 'fak:gu:'..t, 'fak:gc:'..t, 'fak:gd:'..t, 'fak:gp:'..t}
end
local function touch(t, base)
  if redis.call('EXISTS', KEYS[2]) == 0 then
    redis.call('HSET', KEYS[2], 'base', base, 'tc', 0, 'uc', 0, 'n', 0)
    redis.call('INCRBY', KEYS[8], base)
  end
  redis.call('ZADD', KEYS[9], redis.call('INCR', KEYS[10]), t)
end
local function drop(t)
  local k = gkeys(t)
  local c = redis.call('HMGET', k[1], 'base', 'tc', 'uc')
  local total = tonumber(c[1] or '0') + tonumber(c[2] or '0') + tonumber(c[3] or '0')
  redis.call('DEL', k[1], k[2], k[3], k[4], k[5], k[6])
  redis.call('DECRBY', KEYS[8], total)
  redis.call('ZREM', KEYS[9], t)
end
local function bound(t, max)
  while tonumber(redis.call('GET', KEYS[8]) or '0') > max and redis.call('ZCARD', KEYS[9]) > 1 do
    local old = redis.call('ZRANGE', KEYS[9], 0, 0)[1]
    if old == t then break end
    drop(old)
    redis.call('INCR', KEYS[11])
  end
end
"""
_G_SEEN = r"""
local out = {}
for i = 3, #ARGV do out[#out + 1] = redis.call('HEXISTS', KEYS[6], ARGV[i]) end
redis.call('ZADD', KEYS[9], 'XX', redis.call('INCR', KEYS[10]), ARGV[2])
return out
"""
_G_TRUSTED = r"""
local t = ARGV[2]
touch(t, tonumber(ARGV[3]))
local limit = tonumber(ARGV[4])
local tc = tonumber(redis.call('HGET', KEYS[2], 'tc'))
for i = 6, #ARGV, 4 do
  local digest = ARGV[i]
  if redis.call('HEXISTS', KEYS[6], digest) == 0 then
    local id = tostring(redis.call('HINCRBY', KEYS[2], 'n', 1))
    local cost = tonumber(ARGV[i + 3])
    redis.call('HSET', KEYS[5], id, ARGV[i + 1], id..':s', ARGV[i + 2], id..':c', cost,
      id..':d', digest)
    redis.call('HSET', KEYS[6], digest, id)
    redis.call('RPUSH', KEYS[3], id)
    for s in string.gmatch(ARGV[i + 2], '[^\n]+') do redis.call('HINCRBY', KEYS[7], s, 1) end
    tc = tc + cost
    redis.call('INCRBY', KEYS[8], cost)
    while tc > limit do
      local old = redis.call('LPOP', KEYS[3])
      if not old then break end
      local f = redis.call('HMGET', KEYS[5], old..':s', old..':c', old..':d')
      for s in string.gmatch(f[1], '[^\n]+') do
        if redis.call('HINCRBY', KEYS[7], s, -1) <= 0 then redis.call('HDEL', KEYS[7], s) end
      end
      redis.call('HDEL', KEYS[6], f[3])
      redis.call('HDEL', KEYS[5], old, old..':s', old..':c', old..':d')
      tc = tc - tonumber(f[2])
      redis.call('DECRBY', KEYS[8], tonumber(f[2]))
    end
  end
end
redis.call('HSET', KEYS[2], 'tc', tc)
bound(t, tonumber(ARGV[5]))
return 1
"""
_G_UNTRUSTED = r"""
local t = ARGV[2]
touch(t, tonumber(ARGV[3]))
local limit = tonumber(ARGV[4])
local uc = tonumber(redis.call('HGET', KEYS[2], 'uc'))
local id = 'u'..redis.call('HINCRBY', KEYS[2], 'n', 1)
local cost = tonumber(ARGV[9])
redis.call('HSET', KEYS[5], id, ARGV[7], id..':s', ARGV[8], id..':o', ARGV[6], id..':c', cost)
redis.call('RPUSH', KEYS[4], id)
uc = uc + cost
redis.call('INCRBY', KEYS[8], cost)
while uc > limit do
  local old = redis.call('LPOP', KEYS[4])
  if not old then break end
  local c = tonumber(redis.call('HGET', KEYS[5], old..':c'))
  redis.call('HDEL', KEYS[5], old, old..':s', old..':o', old..':c')
  uc = uc - c
  redis.call('DECRBY', KEYS[8], c)
end
redis.call('HSET', KEYS[2], 'uc', uc)
bound(t, tonumber(ARGV[5]))
return 1
"""
_G_RESET = r"""
if redis.call('EXISTS', KEYS[2]) == 1 then drop(ARGV[2]) end
return 1
"""
# Whether any of the keys (a canonical special, a whole identifier, one word) is in the
# session's trusted context: one index lookup each.
_G_INDEXED = r"""
for i = 2, #ARGV do
  if redis.call('HEXISTS', KEYS[7], ARGV[i]) == 1 then return 1 end
end
return 0
"""
# A word sequence: 1 when it is a whole identifier (ARGV[2] its key); else, when every
# word is indexed, the session's trusted words, which the caller searches (a plain find of
# a needle with inner spaces is not linear in Lua, so the search runs in Python, whose
# substring search is); none when a word is missing.
_G_TRUSTED_WORDS = r"""
if redis.call('HEXISTS', KEYS[7], ARGV[2]) == 1 then return 1 end
for i = 3, #ARGV do
  if redis.call('HEXISTS', KEYS[7], 'word:'..ARGV[i]) == 0 then return {} end
end
local out = {}
for _, id in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
  out[#out + 1] = redis.call('HGET', KEYS[5], id)
end
return out
"""
# The origin of the oldest untrusted text whose field (ARGV[2]: ':s' its specials, '' its
# words) holds the needle. A needle framed by newlines (a special) or by spaces (one
# word) holds its frame only at its ends and no item holds it: a plain find is linear.
_G_ORIGIN = r"""
for _, id in ipairs(redis.call('LRANGE', KEYS[4], 0, -1)) do
  if string.find(redis.call('HGET', KEYS[5], id..ARGV[2]), ARGV[3], 1, true) then
    return redis.call('HGET', KEYS[5], id..':o')
  end
end
return false
"""
# Every untrusted text's origin and words, oldest first (a word sequence is searched by
# the caller, as above).
_G_UNTRUSTED_WORDS = r"""
local out = {}
for _, id in ipairs(redis.call('LRANGE', KEYS[4], 0, -1)) do
  local f = redis.call('HMGET', KEYS[5], id..':o', id)
  out[#out + 1] = f[1]
  out[#out + 1] = f[2]
end
return out
"""


def _framed(specials: frozenset[tuple[str, str]], words: bool) -> str:
    """The specials as ``\\nkind:canon\\n...``: no canonical form holds a newline (a word
    is split at white space; the URL parser drops newlines; an address or IBAN has
    none), and one that did would be dropped: it would ground nothing (fail-closed)."""
    items = sorted(f"{k}:{c}" for k, c in specials if (words or k != "word") and "\n" not in c)
    return "\n" + "\n".join(items) + "\n"


class RedisGroundingStore(GroundingStore):
    """:class:`~fak_core.grounding.GroundingStore` in Redis: every replica grounds on the
    same trusted context and names the same untrusted origins.

    Each record is one script (atomic). The bounds are the in-memory store's, in bytes,
    and so is what they forget: the oldest texts of a session past ``trusted_bytes`` or
    ``untrusted_bytes``, the least recently recorded session past ``max_bytes``. Forgotten
    trusted context grounds nothing (a refusal); forgotten untrusted content only stops a
    refusal from naming where a value came from (the verdict reads trusted context only).
    A check is one round trip: an index lookup for an address, host, IBAN, word or whole
    identifier; a word sequence that is not an identifier fetches the trusted words (at
    most ``trusted_bytes``) when every word is indexed and searches them here."""

    #: Not the in-memory store's promise: every operation is a round trip to Redis.
    __fak_nonblocking__ = False

    def __init__(
        self,
        state: RedisState,
        trusted_bytes: int = DEFAULT_TRUSTED_BYTES,
        untrusted_bytes: int = DEFAULT_UNTRUSTED_BYTES,
        max_bytes: int = DEFAULT_GROUNDING_BYTES,
    ) -> None:
        super().__init__(trusted_bytes, untrusted_bytes, max_bytes)
        self.state = state
        self._seen = state.script(_G_SEEN)
        self._trusted = state.script(_G_COMMON + _G_TRUSTED)
        self._untrusted = state.script(_G_COMMON + _G_UNTRUSTED)
        self._reset = state.script(_G_COMMON + _G_RESET)
        self._indexed = state.script(_G_INDEXED)
        self._trusted_words = state.script(_G_TRUSTED_WORDS)
        self._origin = state.script(_G_ORIGIN)
        self._untrusted_words = state.script(_G_UNTRUSTED_WORDS)

    @staticmethod
    def _keys(trace_id: str) -> list[str]:
        session = [f"fak:g{kind}:{trace_id}" for kind in ("", "t", "u", "c", "d", "p")]
        return [*session, "fak:gbytes", "fak:glru", "fak:gseq", "fak:gevicted"]

    def _head(self, trace_id: str) -> list[object]:
        return [trace_id, _OVERHEAD + len(trace_id)]

    def record_trusted(self, trace_id: str, text: str, origin: str = "user") -> None:
        self.record_trusted_many(trace_id, [(origin, text)])

    def record_trusted_many(self, trace_id: str, items: list[tuple[str, str]]) -> None:
        """Record each new text in one script; with several, first ask which are new (a
        proxy sends the whole conversation every turn), so only new texts are scanned."""
        keys = self._keys(trace_id)
        chunks: dict[str, str] = {}
        for origin, raw in items:
            text = raw[: self.trusted_bytes // 4]
            chunks.setdefault(_digest(origin, text).hex(), text)
        if not chunks:
            return
        if len(chunks) > 1:
            known = self.state.run(self._seen, keys, [trace_id, *chunks])
            for digest, seen in zip(list(chunks), known, strict=True):
                if int(seen):
                    del chunks[digest]
        # Newest first, only as far back as the session's bound reaches: the script keeps
        # the longest suffix of the texts that fits, so an older one would be recorded
        # only to be forgotten in the same script. The first that does not fit is sent
        # (it pushes out everything older, as it would in one process), and a text that
        # alone is over the bound is sent without its words: it is forgotten at once.
        picked: list[list[object]] = []
        total = 0
        for digest, text in reversed(chunks.items()):
            words, specials = _scan(text)
            cost = len(words.encode("utf-8", "surrogatepass"))
            cost += _specials_cost(specials) + _OVERHEAD
            if cost > self.trusted_bytes:
                words, specials = "", frozenset()
            picked.append([digest, words, _framed(specials, True), cost])
            total += cost
            if total > self.trusted_bytes:
                break
        args = [arg for chunk in reversed(picked) for arg in chunk]
        if args:
            limits = [self.trusted_bytes, self.max_bytes]
            self.state.run(self._trusted, keys, [*self._head(trace_id), *limits, *args])

    def record_identifiers(self, trace_id: str, values: list[str], origin: str) -> None:
        """The in-memory store's chunk of identifiers, recorded in one script as a trusted
        text with no words (its keys indexed, its cost counted as that store counts it)."""
        chunk = self._identifier_chunk(values, origin)
        if chunk is None:
            return
        cost = _specials_cost(chunk.specials) + _OVERHEAD
        args = [chunk.digest.hex(), chunk.text, _framed(chunk.specials, True), cost]
        limits = [self.trusted_bytes, self.max_bytes]
        self.state.run(self._trusted, self._keys(trace_id), [*self._head(trace_id), *limits, *args])

    def record_untrusted(self, trace_id: str, text: str, origin: str) -> None:
        """Keep the untrusted text's words and specials (cut to the bound first, as the
        in-memory store cuts the text), only to name it in a refusal."""
        words, specials = _scan(text[: self.untrusted_bytes])
        framed = _framed(specials, False)
        cost = sum(len(s.encode("utf-8", "surrogatepass")) for s in (words, framed, origin))
        if cost + _OVERHEAD > self.untrusted_bytes:  # forgotten at once: not sent
            words, framed = "", "\n"
        args = [origin, words, framed, cost + _OVERHEAD]
        limits = [self.untrusted_bytes, self.max_bytes]
        self.state.run(
            self._untrusted, self._keys(trace_id), [*self._head(trace_id), *limits, *args]
        )

    def reset(self, trace_id: str) -> None:
        self.state.run(self._reset, self._keys(trace_id), [trace_id])

    def grounded(self, trace_id: str, value: str) -> bool:
        form = looked_up(value)
        if form is None:
            return False
        kind, canon = form
        # A canon never holds a newline; a special that did is not indexed (:func:`_framed`)
        # and a word that did is not a word: either way, not grounded.
        keys = self._keys(trace_id)
        if kind != "text":
            return bool(self.state.run(self._indexed, keys, [f"{kind}:{canon}"]))
        # a whole identifier value (:meth:`record_identifiers`), then the trusted words
        if " " not in canon:
            return bool(self.state.run(self._indexed, keys, [f"ident:{canon}", f"word:{canon}"]))
        words = list(dict.fromkeys(canon.split(" ")))
        texts = self.state.run(self._trusted_words, keys, [f"ident:{canon}", *words])
        if texts == 1:
            return True
        needle = f" {canon} ".encode("utf-8", "surrogatepass")
        return any(needle in text for text in texts)

    def origin_of(self, trace_id: str, value: str) -> str | None:
        form = looked_up(value)
        if form is None:
            return None
        kind, canon = form
        keys = self._keys(trace_id)
        found: bytes | None
        if kind == "text" and " " in canon:
            out = self.state.run(self._untrusted_words, keys, [])
            needle = f" {canon} ".encode("utf-8", "surrogatepass")
            pairs = zip(out[::2], out[1::2], strict=True)
            found = next((origin for origin, words in pairs if needle in words), None)
        elif kind == "text":
            found = self.state.run(self._origin, keys, ["", f" {canon} "])
        else:
            found = self.state.run(self._origin, keys, [":s", f"\n{kind}:{canon}\n"])
        return None if found is None else found.decode("utf-8", "surrogatepass")

    def stats(self) -> dict[str, int]:
        """Counters for ``/healthz``: the context is shared (no round trip to count it)."""
        return {"grounding_shared": 1, "grounding_bytes_limit": self.max_bytes}

    def __len__(self) -> int:
        return 0
