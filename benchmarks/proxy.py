"""Added latency and throughput of the OpenAI proxy over a direct upstream call.

The scripted planner is served as a real HTTP upstream and ``fak serve --upstream URL`` runs
in front of it, each in its own process as deployed (uvicorn on 127.0.0.1, ephemeral
ports); this process is the client. The same chat completion (one proposed tool call,
adjudicated ALLOW) is sent directly and through the gateway, interleaved, over one
keep-alive connection per path. Prints p50/p99 latency of each, the added latency, and
the throughput ratio; then the same with concurrent clients (requests per second over a
fixed time, direct vs proxied).

``--in-process`` runs both servers as threads of this process instead (one GIL for the
client and both servers: every hop between them is a GIL hand-off, so this reads high).

    python benchmarks/proxy.py [--requests 1000] [--max-seconds 60] [--in-process]
    python benchmarks/proxy.py --serve-planner   # the upstream alone; prints its URL
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn

from pytest_fak.fixtures import serve_app

BODY = {"model": "m", "messages": [{"role": "user", "content": "what is the weather"}]}
PATH = "/v1/chat/completions"


@contextmanager
def spawn(argv: list[str], marker: str) -> Iterator[str]:
    """Run ``argv`` in a child process; yield the URL it prints on its line with ``marker``."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    pipe = subprocess.PIPE
    proc = subprocess.Popen(argv, stdout=pipe, stderr=pipe, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if marker not in line:
            err = proc.stderr.read() if proc.stderr else ""
            raise RuntimeError(f"{argv[:3]} did not start: {line!r} {err[-2000:]}")
        url = next(w for w in line.split() if w.startswith("http://"))
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def serve_planner() -> None:
    """The scripted planner as an upstream on an ephemeral loopback port (``--serve-planner``)."""
    from fak_core.gateway import planner_app

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    print(f"planner upstream on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(planner_app(), log_level="error", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])


@contextmanager
def servers(in_process: bool) -> Iterator[tuple[str, str]]:
    """(upstream URL, gateway URL)."""
    if in_process:
        from starlette.applications import Starlette

        from fak_core import Kernel
        from fak_core.gateway import (
            GatewayState,
            UpstreamConfig,
            planner_app,
            proxy_lifespan,
            proxy_routes,
        )

        with serve_app(planner_app()) as upstream_url:
            state = GatewayState(Kernel())
            routes = proxy_routes(state, UpstreamConfig(base_url=upstream_url + "/v1"))
            with serve_app(Starlette(routes=routes, lifespan=proxy_lifespan(routes))) as gw_url:
                yield upstream_url, gw_url
        return
    me = [sys.executable, os.path.abspath(__file__), "--serve-planner"]
    with spawn(me, "planner upstream on") as upstream_url:
        gateway = [
            sys.executable,
            "-m",
            "fak_core.gateway.cli",
            "--port",
            "0",
            "--upstream",
            upstream_url + "/v1",
        ]
        with spawn(gateway, "listening on") as gw_url:
            yield upstream_url, gw_url


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


async def _concurrent(url: str, clients: int, seconds: float) -> tuple[int, float]:
    """Requests completed by ``clients`` concurrent keep-alive connections in ``seconds``."""
    done = 0
    errors = 0
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=10, limits=limits) as client:
        stop = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal done, errors
            while time.perf_counter() < stop:
                r = await client.post(url + PATH, json=BODY)
                if r.status_code == 200:
                    done += 1
                else:
                    errors += 1

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        elapsed = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{errors} requests to {url} failed")
    return done, elapsed


def measure(requests: int, max_seconds: float, in_process: bool = False) -> None:
    """Proxied chat completions against the scripted upstream beside direct ones; print."""
    n = max(10, min(requests, 5000))
    with servers(in_process) as (upstream_url, gw_url):
        direct: list[float] = []
        proxied: list[float] = []
        with httpx.Client(timeout=10) as client:
            for url in (upstream_url, gw_url):  # warm both paths
                for _ in range(50):
                    client.post(url + PATH, json=BODY).raise_for_status()
            start = time.monotonic()
            for _ in range(n):
                if time.monotonic() - start > max_seconds:
                    break
                for url, sink in ((upstream_url, direct), (gw_url, proxied)):
                    t0 = time.perf_counter()
                    r = client.post(url + PATH, json=BODY)
                    sink.append(time.perf_counter() - t0)
                    r.raise_for_status()
            check = client.post(gw_url + PATH, json=BODY).json()
        window = min(5.0, max(1.0, max_seconds / 10))
        rates = {}
        for name, url in (("direct", upstream_url), ("proxied", gw_url)):
            count, elapsed = asyncio.run(_concurrent(url, 8, window))
            rates[name] = count / elapsed
    kept = len(check["choices"][0]["message"].get("tool_calls") or [])
    ms = 1000.0
    where = "threads of one process" if in_process else "separate processes"
    print(f"requests per path: {len(direct)} (interleaved, sequential, loopback, {where})")
    print(
        f"proxied turn keeps {kept} adjudicated tool call(s); fak verdict: "
        f"{check['fak']['adjudications'][0]['verdict']['kind']}"
    )
    print(f"direct   p50 {pct(direct, 0.5) * ms:7.3f} ms   p99 {pct(direct, 0.99) * ms:7.3f} ms")
    print(f"proxied  p50 {pct(proxied, 0.5) * ms:7.3f} ms   p99 {pct(proxied, 0.99) * ms:7.3f} ms")
    print(
        f"added    p50 {(pct(proxied, 0.5) - pct(direct, 0.5)) * ms:7.3f} ms   "
        f"p99 {(pct(proxied, 0.99) - pct(direct, 0.99)) * ms:7.3f} ms"
    )
    tp_direct = len(direct) / sum(direct)
    tp_proxied = len(proxied) / sum(proxied)
    print(
        f"sequential throughput direct {tp_direct:8.1f} req/s   proxied {tp_proxied:8.1f} req/s"
        f"   ratio proxied/direct {tp_proxied / tp_direct:.3f}"
    )
    print(
        f"concurrent (8 clients, {window:g} s each) direct {rates['direct']:8.1f} req/s   "
        f"proxied {rates['proxied']:8.1f} req/s   ratio {rates['proxied'] / rates['direct']:.3f}"
    )
    print(f"mean added latency {(statistics.mean(proxied) - statistics.mean(direct)) * ms:.3f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--max-seconds", type=float, default=60.0)
    ap.add_argument("--in-process", action="store_true", help="servers as threads of this process")
    ap.add_argument("--serve-planner", action="store_true", help=argparse.SUPPRESS)
    ns = ap.parse_args()
    if ns.serve_planner:
        serve_planner()
        return
    measure(ns.requests, ns.max_seconds, ns.in_process)


if __name__ == "__main__":
    main()
