"""The wire is not a bypass: for a table of calls, the in-process verdict equals the verdict
from ``/v1/fak/adjudicate``, ``/v1/fak/syscall`` and MCP ``fak_adjudicate``, field for field.

One kernel serves both sides (in-process and a real uvicorn server). Taint is per trace, so
each side of each case gets its own trace, prepared identically (clean, or tainted through
the ledger before the call), and a syscall's admitted result cannot leak into another side.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from fak_core.gateway.app import create_app
from fak_core.gateway.state import GatewayState
from fak_core.taint import Taint
from pytest_fak.fixtures import serve_app
from tests.gateway.support import make_kernel


@dataclass(frozen=True)
class Case:
    name: str
    tool: str
    arguments: Any
    tainted: bool = False
    expect: tuple[str, str | None] = ("ALLOW", None)  # (kind, reason) from decide


CASES = [
    Case("allowed", "get_user_details", {"user_id": "u1"}),
    Case("malformed-json-args", "echo", "{bad json", expect=("DENY", "MALFORMED")),
    Case("schema-violation", "search_flights", {"origin": 7}, expect=("DENY", "MALFORMED")),
    Case("unknown-tool", "frobnicate", {}, expect=("DENY", "DEFAULT_DENY")),
    Case("policy-denied", "shell_rm_rf", {}, expect=("DENY", "POLICY_BLOCK")),
    Case(
        "transform-redaction",
        "get_user_details",
        {"user_id": "u", "password": "pw"},
        expect=("TRANSFORM", None),
    ),
    Case("require-witness", "wire_money", {"amount": 5}, expect=("REQUIRE_WITNESS", "UNWITNESSED")),
    Case("clean-egress", "send_email", {"to": "a@example.com"}),
    Case(
        "tainted-egress",
        "send_email",
        {"to": "a@example.com"},
        tainted=True,
        expect=("DENY", "TRUST_VIOLATION"),
    ),
]


def _prepare(state: GatewayState, trace: str, case: Case) -> None:
    state.kernel.reset_trace(trace)
    if case.tainted:
        state.kernel.ledger.raise_to(trace, Taint.TAINTED)


@pytest.fixture(scope="module")
def served() -> Any:
    state = GatewayState(make_kernel())
    with serve_app(create_app(state)) as url:
        yield state, url


async def _mcp_adjudicate(url: str, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    with anyio.fail_after(30):
        async with Client(f"{url}/mcp", mode="legacy") as client:
            for args in calls:
                res = await client.call_tool("fak_adjudicate", args)
                assert res.is_error is False
                out.append(json.loads(res.content[0].text))
    return out


@pytest.mark.fak_theorem("D10.1")
def test_wire_verdicts_equal_in_process_verdicts(served: Any) -> None:
    state, url = served
    kernel = state.kernel
    mcp_requests = []
    expected_mcp = []
    with httpx.Client(base_url=url, timeout=30) as http:
        for case in CASES:
            # in-process reference
            ref_trace = f"{case.name}/inproc"
            _prepare(state, ref_trace, case)
            call = state.build_call(case.tool, case.arguments, ref_trace)
            decided = kernel.decide(call)
            ref = state.render(decided)
            assert (ref["kind"], ref.get("reason")) == case.expect, case.name

            body = {"tool": case.tool, "arguments": case.arguments}
            # HTTP adjudicate
            trace = f"{case.name}/adjudicate"
            _prepare(state, trace, case)
            r = http.post("/v1/fak/adjudicate", json={**body, "trace_id": trace})
            assert r.status_code == 200, case.name
            assert r.json()["verdict"] == ref, case.name
            if decided.repaired_args is not None:
                assert r.json()["repaired_arguments"] == decided.repaired_args
            else:
                assert "repaired_arguments" not in r.json()

            # HTTP syscall vs in-process kernel.syscall
            ref_trace = f"{case.name}/inproc-syscall"
            _prepare(state, ref_trace, case)
            result, v = kernel.syscall(state.build_call(case.tool, case.arguments, ref_trace))
            ref_sys = state.render(v, result.meta)
            trace = f"{case.name}/syscall"
            _prepare(state, trace, case)
            r = http.post("/v1/fak/syscall", json={**body, "trace_id": trace})
            assert r.status_code == 200, case.name
            got = r.json()
            assert got["verdict"] == ref_sys, case.name
            assert got["result"]["status"] == result.status.value, case.name
            assert got["result"]["content"] == result.payload, case.name
            assert got["result"]["meta"] == dict(result.meta), case.name
            assert kernel.taint(trace) == kernel.taint(ref_trace), case.name

            # MCP (collected, sent over one session below)
            trace = f"{case.name}/mcp"
            _prepare(state, trace, case)
            mcp_requests.append({**body, "trace_id": trace})
            expected_mcp.append(ref)

    answers = anyio.run(_mcp_adjudicate, url, mcp_requests)
    for case, ref, answer in zip(CASES, expected_mcp, answers, strict=True):
        assert answer["verdict"] == ref, case.name


def test_parity_table_covers_distinct_outcomes() -> None:
    # the table is only a witness if its rows disagree with each other
    outcomes = {c.expect for c in CASES}
    assert len(outcomes) >= 6
