"""Resetting a shared rate-limit window runs under the epoch, as every other write does (C4.4).

A reset is how an operator frees a principal's budget. On a Redis that lost the state (a
restart without its files: the epoch is gone) or holds another replica set's epoch, the
delete must not read as success: it is ``StateUnavailable`` with the lost-state reason,
counted in the failures, like the reservation beside it. On the state this replica found,
it empties the window. The oracle is the theorem's reason written out here, and the window
read back through Redis itself (``EXISTS``) as well as the limiter's count.
"""

from __future__ import annotations

import pytest

from fak_core.ratelimit import RateLimit
from fak_core.redis_stores import RedisRateLimiter
from fak_core.statedown import StateUnavailable

from .support import RedisServer
from .test_shared_state_closed import LOST, opened


@pytest.mark.fak_theorem("C4.4")
def test_a_reset_on_lost_state_is_refused_and_counted(own_redis: RedisServer) -> None:
    state = opened(own_redis.url)
    limiter = RedisRateLimiter(RateLimit(max_calls=3, window_s=60.0), state)
    key = "principal:alice"
    seconds = int(own_redis.command("TIME").split()[0])
    own_redis.command("HSET", "fak:rl:" + key, "start", str(seconds * 1000), "used", "2")
    assert limiter.used(key) == 2  # a window of this minute, two calls spent
    limiter.reset(key)  # our epoch: the window is gone
    assert own_redis.command("EXISTS", "fak:rl:" + key) == "0"
    assert limiter.used(key) == 0
    for lose in (("FLUSHALL",), ("SET", "fak:epoch", "e" * 32)):
        own_redis.command(*lose)
        own_redis.command("HSET", "fak:rl:" + key, "start", "1", "used", "2")
        before = state.failures
        with pytest.raises(StateUnavailable) as info:
            limiter.reset(key)
        assert str(info.value) == LOST, lose
        assert state.failures == before + 1, lose
        assert own_redis.command("EXISTS", "fak:rl:" + key) == "1", lose  # nothing deleted
    with pytest.raises(ValueError, match="one key at a time"):
        limiter.reset()
