"""Added latency and throughput of the OpenAI proxy over a direct upstream call.

Serves the scripted planner as a real HTTP upstream and a gateway in front of it (both
uvicorn on 127.0.0.1, ephemeral ports), then sends the same chat completion (one
proposed tool call, adjudicated ALLOW) directly and through the gateway, interleaved.
Prints p50/p99 latency of each, the added latency, and the throughput ratio.

    python benchmarks/proxy.py [--requests 300] [--max-seconds 60]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette

from fak_core import Kernel
from fak_core.gateway import GatewayState, UpstreamConfig, planner_app, proxy_lifespan, proxy_routes


@contextmanager
def serve(app: Any) -> Iterator[str]:
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", access_log=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("server did not start")
        time.sleep(0.01)
    sock: socket.socket = server.servers[0].sockets[0]
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--max-seconds", type=float, default=60.0)
    ns = ap.parse_args()
    measure(ns.requests, ns.max_seconds)


def measure(requests: int, max_seconds: float) -> None:
    """Proxied chat completions against the scripted upstream beside direct ones; print."""
    n = max(10, min(requests, 5000))
    body = {"model": "m", "messages": [{"role": "user", "content": "what is the weather"}]}
    with serve(planner_app()) as upstream_url:
        routes = proxy_routes(GatewayState(Kernel()), UpstreamConfig(base_url=upstream_url + "/v1"))
        with serve(Starlette(routes=routes, lifespan=proxy_lifespan(routes))) as gw_url:
            direct: list[float] = []
            proxied: list[float] = []
            with httpx.Client(timeout=10) as client:
                for url in (upstream_url, gw_url):  # warm both paths
                    for _ in range(10):
                        client.post(url + "/v1/chat/completions", json=body).raise_for_status()
                start = time.monotonic()
                for _ in range(n):
                    if time.monotonic() - start > max_seconds:
                        break
                    for url, sink in ((upstream_url, direct), (gw_url, proxied)):
                        t0 = time.perf_counter()
                        r = client.post(url + "/v1/chat/completions", json=body)
                        sink.append(time.perf_counter() - t0)
                        r.raise_for_status()
                check = client.post(gw_url + "/v1/chat/completions", json=body).json()
    kept = len(check["choices"][0]["message"].get("tool_calls") or [])
    ms = 1000.0
    print(f"requests per path: {len(direct)} (interleaved, sequential, loopback)")
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
        f"throughput direct {tp_direct:8.1f} req/s   proxied {tp_proxied:8.1f} req/s   "
        f"ratio proxied/direct {tp_proxied / tp_direct:.3f}"
    )
    print(f"mean added latency {(statistics.mean(proxied) - statistics.mean(direct)) * ms:.3f} ms")


if __name__ == "__main__":
    main()
