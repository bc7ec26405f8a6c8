"""D12 with the owner table in a shared Redis (``fak serve --state``), against a model.

The model is D12's rule written here: a trace is bound to the first token that claims it
(the client's, 16 to 256 characters, else a minted one of 32 URL-safe characters); a later
claim passes with the owner's token or the operator key and is otherwise (no token, or
another one) a 403 that binds nothing; reading or resetting is permitted to the owner's
token or the operator key, never to a wrong or empty one, and each refusal is counted.
Nothing is dropped in Redis, so no trace is orphaned. With Redis unreachable, who owns a
trace is unknown: a claim, a read and a reset are refused as the state being down (no
token; each refused claim counted). A real ``redis-server`` of the test's own serves the
table. For C4.12, a claim of another session's trace is checked to the exact message and
refusal count.
"""

from __future__ import annotations

import string
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from mcp import Client
from starlette.testclient import TestClient

from fak_core.gateway.app import create_app
from fak_core.gateway.redis_sessions import RedisSessions
from fak_core.gateway.sessions import SessionError, not_yours
from fak_core.gateway.state import GatewayState
from fak_core.redis_state import RedisState
from fak_core.statedown import StateUnavailable
from tests.gateway.support import make_kernel
from tests.gateway.test_parity_property import _mcp_server
from tests.gateway.test_sessions_model import OPERATOR, TOKENS, operations
from tests.replicas.support import RedisServer, free_port

URLSAFE = set(string.ascii_letters + string.digits + "-_")
TRACES = st.sampled_from(["a", "b", "trace-c", "\u00e9t\u00e9", "x" * 40, "d"])
OPS = operations(TRACES, st.one_of(TOKENS, st.just("")), 25)


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = RedisServer(Path(tmp_path_factory.mktemp("redis-sessions")))
    try:
        yield server.url
    finally:
        server.stop()


def _claim(
    model: dict[str, str],
    table: RedisSessions,
    trace: str,
    token: str | None,
    extra: object,
    operator: str | None,
) -> int:
    """One claim against the model; 1 if it is a refusal the table counts, else 0."""
    fresh, key = extra if isinstance(extra, tuple) else (bool(extra), None)
    if token == "<owner>":
        token = model.get(trace)
    if token is not None and not 16 <= len(token) <= 256:
        with pytest.raises(SessionError) as bad:
            table.claim(trace, token, fresh=fresh, operator=key)
        assert bad.value.status == 400 and "16 to 256" in bad.value.message
        return 0
    owner = model.get(trace)
    op = operator is not None and key == operator
    if owner is not None and not op and token != owner:
        with pytest.raises(SessionError) as other:
            table.claim(trace, token, fresh=fresh, operator=key)
        assert other.value.status == 403 and "belongs to another session" in other.value.message
        assert repr(trace) in other.value.message
        sent = "without a session token" if token is None else "with another session's token"
        assert f"this request came {sent}:" in other.value.message
        return 1
    got = table.claim(trace, token, fresh=fresh, operator=key)
    if owner is not None:
        assert got is None, (trace, token)
        return 0
    assert got is not None, trace
    if token is None:
        assert len(got) == 32 and set(got) <= URLSAFE, got
    else:
        assert got == token
    model[trace] = got
    return 0


@pytest.mark.fak_theorem("D12")
def test_the_shared_owner_table_keeps_the_rules(redis_url: str) -> None:
    flush = redis.Redis.from_url(redis_url)

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(ops=OPS, operator=st.sampled_from([None, OPERATOR]))
    @example(
        ops=[
            ("claim", "a", None, False),
            ("permits", "a", "<owner>", None),
            ("permits", "a", "", OPERATOR),
            ("permits", "a", None, ""),
            ("claim", "a", "token-one-0123456", False),
            ("claim", "a", None, False),  # no token on an owned trace: a 403
            ("claim", "a", "<owner>", False),
            ("claim", "a", None, (False, OPERATOR)),  # the operator passes
            ("claim", "a", "token-one-0123456", (False, "wrong-operator-key")),
            ("claim", "b", "token-one-0123456", True),
            ("permits", "b", "token-one-0123456", "wrong-operator-key"),
            ("permits", "b", "token-two-0123456", OPERATOR),
        ],
        operator=OPERATOR,
    )
    def run(ops: list[tuple[str, str, str | None, object]], operator: str | None) -> None:
        flush.flushdb()
        shared = RedisState(redis_url)
        shared.check()  # the epoch the scripts are guarded by
        table = RedisSessions(shared, operator_key=operator)
        model: dict[str, str] = {}
        refused = 0
        for op, trace, token, extra in ops:
            if op == "claim":
                refused += _claim(model, table, trace, token, extra, operator)
                continue
            sent = model.get(trace) if token == "<owner>" else token
            op_key = extra if isinstance(extra, str) or extra is None else None
            want = None
            if operator is not None and op_key == operator:
                want = "operator"
            elif sent and model.get(trace) == sent:
                want = "owner"
            refused += want is None
            assert table.permits(trace, sent, op_key) == want, (trace, sent, op_key)
        assert table.stats() == {
            "session_refusals": refused,
            "session_claims_state_down": 0,
            "sessions_orphaned": 0,
            "sessions_refused_full": 0,
            "session_ttl_ms": shared.ttl_ms,
        }
        assert len(table) == 0

    run()


@pytest.mark.fak_theorem("D12")
def test_with_redis_unreachable_a_claim_and_a_read_are_refused() -> None:
    table = RedisSessions(
        RedisState(f"redis://127.0.0.1:{free_port()}/0", timeout=0.5), operator_key=OPERATOR
    )
    for token, key in ((None, None), ("token-one-0123456", None), (None, OPERATOR)):
        with pytest.raises(StateUnavailable) as down:
            table.claim("t-down", token, operator=key)
        assert "'t-down'" in str(down.value) and "retry" in str(down.value), down.value
    with pytest.raises(SessionError):
        table.claim("t-down", "short")
    assert table.stats()["session_claims_state_down"] == 3
    with pytest.raises(StateUnavailable):
        table.permits("t-down", "token-one-0123456", None)


@pytest.mark.fak_theorem("D12")
def test_with_redis_unreachable_every_route_that_names_a_trace_refuses() -> None:
    """The native routes answer 503 ``state_unavailable`` naming the trace, and the MCP
    tools an error result saying the same: unknown ownership is never the owner's."""
    state = GatewayState(make_kernel())
    state.sessions = RedisSessions(RedisState(f"redis://127.0.0.1:{free_port()}/0", timeout=0.5))
    app = create_app(state)
    with TestClient(app, base_url="http://127.0.0.1") as http:
        for route, body in (
            ("/v1/fak/adjudicate", {"tool": "echo"}),
            ("/v1/fak/admit", {"tool": "echo", "result": "x"}),
            ("/v1/fak/trace/context", {"text": "mail ops@example.com"}),
        ):
            r = http.post(route, json={**body, "trace_id": "t-unknown"})
            assert r.status_code == 503, (route, r.text)
            err = r.json()["error"]
            assert err["code"] == "state_unavailable" and "'t-unknown'" in err["message"], err
            assert "x-fak-session" not in r.headers
        portal = http.portal
        assert portal is not None
        with portal.wrap_async_context_manager(Client(_mcp_server(app), mode="legacy")) as mcp:
            res = portal.call(mcp.call_tool, "fak_adjudicate", {"tool": "echo", "trace_id": "t-m"})
    assert res.is_error is True and "'t-m'" in res.content[0].text, res
    assert state.sessions.stats()["session_claims_state_down"] == 4


#: A claim after the owner's: no token, another token, the owner's or the operator key.
SECOND = st.sampled_from(["none", "other", "owner", "operator"])
VALID_TOKENS = st.text(st.characters(codec="utf-8"), min_size=16, max_size=256)


@pytest.mark.fak_theorem("C4.12", "D12")
def test_a_claim_of_another_sessions_trace_is_a_counted_403(redis_url: str) -> None:
    redis.Redis.from_url(redis_url).flushdb()
    shared = RedisState(redis_url)
    shared.check()
    table = RedisSessions(shared, operator_key=OPERATOR)
    made = iter(range(10**6))

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        trace=TRACES,
        first=st.one_of(st.none(), VALID_TOKENS),
        second=SECOND,
        other=VALID_TOKENS,
    )
    @example(trace="a", first=None, second="none", other="")  # minted, then no token
    @example(trace="a", first=None, second="other", other="token-two-0123456")
    @example(trace="b", first="token-one-0123456", second="none", other="")
    @example(trace="b", first="token-one-0123456", second="other", other="token-two-0123456")
    def run(trace: str, first: str | None, second: str, other: str) -> None:
        trace = f"{trace}-{next(made)}"  # a trace nobody claimed yet
        owner = table.claim(trace, first)
        assert owner is not None and (first is None or owner == first)
        before = table.stats()["session_refusals"]
        if second in ("owner", "operator"):
            key = OPERATOR if second == "operator" else None
            assert table.claim(trace, owner if key is None else None, operator=key) is None
            assert table.stats()["session_refusals"] == before
            return
        token = None if second == "none" else other
        assume(token != owner)
        with pytest.raises(SessionError) as refused:
            table.claim(trace, token)
        assert refused.value.status == 403
        assert refused.value.message == not_yours(trace, token)
        assert table.stats()["session_refusals"] == before + 1

    run()
