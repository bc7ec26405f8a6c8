"""D12 with the owner table in a shared Redis (``fak serve --state``), against a model.

The model is D12's rule written here: a trace is bound to the first token that claims it
(the client's, 16 to 256 characters, else a minted one of 32 URL-safe characters); a claim
with another token is a 403 and binds nothing; reading or resetting is permitted to the
owner's token or the operator key, never to a wrong or empty one, and each refusal is
counted. Nothing is dropped in Redis, so no trace is orphaned. With Redis unreachable, a
claim is put off (no token, counted) and a read or reset is refused as the state being
down. A real ``redis-server`` of the test's own serves the table.
"""

from __future__ import annotations

import string
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fak_core.gateway.redis_sessions import RedisSessions
from fak_core.gateway.sessions import SessionError
from fak_core.redis_state import RedisState
from fak_core.statedown import StateUnavailable
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
    model: dict[str, str], table: RedisSessions, trace: str, token: str | None, fresh: bool
) -> None:
    if token is not None and not 16 <= len(token) <= 256:
        with pytest.raises(SessionError) as bad:
            table.claim(trace, token, fresh=fresh)
        assert bad.value.status == 400 and "16 to 256" in bad.value.message
        return
    owner = model.get(trace)
    if owner is not None and token is not None and token != owner:
        with pytest.raises(SessionError) as other:
            table.claim(trace, token, fresh=fresh)
        assert other.value.status == 403 and "belongs to another session" in other.value.message
        return
    got = table.claim(trace, token, fresh=fresh)
    if owner is not None:
        assert got is None, (trace, token)
        return
    assert got is not None, trace
    if token is None:
        assert len(got) == 32 and set(got) <= URLSAFE, got
    else:
        assert got == token
    model[trace] = got


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
                _claim(model, table, trace, token, bool(extra))
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
            "session_claims_deferred": 0,
            "sessions_orphaned": 0,
            "sessions_refused_full": 0,
            "session_ttl_ms": shared.ttl_ms,
        }
        assert len(table) == 0

    run()


@pytest.mark.fak_theorem("D12")
def test_with_redis_unreachable_a_claim_is_put_off_and_a_read_is_refused() -> None:
    table = RedisSessions(RedisState(f"redis://127.0.0.1:{free_port()}/0", timeout=0.5))
    assert table.claim("t-down", None) is None
    assert table.claim("t-down", "token-one-0123456") is None
    with pytest.raises(SessionError):
        table.claim("t-down", "short")
    assert table.stats()["session_claims_deferred"] == 2
    with pytest.raises(StateUnavailable):
        table.permits("t-down", "token-one-0123456", None)
