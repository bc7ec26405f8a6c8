"""The shared stores against a real redis-server: atomic under concurrency, and every
failure (data lost, memory full, server gone) is a refusal, DENY/STATE_DOWN, never a clean
read and never a result handed out whose taint is not on record."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest

from fak_core import Kernel, Policy, Taint, ToolCall, VerdictKind
from fak_core.gateway.replicas import attach_shared, shared_kernel_options
from fak_core.gateway.state import GatewayState
from fak_core.ratelimit import RateLimit
from fak_core.redis_state import RedisState, StateConfigError
from fak_core.redis_stores import RedisLedger
from fak_core.statedown import STATE_DOWN, StateUnavailable

from .support import RedisServer

POLICY = Policy(allow=("send_email", "fetch_url", "get_a"))
EGRESS = '{"to": "alice@example.com", "body": "the report"}'


_OPEN: list[GatewayState] = []
_CLOSE: list[RedisState] = []


@pytest.fixture(autouse=True)
def _close_gateways() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()
    while _CLOSE:
        _CLOSE.pop().close()


def gateway(url: str, policy: Policy = POLICY) -> GatewayState:
    shared = RedisState(url, timeout=0.3)
    shared.check()
    state = GatewayState(Kernel(policy, **shared_kernel_options(shared)))
    attach_shared(state, shared)
    _OPEN.append(state)
    return state


def _trace() -> str:
    return "fail-" + uuid.uuid4().hex


def test_concurrent_raises_from_two_replicas_are_an_atomic_maximum(
    redis_server: RedisServer,
) -> None:
    ledgers = [RedisLedger(RedisState(redis_server.url)) for _ in range(2)]
    for ledger in ledgers:
        ledger.state.check()
        _CLOSE.append(ledger.state)
    traces = [_trace() for _ in range(20)]
    labels = [Taint.TRUSTED, Taint.TAINTED, Taint.QUARANTINED, Taint.TAINTED, Taint.TRUSTED]

    def hammer(n: int) -> None:
        for trace in traces:
            ledgers[n % 2].raise_to(trace, labels[n % len(labels)])

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {ledger.level(t) for ledger in ledgers for t in traces} == {Taint.QUARANTINED}


def test_a_rate_limit_cannot_be_overspent_by_two_replicas_at_once(
    redis_server: RedisServer,
) -> None:
    policy = Policy(allow=("get_a",), rate_limit=RateLimit(10, 60.0, "trace"))
    replicas = [gateway(redis_server.url, policy) for _ in range(2)]
    trace = _trace()
    kinds: list[VerdictKind] = []
    lock = threading.Lock()

    def call(n: int) -> None:
        v = replicas[n % 2].kernel.decide(ToolCall("get_a", "{}", trace))
        with lock:
            kinds.append(v.kind)

    threads = [threading.Thread(target=call, args=(n,)) for n in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert kinds.count(VerdictKind.ALLOW) == 10
    assert kinds.count(VerdictKind.DENY) == 30
    # a call the fold refuses gives its slot back, on every replica
    other = _trace()
    denied = replicas[0].kernel.decide(ToolCall("rm_rf", "{}", other))
    assert denied.kind == VerdictKind.DENY
    assert replicas[1].kernel.rate_limiter is not None
    assert replicas[1].kernel.rate_limiter.used("trace:" + other) == 0


def _down(verdict: dict[str, object]) -> bool:
    return verdict.get("kind") == "DENY" and verdict.get("reason") == "STATE_DOWN"


def test_lost_data_is_refused_until_the_replicas_restart(own_redis: RedisServer) -> None:
    state = gateway(own_redis.url)
    trace = _trace()
    state.admit(state.build_call("fetch_url", "{}", trace), "untrusted text")
    own_redis.command("FLUSHALL")  # what a restart without persistence would do
    decided = state.adjudicate(state.build_call("send_email", EGRESS, trace))
    assert _down(decided["verdict"]) and "lost" in decided["verdict"]["detail"]["claim"]
    admitted = state.admit(state.build_call("fetch_url", "{}", trace), "more text")
    assert _down(admitted["verdict"]) and admitted["result"]["content"] == ""
    with pytest.raises(StateUnavailable):
        state.kernel.taint(trace)
    # an operator's restart adopts a new epoch: the sessions start again from nothing
    fresh = gateway(own_redis.url)
    ok = fresh.adjudicate(fresh.build_call("send_email", EGRESS, _trace()))
    assert ok["verdict"]["kind"] == "ALLOW"


def test_memory_full_is_a_refusal_and_the_result_is_withheld(own_redis: RedisServer) -> None:
    state = gateway(own_redis.url)
    trace = _trace()
    own_redis.command("CONFIG", "SET", "maxmemory", "1")
    try:
        admitted = state.admit(state.build_call("fetch_url", "{}", trace), "untrusted text")
        decided = state.adjudicate(state.build_call("send_email", EGRESS, trace))
    finally:
        own_redis.command("CONFIG", "SET", "maxmemory", "0")
    assert _down(admitted["verdict"]) and admitted["result"]["content"] == ""
    assert admitted["result"]["meta"]["admit"] == "denied"
    # reads still work when memory is full: nothing was recorded and nothing was handed out,
    # so the session is as clean as the shared state says
    assert decided["verdict"]["kind"] == "ALLOW"
    assert state.kernel.taint(trace) == Taint.TRUSTED
    assert state.kernel.reasons.code("STATE_DOWN") == STATE_DOWN


def test_an_unreachable_redis_refuses_and_service_resumes(own_redis: RedisServer) -> None:
    state = gateway(own_redis.url)
    trace = _trace()
    state.admit(state.build_call("fetch_url", "{}", trace), "untrusted text")
    own_redis.stop()
    assert _down(state.adjudicate(state.build_call("send_email", EGRESS, _trace()))["verdict"])
    assert _down(state.syscall(state.build_call("get_a", "{}", trace))["verdict"])
    with pytest.raises(StateUnavailable):  # refused, not granted
        state.sessions.claim(_trace(), None)
    own_redis.start()
    resumed = state.adjudicate(state.build_call("send_email", EGRESS, _trace()))
    assert resumed["verdict"]["kind"] == "ALLOW"
    assert state.kernel.taint(trace) == Taint.TAINTED  # the append-only file kept it


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:6379/0", "redis://", "redis://127.0.0.1:6379/zero"]
)
def test_a_bad_state_url_is_refused_with_what_to_pass(url: str) -> None:
    with pytest.raises(StateConfigError, match=r"redis://HOST:PORT/DB|database is a number"):
        RedisState(url)
