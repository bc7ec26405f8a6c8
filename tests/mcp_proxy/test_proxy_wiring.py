"""D11: what a proxy is built with decides what it exposes, whom it tells, and whose taint is whose.

The proxies here are constructed, never entered: no downstream process runs. The expected
values are written from the theorem: a proxy needs at least one server, server names are
distinct, several servers need prefixed names (the default for several, never for one);
prefixed names are read by the kernel's floor and by the listing as scoped names
(``<server>__<tool>``: an ``allow_prefix`` entry without ``__`` against the tool's own
name), plain names as they are; a journal given to the proxy sees the kernel's events until
the proxy is closed; each connection's session has a trace of its own,
``mcp-<8 hex digits>-<n>`` with ``n`` counting from 1; nothing is hidden or counted
before a listing; the proxy's log lines reach its log as they are written.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fak_core import Event, Kernel, Policy
from fak_core.calls import ToolCall
from fak_core.gateway.mcp_downstream import DownstreamSpec
from fak_core.gateway.mcp_proxy import McpProxy
from fak_core.verdicts import VerdictKind

#: Names where plain and scoped readings differ: a tool's own name behind ``__``.
SCOPED = "alpha__read_notes"
#: A deny without ``__`` denies that tool on every server only behind the prefix.
POLICY = Policy(
    allow=("beta__read_secret",), allow_prefix=("read_",), deny={"read_secret": "POLICY_BLOCK"}
)
SESSION = re.compile(r"mcp-([0-9a-f]{8})-([0-9]+)")


def _specs(*names: str) -> list[DownstreamSpec]:
    return [DownstreamSpec(n, command="unused") for n in names]


def _allowed(proxy: McpProxy, name: str) -> bool:
    call = ToolCall.make(name, "{}", trace_id="wiring")
    return proxy.kernel.decide(call).kind == VerdictKind.ALLOW


@pytest.mark.fak_theorem("D11")
def test_a_proxy_is_built_only_where_every_name_splits_one_way() -> None:
    with pytest.raises(ValueError, match="at least one downstream server"):
        McpProxy(Kernel(POLICY), [])
    with pytest.raises(ValueError, match="must be unique"):
        McpProxy(Kernel(POLICY), _specs("alpha", "beta", "alpha"))
    with pytest.raises(ValueError, match="need prefixed tool names"):
        McpProxy(Kernel(POLICY), _specs("alpha", "beta"), prefix=False)
    cases = [
        (_specs("alpha"), None, False),
        (_specs("alpha"), False, False),
        (_specs("alpha"), True, True),
        (_specs("alpha", "beta"), None, True),
        (_specs("alpha", "beta"), True, True),
        (_specs("alpha", "beta", "gamma"), None, True),
    ]
    for specs, prefix, prefixed in cases:
        proxy = McpProxy(Kernel(POLICY), specs, prefix=prefix)
        assert [d.name for d in proxy.downstreams] == [s.name for s in specs]
        for d in proxy.downstreams:
            want = f"{d.name}__read_notes" if prefixed else "read_notes"
            assert proxy.exposed_name(d, "read_notes") == want, (len(specs), prefix)
        # the floor and the listing read names alike: scoped behind the prefix, else plain
        assert _allowed(proxy, SCOPED) is prefixed, (len(specs), prefix)
        assert proxy.visible(SCOPED) is prefixed, (len(specs), prefix)
        assert proxy.visible("beta__read_secret") is not prefixed, (len(specs), prefix)
        assert _allowed(proxy, "beta__read_secret") is not prefixed, (len(specs), prefix)
        assert _allowed(proxy, "read_notes") and proxy.visible("read_notes")
        assert (proxy.hidden, proxy.tools_hidden) == ({}, 0)  # nothing hidden before a listing


@pytest.mark.fak_theorem("D11")
def test_a_journal_sees_the_kernels_events_until_the_proxy_is_closed() -> None:
    seen: list[Event] = []
    kernel = Kernel(POLICY)
    proxy = McpProxy(kernel, _specs("alpha"), journal=seen.append)
    _allowed(proxy, "read_notes")
    assert seen and all(isinstance(e, Event) for e in seen)
    proxy.close()
    count = len(seen)
    _allowed(proxy, "read_notes")
    assert len(seen) == count
    bare = McpProxy(Kernel(POLICY), _specs("alpha"))  # no journal: deciding still works
    assert _allowed(bare, "read_notes")
    bare.close()


@pytest.mark.fak_theorem("D11")
def test_each_connection_is_a_session_of_its_own_trace() -> None:
    proxies = [McpProxy(Kernel(POLICY), _specs("alpha")) for _ in range(2)]
    traces = [p.new_session().trace_id for p in proxies for _ in range(3)]
    assert len(set(traces)) == len(traces)
    for i, trace in enumerate(traces):
        m = SESSION.fullmatch(trace)
        assert m is not None, trace
        assert int(m.group(2)) == i % 3 + 1, traces


@pytest.mark.fak_theorem("D11")
def test_the_proxy_tells_its_client_and_its_log(tmp_path: Path) -> None:
    log = tmp_path / "proxy.log"
    with log.open("w", encoding="utf-8") as errlog:  # buffered: a line must be flushed
        proxy = McpProxy(Kernel(POLICY), _specs("alpha"), errlog=errlog)
        proxy._log("listing alpha failed")
        assert log.read_text(encoding="utf-8") == "fak mcp-proxy: listing alpha failed\n"
    said = proxy.server.instructions or ""
    for phrase in ("passes through the fak kernel", "isError true", "_meta.fak"):
        assert phrase in said, said
