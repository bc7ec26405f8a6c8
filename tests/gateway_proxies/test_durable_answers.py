"""A decision the journal cannot commit is never answered as made, on any surface.

With a decision journal, a surface answers only once its decisions are committed
(``GatewayState.durable``): a native route's answer is then the refusal
DENY/JOURNAL_DOWN by ``journal`` with the request's trace and nothing else
(``GatewayState.recorded``); a proxied turn is a 503 ``journal_unavailable``, buffered or
streamed (``proxy_io.durable_stream``: before any event the HTTP error, after one the
wire's error event), and no tool call reaches the client.

The journal is broken from outside the gateway by a real SQLite trigger that refuses every
insert, after the file exists and before the request: the kernel's fail-closed gate has not
seen a failure yet (nothing was written since), so the request is decided ALLOW and only the
wait for the commit can refuse it. The expected answers are written out here by hand.
Gateway and scripted upstream run in this process (``httpx.ASGITransport``).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from fak_core.gateway import GatewayState, UpstreamConfig, proxy_routes
from fak_core.gateway.app import create_app
from fak_core.journal import Journal
from tests.journal.faults import refuse_inserts

from .kernels import make_kernel
from .scripted_upstream import Script, ScriptedUpstream

PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}
WIRES = ("openai", "anthropic")
CALL = ("get_user", {"id": 1})
#: Each native route's request (the admission's tool is one the test kernel allows).
NATIVE: dict[str, dict[str, Any]] = {
    "/v1/fak/adjudicate": {"tool": "get_user", "arguments": {"id": 1}},
    "/v1/fak/syscall": {"tool": "get_user", "arguments": {"id": 1}},
    "/v1/fak/admit": {"tool": "fetch_url", "result": "hello"},
}


@pytest.fixture
def journaled(tmp_path: Path) -> Iterator[tuple[ScriptedUpstream, GatewayState, Starlette, Path]]:
    """The whole gateway (native routes and both proxies) with a fresh journal."""
    up, state = ScriptedUpstream(), GatewayState(make_kernel())
    state.kernel.register_tool("get_user", lambda args: {"user": args.get("id")})
    path = tmp_path / "decisions.db"
    journal = Journal(path)
    journal.attach(state.kernel)
    state.journal = journal
    cfg = UpstreamConfig(base_url="http://up/v1", transport=httpx.ASGITransport(app=up.app))
    app = create_app(state, extra_routes=proxy_routes(state, cfg))
    try:
        yield up, state, app, path
    finally:
        journal.close()


def _post(app: Starlette, path: str, doc: dict[str, Any], trace: str) -> httpx.Response:
    async def go() -> httpx.Response:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
        ) as c:
            return await c.post(path, json=doc, headers={"x-trace-id": trace})

    return asyncio.run(go())


def _turn(wire: str, stream: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "model": "m",
        "stream": stream,
        "messages": [{"role": "user", "content": "who?"}],
    }
    if wire == "anthropic":
        doc["max_tokens"] = 16
    return doc


def _events(text: str) -> list[tuple[str, Any]]:
    """An event stream read by hand: ``(event name or "", data as JSON or text)``."""
    out: list[tuple[str, Any]] = []
    for block in text.split("\n\n"):
        name, data = "", []
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data:
            raw = "\n".join(data)
            out.append((name, raw if raw == "[DONE]" else json.loads(raw)))
    return out


def _is_journal_503(wire: str, doc: Any) -> bool:
    """``doc`` is this wire's error document for a 503 ``journal_unavailable``."""
    if wire == "openai":
        err = doc.get("error") if isinstance(doc, dict) else None
        return isinstance(err, dict) and err.get("code") == "journal_unavailable"
    return (
        doc
        == {
            "type": "error",
            "error": {"type": "overloaded_error", "message": doc["error"]["message"]},
        }
        and "decision journal unavailable" in doc["error"]["message"]
    )


def _trace() -> str:
    return f"durable-{uuid.uuid4().hex}"


@pytest.mark.parametrize("route", sorted(NATIVE))
@pytest.mark.fak_theorem("D10.3")
def test_a_native_decision_that_cannot_be_committed_is_answered_journal_down(
    journaled: tuple[ScriptedUpstream, GatewayState, Starlette, Path], route: str
) -> None:
    _, _, app, path = journaled
    ok = _post(app, route, NATIVE[route], _trace())  # healthy: the kernel's own answer
    assert ok.status_code == 200 and ok.json()["verdict"]["kind"] == "ALLOW", ok.text
    refuse_inserts(path)
    trace = _trace()
    r = _post(app, route, NATIVE[route], trace)
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"verdict", "trace_id"}  # no result, no repaired arguments
    assert body["trace_id"] == trace
    v = body["verdict"]
    assert (v["kind"], v["reason"], v["by"]) == ("DENY", "JOURNAL_DOWN", "journal")
    assert "decision journal unavailable" in v["detail"]["claim"]


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.fak_theorem("D10.3")
def test_a_buffered_turn_that_cannot_be_committed_is_a_503_without_a_call(
    journaled: tuple[ScriptedUpstream, GatewayState, Starlette, Path], wire: str
) -> None:
    up, _, app, path = journaled
    up.reset(Script(text="ok", calls=[CALL]))
    ok = _post(app, PATHS[wire], _turn(wire, False), _trace())
    assert ok.status_code == 200 and "get_user" in ok.text, ok.text
    assert ok.headers["content-type"].partition(";")[0] == "application/json"
    refuse_inserts(path)
    trace = _trace()
    r = _post(app, PATHS[wire], _turn(wire, False), trace)
    assert r.status_code == 503, r.text
    assert _is_journal_503(wire, r.json())
    assert r.headers["x-trace-id"] == trace and "get_user" not in r.text


@pytest.mark.parametrize("text", ["", "some words first"])
@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.fak_theorem("D10.3")
def test_a_streamed_turn_that_cannot_be_committed_ends_in_a_503_without_a_call(
    journaled: tuple[ScriptedUpstream, GatewayState, Starlette, Path], wire: str, text: str
) -> None:
    up, _, app, path = journaled
    up.reset(Script(text=text, calls=[CALL]))
    ok = _post(app, PATHS[wire], _turn(wire, True), _trace())
    assert ok.status_code == 200 and "get_user" in ok.text, ok.text
    refuse_inserts(path)
    trace = _trace()
    r = _post(app, PATHS[wire], _turn(wire, True), trace)
    assert r.headers["x-trace-id"] == trace and "get_user" not in r.text
    if r.status_code != 200:  # failed before the first event: the HTTP error itself
        assert r.status_code == 503 and _is_journal_503(wire, r.json()), r.text
        return
    assert r.headers["content-type"].partition(";")[0] == "text/event-stream"
    events = _events(r.text)
    assert events, r.text
    name, last = events[-1]
    assert name == ("error" if wire == "anthropic" else "")
    assert _is_journal_503(wire, last), r.text
    if text:  # the words relayed before the tail still reached the client
        assert text.split()[0] in r.text
