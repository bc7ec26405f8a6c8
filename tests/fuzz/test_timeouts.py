"""A hanging or raising adjudicator or tool: the gateway answers within its deadline, with a
DENY (or a tool result that is an error), and keeps serving. Every hanging thing waits on
an event the test sets at the end, so no thread outlives its test."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import Client
from starlette.testclient import TestClient

from fak_core import Kernel, Verdict, nonblocking, parse_policy
from fak_core.gateway.app import create_app
from fak_core.gateway.mcp_server import build_mcp_server
from fak_core.gateway.state import INLINE_ARGS_BYTES, GatewayState
from fak_core.view import CallView

SHORT = 0.2
LATE_CLAIM = "adjudication timed out after 0.2s"


class Hangs:
    """An adjudicator for ``slow`` that blocks until released, and a tool that counts runs."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = 0
        self.tool_runs = 0

    def adjudicate(self, view: CallView) -> Verdict:
        self.entered += 1
        self.release.wait()
        return Verdict.allow("hangs")  # too late to matter: the gateway already denied

    def tool(self, args: dict[str, Any]) -> str:
        self.tool_runs += 1
        return "ran"

    def hanging_tool(self, args: dict[str, Any]) -> str:
        self.release.wait()
        return "late"


def boom(view: CallView) -> Verdict:
    raise RuntimeError("adjudicator crashed")


@pytest.fixture
def hangs() -> Iterator[Hangs]:
    h = Hangs()
    yield h
    h.release.set()


@pytest.fixture
def state(hangs: Hangs) -> Iterator[GatewayState]:
    policy = parse_policy(
        {"version": "fak-policy/v1", "allow": ["slow", "echo", "crashy", "stuck_tool"]}
    )
    kernel = Kernel(policy)
    kernel.register_tool("slow", hangs.tool)
    kernel.register_tool("echo", lambda args: args)
    kernel.register_tool("crashy", hangs.tool)
    kernel.register_tool("stuck_tool", hangs.hanging_tool)
    kernel.add_adjudicator(hangs.adjudicate, 50, tools=["slow"])
    kernel.add_adjudicator(boom, 50, tools=["crashy"])
    kernel.tool_timeout = SHORT
    st = GatewayState(kernel, decide_timeout=SHORT)
    yield st
    hangs.release.set()
    st.close()
    kernel.close()


def assert_late_deny(verdict: dict[str, Any]) -> None:
    assert verdict == {
        "kind": "DENY",
        "reason": "DEFAULT_DENY",
        "by": "gateway",
        "disposition": "TERMINAL",
        "detail": {"claim": LATE_CLAIM},
    }


def wait_until(predicate: Any, limit: float = 5.0) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def test_http_hanging_adjudicator_is_a_deny_and_the_gateway_keeps_serving(
    state: GatewayState, hangs: Hangs
) -> None:
    with TestClient(create_app(state, mcp=False), base_url="http://127.0.0.1") as client:
        started = time.monotonic()
        r = client.post("/v1/fak/adjudicate", json={"tool": "slow"})
        assert r.status_code == 200
        assert_late_deny(r.json()["verdict"])
        s = client.post("/v1/fak/syscall", json={"tool": "slow", "arguments": {"x": 1}})
        assert s.status_code == 200
        body = s.json()
        assert_late_deny(body["verdict"])
        assert body["result"]["status"] == "ERROR"
        assert body["result"]["meta"]["claim"] == LATE_CLAIM
        assert time.monotonic() - started < 10, "the deadline did not bound the wait"
        # still serving, on other tools too, while two decisions are stuck
        assert client.get("/healthz").status_code == 200
        ok = client.post("/v1/fak/syscall", json={"tool": "echo", "arguments": {"n": 1}})
        assert ok.json()["verdict"]["kind"] == "ALLOW"
        assert json.loads(ok.json()["result"]["content"]) == {"n": 1}
        assert state.decide_timeouts == 2
        assert state.stuck_decisions == 2
        hangs.release.set()
        wait_until(lambda: state.stuck_decisions == 0)
    # the late ALLOW was dropped: the syscall's tool never ran
    assert hangs.entered == 2
    assert hangs.tool_runs == 0


def test_http_raising_adjudicator_is_a_deny(state: GatewayState, hangs: Hangs) -> None:
    with TestClient(create_app(state, mcp=False), base_url="http://127.0.0.1") as client:
        r = client.post("/v1/fak/syscall", json={"tool": "crashy"})
        assert r.status_code == 200
        verdict = r.json()["verdict"]
        assert verdict["kind"] == "DENY"
        assert r.json()["result"]["status"] == "ERROR"
    assert hangs.tool_runs == 0


def test_http_hanging_tool_is_an_error_result(state: GatewayState) -> None:
    with TestClient(create_app(state, mcp=False), base_url="http://127.0.0.1") as client:
        r = client.post("/v1/fak/syscall", json={"tool": "stuck_tool"})
        assert r.status_code == 200
        body = r.json()
        assert body["verdict"]["kind"] == "ALLOW"
        assert body["result"]["status"] == "ERROR"
        assert body["result"]["meta"]["error"] == "tool 'stuck_tool' timed out after 0.2s"
        assert client.get("/healthz").status_code == 200
    assert state.kernel.counters.tool_timeouts == 1
    assert state.kernel.stuck_tools == 1


def test_mcp_hanging_adjudicator_is_a_deny_result(state: GatewayState, hangs: Hangs) -> None:
    async def main() -> list[Any]:
        with anyio.fail_after(20):
            async with Client(build_mcp_server(state), mode="legacy") as client:
                late = await client.call_tool("fak_adjudicate", {"tool": "slow"})
                run = await client.call_tool("fak_syscall", {"tool": "slow"})
                ok = await client.call_tool("fak_adjudicate", {"tool": "echo"})
                return [late, run, ok]

    late, run, ok = anyio.run(main)
    assert late.is_error is False  # a deny is a normal result
    assert_late_deny(late.structured_content["verdict"])
    assert_late_deny(run.structured_content["verdict"])
    assert run.structured_content["result"]["status"] == "ERROR"
    assert ok.structured_content["verdict"]["kind"] == "ALLOW"
    assert hangs.tool_runs == 0


def test_no_deadline_decides_inline(hangs: Hangs) -> None:
    kernel = Kernel(parse_policy({"version": "fak-policy/v1", "allow": ["echo"]}))
    seen: list[str] = []

    def where(view: CallView) -> Verdict:
        seen.append(threading.current_thread().name)
        return Verdict.defer("where")

    kernel.add_adjudicator(where, 50)
    inline = GatewayState(kernel, decide_timeout=None)
    bounded = GatewayState(kernel)
    call = inline.build_call("echo", {}, "t")
    assert inline.decide(call).kind.name == "ALLOW"
    assert bounded.decide(call).kind.name == "ALLOW"
    assert seen[0] == threading.current_thread().name
    assert seen[1].startswith("fak-decide-")
    bounded.close()


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"decide_timeout": 0}, "decide_timeout"),
        ({"decide_timeout": float("inf")}, "decide_timeout"),
        ({"decide_timeout": float("nan")}, "decide_timeout"),
        ({"max_tool_calls": 0}, "max_tool_calls"),
    ],
)
def test_state_limits_are_checked(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        GatewayState(Kernel(), **kw)


def test_a_late_decision_is_journaled_as_the_deny_the_caller_got(
    state: GatewayState, hangs: Hangs, tmp_path: Any
) -> None:
    from fak_core.journal import Journal, read_rows

    journal = Journal(tmp_path / "j.db")
    journal.attach(state.kernel)
    state.journal = journal
    try:
        with TestClient(create_app(state, mcp=False), base_url="http://127.0.0.1") as client:
            r = client.post("/v1/fak/adjudicate", json={"tool": "slow", "trace_id": "late-1"})
            assert_late_deny(r.json()["verdict"])
            hangs.release.set()
            wait_until(lambda: state.stuck_decisions == 0)
            journal.sync()
        rows = [(r["trace"], r["verdict"], r["by"]) for r in read_rows(tmp_path / "j.db")]
        # first the deny the caller was given, then the kernel's own late verdict
        assert rows[0] == ("late-1", "DENY", "gateway")
    finally:
        journal.close()


def test_a_decision_that_cannot_wait_is_inline_and_large_arguments_take_the_pool() -> None:
    policy = parse_policy({"version": "fak-policy/v1", "allow": ["echo"]})
    seen: list[str] = []

    @nonblocking
    def where(view: CallView) -> Verdict:
        seen.append(threading.current_thread().name)
        return Verdict.defer("where")

    kernel = Kernel(policy)
    kernel.add_adjudicator(where, 50)
    state = GatewayState(kernel)  # the default deadline is set
    try:
        small = state.build_call("echo", {"n": 1}, "t")
        large = state.build_call("echo", {"blob": "x" * (INLINE_ARGS_BYTES + 1)}, "t")
        assert state.decide(small).kind.name == "ALLOW"
        assert asyncio.run(state.decide_async(small)).kind.name == "ALLOW"
        assert state.decide(large).kind.name == "ALLOW"
        assert asyncio.run(state.decide_async(large)).kind.name == "ALLOW"
        here = threading.current_thread().name
        assert seen[:2] == [here, here]  # inline: no worker thread was involved
        assert all(name.startswith("fak-decide-") for name in seen[2:])
        assert len(seen) == 4
    finally:
        state.close()


def test_an_undeclared_adjudicator_is_decided_under_the_deadline_from_a_coroutine(
    hangs: Hangs,
) -> None:
    kernel = Kernel(parse_policy({"version": "fak-policy/v1", "allow": ["slow"]}))
    kernel.add_adjudicator(hangs.adjudicate, 50, tools=["slow"])
    state = GatewayState(kernel, decide_timeout=SHORT)
    try:
        started = time.monotonic()
        verdict = asyncio.run(state.decide_async(state.build_call("slow", {}, "t")))
        assert time.monotonic() - started < 5
        assert_late_deny(state.render(verdict))
        assert state.decide_timeouts == 1
        assert state.stuck_decisions == 1
        hangs.release.set()
        wait_until(lambda: state.stuck_decisions == 0)
    finally:
        hangs.release.set()
        state.close()
