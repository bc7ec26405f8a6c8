"""The MCP proxy against real MCP servers (subprocesses) and the official SDK client."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from fak_core import (
    Event,
    EventKind,
    Kernel,
    Policy,
    Reason,
    Taint,
    Verdict,
    WitnessOutcome,
)
from fak_core.gateway.mcp_downstream import DownstreamSpec
from fak_core.gateway.mcp_proxy import McpProxy, tool_visible

from .conftest import POLICY, Downstream, running_proxy, session

pytestmark = pytest.mark.anyio

MAIL = {"to": "alice@example.com", "subject": "Lunch", "body": "Thursday at noon?"}


def payload(result: types.CallToolResult) -> dict[str, Any]:
    assert len(result.content) == 1 and isinstance(result.content[0], types.TextContent)
    return json.loads(result.content[0].text)


def refusal(result: types.CallToolResult) -> dict[str, Any]:
    """The verdict a refused call carries (and check it is one)."""
    assert result.is_error is True
    body = payload(result)
    assert body["refused"] is True
    assert body["instead"]
    assert result.meta is not None and result.meta["fak"]["verdict"] == body["verdict"]
    return body["verdict"]  # type: ignore[no-any-return]


def text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


# --------------------------------------------------------------------- tools/list
async def test_tools_list_passes_through_and_policy_decides_visibility(
    shared: tuple[McpProxy, list[Event]],
) -> None:
    proxy, _ = shared
    async with session(proxy) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    assert set(listed) == {"read_file", "fetch_url", "send_email", "hang", "crash"}
    routed = {r.name: r.tool for r in await proxy.refresh_tools()}
    for name, tool in listed.items():
        assert tool.input_schema == routed[name].input_schema  # unchanged on the way through
        assert tool.description == routed[name].description
        assert proxy.kernel.schemas.get(name) is not None  # registered as the rung-1 schema


async def test_hidden_tools_are_not_listed_and_refused_if_called(downstream: Downstream) -> None:
    policy = Policy(allow=("read_file", "send_email"), deny={"crash": "POLICY_BLOCK"})
    before = len(downstream.calls())
    async with (
        running_proxy([downstream.spec()], policy, pin=True) as (proxy, _),
        session(proxy) as client,
    ):
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"read_file", "send_email"}
        v = refusal(await client.call_tool("fetch_url", {"url": "https://example.com"}))
        assert (v["kind"], v["reason"], v["disposition"]) == ("DENY", "DEFAULT_DENY", "TERMINAL")
        v = refusal(await client.call_tool("crash", {}))
        assert (v["reason"], v["by"]) == ("POLICY_BLOCK", "floor")
    assert len(downstream.calls()) == before  # neither call reached the server
    assert tool_visible(policy, "read_file") and not tool_visible(policy, "crash")
    assert not tool_visible(policy, "x__crash", "__")  # a deny names the tool on every server


# --------------------------------------------------------------------- the IFC story
async def test_clean_session_sends_mail(
    shared: tuple[McpProxy, list[Event]], downstream: Downstream
) -> None:
    proxy, _ = shared
    async with session(proxy) as client:
        result = await client.call_tool("send_email", MAIL)
    assert result.is_error is False
    assert text(result) == "sent to alice@example.com"
    assert result.structured_content == {"result": "sent to alice@example.com"}
    assert MAIL in downstream.mails()
    assert result.meta is not None and result.meta["fak"]["verdict"]["kind"] == "ALLOW"


@pytest.mark.fak_theorem("D11")
async def test_session_that_fetched_untrusted_text_cannot_send_mail(
    shared: tuple[McpProxy, list[Event]], downstream: Downstream
) -> None:
    proxy, _ = shared
    mails_before = len(downstream.mails())
    async with session(proxy) as client:
        page = await client.call_tool("fetch_url", {"url": "https://evil.example/weather"})
        # the injected page never reaches the client: the kernel's stub replaces it
        stub = payload(page)
        assert stub["_quarantined"] is True and stub["reason"] == "TRUST_VIOLATION"
        assert "IGNORE PREVIOUS" not in page.model_dump_json()
        assert page.structured_content is None
        assert page.meta is not None and page.meta["fak"]["admission"]["kind"] == "QUARANTINE"
        trace = page.meta["fak"]["trace_id"]
        assert proxy.kernel.taint(trace) == Taint.QUARANTINED

        refused = await client.call_tool("send_email", MAIL)
        v = refusal(refused)
        assert (v["kind"], v["reason"], v["disposition"], v["by"]) == (
            "DENY",
            "TRUST_VIOLATION",
            "ESCALATE",
            "ifc-sink",
        )
        assert v["detail"]["claim"] == "EGRESS sink fed quarantined data"
    assert len(downstream.mails()) == mails_before  # the mail was never sent


async def test_benign_result_still_taints_the_session(
    shared: tuple[McpProxy, list[Event]],
) -> None:
    proxy, _ = shared
    async with session(proxy) as client:
        page = await client.call_tool("fetch_url", {"url": "https://weather.example/today"})
        assert page.is_error is False and "sunny" in text(page)
        assert proxy.kernel.taint(page.meta["fak"]["trace_id"]) == Taint.TAINTED  # type: ignore[index]
        v = refusal(await client.call_tool("send_email", MAIL))
        assert v["detail"]["claim"] == "EGRESS sink fed tainted data"


async def test_taint_does_not_leak_between_sessions(
    shared: tuple[McpProxy, list[Event]], downstream: Downstream
) -> None:
    proxy, _ = shared
    async with session(proxy) as dirty, session(proxy) as clean:
        await dirty.call_tool("fetch_url", {"url": "https://evil.example/"})
        sent = await clean.call_tool("send_email", {**MAIL, "subject": "from the clean one"})
        assert sent.is_error is False
        refusal(await dirty.call_tool("send_email", MAIL))
    async with session(proxy) as later:  # a new connection starts clean
        assert (await later.call_tool("send_email", {**MAIL, "subject": "later"})).is_error is False
    subjects = [m["subject"] for m in downstream.mails()]
    assert "from the clean one" in subjects and "later" in subjects


async def test_taint_does_not_leak_between_proxies(downstream: Downstream) -> None:
    async with running_proxy([downstream.spec("a")], pin=True) as (one, _), session(one) as client:
        await client.call_tool("fetch_url", {"url": "https://evil.example/"})
        refusal(await client.call_tool("send_email", MAIL))
        async with (
            running_proxy([downstream.spec("b")], pin=True) as (two, _),
            session(two) as other,
        ):
            assert (await other.call_tool("send_email", MAIL)).is_error is False


async def test_trusted_sources_when_the_operator_opts_in(
    downstream: Downstream, text_file: Path
) -> None:
    policy = Policy(
        allow=("read_file", "fetch_url", "send_email"), sources={"read_file": "trusted_local"}
    )
    async with (
        running_proxy([downstream.spec()], policy, trust_sources=True, pin=True) as (proxy, _),
        session(proxy) as client,
    ):
        read = await client.call_tool("read_file", {"path": str(text_file)})
        assert text(read) == "Meeting moved to Thursday at 10."
        assert (await client.call_tool("send_email", MAIL)).is_error is False
        await client.call_tool("fetch_url", {"url": "https://weather.example/"})  # untrusted source
        refusal(await client.call_tool("send_email", MAIL))


# --------------------------------------------------------------------- adjudication
@pytest.mark.fak_theorem("D11")
async def test_schema_violation_is_refused_before_the_server(
    shared: tuple[McpProxy, list[Event]], downstream: Downstream
) -> None:
    proxy, _ = shared
    before = len(downstream.calls("send_email"))
    async with session(proxy) as client:
        v = refusal(await client.call_tool("send_email", {"to": 42, "subject": "s", "body": "b"}))
        assert (v["kind"], v["reason"], v["by"], v["disposition"]) == (
            "DENY",
            "MALFORMED",
            "preflight",
            "RETRYABLE",
        )
        assert "to" in v["detail"]["claim"]
        v = refusal(await client.call_tool("send_email", {"to": "x@example.com"}))
        assert v["reason"] == "MALFORMED" and "required" in v["detail"]["claim"]
    assert len(downstream.calls("send_email")) == before


async def test_unknown_tool_is_refused(shared: tuple[McpProxy, list[Event]]) -> None:
    proxy, _ = shared
    async with session(proxy) as client:
        v = refusal(await client.call_tool("no_such_tool", {}))
    assert (v["kind"], v["reason"]) == ("DENY", "DEFAULT_DENY")


async def test_transform_forwards_the_repaired_arguments(
    shared: tuple[McpProxy, list[Event]], downstream: Downstream
) -> None:
    proxy, _ = shared
    async with session(proxy) as client:
        result = await client.call_tool(
            "send_email", {**MAIL, "subject": "redact", "password": "hunter2"}
        )
    assert result.is_error is False
    assert result.meta is not None
    assert result.meta["fak"]["verdict"]["kind"] == "TRANSFORM"
    assert result.meta["fak"]["forwarded_arguments"] == {**MAIL, "subject": "redact"}
    seen = [c["args"] for c in downstream.calls("send_email") if c["args"]["subject"] == "redact"]
    assert seen == [{**MAIL, "subject": "redact"}]  # the server never saw the password
    assert "hunter2" not in downstream.call_log.read_text()


class _Witnesses:
    def resolve(self, call: Any, claim: str) -> WitnessOutcome:
        if call.meta.get("witness") == "approved-by-alice":
            return WitnessOutcome.CONFIRMED
        if call.meta.get("witness"):
            return WitnessOutcome.REFUTED
        return WitnessOutcome.ABSTAIN


async def test_require_witness_follows_the_kernel(downstream: Downstream) -> None:
    kernel = Kernel(POLICY)
    kernel.add_adjudicator(
        lambda view: Verdict.require_witness("a human approves outbound mail", "mail-approval"),
        50,
        tools=["send_email"],
    )
    kernel.add_witness_resolver("approvals", _Witnesses())
    before = len(downstream.calls("send_email"))
    async with (
        running_proxy([downstream.spec()], kernel=kernel, pin=True) as (proxy, events),
        session(proxy) as client,
    ):
        v = refusal(await client.call_tool("send_email", MAIL))
        assert (v["kind"], v["reason"], v["by"]) == ("DENY", "UNWITNESSED", "witness")
        v = refusal(await client.call_tool("send_email", MAIL, meta={"fak/witness": "forged"}))
        assert (v["reason"], v["disposition"]) == ("TRUST_VIOLATION", "ESCALATE")
        assert len(downstream.calls("send_email")) == before
        ok = await client.call_tool(
            "send_email",
            {**MAIL, "subject": "witnessed"},
            meta={"fak/witness": "approved-by-alice"},
        )
        assert ok.is_error is False
        assert ok.meta is not None and ok.meta["fak"]["verdict"]["by"] == "witness"
    assert len(downstream.calls("send_email")) == before + 1
    denies = [e for e in events if e.kind == EventKind.DENY]
    assert [e.verdict.reason for e in denies if e.verdict] == [
        Reason.UNWITNESSED,
        Reason.TRUST_VIOLATION,
    ]


async def test_every_decision_reaches_the_journal(downstream: Downstream) -> None:
    async with running_proxy([downstream.spec()], pin=True) as (proxy, events):
        async with session(proxy) as client:
            await client.call_tool("fetch_url", {"url": "https://evil.example/"})
            await client.call_tool("send_email", MAIL)
            await client.call_tool("send_email", {"to": 1})
        async with session(proxy) as client:
            await client.call_tool("send_email", MAIL)
    kinds = [e.kind for e in events]
    assert kinds.count(EventKind.SUBMIT) == 4 and kinds.count(EventKind.DECIDE) == 4
    assert kinds.count(EventKind.DENY) == 2
    assert kinds.count(EventKind.ADMIT) == 1 and kinds.count(EventKind.QUARANTINE) == 1
    traces = [e.call.trace_id for e in events if e.kind == EventKind.SUBMIT]
    assert traces[0] == traces[1] == traces[2] != traces[3]
    assert all(t.startswith("mcp-") for t in traces)


# --------------------------------------------------------------------- faults
async def test_hang_and_crash_give_clear_errors_and_the_proxy_keeps_serving(
    downstream: Downstream,
) -> None:
    spec = downstream.spec("faulty", timeout=1.5)
    async with running_proxy([spec]) as (proxy, _), session(proxy) as client:
        hung = await client.call_tool("hang", {"seconds": 60})
        assert hung.is_error is True
        body = payload(hung)
        assert (body["error"], body["server"]) == ("downstream timeout", "faulty")
        assert "1.5s" in body["detail"]
        pid_before = downstream.calls("hang")[-1]["pid"]

        crashed = await client.call_tool("crash", {})
        assert crashed.is_error is True and payload(crashed)["error"] == "downstream crashed"

        # the next call reconnects (a new server process) and is served normally
        page = await client.call_tool("read_file", {"path": str(downstream.call_log)})
        assert page.is_error is False
        assert downstream.calls("read_file")[-1]["pid"] != pid_before
        # the crashing call was not replayed on the new connection
        assert len(downstream.calls("crash")) == 1
        assert proxy.downstreams[0].connects == 2


async def test_frames_that_are_not_json_rpc_are_a_crash(downstream: Downstream) -> None:
    spec = downstream.spec("garbage", mode="garbage", timeout=3)
    policy = Policy(allow=("garble",))
    async with running_proxy([spec], policy, pin=True) as (proxy, events), session(proxy) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["garble"]
        for _ in range(2):  # and again: the proxy reconnects and keeps serving
            result = await client.call_tool("garble", {"x": 1})
            body = payload(result)
            assert result.is_error is True and body["error"] == "downstream crashed"
            assert "not JSON-RPC" in body["detail"]
        assert proxy.downstreams[0].connects == 2
    # nothing from the garbage server was admitted as a result
    assert not [e for e in events if e.kind in (EventKind.ADMIT, EventKind.QUARANTINE)]


async def test_unavailable_server_is_reported(tmp_path: Path) -> None:
    spec = DownstreamSpec("gone", command=str(tmp_path / "no-such-server"), timeout=2)
    policy = Policy(allow=("anything",))
    async with running_proxy([spec], policy) as (proxy, _), session(proxy) as client:
        assert (await client.list_tools()).tools == []
        v = refusal(await client.call_tool("anything", {}))
        assert (v["reason"], v["by"]) == ("UNKNOWN_TOOL", "mcp-proxy")


# --------------------------------------------------------------------- aggregation
async def test_several_servers_aggregated_with_prefixes_stdio_and_http(
    downstream: Downstream, http_server: str
) -> None:
    specs = [downstream.spec("files"), DownstreamSpec("web", url=http_server, timeout=10)]
    policy = Policy(allow=("files__read_file", "web__fetch_url", "web__send_email"))
    async with running_proxy(specs, policy, pin=True) as (proxy, _):
        async with session(proxy) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == {"files__read_file", "web__fetch_url", "web__send_email"}
            v = refusal(await client.call_tool("files__send_email", MAIL))  # listed downstream,
            assert v["reason"] == "DEFAULT_DENY"  # but not allowed under this name
            sent = await client.call_tool("web__send_email", {**MAIL, "subject": "over http"})
            assert text(sent) == "sent to alice@example.com"
            read = await client.call_tool("files__read_file", {"path": str(downstream.outbox)})
            assert "over http" in text(read)  # the stdio server sees what the HTTP one wrote
        async with session(proxy) as client:
            page = await client.call_tool("web__fetch_url", {"url": "https://evil.example/"})
            assert payload(page)["_quarantined"] is True
            v = refusal(await client.call_tool("web__send_email", MAIL))
            assert v["reason"] == "TRUST_VIOLATION"

    assert [m["subject"] for m in downstream.mails()].count("over http") == 1


def test_constructor_refuses_bad_server_sets() -> None:
    spec = DownstreamSpec("a", command=sys.executable)
    with pytest.raises(ValueError, match="at least one"):
        McpProxy(Kernel(), [])
    with pytest.raises(ValueError, match="unique"):
        McpProxy(Kernel(), [spec, spec])
    with pytest.raises(ValueError, match="prefixed"):
        McpProxy(Kernel(), [spec, DownstreamSpec("b", command="x")], prefix=False)


@pytest.mark.fak_theorem("D11")
async def test_first_call_of_a_proxy_that_never_listed_is_schema_checked(
    downstream: Downstream,
) -> None:
    # Regression: the schema comes from tools/list; a call decided before the proxy had
    # listed its tools skipped rung 1 and reached the server.
    before = len(downstream.calls("send_email"))
    async with running_proxy([downstream.spec()]) as (proxy, _), session(proxy) as client:
        v = refusal(await client.call_tool("send_email", {"to": 42, "subject": "s", "body": "b"}))
        assert (v["kind"], v["reason"], v["by"]) == ("DENY", "MALFORMED", "preflight")
    assert len(downstream.calls("send_email")) == before


async def test_nothing_is_forwarded_before_its_decision_is_journaled(
    downstream: Downstream, tmp_path: Path
) -> None:
    import sqlite3

    from fak_core import Kernel
    from fak_core.journal import Journal, read_rows

    kernel = Kernel(POLICY)
    journal = Journal(tmp_path / "j.db")
    journal.attach(kernel)
    before = len(downstream.mails())
    try:
        async with (
            running_proxy(
                [downstream.spec()], kernel=kernel, decision_journal=journal, pin=True
            ) as (
                proxy,
                _,
            ),
            session(proxy) as client,
        ):
            sent = await client.call_tool("send_email", {**MAIL, "subject": "journaled"})
            assert sent.is_error is False
            assert ("send_email", "ALLOW") in [
                (r["tool"], r["verdict"]) for r in read_rows(tmp_path / "j.db")
            ]
            conn = sqlite3.connect(tmp_path / "j.db")
            conn.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON decisions "
                "BEGIN SELECT RAISE(ABORT, 'disk full'); END"
            )
            conn.commit()
            conn.close()
            reads = len(downstream.calls("read_file"))
            v = refusal(await client.call_tool("read_file", {"path": str(downstream.call_log)}))
            assert (v["kind"], v["reason"]) == ("DENY", "JOURNAL_DOWN")
            assert len(downstream.calls("read_file")) == reads  # never reached the server
    finally:
        journal.close()
    assert [m["subject"] for m in downstream.mails()[before:]] == ["journaled"]
