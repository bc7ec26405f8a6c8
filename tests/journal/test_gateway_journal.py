"""The gateway with a decision journal: every surface answers only once its decision is
committed, and a journal that fails turns the answer into a refusal, never an
unrecorded ALLOW (fak-native routes and MCP: DENY/JOURNAL_DOWN as a value; the model
proxies: a 503 envelope, or an error event that ends the stream, with no tool call)."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from fak_core.gateway import UpstreamConfig, proxy_routes
from fak_core.gateway.app import create_app
from fak_core.gateway.cli import main as serve_main
from fak_core.gateway.state import GatewayState
from fak_core.journal import Journal, read_rows, verify_files
from pytest_fak.fixtures import serve_app
from tests.gateway.support import own_session
from tests.gateway_proxies.kernels import make_kernel
from tests.gateway_proxies.scripted_upstream import Script, ScriptedUpstream
from tests.journal.faults import refuse_inserts

TIMEOUT = 20


@pytest.fixture
def journal_path(tmp_path: Path) -> Path:
    return tmp_path / "decisions.db"


@pytest.fixture
def served(journal_path: Path) -> Iterator[tuple[str, GatewayState, ScriptedUpstream]]:
    """The whole gateway (native API, MCP, both proxies) on uvicorn, with a journal."""
    upstream = ScriptedUpstream()
    upstream.reset(Script(text="ok", calls=[("get_user", {"id": 1})]))
    state = GatewayState(make_kernel())
    journal = Journal(journal_path)
    journal.attach(state.kernel)
    state.journal = journal
    config = UpstreamConfig(
        base_url="http://up/v1", transport=httpx.ASGITransport(app=upstream.app)
    )
    app = create_app(state, extra_routes=proxy_routes(state, config))
    with serve_app(app) as url:
        yield url, state, upstream
    journal.close()


def _traces(path: Path) -> set[str]:
    return {str(r["trace"]) for r in read_rows(path)}


def test_a_response_waits_until_its_decision_is_committed(
    served: tuple[str, GatewayState, ScriptedUpstream], journal_path: Path
) -> None:
    url, _, _ = served
    with httpx.Client(base_url=url, timeout=TIMEOUT) as c:  # the journal file exists
        assert c.post("/v1/fak/adjudicate", json={"tool": "get_user"}).status_code == 200
    # Another process holds the journal's write lock: nothing can be committed meanwhile.
    blocker = sqlite3.connect(journal_path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    box: list[httpx.Response] = []

    def ask() -> None:
        with httpx.Client(base_url=url, timeout=TIMEOUT) as c:
            box.append(c.post("/v1/fak/adjudicate", json={"tool": "get_user", "trace_id": "held"}))

    t = threading.Thread(target=ask)
    t.start()
    time.sleep(0.6)
    answered_early = bool(box)
    blocker.execute("ROLLBACK")
    blocker.close()
    t.join(TIMEOUT)
    assert not answered_early, "the gateway answered before the decision was committed"
    assert box and box[0].status_code == 200
    assert box[0].json()["verdict"]["kind"] == "ALLOW"
    assert "held" in _traces(journal_path)


def _native(c: httpx.Client, trace: str) -> dict[str, dict[str, Any]]:
    return {
        "adjudicate": c.post(
            "/v1/fak/adjudicate", json={"tool": "get_user", "trace_id": trace}
        ).json(),
        "syscall": c.post("/v1/fak/syscall", json={"tool": "get_user", "trace_id": trace}).json(),
        "admit": c.post(
            "/v1/fak/admit", json={"tool": "fetch_url", "result": "hi", "trace_id": trace}
        ).json(),
    }


async def _mcp(url: str, trace: str) -> dict[str, Any]:
    with anyio.fail_after(TIMEOUT):
        async with Client(f"{url}/mcp", mode="legacy") as client:
            res = await client.call_tool("fak_adjudicate", {"tool": "get_user", "trace_id": trace})
    assert res.is_error is False
    return dict(json.loads(res.content[0].text))


def _chat(c: httpx.Client, stream: bool) -> httpx.Response:
    doc = {"model": "m", "stream": stream, "messages": [{"role": "user", "content": "who?"}]}
    return c.post("/v1/chat/completions", json=doc)


def _messages(c: httpx.Client, stream: bool) -> httpx.Response:
    doc = {
        "model": "m",
        "max_tokens": 8,
        "stream": stream,
        "messages": [{"role": "user", "content": "who?"}],
    }
    return c.post("/v1/messages", json=doc)


def test_a_failed_journal_refuses_on_every_surface(
    served: tuple[str, GatewayState, ScriptedUpstream], journal_path: Path
) -> None:
    url, state, _ = served
    with httpx.Client(base_url=url, timeout=TIMEOUT, headers=own_session()) as c:
        # Healthy: the same requests are allowed and carry their tool calls.
        ok = _native(c, "before")
        assert ok["adjudicate"]["verdict"]["kind"] == "ALLOW"
        assert ok["admit"]["result"]["status"] == "OK"
        assert anyio.run(_mcp, url, "before-mcp")["verdict"]["kind"] == "ALLOW"
        assert _chat(c, False).json()["choices"][0]["message"]["tool_calls"]
        assert '"tool_calls"' in _chat(c, True).text
        assert any(b["type"] == "tool_use" for b in _messages(c, False).json()["content"])
        assert "tool_use" in _messages(c, True).text

        refuse_inserts(journal_path)
        bad = _native(c, "after")
        for name, body in bad.items():
            v = body["verdict"]
            assert (v["kind"], v["reason"], v["by"]) == ("DENY", "JOURNAL_DOWN", "journal"), name
            assert "decision journal unavailable" in v["detail"]["claim"], name
            assert "result" not in body, name  # nothing unrecorded is handed back
        mcp_body = anyio.run(_mcp, url, "after-mcp")
        assert (mcp_body["verdict"]["kind"], mcp_body["verdict"]["reason"]) == (
            "DENY",
            "JOURNAL_DOWN",
        )
        for send in (_chat, _messages):
            r = send(c, False)
            assert r.status_code == 503, r.text
            assert "decision journal unavailable" in r.text
            assert "tool_calls" not in r.text and "tool_use" not in r.text
            streamed = send(c, True)
            assert "decision journal unavailable" in streamed.text
            assert '"tool_calls"' not in streamed.text and '"tool_use"' not in streamed.text
        # The kernel itself now denies (the journal's fail-closed gate), not only the wire.
        assert state.kernel.decide(
            state.build_call("get_user", {}, "k")
        ).reason == state.kernel.reasons.code("JOURNAL_DOWN")
    traces = _traces(journal_path)
    assert {"before", "before-mcp"} <= traces
    assert not {"after", "after-mcp"} & traces
    assert verify_files([journal_path]).ok


def test_serve_refuses_a_journal_it_cannot_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert serve_main(["--port", "0", "--journal", str(tmp_path)]) == 2  # a directory
    assert "--journal: cannot open decision journal" in capsys.readouterr().err
    args = ["--port", "0", "--journal", str(tmp_path / "j.db"), "--journal-rotate-bytes", "-1"]
    assert serve_main(args) == 2
    assert "--journal-rotate-bytes must be" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        serve_main(["--journal", "j.db", "--journal-durability", "sometimes"])


def test_a_tool_runs_only_once_its_allow_is_committed(journal_path: Path) -> None:
    state = GatewayState(make_kernel())
    seen: list[set[str]] = []
    state.kernel.register_tool("get_user", lambda args: seen.append(_traces(journal_path)) or {})
    with Journal(journal_path) as journal:
        journal.attach(state.kernel)
        state.kernel.decide(state.build_call("get_user", {}, "warm"))
        journal.sync()
        blocker = sqlite3.connect(journal_path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        t = threading.Thread(target=state.syscall, args=(state.build_call("get_user", {}, "run"),))
        t.start()
        time.sleep(0.6)
        ran_early = bool(seen)
        blocker.execute("ROLLBACK")
        blocker.close()
        t.join(TIMEOUT)
    assert not ran_early, "the tool ran before its ALLOW was committed"
    assert seen and "run" in seen[0]  # the tool saw its own decision already in the journal


def test_a_request_over_its_journal_share_is_refused_and_others_are_not(
    journal_path: Path,
) -> None:
    """Each HTTP request (and each MCP tool call) is one journal request scope: a proxied
    turn whose admissions would queue more than ``max_request_bytes`` is answered 503
    ``journal_unavailable``, and the next request, on any surface, is decided as usual."""
    upstream = ScriptedUpstream()
    upstream.reset(Script(text="ok", calls=[("get_user", {"id": 1})]))
    state = GatewayState(make_kernel())
    journal = Journal(journal_path, max_request_bytes=16 << 10)
    journal.attach(state.kernel)
    state.journal = journal
    config = UpstreamConfig(
        base_url="http://up/v1", transport=httpx.ASGITransport(app=upstream.app)
    )
    app = create_app(state, extra_routes=proxy_routes(state, config))
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "get_user", "arguments": "{}"}}
        for i in range(200)
    ]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "who?"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        *({"role": "tool", "tool_call_id": f"c{i}", "content": "x"} for i in range(200)),
    ]
    with serve_app(app) as url, httpx.Client(base_url=url, timeout=TIMEOUT) as c:
        big = c.post("/v1/chat/completions", json={"model": "m", "messages": messages})
        assert big.status_code == 503, big.text
        assert "16384-byte limit per request" in big.text
        small = c.post("/v1/chat/completions", json={"model": "m", "messages": messages[:1]})
        assert small.status_code == 200 and small.json()["choices"][0]["message"]["tool_calls"]
        assert _native(c, "after")["adjudicate"]["verdict"]["kind"] == "ALLOW"
        assert anyio.run(_mcp, url, "after-mcp")["verdict"]["kind"] == "ALLOW"
    journal.close()
    assert {"after", "after-mcp"} <= _traces(journal_path)
    assert verify_files([journal_path]).ok
