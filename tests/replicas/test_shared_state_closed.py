"""C4.4 for the shared state: a Redis that could forget, or did, or cannot answer, is refused.

The URL witness builds ``--state`` URLs from parts it knows to be valid or not (the redis
URI scheme's ``DIGIT`` is ASCII; other scripts' digits, superscripts, signs, blanks, ports
out of range, a path or a query naming no number) and expects a refusal exactly when one
part is not; for an accepted URL it asks the Redis client itself which database, port and
socket it would use, and expects the ones the URL spells. The settings witness writes out
the refusal for each setting by hand. The rest runs a real ``redis-server`` of its own:
start-up checks through :func:`~fak_core.gateway.replicas.open_shared` (an evicting policy,
no append-only file, settings or epoch that cannot be read; the timeout and expiry it is
given; the orphan bitmap grown whole with the bits it held), the epoch one replica writes
and the next adopts, every failure of an operation (lost data, an error, a server gone) as
:class:`~fak_core.statedown.StateUnavailable` with its reason and its count, and
``/healthz``'s probe.
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fak_core import Kernel, Policy
from fak_core.gateway.bootstrap import BootstrapError
from fak_core.gateway.redis_sessions import RedisSessions
from fak_core.gateway.replicas import attach_shared, open_shared, shared_kernel_options
from fak_core.gateway.state import GatewayState
from fak_core.redis_state import (
    DEFAULT_STATE_TIMEOUT,
    DEFAULT_STATE_TTL,
    ORPHAN_BITS,
    ORPHAN_KEY,
    RedisState,
    StateConfigError,
    settings_problem,
)
from fak_core.statedown import StateUnavailable

from .support import RedisServer, closing, free_port
from .support import close_states as close_states  # autouse: closes the shared states

LOST = (
    "the shared state was lost (Redis came back without fak:epoch): taint may have been "
    "forgotten, so every session is refused until an operator restarts the replicas"
)
CANNOT_READ = (
    "; the gateway checks maxmemory-policy and appendonly before it trusts a Redis "
    "(CONFIG GET must be allowed)"
)
APPENDONLY = (
    "Redis appendonly is off: a restart would forget every write since the last snapshot, "
    "taint included; set appendonly yes (appendfsync everysec or always)"
)
EXPECTED = "expected redis://HOST:PORT/DB (or rediss:// or unix://)"


def policy_problem(policy: str) -> str:
    return (
        f"Redis maxmemory-policy is {policy!r}: it may evict a taint mark, which would then "
        "read as clean; set maxmemory-policy noeviction"
    )


def opened(url: str, timeout: float | None = None) -> RedisState:
    shared = open_shared(url, timeout)
    closing(shared)
    return shared


# ---------------------------------------------------------------------------- the URL
# Each part: (text, valid). Digits other than ASCII are what ``int`` (and ``isdigit``)
# read too: superscripts, Arabic-Indic, Devanagari, fullwidth, mathematical.
ASCII_NUMBERS = ("0", "1", "9", "15", "007", "65535")
NOT_NUMBERS = (
    "\u00b2", "1\u00b2", "\u0661", "\u0661\u0662", "\u0967", "\uff11", "\U0001d7d9",
    "+1", "-1", " 1", "1 ", "1_0", "0x1", "x", "1.0", "\u00a01",
)  # fmt: skip
HOSTS = ("localhost", "127.0.0.1", "[::1]", "redis.internal", "user:pw@cache.example")


@st.composite
def redis_urls(draw: st.DrawFn) -> tuple[str, bool, dict[str, Any]]:
    """A URL, whether it is valid, and (if valid) what the client must connect to."""
    scheme = draw(st.sampled_from(["redis", "rediss", "unix", "REDIS", "http", "redis:"]))
    valid = scheme in ("redis", "rediss", "unix")
    want: dict[str, Any] = {}
    if scheme == "unix":
        path = draw(st.sampled_from(["/tmp/redis.sock", "/run/r/7", "/0", ""]))
        valid &= path != ""
        url, want["path"] = f"unix://{path}", path
    else:
        host = draw(st.sampled_from((*HOSTS, "")))
        valid &= host != ""
        port = draw(st.one_of(st.none(), st.sampled_from([*ASCII_NUMBERS, "", "65536", "99999"]),
                              st.sampled_from(NOT_NUMBERS)))  # fmt: skip
        number = re.fullmatch("[0-9]+", port or "") is not None
        valid &= not port or (number and 0 < int(port or "0") < 65536)
        want["port"] = int(port) if port and number else 6379
        db = draw(st.one_of(st.none(), st.sampled_from([*ASCII_NUMBERS, ""]),
                            st.sampled_from(NOT_NUMBERS)))  # fmt: skip
        if db is not None:
            valid &= db == "" or db in ASCII_NUMBERS
            want["db"] = int(db) if db in ASCII_NUMBERS else 0
        else:
            want["db"] = 0
        url = f"{scheme}://{host}" + ("" if port is None else f":{port}")
        url += "" if db is None else f"/{db}"
    number = st.one_of(st.sampled_from(ASCII_NUMBERS), st.sampled_from(NOT_NUMBERS))
    queries = draw(st.lists(number, max_size=2))
    if queries:  # the client reads the first; every one given must be a number
        valid &= all(q in ASCII_NUMBERS for q in queries)
        url += "?" + "&".join(f"db={q}" for q in queries)
        want["db"] = int(queries[0]) if queries[0] in ASCII_NUMBERS else None
    return url, valid, want


@pytest.mark.fak_theorem("C4.4")
@settings(max_examples=300, deadline=None)
@given(case=redis_urls())
@example(case=("redis://127.0.0.1:6379/\u00b2", False, {}))  # the client would use db 0
@example(case=("redis://127.0.0.1:6379/\u0661", False, {}))  # the client would use db 1
@example(case=("redis://127.0.0.1:6379/0?db=\u0661", False, {}))
@example(case=("redis://127.0.0.1:8\u00b2/0", False, {}))  # the client raises ValueError
@example(case=("redis://127.0.0.1:0/0", False, {}))  # the client would use 6379
@example(case=("REDIS://127.0.0.1:6379/0", False, {}))  # the client raises ValueError
@example(case=("redis://[::1/0", False, {}))  # urlsplit raises ValueError
@example(case=("unix:///run/redis.sock", True, {"path": "/run/redis.sock"}))
def test_a_state_url_is_refused_unless_the_client_connects_where_it_says(
    case: tuple[str, bool, dict[str, Any]],
) -> None:
    url, valid, want = case
    if not valid:
        with pytest.raises(StateConfigError, match=f"^--state {re.escape(url)}: "):
            RedisState(url)
        with pytest.raises(BootstrapError, match=f"^--state {re.escape(url)}: "):
            open_shared(url)
        return
    state = RedisState(url)
    try:
        assert state.url == url
        got = state.client.connection_pool.connection_kwargs
        for key, value in want.items():
            assert got.get(key, 6379 if key == "port" else 0) == value, (url, key, got)
    finally:
        state.close()


@pytest.mark.fak_theorem("C4.4")
@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:6379/0", EXPECTED),
        ("redis:/127.0.0.1/0", EXPECTED),
        ("redis://[::1/0", EXPECTED),
        ("redis://", "no host; expected redis://HOST:PORT/DB"),
        ("unix://", "no socket; expected unix://PATH"),
        ("redis://127.0.0.1:\u0661/0", "the port is a number from 1 to 65535"),
        ("redis://127.0.0.1:65536/0", "the port is a number from 1 to 65535"),
        ("redis://127.0.0.1/\u00b2", "the database is a number, not '\u00b2'"),
        ("redis://127.0.0.1/0?db=x&db=1", "the database is a number, not 'x'"),
        ("redis://127.0.0.1/0?db=1&db=\u00b2", "the database is a number, not '\u00b2'"),
    ],
)
def test_a_refused_url_says_what_to_pass(url: str, why: str) -> None:
    with pytest.raises(StateConfigError) as info:
        RedisState(url)
    assert str(info.value) == f"--state {url}: {why}"


# ---------------------------------------------------------------------------- settings
POLICIES = ("noeviction", "allkeys-lru", "volatile-ttl", "", "NOEVICTION", "noeviction ", None)
APPENDS = ("yes", "no", "YES", "", None)


@pytest.mark.fak_theorem("C4.4")
@settings(max_examples=120, deadline=None)
@given(
    policy=st.sampled_from(POLICIES),
    append=st.sampled_from(APPENDS),
    raw=st.lists(st.booleans(), min_size=4, max_size=4),
    extra=st.booleans(),
)
def test_settings_that_could_forget_are_named(
    policy: str | None, append: str | None, raw: list[bool], extra: bool
) -> None:
    def put(flag_key: bool, flag_value: bool, key: str, value: str) -> None:
        config[key.encode() if flag_key else key] = value.encode() if flag_value else value

    config: dict[Any, Any] = {}
    if policy is not None:
        put(raw[0], raw[1], "maxmemory-policy", policy)
    if append is not None:
        put(raw[2], raw[3], "appendonly", append)
    if extra:
        config[b"maxmemory"] = b"0"
    if policy != "noeviction":
        want: str | None = policy_problem(policy or "unknown")
    elif append != "yes":
        want = APPENDONLY
    else:
        want = None
    assert settings_problem(config) == want


# ---------------------------------------------------------------------------- start-up
@pytest.mark.fak_theorem("C4.4")
def test_a_redis_that_could_forget_refuses_the_start(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    url = own_redis.url
    first = opened(url)
    assert first.timeout == DEFAULT_STATE_TIMEOUT and opened(url, 0.25).timeout == 0.25
    assert first.ttl == DEFAULT_STATE_TTL  # the sessions' expiry (C4.12) it is given, or this
    short = closing(open_shared(url, ttl=0.4))
    assert (short.ttl, short.ttl_ms, short.timeout) == (0.4, 400, DEFAULT_STATE_TIMEOUT)
    assert re.fullmatch("[0-9a-f]{32}", first.epoch)
    second = opened(url)  # the next replica adopts the epoch the first wrote
    assert second.epoch == first.epoch == own_redis.command("GET", "fak:epoch")
    for setting, value, why in (
        ("maxmemory-policy", "allkeys-lru", policy_problem("allkeys-lru")),
        ("maxmemory-policy", "volatile-lru", policy_problem("volatile-lru")),
    ):
        own_redis.command("CONFIG", "SET", setting, value)
        with pytest.raises(BootstrapError) as info:
            opened(url)
        assert str(info.value) == f"--state {url}: {why}"
        unchecked = RedisState(url)
        closing(unchecked)
        with pytest.raises(StateConfigError) as again:
            unchecked.check()
        assert str(again.value) == f"--state {url}: {why}"
        own_redis.command("CONFIG", "SET", "maxmemory-policy", "noeviction")
    assert opened(url).epoch == first.epoch
    # turning the append-only file on at run time rewrites it, which a stop then waits for:
    # a server started without it
    snapshots = RedisServer(tmp_path / "no-aof", appendonly="no")
    try:
        with pytest.raises(BootstrapError) as info:
            opened(snapshots.url)
        assert str(info.value) == f"--state {snapshots.url}: {APPENDONLY}"
    finally:
        snapshots.stop()


@pytest.mark.fak_theorem("C4.4")
def test_the_start_sizes_the_orphan_bitmap_whole_and_keeps_its_bits(
    own_redis: RedisServer,
) -> None:
    """Whatever bits a bitmap already holds (none, or any up to the last), a start leaves it
    2 MiB long holding exactly those bits: it is grown, never written over."""
    client = redis.Redis.from_url(own_redis.url)
    whole = ORPHAN_BITS // 8

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.sets(st.integers(0, ORPHAN_BITS - 1), max_size=4))
    @example(set())  # a new Redis: no bitmap yet
    @example({ORPHAN_BITS - 1})  # the last bit set: the bitmap is whole already
    @example({ORPHAN_BITS - 9})  # one byte short of whole
    @example({8 * (ORPHAN_BITS // 9)})  # a bitmap longer than a ninth short of whole
    def run(bits: set[int]) -> None:
        client.delete(ORPHAN_KEY)
        for bit in bits:
            client.setbit(ORPHAN_KEY, bit, 1)
        closing(RedisState(own_redis.url)).check()
        assert client.strlen(ORPHAN_KEY) == whole
        assert client.bitcount(ORPHAN_KEY) == len(bits)
        assert all(client.getbit(ORPHAN_KEY, bit) for bit in bits)

    try:
        run()
    finally:
        client.close()


@pytest.mark.fak_theorem("C4.4")
def test_settings_or_an_epoch_that_cannot_be_read_refuse_the_start(
    own_redis: RedisServer,
) -> None:
    down = f"redis://127.0.0.1:{free_port()}/0"
    with pytest.raises(BootstrapError) as info:
        opened(down)
    message = str(info.value)
    assert message.startswith(f"--state {down}: cannot read the Redis settings (")
    assert message.endswith(")" + CANNOT_READ)
    own_redis.command("ACL", "SETUSER", "nocfg", "on", ">pw", "~*", "&*", "+@all", "-config")
    no_config = f"redis://nocfg:pw@127.0.0.1:{own_redis.port}/0"
    with pytest.raises(BootstrapError, match=r"cannot read the Redis settings \(.*no permissions"):
        opened(no_config)
    own_redis.command("ACL", "SETUSER", "noset", "on", ">pw", "~*", "&*", "+@all", "-set")
    no_set = f"redis://noset:pw@127.0.0.1:{own_redis.port}/0"
    with pytest.raises(BootstrapError) as info:
        opened(no_set)
    assert str(info.value).startswith(f"--state {no_set}: ") and "no permissions" in str(info.value)
    assert own_redis.command("EXISTS", "fak:epoch") == "0"
    own_redis.command("SET", "fak:epoch", "")  # an epoch no replica could have written
    with pytest.raises(BootstrapError) as info:
        opened(own_redis.url)
    assert str(info.value) == f"--state {own_redis.url}: could not read fak:epoch"


@pytest.mark.fak_theorem("C4.4")
def test_without_the_redis_client_the_start_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)  # what an install without it does
    monkeypatch.delitem(sys.modules, "fak_core.redis_state")
    url = "redis://127.0.0.1:6379/0"
    with pytest.raises(BootstrapError) as info:
        open_shared(url)
    assert str(info.value) == (
        f"--state {url}: the Redis client is not installed (redis); pip install 'pytest-fak[redis]'"
    )


# ---------------------------------------------------------------------------- operations
_ECHO = "return {KEYS[2], ARGV[2]}"
_FAIL = "return redis.error_reply('ERR ' .. ARGV[2])"


@pytest.mark.fak_theorem("C4.4")
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    texts=st.lists(
        st.one_of(
            st.text(st.sampled_from("abcXYZ019 -:"), min_size=1, max_size=260).map(str.strip),
            st.sampled_from(["FAKLOST", "a FAKLOST b", "faklost"]),
        ).filter(bool),
        min_size=1,
        max_size=4,
    )
)
@example(texts=["x" * 119, "y" * 120, "z" * 121])  # the reason keeps 120 characters
@example(texts=["ab " * 80, "a FAKLOST b"])
def test_every_failed_operation_is_a_refusal_with_its_reason(
    redis_server: RedisServer, texts: list[str]
) -> None:
    state = opened(redis_server.url)
    echo, fail = state.script(_ECHO), state.script(_FAIL)
    key = "fak:test:" + uuid.uuid4().hex
    assert state.run(echo, [key], ["v"]) == [key.encode(), b"v"]
    assert state.stats()["down_s"] == 0
    for n, text in enumerate(texts, 1):
        with pytest.raises(StateUnavailable) as info:
            state.run(fail, [key], [text])
        lost = "FAKLOST" in text
        want = LOST if lost else f"shared state unavailable (ResponseError: {text[:120]})"
        assert str(info.value) == want
        assert (state.failures, state.last_error) == (n, want)
    time.sleep(0.02)
    assert state.stats()["down_s"] >= 0.02  # timed from the first failure
    assert state.run(echo, [key], ["w"]) == [key.encode(), b"w"]  # service resumes
    assert state.stats() == {
        "backend": "redis",
        "failures": len(texts),
        "down_s": 0,
        "last_error": want,
    }


@pytest.mark.fak_theorem("C4.4")
def test_lost_data_and_a_gone_server_are_refusals(own_redis: RedisServer) -> None:
    state = opened(own_redis.url)
    echo = state.script(_ECHO)
    assert state.run(echo, ["k"], ["v"]) == [b"k", b"v"]
    own_redis.command("FLUSHALL")  # a restart without its files
    with pytest.raises(StateUnavailable) as info:
        state.run(echo, ["k"], ["v"])
    assert str(info.value) == LOST
    own_redis.command("SET", "fak:epoch", "0" * 32)  # another epoch: still not ours
    with pytest.raises(StateUnavailable, match=re.escape(LOST)):
        state.run(echo, ["k"], ["v"])
    own_redis.command("SET", "fak:epoch", state.epoch)
    assert state.run(echo, ["k"], ["v"]) == [b"k", b"v"]
    own_redis.stop()
    with pytest.raises(StateUnavailable) as info:
        state.run(echo, ["k"], ["v"])
    assert str(info.value).startswith("shared state unavailable (ConnectionError: ")
    assert state.failures == 3


# ---------------------------------------------------------------------------- /healthz
FIGURES = ("keys", "used_memory", "maxmemory", "ttl_s", "orphan_bits")


async def _probes(state: RedisState, own_redis: RedisServer) -> list[dict[str, Any]]:
    try:
        out = [await state.aprobe()]
        own_redis.command("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
        out.append(await state.aprobe())
        own_redis.command("CONFIG", "SET", "maxmemory-policy", "noeviction")
        own_redis.command("SET", "fak:epoch", "f" * 32)
        out.append(await state.aprobe())
        own_redis.command("DEL", "fak:epoch")
        out.append(await state.aprobe())
        own_redis.command("SET", "fak:epoch", state.epoch)
        out.append(await state.aprobe())
        own_redis.stop()
        out += [await state.aprobe(), await state.aprobe()]
        own_redis.start()
        out.append(await state.aprobe())
        return out
    finally:
        # closed on the loop that made it, whatever failed above (a mutant re-run): a
        # client left for the collector warns later, in whichever test is running then
        if state._aclient is not None:
            await state._aclient.aclose()


@pytest.mark.fak_theorem("C4.4")
def test_healthz_is_ok_only_while_redis_answers_with_its_epoch_and_safe_settings(
    own_redis: RedisServer,
) -> None:
    state = opened(own_redis.url)
    probes = asyncio.run(_probes(state, own_redis))
    head = {"backend": "redis"}
    keys = []
    for probe in probes[:5] + probes[7:]:  # Redis answered: its figures (C4.12)
        figures = {k: probe.pop(k) for k in FIGURES}
        assert figures["ttl_s"] == state.ttl and figures["orphan_bits"] == ORPHAN_BITS
        assert figures["used_memory"] > 0 and figures["maxmemory"] == 0  # no limit set
        keys.append(figures["keys"])
    assert keys[:5] == [2, 2, 2, 1, 2]  # the epoch and the orphan bitmap
    assert probes[:5] == [
        {**head, "failures": 0, "ok": True},
        {**head, "failures": 0, "ok": False, "error": policy_problem("allkeys-lru")},
        {**head, "failures": 0, "ok": False, "error": LOST},
        {**head, "failures": 0, "ok": False, "error": LOST},
        {**head, "failures": 0, "ok": True},
    ]
    for n, probe in enumerate(probes[5:7], 1):  # a failed probe counts itself
        assert set(probe) == {"backend", "failures", "ok", "error"}
        assert (probe["backend"], probe["failures"], probe["ok"]) == ("redis", n, False)
        assert probe["error"].startswith("shared state unavailable (ConnectionError: ")
    assert probes[7] == {**head, "failures": 2, "ok": True}
    assert state.last_error == probes[6]["error"]


# ---------------------------------------------------------------------------- the wiring
@pytest.mark.fak_theorem("C4.4")
def test_a_gateway_wired_to_the_shared_state_refuses_while_it_is_down(
    own_redis: RedisServer,
) -> None:
    """Two gateways on one Redis: the owner table is the shared one (a trace one claimed is
    refused to another token on the other), and while Redis is down a decision is DENY/
    STATE_DOWN (a reason the kernel knows), a claim is refused and ``/healthz``'s probe
    reports the failure."""
    policy = Policy(allow=("send_email",))
    gateways = []
    for _ in range(2):
        shared = opened(own_redis.url)
        state = GatewayState(Kernel(policy, **shared_kernel_options(shared)))
        attach_shared(state, shared)
        assert state.shared is shared and isinstance(state.sessions, RedisSessions)
        gateways.append(state)
    a, b = gateways
    trace = "c44-" + uuid.uuid4().hex
    token = a.sessions.claim(trace, None)
    assert token is not None
    assert b.sessions.permits(trace, token, None) == "owner"
    assert b.sessions.permits(trace, "another-token-0123", None) is None
    own_redis.stop()
    call = b.build_call("send_email", '{"to": "a@example.com"}', "c44-" + uuid.uuid4().hex)
    verdict = b.adjudicate(call)["verdict"]
    assert (verdict["kind"], verdict["reason"]) == ("DENY", "STATE_DOWN")
    assert b.kernel.reasons.code("STATE_DOWN") is not None
    with pytest.raises(StateUnavailable):  # who owns it is unknown: refused, no token
        b.sessions.claim("c44-" + uuid.uuid4().hex, None)
    assert b.shared is not None
    assert asyncio.run(_probe_once(b.shared))["ok"] is False


async def _probe_once(state: RedisState) -> dict[str, Any]:
    try:
        return await state.aprobe()
    finally:
        if state._aclient is not None:
            await state._aclient.aclose()
