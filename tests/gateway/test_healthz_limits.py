"""``/healthz`` shows every bound and counter under ``limits``.

The gateway's own bounds and counters are written out here by hand from the settings the
state is built with (each a distinct value, so no two can be mistaken for each other) and
the trace id bound of the theorem (128 bytes); each store's own figures are what that
store reports. A turn refused for its tool results is counted once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from fak_core import Kernel
from fak_core.gateway.app import create_app
from fak_core.gateway.state import GatewayState


def _limits(state: GatewayState) -> dict[str, Any]:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=create_app(state))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return await c.get("/healthz")

    r = asyncio.run(go())
    assert r.status_code == 200, r.text
    return dict(r.json()["limits"])


@pytest.mark.fak_theorem("D14")
def test_healthz_shows_every_bound_and_counter() -> None:
    kernel = Kernel()
    state = GatewayState(kernel, max_body=4321, max_tool_calls=7, max_tool_results=9)
    try:
        assert state.refuse_tool_results(10) is not None
        assert state.refuse_tool_results(9) is None
        ledger_stats = getattr(kernel.ledger, "stats", None)
        assert callable(ledger_stats)  # the in-memory ledger reports its figures
        stores = [
            ledger_stats(),
            kernel.held.stats(),
            kernel.grounding.stats(),
            state.sessions.stats(),
        ]
        expected: dict[str, Any] = {
            "max_body": 4321,
            "max_tool_calls": 7,
            "max_tool_results": 9,
            "tool_results_refused": 1,
            "max_trace_id_bytes": 128,
            "decide_timeouts": 0,
        }
        for figures in stores:
            assert figures and not set(figures) & set(expected)
            expected.update(figures)
        assert _limits(state) == expected
    finally:
        state.close()
