"""One Redis shared by several gateway replicas: the connection, its checks, its failure.

``fak serve --state redis://HOST:PORT/DB`` keeps session state (taint marks, rate-limit
windows, held results, session owners) in one Redis so that every replica decides on
the same state (:mod:`fak_core.redis_stores`). This module owns the connection and says
when the shared state cannot be trusted:

* **At start** (:meth:`RedisState.check`): ``maxmemory-policy`` must be ``noeviction``
  (any other policy may evict a taint mark, which would read as clean) and ``appendonly``
  must be ``yes`` (without the append-only file a restart of Redis forgets every write
  since the last snapshot). A setting that could forget taint refuses the start.
* **Epoch.** The first replica writes a random ``fak:epoch``; every replica remembers the
  one it found, and every script checks it first. If Redis comes back without it (data
  lost: a restart without persistence, a ``FLUSHALL``), every operation fails with
  :class:`StateUnavailable` until an operator restarts the replicas: forgotten state is
  never read as clean.
* **Bounded, expiring, closed.** A trace's owner key (``fak:owner:<t>``) and taint key
  (``fak:taint:<t>``) carry one sliding expiry (``ttl``, default
  :data:`DEFAULT_STATE_TTL` seconds), refreshed together by every script that touches
  either (:data:`TRACE_LUA`), so they expire together. A trace raised above TRUSTED sets
  its bit in a fixed-size salted bitmap (``fak:orphans``, :data:`ORPHAN_BITS` bits, the
  salt the epoch): once its keys expired, it reads QUARANTINED and nobody may claim it
  afresh (an *orphan*), so a forgotten mark never reads cleaner on any replica. A Redis
  whose ``used_memory`` is at :data:`FULL_FRACTION` of its ``maxmemory`` refuses the
  start and, at run time (polled at most once a second), new sessions (a 503 naming it)
  before existing sessions' writes fail.
* **Outage.** Any Redis error or timeout (``socket_timeout``, no retries) is a
  :class:`StateUnavailable`, which the kernel and the gateway turn into DENY/STATE_DOWN
  (:data:`STATE_DOWN`, an extension reason; disposition WAIT). Nothing falls back to a
  local store. The next operation tries Redis again, so service resumes by itself.

The kernel is synchronous, so the stores use redis-py's synchronous client on the thread
that decides (the gateway's decision worker: the stores are not declared non-blocking,
so a decision that reads Redis runs under the gateway's deadline, one thread hop per
decision; ``benchmarks/replicas.py`` measures it). ``/healthz`` probes with the asyncio
client on the event loop (:meth:`RedisState.aprobe`).
"""

from __future__ import annotations

import secrets
import threading
import time
from typing import Any
from urllib.parse import SplitResult, parse_qs, urlsplit

import redis
import redis.asyncio
import redis.asyncio.retry
import redis.retry
from redis.backoff import NoBackoff

from fak_core.statedown import STATE_DOWN, StateUnavailable, register_state_down

__all__ = [
    "DEFAULT_STATE_TIMEOUT",
    "DEFAULT_STATE_TTL",
    "EPOCH_KEY",
    "FULL_FRACTION",
    "ORPHAN_BITS",
    "STATE_DOWN",
    "RedisState",
    "StateConfigError",
    "StateUnavailable",
    "memory_problem",
    "register_state_down",
]

#: Seconds one Redis command may take before it is an outage.
DEFAULT_STATE_TIMEOUT = 0.5
#: Seconds a trace's keys live after their last use (``fak serve --state-ttl``).
DEFAULT_STATE_TTL = 3600
#: The share of ``maxmemory`` at which new sessions (and the start) are refused.
FULL_FRACTION = 0.9
#: Seconds between two reads of Redis's memory figures by one replica.
MEMORY_POLL_S = 1.0
#: Bits in the shared orphan bitmap (2**24 bits: 2 MiB).
ORPHAN_BITS = 1 << 24
ORPHAN_KEY = "fak:orphans"
EPOCH_KEY = "fak:epoch"
_LOST = "FAKLOST"
#: Every script starts here: the epoch this replica found must still be there.
EPOCH_GUARD = f"""
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('{_LOST} the shared state was lost (fak:epoch changed)')
end
"""


#: Lua shared by the scripts that touch a trace (``ARGV[1]`` is the epoch, the salt):
#: ``life`` gives its owner and taint keys one expiry (one instant, from one ``TIME``),
#: ``orphaned``/``orphan`` read and set its bit in the orphan bitmap, ``FORGOT`` is what a
#: forgotten mark reads.
TRACE_LUA = (
    """
local FORGOT = 2
local function life(t, ttl)
  local now = redis.call('TIME')
  local at = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + tonumber(ttl)
  redis.call('PEXPIREAT', 'fak:owner:'..t, at)
  redis.call('PEXPIREAT', 'fak:taint:'..t, at)
end
local function obit(t)
  local h = redis.sha1hex(ARGV[1]..':'..t)
  return tonumber(string.sub(h, 1, 8), 16) % """
    + str(ORPHAN_BITS)
    + """
end
local function orphaned(t)
  return redis.call('GETBIT', '"""
    + ORPHAN_KEY
    + """', obit(t)) == 1
end
local function orphan(t)
  redis.call('SETBIT', '"""
    + ORPHAN_KEY
    + """', obit(t), 1)
end
"""
)


_SCHEMES = ("redis", "rediss", "unix")


class StateConfigError(ValueError):
    """A ``--state`` URL or Redis setting the gateway refuses to start with."""


def parse_url(url: str) -> str:
    """``redis://HOST:PORT/DB`` checked; the URL back, or :class:`StateConfigError`.

    The port and the database are ASCII digits (the redis URI scheme's ``DIGIT``): the
    client reads them with ``int``, which also reads other scripts' digits (U+0661, an
    Arabic-Indic one, is database 1) and silently drops a database it cannot read
    (``"²"`` would be database 0, another application's). A ``unix://`` URL's path is its
    socket; its database, as any URL's, may also be given as ``?db=N`` (each one given),
    which the client reads before the path."""
    try:
        parts: SplitResult | None = urlsplit(url)
    except ValueError:  # an IPv6 host without its bracket, or a netloc NFKC would change
        parts = None
    if parts is None or parts.scheme not in _SCHEMES or not url.startswith(parts.scheme + "://"):
        raise StateConfigError(
            f"--state {url}: expected redis://HOST:PORT/DB (or rediss:// or unix://)"
        )
    if parts.scheme == "unix":
        if not parts.path:
            raise StateConfigError(f"--state {url}: no socket; expected unix://PATH")
    else:
        if not parts.hostname:
            raise StateConfigError(f"--state {url}: no host; expected redis://HOST:PORT/DB")
        _port(url, parts)
        _database(url, parts.path.strip("/"))
    for db in parse_qs(parts.query).get("db", []):
        _database(url, db)
    return url


def _port(url: str, parts: SplitResult) -> None:
    """No port, or one of ASCII digits from 1 to 65535 (the client reads 0 as none)."""
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise StateConfigError(f"--state {url}: the port is a number from 1 to 65535")


def _database(url: str, db: str) -> None:
    if db and not _digits(db):
        raise StateConfigError(f"--state {url}: the database is a number, not {db!r}")


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


class RedisState:
    """The shared Redis: a synchronous client for the stores, an asyncio one for health."""

    def __init__(
        self, url: str, *, timeout: float = DEFAULT_STATE_TIMEOUT, ttl: float = DEFAULT_STATE_TTL
    ) -> None:
        self.url = parse_url(url)
        self.timeout = timeout
        if not 0 < ttl < float("inf"):
            raise StateConfigError(f"--state-ttl {ttl}: a positive number of seconds")
        self.ttl = ttl
        #: The expiry in milliseconds, as the scripts are given it.
        self.ttl_ms = max(1, int(ttl * 1000))
        self._memory: tuple[float, int, int] = (float("-inf"), 0, 0)
        options: dict[str, Any] = {
            "socket_timeout": timeout,
            "socket_connect_timeout": timeout,
            "health_check_interval": 0,
            "encoding_errors": "surrogatepass",  # as every other store encodes trace ids
        }
        # No retries: each client gets the retry policy of its own kind (redis-py 8 warns,
        # and drops a custom policy, when an asyncio client is given the synchronous one).
        self.client: redis.Redis = redis.Redis.from_url(
            url, retry=redis.retry.Retry(NoBackoff(), 0), **options
        )
        self._async_options = {**options, "retry": redis.asyncio.retry.Retry(NoBackoff(), 0)}
        self._aclient: redis.asyncio.Redis | None = None
        self.epoch = ""
        self._lock = threading.Lock()
        #: Operations that failed (outage, timeout, lost epoch) since start.
        self.failures = 0
        self.last_error = ""
        self._down_since: float | None = None

    # ------------------------------------------------------------------ start-up
    def check(self) -> None:
        """Refuse a Redis that could forget taint; adopt (or create) the epoch."""
        try:
            config = self.client.config_get("maxmemory-policy")
            config.update(self.client.config_get("appendonly"))
        except redis.RedisError as exc:
            raise StateConfigError(
                f"--state {self.url}: cannot read the Redis settings ({exc}); the gateway "
                "checks maxmemory-policy and appendonly before it trusts a Redis (CONFIG GET "
                "must be allowed)"
            ) from exc
        problem = settings_problem(config)
        if problem:
            raise StateConfigError(f"--state {self.url}: {problem}")
        try:
            # the orphan bitmap takes its full size now, not bit by bit as traces are raised
            # (Redis grows a string to the highest bit set): its 2 MiB count from the start
            if self.client.strlen(ORPHAN_KEY) < ORPHAN_BITS // 8:
                self.client.setbit(ORPHAN_KEY, ORPHAN_BITS - 1, 0)
            used, most = self._read_memory()
        except redis.RedisError as exc:
            raise StateConfigError(
                f"--state {self.url}: cannot size the orphan bitmap or read the memory "
                f"figures ({exc}); STRLEN, SETBIT and INFO must be allowed"
            ) from exc
        problem = memory_problem(used, most)
        if problem:
            raise StateConfigError(f"--state {self.url}: {problem}")
        try:
            self.client.set(EPOCH_KEY, secrets.token_hex(16), nx=True)
            epoch = self.client.get(EPOCH_KEY)
        except redis.RedisError as exc:
            raise StateConfigError(f"--state {self.url}: {exc}") from exc
        if not epoch:
            raise StateConfigError(f"--state {self.url}: could not read {EPOCH_KEY}")
        self.epoch = epoch.decode() if isinstance(epoch, bytes) else str(epoch)

    def _read_memory(self) -> tuple[int, int]:
        info = self.client.info("memory")
        used, most = int(info.get("used_memory", 0)), int(info.get("maxmemory", 0))
        self._memory = (time.monotonic(), used, most)
        return used, most

    def full(self) -> str | None:
        """Why no new session may start (Redis near its ``maxmemory``), or None. Reads the
        figures at most once per :data:`MEMORY_POLL_S` (one extra round trip then); a
        Redis that cannot be read is :class:`StateUnavailable`."""
        stamp, used, most = self._memory
        if time.monotonic() - stamp >= MEMORY_POLL_S:
            try:
                used, most = self._read_memory()
            except redis.RedisError as exc:
                self._failed(exc)
                raise StateUnavailable(self._why(exc)) from None
        return memory_problem(used, most)

    # ------------------------------------------------------------------ operations
    def script(self, body: str) -> Any:
        """A Lua script whose first act is the epoch check (``KEYS[1]``, ``ARGV[1]``)."""
        return self.client.register_script(EPOCH_GUARD + body)

    def run(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        """Run ``script`` under the epoch guard; any failure is :class:`StateUnavailable`."""
        try:
            out = script(keys=[EPOCH_KEY, *keys], args=[self.epoch, *args], client=self.client)
        except redis.RedisError as exc:
            self._failed(exc)
            raise StateUnavailable(self._why(exc)) from None
        if self._down_since is not None:
            with self._lock:
                self._down_since = None
        return out

    def _why(self, exc: Exception) -> str:
        text = str(exc)
        if _LOST in text:
            return (
                "the shared state was lost (Redis came back without fak:epoch): taint may "
                "have been forgotten, so every session is refused until an operator "
                "restarts the replicas"
            )
        return f"shared state unavailable ({type(exc).__name__}: {text[:120]})"

    def _failed(self, exc: Exception) -> None:
        with self._lock:
            self.failures += 1
            self.last_error = self._why(exc)
            if self._down_since is None:
                self._down_since = time.monotonic()

    # ------------------------------------------------------------------ health
    async def aprobe(self) -> dict[str, Any]:
        """``/healthz``'s view: PING, the epoch and the eviction policy, on the event loop."""
        if self._aclient is None:
            self._aclient = redis.asyncio.Redis.from_url(self.url, **self._async_options)
        client = self._aclient
        out: dict[str, Any] = {"backend": "redis", "failures": self.failures}
        try:
            epoch = await client.get(EPOCH_KEY)
            config = await client.config_get("maxmemory-policy")
            config.update(await client.config_get("appendonly"))
            info = await client.info("memory")
            keys = await client.dbsize()
        except redis.RedisError as exc:
            self._failed(exc)
            return {**out, "failures": self.failures, "ok": False, "error": self._why(exc)}
        used, most = int(info.get("used_memory", 0)), int(info.get("maxmemory", 0))
        out.update(
            keys=int(keys),
            used_memory=used,
            maxmemory=most,
            ttl_s=self.ttl,
            orphan_bits=ORPHAN_BITS,
        )
        found = epoch.decode() if isinstance(epoch, bytes) else epoch
        if found != self.epoch:
            why = self._why(RuntimeError(_LOST))
            return {**out, "ok": False, "error": why}
        problem = settings_problem(config) or memory_problem(used, most)
        if problem:
            return {**out, "ok": False, "error": problem}
        return {**out, "ok": True}

    def stats(self) -> dict[str, Any]:
        with self._lock:
            down = self._down_since
        return {
            "backend": "redis",
            "failures": self.failures,
            "down_s": round(time.monotonic() - down, 3) if down is not None else 0,
            "last_error": self.last_error,
        }

    def close(self) -> None:
        self.client.close()


def settings_problem(config: dict[Any, Any]) -> str | None:
    """Why these Redis settings could forget taint (None: they cannot)."""
    conf = {_text(k): _text(v) for k, v in config.items()}
    policy = conf.get("maxmemory-policy", "")
    if policy != "noeviction":
        return (
            f"Redis maxmemory-policy is {policy or 'unknown'!r}: it may evict a taint mark, "
            "which would then read as clean; set maxmemory-policy noeviction"
        )
    if conf.get("appendonly") != "yes":
        return (
            "Redis appendonly is off: a restart would forget every write since the last "
            "snapshot, taint included; set appendonly yes (appendfsync everysec or always)"
        )
    return None


def memory_problem(used: int, most: int) -> str | None:
    """Why a Redis using ``used`` of ``most`` bytes (``maxmemory``; 0: no limit) takes no
    new session: at :data:`FULL_FRACTION` of its limit, the room left is kept for the
    sessions already open."""
    if most > 0 and used >= FULL_FRACTION * most:
        return (
            f"Redis holds {used} bytes of its maxmemory {most} (at least "
            f"{FULL_FRACTION:.0%}): new sessions are refused so that open ones keep "
            "working; raise maxmemory, lower --state-ttl, or wait for idle sessions to expire"
        )
    return None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
