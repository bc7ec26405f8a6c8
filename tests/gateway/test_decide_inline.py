"""A kernel of only built-in parts (every one declared non-blocking) decides inline on the
wire, and its verdicts there are the ones written out here: the floor's ALLOW for a tool the
policy allows, DEFAULT_DENY for any other, with the repaired arguments only on a TRANSFORM."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from fak_core.gateway.app import create_app
from fak_core.gateway.state import GatewayState
from fak_core.kernel import Kernel
from fak_core.policy import parse_policy
from tests.gateway.support import own_session


def _answers(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    policy = {"version": "fak-policy/v1", "allow": ["echo"], "redact_fields": ["password"]}
    state = GatewayState(Kernel(parse_policy(policy)))  # the default deadline is set
    assert state.kernel.decides_without_waiting()
    try:
        with TestClient(
            create_app(state, mcp=False), base_url="http://127.0.0.1", headers=own_session()
        ) as client:
            out = []
            for body in calls:
                r = client.post("/v1/fak/adjudicate", json={**body, "trace_id": "inline"})
                assert r.status_code == 200, r.text
                out.append(r.json())
            return out
    finally:
        state.close()


@pytest.mark.fak_theorem("D10.1")
def test_a_kernel_that_cannot_wait_answers_inline_on_the_wire() -> None:
    allowed, denied, repaired = _answers(
        [
            {"tool": "echo", "arguments": {"n": 1}},
            {"tool": "other", "arguments": {}},
            {"tool": "echo", "arguments": {"n": 1, "password": "hunter2"}},
        ]
    )
    assert allowed == {"verdict": {"kind": "ALLOW", "by": "floor"}, "trace_id": "inline"}
    assert denied["verdict"]["kind"] == "DENY"
    assert denied["verdict"]["reason"] == "DEFAULT_DENY" and "repaired_arguments" not in denied
    assert repaired["verdict"]["kind"] == "TRANSFORM"
    assert "hunter2" not in repaired["repaired_arguments"]
