"""Benchmark: what the MCP proxy adds to each ``tools/call``.

Starts a small MCP server (this file, ``--serve``) on stdio and calls one tool through the
official SDK client three ways: directly; through ``fak mcp-proxy`` as a subprocess (the
real deployment: one more stdio hop plus the kernel); and through the proxy in-process
(the client talks to the proxy's server object in memory, so only the kernel and the
proxy's own work are added to the direct path). Prints p50/p99 latency per call in
milliseconds and the added latency against the direct path, all measured in this run.

Then what the metadata rule costs a benign session: the server also lists ``--tools``
ordinary tools and a ``send_report`` tool; ``tools/list`` through the proxy in-process is
timed without pins (each listing's metadata is admitted in the session) and with the
operator's pins (a SHA-256 per tool), and a fresh session lists, then sends a report:
its outcome is printed (refused without pins, delivered with them). Run the same file
against an older tree (``PYTHONPATH=/path/to/old/tree``) for a before/after: a proxy
without pins prints only the unpinned rows.

    python benchmarks/mcp_proxy.py [--calls 500] [--warmup 50] [--tools 20]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ARGS = {"record_id": "A-1042", "fields": ["name", "status", "owner"]}


def serve() -> None:
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("bench", log_level="ERROR")

    @app.tool()
    def lookup_record(record_id: str, fields: list[str]) -> str:
        """Look a record up."""
        return json.dumps({"id": record_id, **{f: f"{f}-value" for f in fields}})

    @app.tool()
    def send_report(to: str, body: str) -> str:
        """Send a report by email to a colleague."""
        return f"sent to {to}"

    for i in range(int(os.environ.get("BENCH_TOOLS", "0"))):
        app.add_tool(
            _filler,
            name=f"query_table_{i}",
            title=f"Query table {i}",
            description=(
                f"Run a read-only query against table {i} of the warehouse and return the "
                "matching rows as JSON. Columns are returned in schema order; at most 100 "
                "rows per call. Use the cursor from the previous page to read further."
            ),
        )

    app.run()


def _filler(table: str, where: str = "", cursor: str = "") -> str:
    """A read-only query (the benchmark never calls it)."""
    return "[]"


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def measure(call: Callable[[], Awaitable[Any]], calls: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        await call()
    out: list[float] = []
    for _ in range(calls):
        start = time.perf_counter()
        result = await call()
        out.append((time.perf_counter() - start) * 1000)
        if result.is_error:
            raise SystemExit(f"benchmark call failed: {result.content}")
    return out


async def listing(calls: int, warmup: int, tools: int) -> None:
    """tools/list through the proxy in-process, without and with pins, and a benign
    session that lists and then sends."""
    from mcp import Client

    from fak_core import Kernel, Policy
    from fak_core.gateway.mcp_downstream import DownstreamSpec
    from fak_core.gateway.mcp_proxy import McpProxy

    me = str(Path(__file__).resolve())
    env = {**os.environ, "BENCH_TOOLS": str(tools)}
    spec = DownstreamSpec("bench", command=sys.executable, args=(me, "--serve"), env=env)
    has_pins = "pins" in inspect.signature(McpProxy).parameters
    names = ("lookup_record", "send_report", *(f"query_table_{i}" for i in range(tools)))
    modes = ["unpinned", "pinned"] if has_pins else ["no metadata rule (before)"]
    print(f"\ntools/list through the proxy in-process, {tools + 2} tools, {calls} listings (ms)")
    print(f"{'mode':30} {'p50':>8} {'p99':>8}   a fresh session lists, then sends")
    for mode in modes:
        kernel = Kernel(Policy(allow=names))
        kw: dict[str, Any] = {}
        if mode == "pinned":
            async with McpProxy(Kernel(Policy(allow=names)), [spec]) as printer:
                kw["pins"] = await printer.current_pins()
        async with McpProxy(kernel, [spec], **kw) as proxy:
            async with Client(proxy.server, cache=None) as client:
                for _ in range(warmup):
                    await client.list_tools()
                samples = []
                for _ in range(calls):
                    start = time.perf_counter()
                    listed = await client.list_tools()
                    samples.append((time.perf_counter() - start) * 1000)
                    assert len(listed.tools) == tools + 2
            async with Client(proxy.server, cache=None) as client:
                await client.list_tools()
                sent = await client.call_tool(
                    "send_report", {"to": "bob@example.com", "body": "hi"}
                )
        outcome = "refused" if sent.is_error else "delivered"
        print(f"{mode:30} {pct(samples, 0.5):8.3f} {pct(samples, 0.99):8.3f}   {outcome}")
    if has_pins:
        await rule_cost(spec, names, calls)


async def rule_cost(spec: Any, names: tuple[str, ...], reps: int) -> None:
    """The rule's own CPU per listing, without the downstream round trip: digesting every
    tool against the pins, and admitting every tool's metadata (no pins)."""
    from fak_core import Kernel, Policy
    from fak_core.gateway.mcp_pins import pin_status
    from fak_core.gateway.mcp_proxy import McpProxy, ProxySession

    async with McpProxy(Kernel(Policy(allow=names)), [spec]) as proxy:
        pins = await proxy.current_pins()
        routes = await proxy.refresh_tools()
        start = time.perf_counter()
        for _ in range(reps):
            for r in routes:
                pin_status(pins, "bench", r.tool)
        digest_us = (time.perf_counter() - start) / reps * 1e6
        start = time.perf_counter()
        for i in range(reps):
            proxy.mark_seen(ProxySession(f"bench-{i}"), routes)
        admit_us = (time.perf_counter() - start) / reps * 1e6
    print(f"per listing of {len(routes)} tools, CPU in this process (mean of {reps}):")
    print(f"  pins: digest and compare every tool     {digest_us:10.1f} us")
    print(f"  no pins: admit every tool's metadata    {admit_us:10.1f} us")


async def run(calls: int, warmup: int) -> None:
    from mcp import Client, StdioServerParameters

    from fak_core import Kernel, Policy
    from fak_core.gateway.mcp_downstream import DownstreamSpec
    from fak_core.gateway.mcp_proxy import McpProxy

    me = str(Path(__file__).resolve())
    direct = StdioServerParameters(command=sys.executable, args=[me, "--serve"])
    with tempfile.TemporaryDirectory() as tmp:
        policy_file = Path(tmp) / "policy.json"
        policy_file.write_text(json.dumps({"allow": ["lookup_record"]}))
        proxied = StdioServerParameters(
            command=sys.executable,
            args=[
                *("-m", "fak_core.cli", "mcp-proxy", "--policy", str(policy_file), "--"),
                *(sys.executable, me, "--serve"),
            ],
        )
        rows: dict[str, list[float]] = {}
        async with Client(direct, cache=None) as client:
            rows["direct (stdio)"] = await measure(
                lambda: client.call_tool("lookup_record", ARGS), calls, warmup
            )
        async with Client(proxied, cache=None) as client:
            rows["fak mcp-proxy (stdio, subprocess)"] = await measure(
                lambda: client.call_tool("lookup_record", ARGS), calls, warmup
            )
        kernel = Kernel(Policy(allow=("lookup_record",)))
        spec = DownstreamSpec("bench", command=sys.executable, args=(me, "--serve"))
        async with McpProxy(kernel, [spec]) as proxy, Client(proxy.server, cache=None) as client:
            rows["proxy in-process (kernel + proxy only)"] = await measure(
                lambda: client.call_tool("lookup_record", ARGS), calls, warmup
            )
            decide_us = kernel.counters.decide_ns / max(1, kernel.counters.decisions) / 1000

    base = rows["direct (stdio)"]
    b50, b99 = pct(base, 0.5), pct(base, 0.99)
    print(f"tools/call latency, {calls} calls each after {warmup} warm-up calls (ms)")
    print(f"{'path':42} {'p50':>8} {'p99':>8} {'+p50':>8} {'+p99':>8} {'x p50':>6}")
    for name, samples in rows.items():
        p50, p99 = pct(samples, 0.5), pct(samples, 0.99)
        print(f"{name:42} {p50:8.3f} {p99:8.3f} {p50 - b50:8.3f} {p99 - b99:8.3f} {p50 / b50:6.2f}")
    print(f"mean kernel decide per call: {decide_us:.1f} us")
    print(f"direct mean {statistics.fmean(base):.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--tools", type=int, default=20, help="ordinary tools the server lists")
    parser.add_argument("--listing-only", action="store_true", help="skip the tools/call rows")
    ns = parser.parse_args()
    if ns.serve:
        serve()
        return
    import anyio

    if not ns.listing_only:
        anyio.run(run, ns.calls, ns.warmup)
    anyio.run(listing, ns.calls, ns.warmup, ns.tools)


if __name__ == "__main__":
    main()
