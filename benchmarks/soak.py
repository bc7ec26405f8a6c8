"""Soak: a bounded, mixed load against a local gateway, with and without the journal.

The script starts ``fak serve`` itself as a subprocess on 127.0.0.1, port 0 (so the
server's resident memory is its own, read from ``/proc/<pid>/status``), drives it with
``--concurrency`` asyncio workers (one httpx keep-alive client) for ``--seconds`` or
``--max-requests``, whichever ends first, then stops it. The traffic mixes:

- allowed: ``adjudicate get_user_details`` (ALLOW);
- denied: ``adjudicate shell_rm_rf`` (DENY/POLICY_BLOCK);
- malformed: a body that is not JSON (400);
- admit + egress on a fresh trace: an untrusted result admitted, then an external
  ``send_certificate`` (DENY/TRUST_VIOLATION): every one is a new session, so the taint
  ledger fills to its bound and must then stay flat.

Every answer is checked (status and verdict); anything else counts as an error. Printed:
requests/s, p50/p99 latency, errors, the server's RSS at start, during, and at the end.
The same load runs twice, without and with ``--journal`` (the journal's cost at the
wire), and ``kernel.decide`` is timed in process with and without an attached journal
(µs per decision) along with the group-commit ``sync`` latency.

Run: ``python benchmarks/soak.py [--seconds 60] [--concurrency 16] [--max-requests N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from fak_core import Kernel, ToolCall, default_policy
from fak_core.journal import Journal, read_rows, verify_files
from fak_core.ledger import DEFAULT_LEDGER_LIMIT

#: The benchmark's one client: a session token of its own on every request (D12).
SESSION = {"X-Fak-Session": secrets.token_urlsafe(24)}

LINE = re.compile(r"^fak serve: listening on (http://127\.0\.0\.1:\d+) ")
MIX = ("allowed", "denied", "malformed", "admit_egress")


# ------------------------------------------------------------------ the server process
class Gateway:
    """``fak serve`` as a subprocess on a free loopback port; stopped with SIGTERM."""

    def __init__(self, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fak_core.gateway.cli", "--port", "0", *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        reader.join(60)
        match = LINE.match(box[0]) if box else None
        if match is None:
            self.proc.kill()
            raise SystemExit(f"fak serve did not start: {box} {self.proc.stderr.read()}")  # type: ignore[union-attr]
        self.url = match.group(1)

    def rss_kib(self) -> int:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        return int(found.group(1)) if found else -1

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


# ------------------------------------------------------------------ the load
@dataclass
class Load:
    latencies_ns: list[int] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(MIX, 0))
    errors: int = 0
    first_error: str = ""
    decisions: int = 0  # answered decisions and admissions (what the journal records)
    rss_samples: list[tuple[float, int]] = field(default_factory=list)
    wall_s: float = 0.0

    def fail(self, what: str) -> None:
        self.errors += 1
        self.first_error = self.first_error or what[:200]

    def pct(self, q: float) -> float:
        ordered = sorted(self.latencies_ns)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] / 1e6


async def _one(c: httpx.AsyncClient, kind: str, n: int, load: Load) -> None:
    """One request of the mix (two for admit_egress), checked and timed."""

    async def post(
        body: dict[str, object] | bytes, path: str = "/v1/fak/adjudicate"
    ) -> httpx.Response:
        start = time.perf_counter_ns()
        if isinstance(body, bytes):
            r = await c.post(path, content=body, headers={"content-type": "application/json"})
        else:
            r = await c.post(path, json=body)
        load.latencies_ns.append(time.perf_counter_ns() - start)
        return r

    def expect(r: httpx.Response, status: int, verdict: tuple[str, str] | None) -> None:
        if r.status_code != status:
            load.fail(f"{kind}: HTTP {r.status_code} {r.text}")
            return
        if verdict is not None:
            v = r.json()["verdict"]
            if (v["kind"], v.get("reason", "NONE")) != verdict:
                load.fail(f"{kind}: {v}")
                return
            load.decisions += 1

    if kind == "allowed":
        call = {
            "tool": "get_user_details",
            "arguments": {"user_id": "u1"},
            "trace_id": f"s-{n % 64}",
        }
        expect(await post(call), 200, ("ALLOW", "NONE"))
    elif kind == "denied":
        expect(
            await post({"tool": "shell_rm_rf", "trace_id": f"s-{n % 64}"}),
            200,
            ("DENY", "POLICY_BLOCK"),
        )
    elif kind == "malformed":
        expect(await post(b'{"tool": "get_user_details", '), 400, None)
    else:
        trace = f"fresh-{n}"
        admit = {"tool": "fetch_page", "result": "weather: mild", "trace_id": trace}
        r = await post(admit, "/v1/fak/admit")
        if r.status_code != 200 or r.json()["result"]["status"] != "OK":
            load.fail(f"admit: HTTP {r.status_code} {r.text}")
            return
        load.decisions += 1
        egress = {
            "tool": "send_certificate",
            "arguments": {"to": "someone@elsewhere.example"},
            "trace_id": trace,
        }
        expect(await post(egress), 200, ("DENY", "TRUST_VIOLATION"))
    load.counts[kind] += 1


async def _drive(gw: Gateway, seconds: float, concurrency: int, cap: int) -> Load:
    load = Load()
    counter = iter(range(cap))
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async def worker(c: httpx.AsyncClient) -> None:
        while time.monotonic() < deadline:
            n = next(counter, None)
            if n is None:
                return
            try:
                await _one(c, MIX[n % len(MIX)], n, load)
            except httpx.HTTPError as exc:
                load.fail(f"transport: {exc!r}")

    async def sampler() -> None:
        start = time.monotonic()
        while time.monotonic() < deadline:
            await asyncio.sleep(min(5.0, max(0.1, deadline - time.monotonic())))
            load.rss_samples.append((time.monotonic() - start, gw.rss_kib()))

    async with httpx.AsyncClient(base_url=gw.url, timeout=30, limits=limits, headers=SESSION) as c:
        for i in range(200):  # warm-up (not counted): imports, JIT-free caches, pools
            await _one(c, MIX[i % len(MIX)], cap + i, Load())
        load.rss_samples.append((0.0, gw.rss_kib()))
        start = time.perf_counter()
        samp = asyncio.create_task(sampler())
        await asyncio.gather(*(worker(c) for _ in range(concurrency)))
        load.wall_s = time.perf_counter() - start
        samp.cancel()
    load.rss_samples.append((load.wall_s, gw.rss_kib()))
    return load


def soak(label: str, seconds: float, concurrency: int, cap: int, *extra: str) -> Load:
    gw = Gateway(*extra)
    try:
        load = asyncio.run(_drive(gw, seconds, concurrency, cap))
    finally:
        gw.stop()
    n = len(load.latencies_ns)
    rss = load.rss_samples
    print(f"\n[{label}] {n} requests in {load.wall_s:.1f} s, concurrency {concurrency}")
    rps = n / load.wall_s
    print(
        f"  {rps:8.0f} req/s   p50 {load.pct(0.50):6.2f} ms   p99 {load.pct(0.99):6.2f} ms"
        f"   errors {load.errors}" + (f" (first: {load.first_error})" if load.errors else "")
    )
    print(
        "  mix: "
        + ", ".join(f"{k} {v}" for k, v in load.counts.items())
        + f"; fresh sessions {load.counts['admit_egress']} (ledger bound {DEFAULT_LEDGER_LIMIT})"
    )
    print(
        f"  server RSS: start {rss[0][1] / 1024:.1f} MiB, end {rss[-1][1] / 1024:.1f} MiB "
        f"(delta {(rss[-1][1] - rss[0][1]) / 1024:+.1f} MiB); samples "
        + " ".join(f"{t:.0f}s:{k / 1024:.1f}" for t, k in rss)
    )
    return load


# ------------------------------------------------------------------ in process
def inprocess(n: int, tmp: Path) -> None:
    def kernel() -> Kernel:
        return Kernel(default_policy())

    calls = [ToolCall("get_user_details", '{"user_id": "u1"}', f"t{i % 64}") for i in range(n)]

    def per_decision(k: Kernel) -> float:
        for c in calls[:500]:
            k.decide(c)
        start = time.perf_counter_ns()
        for c in calls:
            k.decide(c)
        return (time.perf_counter_ns() - start) / n / 1000

    bare = per_decision(kernel())
    k = kernel()
    with Journal(tmp / "inproc.db") as j:
        j.attach(k)
        journaled = per_decision(k)
        t0 = time.perf_counter_ns()
        j.sync(60)
        drain_ms = (time.perf_counter_ns() - t0) / 1e6
        # Durable one by one: decide, then wait for the commit (what one lone request pays).
        lone: list[int] = []
        for c in calls[:2000]:
            k.decide(c)
            s = time.perf_counter_ns()
            j.sync()
            lone.append(time.perf_counter_ns() - s)
        lone.sort()
    print(f"\n[in process] kernel.decide, {n} decisions")
    print(f"  no journal     {bare:7.2f} us/decision")
    print(
        f"  with journal   {journaled:7.2f} us/decision  (+{journaled - bare:.2f} us, "
        f"x{journaled / bare:.2f}): building the row and the queue put, plus the writer "
        "thread's share of the GIL; the commit itself is off the critical path"
    )
    print(f"  sync after the {n}-decision burst: {drain_ms:.1f} ms (the writer catching up)")
    print(
        f"  decide then sync, one at a time: sync p50 {lone[len(lone) // 2] / 1000:.0f} us, "
        f"p99 {lone[int(len(lone) * 0.99)] / 1000:.0f} us (a commit per decision: the worst case)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--seconds", type=float, default=60.0, help="per soak (default 60)")
    parser.add_argument("--concurrency", type=int, default=16, help="workers (default 16)")
    parser.add_argument("--max-requests", type=int, default=2_000_000, help="cap per soak")
    parser.add_argument("--durability", choices=("normal", "full"), default="normal")
    parser.add_argument("--inprocess", type=int, default=50_000, help="decisions timed in process")
    ns = parser.parse_args()
    print(f"soak: python {sys.version.split()[0]}, {os.cpu_count()} cpus, pid {os.getpid()}")
    with tempfile.TemporaryDirectory(prefix="fak-soak-") as tmpdir:
        tmp = Path(tmpdir)
        bare = soak("no journal", ns.seconds, ns.concurrency, ns.max_requests)
        journal = tmp / "soak.db"
        args = ("--journal", str(journal), "--journal-durability", ns.durability)
        with_j = soak(
            f"journal ({ns.durability})", ns.seconds, ns.concurrency, ns.max_requests, *args
        )
        rows = sum(1 for _ in read_rows(journal))
        report = verify_files([journal])
        print(
            f"  journal: {rows} rows, {journal.stat().st_size / 2**20:.1f} MiB, {report.describe()}"
        )
        if rows < with_j.decisions:
            print(f"  !! {with_j.decisions - rows} answered decisions are missing from the journal")
        rps0 = len(bare.latencies_ns) / bare.wall_s
        rps1 = len(with_j.latencies_ns) / with_j.wall_s
        print("\n[journal cost at the wire]")
        print(
            f"  throughput x{rps1 / rps0:.2f} ({rps0:.0f} -> {rps1:.0f} req/s); "
            f"p50 {bare.pct(0.5):.2f} -> {with_j.pct(0.5):.2f} ms; "
            f"p99 {bare.pct(0.99):.2f} -> {with_j.pct(0.99):.2f} ms"
        )
        print(
            f"  per decision: {1e6 / rps1 - 1e6 / rps0:+.0f} us of server time per request "
            f"at saturation (1/throughput)"
        )
        inprocess(ns.inprocess, tmp)


if __name__ == "__main__":
    main()
