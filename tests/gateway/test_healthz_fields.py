"""``/healthz`` beside its limits (D14): ``ok``, the running policy's digest, the number of
registered tools, the fields the server adds, and the shared state's probe.

The expected values are written from the test's own setup: the tools it registered
(counted here), the fields it passed, the probe answers it scripted (a stand-in shared
state that answers what it is told and counts its calls), and the digest the policy module
gives the policy the test swapped in.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from fak_core import Kernel, parse_policy
from fak_core.gateway.app import create_app
from fak_core.gateway.state import GatewayState
from fak_core.policy import policy_digest

TOOLS = ("alpha", "beta", "gamma")


class _Probe:
    """A shared state whose probe answers ``answer`` (a copy each time) and counts calls."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.calls = 0

    async def aprobe(self) -> dict[str, Any]:
        self.calls += 1
        return dict(self.answer)

    def close(self) -> None:
        return None


def _state() -> GatewayState:
    kernel = Kernel()
    for name in TOOLS:
        kernel.register_tool(name, lambda args: {})
    return GatewayState(kernel)


def _healthz(state: GatewayState, health: dict[str, Any] | None, times: int = 1) -> Any:
    async def go() -> list[httpx.Response]:
        app = create_app(state, mcp=False, health=health)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return [await c.get("/healthz") for _ in range(times)]

    answers = asyncio.run(go())
    for r in answers:
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "application/json"
    return answers[-1].json()


@pytest.mark.fak_theorem("D14")
def test_one_process_is_ok_and_names_its_policy_tools_and_fields() -> None:
    state = _state()
    swapped = parse_policy({"version": "fak-policy/v1", "allow": ["alpha"]})
    state.kernel.set_policy(swapped)
    body = _healthz(state, {"planner": "scripted"})
    assert body["ok"] is True
    assert body["policy_digest"] == policy_digest(swapped)
    assert body["tools"] == len(TOOLS)
    assert body["planner"] == "scripted"
    assert "state" not in body
    assert isinstance(body["limits"], dict)


@pytest.mark.fak_theorem("D14")
def test_no_fields_added_leaves_the_gateways_own() -> None:
    body = _healthz(_state(), None)
    assert set(body) == {"ok", "policy_digest", "tools", "limits"}


@pytest.mark.fak_theorem("D14")
@pytest.mark.parametrize("answers", [True, False])
def test_a_shared_state_is_probed_on_each_call_and_decides_ok(answers: bool) -> None:
    state = _state()
    said = {"ok": answers, "backend": "stand-in"} if answers else {"ok": False, "error": "down"}
    probe = _Probe(said)
    state.shared = probe
    body = _healthz(state, {"planner": "none"}, times=2)
    assert probe.calls == 2
    assert body["ok"] is answers
    assert body["state"] == said
    assert body["planner"] == "none"
