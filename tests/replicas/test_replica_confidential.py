"""Confidential values (C4.10) and identifiers (C4.9) in the shared Redis, against a real
redis-server: the shared stores answer as the in-memory ones do whichever replica
recorded what, forget by the byte counts they declare, and
whatever they forget, or cannot reach, never reads as "carries no secret"."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fak_core import GroundingStore
from fak_core.confidential import FORGOTTEN_BUCKETS, MAX_VALUES, ConfidentialStore
from fak_core.redis_confidential import (
    SESSION_OVERHEAD,
    VALUE_OVERHEAD,
    RedisConfidential,
)
from fak_core.redis_state import RedisState
from fak_core.redis_stores import RedisGroundingStore
from fak_core.statedown import StateUnavailable

from .support import JSON, RedisServer, Replica, shared_state
from .support import close_states as close_states  # autouse: closes the shared states


def _trace() -> str:
    return "cv-" + uuid.uuid4().hex


# Values as a declared result field holds them: cards, passports, passwords (one with a
# lone surrogate, one too short to keep, one that is part of another).
VALUES = (
    "4237-4252-7456-2574",
    "HGK137803",
    "hunter2hunter2",
    "p\u00e4ssw\u00f6rd-\udc00-99",
    "12-34",
    "4252-7456",
    "\uff21\uff22\uff23\uff11\uff12\uff13",  # fullwidth ABC123: NFKC folds it
)
# What a sink call's arguments may hold: the values spelled otherwise, parts, neighbours.
TEXTS = (
    "card 4237 4252 7456 2574",
    "passport: hgk 137 803",
    "HUNTER2 hunter2!",
    "P\u00c4SSW\u00d6RD 99",
    "number 4237 4252",
    "abc-123",
    "the quarterly report",
    "12-34",
    "",
)
ORIGINS = ("get_user", "read_\udcffvault", "bank statement")
arg = st.recursive(
    st.one_of(st.sampled_from(TEXTS), st.integers(0, 10**20), st.floats(allow_nan=False)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from((*TEXTS, "to", "body")), inner, max_size=3),
    ),
    max_leaves=6,
)
args = st.one_of(st.dictionaries(st.sampled_from((*TEXTS, "to", "body")), arg, max_size=3), arg)
ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("record"),
            st.integers(0, 2),
            st.lists(st.sampled_from(VALUES), max_size=4),
            st.sampled_from(ORIGINS),
        ),
        st.tuples(st.just("reset"), st.integers(0, 2), st.just([]), st.just("")),
    ),
    max_size=10,
)


# Values longer than the 512 bytes a kept value is cut to, with a character of two or
# three bytes of UTF-8 across the cut, and texts holding them whole or just that prefix.
LONG = ("x" + "\u00e9" * 300, "\u4e2d" * 200)
LONG_TEXTS = (LONG[0], "X" + "\u00c9" * 255, "\u4e2d" * 171, "\u4e2d" * 169)
# Recordings as the kernel makes them: ``whole`` is False when the reading stopped at a
# bound (C4.10), so the session refuses every call.
wops = st.lists(
    st.one_of(
        st.tuples(
            st.just("record"),
            st.integers(0, 2),
            st.lists(st.sampled_from((*VALUES, *LONG)), max_size=4),
            st.sampled_from(ORIGINS),
            st.booleans() | st.just(True),
        ),
        st.tuples(st.just("reset"), st.integers(0, 2), st.just([]), st.just(""), st.just(True)),
    ),
    max_size=10,
)
wargs = st.one_of(
    args,
    st.dictionaries(st.sampled_from(("to", "body")), st.sampled_from(LONG_TEXTS), max_size=2),
)


def _apply(store: ConfidentialStore, traces: list[str], op: tuple[Any, ...]) -> None:
    action, which, values, origin, *whole = op
    if action == "record":
        store.record(traces[which], values, origin, *whole)
    else:
        store.reset(traces[which])


@pytest.mark.fak_theorem("C4.7")
@settings(max_examples=30, deadline=None)
@given(script=wops, checks=st.lists(wargs, min_size=1, max_size=4))
def test_the_shared_confidential_store_answers_as_the_memory_store(
    redis_server: RedisServer, script: list[Any], checks: list[Any]
) -> None:
    """Recordings (whole readings or partial ones, values past the byte cut) and resets
    over three sessions, each sent to replica A or B: for every session and every argument
    shape, the pointer and origin a refusal names (or none) are the in-memory store's, on
    both replicas."""
    shared = [RedisConfidential(shared_state(redis_server.url)) for _ in range(2)]
    memory = ConfidentialStore()
    traces = [_trace() for _ in range(3)]
    for n, op in enumerate(script):
        _apply(shared[n % 2], traces, op)
        _apply(memory, traces, op)
    for store in shared:
        for t in traces:
            for a in checks:
                assert store.carried(t, a) == memory.carried(t, a), (t, a)


@pytest.mark.fak_theorem("C4.7")
def test_a_session_past_its_value_bound_carries_a_secret_on_every_call(
    redis_server: RedisServer,
) -> None:
    """MAX_VALUES values are kept and matched; one more overflows the session on both
    replicas (every call refused, as in one process) until it is reset."""
    a, b = (RedisConfidential(shared_state(redis_server.url)) for _ in range(2))
    full, over = _trace(), _trace()
    values = [f"secret-{n:06d}" for n in range(MAX_VALUES + 1)]
    a.record(full, values[:MAX_VALUES], "vault")
    b.record(full, values[:3], "vault")  # held already: no overflow
    assert b.carried(full, {"body": "the report"}) is None
    assert b.carried(full, {"body": values[MAX_VALUES - 1]}) == ("/body", "vault")
    a.record(over, values[:MAX_VALUES], "vault")
    a.record(over, values[MAX_VALUES:], "vault")
    for store in (a, b):
        assert store.carried(over, {"body": "the report"}) == (
            "",
            "more confidential values than the session keeps",
        )
    b.reset(over)
    assert a.carried(over, {"body": values[0]}) is None


@pytest.mark.fak_theorem("C4.7")
def test_the_first_recorded_value_is_named_whatever_order_redis_keeps(
    redis_server: RedisServer,
) -> None:
    """A session's hash past ``hash-max-listpack-entries`` (512 by default, lowered here
    as an operator may, and put back after) is kept unordered by Redis: a text carrying
    every value is still refused naming the first recorded, as one process does."""
    setting = redis_server.command("CONFIG", "GET", "hash-max-listpack-entries").split()[-1]
    redis_server.command("CONFIG", "SET", "hash-max-listpack-entries", "4")
    try:
        a, b = (RedisConfidential(shared_state(redis_server.url)) for _ in range(2))
        many, memory = _trace(), ConfidentialStore()
        values = [f"secret-{n:06d}" for n in range(64)]
        for n, value in enumerate(values):
            for store in (a, memory):
                store.record(many, [value], f"tool-{n}")
        assert redis_server.command("OBJECT", "ENCODING", f"fak:cv:{many}") == "hashtable"
    finally:
        redis_server.command("CONFIG", "SET", "hash-max-listpack-entries", setting)
    everything = {"body": " ".join(reversed(values))}
    assert b.carried(many, everything) == memory.carried(many, everything) == ("/body", "tool-0")


def _bucket(trace: str) -> int:
    digest = hashlib.blake2b(trace.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % FORGOTTEN_BUCKETS


def _forget_confidential(state: RedisState) -> None:
    keys = list(state.client.scan_iter("fak:c*"))
    if keys:
        state.client.delete(*keys)


@pytest.mark.fak_theorem("C4.7")
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(script=ops, max_bytes=st.integers(200, 900))
def test_past_the_byte_bound_a_forgotten_session_never_reads_clean(
    own_redis: RedisServer, script: list[Any], max_bytes: int
) -> None:
    """A byte bound small enough to drop sessions: the bytes kept are the model's (a
    session's overhead and trace id, each distinct value's overhead and origin), the
    least recently recorded session leaves first, and a session that left refuses every
    call on both replicas (so does any session in its bucket), while those kept answer as
    the in-memory store does."""
    states = [shared_state(own_redis.url) for _ in range(2)]
    _forget_confidential(states[0])
    shared = [RedisConfidential(s, max_bytes=max_bytes) for s in states]
    memory = ConfidentialStore()
    traces = [_trace() for _ in range(3)]
    # the model: sessions by last record, their bytes and values, the buckets marked, the
    # sessions that started in a marked bucket
    live: OrderedDict[str, tuple[int, set[str]]] = OrderedDict()
    marked: set[int] = set()
    forgotten: set[str] = set()
    evicted = 0
    for n, (action, which, values, origin) in enumerate(script):
        t = traces[which]
        _apply(shared[n % 2], traces, (action, which, values, origin))
        _apply(memory, traces, (action, which, values, origin))
        if action == "reset":
            live.pop(t, None)
            forgotten.discard(t)
            continue
        kept = {_compact(v) for v in values if len(_compact(v)) >= 6}
        if not kept:
            continue
        if t not in live and _bucket(t) in marked:
            forgotten.add(t)
        cost, held = live.pop(t, (SESSION_OVERHEAD + len(t), set()))
        for c in kept - held:
            held.add(c)
            cost += VALUE_OVERHEAD + len(f"{c}{origin}".encode("utf-8", "surrogatepass"))
        live[t] = (cost, held)
        while sum(c for c, _ in live.values()) > max_bytes and len(live) > 1:
            old = next(iter(live))
            if old == t:
                break
            del live[old]
            forgotten.discard(old)
            marked.add(_bucket(old))
            evicted += 1
        client = states[0].client
        assert int(client.get("fak:cbytes") or 0) == sum(c for c, _ in live.values())
        assert int(client.get("fak:cevicted") or 0) == evicted
    stranger = _trace()
    gone = ("", "a session whose confidential values may have been forgotten")
    for store in shared:
        for t in [*traces, stranger]:
            for a in ({"body": "the quarterly report"}, {"body": TEXTS[0]}, TEXTS[1]):
                got = store.carried(t, a)
                # started again in a marked bucket, or not kept in one: refused
                if t in forgotten or (t not in live and _bucket(t) in marked):
                    assert got == gone
                elif t in live:  # never evicted: it keeps what one process keeps
                    assert got == memory.carried(t, a)
                else:
                    assert got is None


def _compact(text: str) -> str:
    """The oracle's compact form, written again here: NFKC, case-folded, alphanumerics."""
    import unicodedata

    return "".join(c for c in unicodedata.normalize("NFKC", text).casefold() if c.isalnum())


@pytest.mark.fak_theorem("C4.7")
def test_an_unreachable_or_lost_redis_never_reads_as_no_secret(own_redis: RedisServer) -> None:
    """Redis down: recording and checking raise StateUnavailable (the sink gate's
    DENY/STATE_DOWN), never "carries nothing"; back up, the values are there; its data
    lost (the epoch gone): every call raises until the replicas are restarted."""
    store = RedisConfidential(shared_state(own_redis.url, timeout=0.3))
    trace = _trace()
    store.record(trace, ["4237-4252-7456-2574"], "get_user")
    own_redis.stop()
    for check in (
        lambda: store.carried(trace, {"body": "the quarterly report"}),
        lambda: store.carried(_trace(), {"body": "hello"}),
        lambda: store.record(trace, ["HGK137803"], "get_user"),
        lambda: store.reset(trace),
    ):
        with pytest.raises(StateUnavailable):
            check()
    own_redis.start()
    assert store.carried(trace, {"body": TEXTS[0]}) == ("/body", "get_user")
    own_redis.command("FLUSHALL")
    for t in (trace, _trace()):
        with pytest.raises(StateUnavailable):
            store.carried(t, {"body": "the quarterly report"})


# ------------------------------------------------------------------ identifiers (C4.9)
IDS = (
    "Dana Reyes",
    "carol@example.net",
    "GB33 BUKB 2020 1555 5555 55",
    "https://Shop.Example.com/pay/",
    "acme",
    "x" * 300,
)
CHECKED = (*IDS, "dana", "reyes dana", "CAROL@EXAMPLE.NET", "GB33BUKB20201555555555", "Acme")
id_ops = st.lists(
    st.one_of(
        st.tuples(st.just("ids"), st.integers(0, 1), st.lists(st.sampled_from(IDS), max_size=8)),
        st.tuples(
            st.just("trusted"),
            st.integers(0, 1),
            st.lists(st.sampled_from(("pay dana", "and acme", "send it")), max_size=2),
        ),
        st.tuples(st.just("reset"), st.integers(0, 1), st.just([])),
    ),
    max_size=10,
)


@pytest.mark.fak_theorem("C4.7")
@settings(max_examples=30, deadline=None)
@given(script=id_ops, trusted_bytes=st.sampled_from([900, 2000, 256 << 10]))
def test_identifiers_recorded_on_one_replica_ground_as_in_one_process(
    redis_server: RedisServer, script: list[Any], trusted_bytes: int
) -> None:
    """Identifier values recorded on either replica ground on both exactly what they
    ground in one process: each as a whole value (never its words), none past a quarter
    of the session's trusted bound, and the oldest forgotten first under small bounds;
    the session's byte count is the in-memory store's."""
    shared = [
        RedisGroundingStore(shared_state(redis_server.url), trusted_bytes=trusted_bytes)
        for _ in range(2)
    ]
    memory = GroundingStore(trusted_bytes=trusted_bytes)
    traces = [_trace() for _ in range(2)]
    for n, (action, which, items) in enumerate(script):
        store, t = shared[n % 2], traces[which]
        for s in (store, memory):
            if action == "ids":
                s.record_identifiers(t, items, "ids:bank")
            elif action == "trusted":
                for text in items:
                    s.record_trusted(t, text)
            else:
                s.reset(t)
    for store in shared:
        for t in traces:
            assert [store.grounded(t, v) for v in CHECKED] == [
                memory.grounded(t, v) for v in CHECKED
            ]
    total = sum(
        int(shared[0].state.client.hget(f"fak:g:{t}", "tc") or 0) + 96 + len(t)
        for t in traces
        if shared[0].state.client.exists(f"fak:g:{t}")
    )
    assert total == memory.stats()["grounding_bytes"]


def test_two_serve_replicas_share_identifiers_and_confidential_values(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """Through two ``fak serve --state`` processes: a bank result admitted on A grounds
    its recipient on B, and B refuses the mail that carries its card."""
    policy = tmp_path / "policy.json"
    policy.write_text(
        json.dumps(
            {
                "version": "fak-policy/v2",
                "allow": ["mail", "bank"],
                "tools": {
                    "mail": {"sink": "EGRESS", "destinations": ["/to"], "content": ["/body"]},
                    "bank": {
                        "sink": "NONE",
                        "identifiers": ["/*/recipient"],
                        "confidential": ["/*/card"],
                    },
                },
            }
        )
    )
    pair = [Replica(redis_server.url, n, "--policy", str(policy), wait=False) for n in "IJ"]
    try:
        a, b = (r.ready() for r in pair)
        trace = _trace()
        rows = [{"recipient": "Dana Reyes", "card": "4237-4252-7456-2574"}]
        body = {"tool": "bank", "trace_id": trace, "result": json.dumps(rows)}
        r = a.client.post("/v1/fak/admit", content=json.dumps(body), headers=JSON)
        assert r.status_code == 200 and r.json()["verdict"]["kind"] == "ALLOW", r.text
        token = {"X-Fak-Session": r.headers["x-fak-session"]}
        sent = {"tool": "mail", "trace_id": trace, "arguments": {"to": "dana reyes"}}
        for x in (a, b):
            ok = x.post(
                "/v1/fak/adjudicate",
                {**sent, "arguments": {**sent["arguments"], "body": "hi"}},
                **token,
            )
            assert ok["verdict"]["kind"] == "ALLOW", ok
            leak = {**sent, "arguments": {"to": "dana reyes", "body": "card 4237 4252 7456 2574"}}
            verdict = x.post("/v1/fak/adjudicate", leak, **token)["verdict"]
            assert (verdict["kind"], verdict["reason"]) == ("DENY", "TRUST_VIOLATION"), verdict
            assert "confidential value of bank" in verdict["detail"]["claim"]
    finally:
        for r in pair:
            r.stop()
