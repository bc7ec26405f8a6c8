"""Confidential values (policy v2, :mod:`fak_core.confidential`) in the shared Redis.

:class:`RedisConfidential` answers as :class:`~fak_core.confidential.ConfidentialStore`
does, for every replica: a value recorded on one replica is carried (and so refused in a
tainted session's sink call) on every other. It keeps what the in-memory store keeps,
each value's compact form (:func:`~fak_core.confidential.compact`) and the tool it came
from, and a check is the same substring test, run in the replica on the values fetched in
one round trip. The compact forms are in Redis (and its append-only file) in clear, as
the admitted result's words already are (the grounding store keeps untrusted content);
keeping keyed digests instead was measured: a digest per substring of each kept length,
about 6 ms per 4 KiB argument on the loaded 2-core test machine, for no secrecy against a
reader of that Redis.

Per session ``<t>``, one hash ``fak:cv:<t>``: each compact value maps to ``seq origin``;
``#n`` the values kept, ``#o`` set to ``d`` when one had to be dropped or the reading
was partial, ``f`` when the session started in a marked bucket (either way the session
carries a secret on every call until reset, as in one process), ``#b`` the session's
bytes, ``#k`` its forgotten-bucket (a compact value is letters and digits, never ``#``).
Across sessions: ``fak:cbytes`` (bytes kept), ``fak:clru`` (sessions by last record),
``fak:cseq``, ``fak:cevicted`` and ``fak:cforgot``, a bitmap of
:data:`~fak_core.confidential.FORGOTTEN_BUCKETS` bits.

Memory is bounded in bytes: at most :data:`~fak_core.confidential.MAX_VALUES` values per
session (the in-memory store's bound, so the same overflow) and ``max_bytes`` in all; past
it the least recently recorded session is dropped and its bucket bit set, and a session
that has no hash but whose bucket is set carries a secret on every call; one that starts
in a set bucket starts overflowed, as in one process (forgotten never reads as clean).
Nothing expires and the Redis must not evict (checked at start); a Redis that lost its
data fails the epoch guard, one that cannot be reached raises
:class:`~fak_core.statedown.StateUnavailable`: the sink gate's DENY/STATE_DOWN.
"""

from __future__ import annotations

from typing import Any

from fak_core.confidential import (
    _DROPPED,
    _FORGOTTEN,
    MAX_VALUE_BYTES,
    MAX_VALUES,
    MIN_CHARS,
    ConfidentialStore,
    _bucket,
    _Session,
    compact,
)
from fak_core.redis_state import RedisState

__all__ = ["DEFAULT_CONFIDENTIAL_BYTES", "RedisConfidential"]

#: The bytes all sessions' kept values may take together in Redis.
DEFAULT_CONFIDENTIAL_BYTES = 16 << 20
#: Bytes counted for a session (its hash and counters) besides its trace id.
SESSION_OVERHEAD = 96
#: Bytes counted for one value besides its compact form and origin: sequence, hash entry.
VALUE_OVERHEAD = 48
#: An origin (a tool's name) is cut to this many characters before it is kept.
MAX_ORIGIN_CHARS = 256

# KEYS: epoch, fak:cv:<t>, fak:cbytes, fak:clru, fak:cseq, fak:cevicted, fak:cforgot
_C_COMMON = r"""
local function drop(t)
  local k = 'fak:cv:'..t
  redis.call('DECRBY', KEYS[3], tonumber(redis.call('HGET', k, '#b') or '0'))
  redis.call('DEL', k)
  redis.call('ZREM', KEYS[4], t)
end
"""
# ARGV: epoch, trace, its bytes, its bucket, max_bytes, max_values, whole (1, or 0 when the
# values may not be all of them), then per value its compact form, its origin and its bytes.
_C_RECORD = r"""
local t = ARGV[2]
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('HSET', KEYS[2], '#n', 0, '#b', ARGV[3], '#k', ARGV[4])
  -- one created in a marked bucket may be one that was forgotten: its older values are gone
  if redis.call('GETBIT', KEYS[7], tonumber(ARGV[4])) == 1 then
    redis.call('HSET', KEYS[2], '#o', 'f')
  end
  redis.call('INCRBY', KEYS[3], ARGV[3])
end
redis.call('ZADD', KEYS[4], redis.call('INCR', KEYS[5]), t)
local n = tonumber(redis.call('HGET', KEYS[2], '#n'))
local cap = tonumber(ARGV[6])
-- anything but an explicit whole reading is a partial one (fail-closed)
if ARGV[7] ~= '1' then redis.call('HSET', KEYS[2], '#o', 'd') end
for i = 8, #ARGV, 3 do
  if redis.call('HEXISTS', KEYS[2], ARGV[i]) == 0 then
    if n >= cap then
      redis.call('HSET', KEYS[2], '#o', 'd')
      break
    end
    n = n + 1
    redis.call('HSET', KEYS[2], ARGV[i], n..' '..ARGV[i + 1])
    redis.call('HINCRBY', KEYS[2], '#b', ARGV[i + 2])
    redis.call('INCRBY', KEYS[3], ARGV[i + 2])
  end
end
redis.call('HSET', KEYS[2], '#n', n)
local max = tonumber(ARGV[5])
while tonumber(redis.call('GET', KEYS[3]) or '0') > max and redis.call('ZCARD', KEYS[4]) > 1 do
  local old = redis.call('ZRANGE', KEYS[4], 0, 0)[1]
  if old == t then break end
  local bucket = tonumber(redis.call('HGET', 'fak:cv:'..old, '#k') or '-1')
  drop(old)
  if bucket >= 0 then redis.call('SETBIT', KEYS[7], bucket, 1) end
  redis.call('INCR', KEYS[6])
end
return 1
"""
_C_RESET = r"""
if redis.call('EXISTS', KEYS[2]) == 1 then drop(ARGV[2]) end
return 1
"""
# {0}: nothing kept and the bucket clean; {2}: nothing kept and the bucket marked
# (forgotten); {3, 'd'}: a value was dropped; {3, 'f'}: started in a marked bucket;
# {1, field, value, ...}: the kept values.
_C_READ = r"""
if redis.call('EXISTS', KEYS[2]) == 0 then
  if redis.call('GETBIT', KEYS[7], tonumber(ARGV[2])) == 1 then return {2} end
  return {0}
end
local o = redis.call('HGET', KEYS[2], '#o')
if o then return {3, o} end
local out = {1}
for _, v in ipairs(redis.call('HGETALL', KEYS[2])) do out[#out + 1] = v end
return out
"""


def _text(value: Any) -> str:
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else str(value)


class RedisConfidential(ConfidentialStore):
    """:class:`~fak_core.confidential.ConfidentialStore` in Redis: the values every
    replica recorded, bounded in bytes (see the module)."""

    #: Not the in-memory store's promise: every operation is a round trip to Redis.
    __fak_nonblocking__ = False

    def __init__(self, state: RedisState, max_bytes: int = DEFAULT_CONFIDENTIAL_BYTES) -> None:
        super().__init__()
        if max_bytes < 1:
            raise ValueError("max_bytes must be a positive byte count")
        self.state = state
        self.max_bytes = max_bytes
        self._record = state.script(_C_COMMON + _C_RECORD)
        self._reset = state.script(_C_COMMON + _C_RESET)
        self._read = state.script(_C_READ)

    @staticmethod
    def _keys(trace_id: str) -> list[str]:
        return [
            "fak:cv:" + trace_id,
            "fak:cbytes",
            "fak:clru",
            "fak:cseq",
            "fak:cevicted",
            "fak:cforgot",
        ]

    def record(self, trace_id: str, values: list[str], origin: str, whole: bool = True) -> None:
        kept = [
            c.encode("utf-8")[:MAX_VALUE_BYTES].decode("utf-8", "ignore")
            for c in map(compact, values)
            if len(c) >= MIN_CHARS
        ]
        if whole and not kept:
            return
        origin = origin[:MAX_ORIGIN_CHARS]
        size = VALUE_OVERHEAD + len(origin.encode("utf-8", "surrogatepass"))
        args: list[object] = []
        for c in dict.fromkeys(kept):
            args += [c, origin, size + len(c.encode())]  # letters and digits: no surrogate
        head = [trace_id, SESSION_OVERHEAD + len(trace_id), _bucket(trace_id)]
        limits = [self.max_bytes, MAX_VALUES, 1 if whole else 0]
        self.state.run(self._record, self._keys(trace_id), [*head, *limits, *args])

    def reset(self, trace_id: str) -> None:
        self.state.run(self._reset, self._keys(trace_id), [trace_id])

    def carried(self, trace_id: str, args: Any) -> tuple[str, str] | None:
        out = self.state.run(self._read, self._keys(trace_id), [_bucket(trace_id)])
        status = int(out[0])
        if status == 0:
            return None
        if status == 2:
            return ("", _FORGOTTEN)
        if status != 1:
            return ("", _FORGOTTEN if _text(out[1]) == "f" else _DROPPED)
        kept: list[tuple[int, str, str]] = []
        for field, entry in zip(out[1::2], out[2::2], strict=True):
            value = _text(field)
            if value.startswith("#"):
                continue
            seq, origin = _text(entry).split(" ", 1)
            kept.append((int(seq), value, origin))
        if not kept:
            return None
        kept.sort()  # in recording order, as the in-memory store's dict
        # the in-memory store's own check, on a one-session store holding what Redis holds
        view = ConfidentialStore()
        view._sessions[trace_id] = _Session(values={value: origin for _, value, origin in kept})
        return ConfidentialStore.carried(view, trace_id, args)

    def __len__(self) -> int:
        return 0
