"""D9: a rate limiter is built only for a key the theorem names.

A ``RateLimit`` built in Python skips the policy loader's check, so the limiter itself
must refuse any other key, listing the valid ones; each valid key builds a limiter that
keeps the limit, the clock and the bound it was given. The oracle is the list of keys
written out from D9.1.
"""

from __future__ import annotations

import pytest

from fak_core import Kernel, Policy, ToolCall, VerdictKind
from fak_core.ratelimit import RateLimit, RateLimiter

VALID = ("credential", "client", "trace", "tool", "global")


@pytest.mark.fak_theorem("D9")
@pytest.mark.parametrize("key", ["", "Trace", "session", "trace ", "principal", "GLOBAL"])
def test_a_limiter_with_an_unknown_key_is_refused(key: str) -> None:
    with pytest.raises(ValueError, match=r"rate_limit\.key") as err:
        RateLimiter(RateLimit(1, 60.0, key))
    assert all(k in str(err.value) for k in VALID)
    with pytest.raises(ValueError, match=r"rate_limit\.key"):
        Kernel(Policy(allow=("get_a",), rate_limit=RateLimit(1, 60.0, key)))


@pytest.mark.fak_theorem("D9")
@pytest.mark.parametrize("key", VALID)
def test_a_limiter_keeps_what_it_was_given(key: str) -> None:
    now = [100.0]
    limiter = RateLimiter(RateLimit(1, 10.0, key), clock=lambda: now[0], max_keys=1)
    assert (limiter.limit, limiter.max_keys) == (RateLimit(1, 10.0, key), 1)
    k = Kernel(Policy(allow=("get_a",)), rate_limiter=lambda lim: limiter)
    k.set_policy(Policy(allow=("get_a",), rate_limit=RateLimit(1, 10.0, key)))
    call = ToolCall("get_a", "{}", "t")
    assert [k.decide(call).kind for _ in range(2)] == [VerdictKind.ALLOW, VerdictKind.DENY]
    now[0] += 10.0  # the window ends by the clock the limiter was given
    assert k.decide(call).kind == VerdictKind.ALLOW
