"""Gateway latency, measured in one run: the in-process decision hop against the HTTP hop.

Sections (one function each, so other surfaces can add theirs, e.g. ``benchmarks/proxy.py``):

- ``bench_inprocess``: ``build_call -> kernel.decide -> render`` through GatewayState.
- ``bench_http_adjudicate``: ``POST /v1/fak/adjudicate`` over loopback HTTP (uvicorn on
  127.0.0.1, port 0; an httpx keep-alive client), p50/p99 and requests per second.

Bounded: a fixed number of requests per section and a wall-clock cap.
Run: ``python benchmarks/gateway.py [--requests N] [--time-cap SECONDS]``.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from fak_core.gateway.app import create_app
from fak_core.gateway.state import GatewayState
from fak_core.kernel import Kernel
from pytest_fak.fixtures import serve_app

#: The benchmark's one client: a session token of its own on every request (D12).
SESSION = {"X-Fak-Session": secrets.token_urlsafe(24)}

CALL = {"tool": "get_user_details", "arguments": {"user_id": "u-1"}, "trace_id": "bench"}


@dataclass
class Figures:
    name: str
    samples_ns: list[int]
    wall_s: float

    def pct(self, q: float) -> float:
        ordered = sorted(self.samples_ns)
        idx = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
        return ordered[idx] / 1000.0

    def line(self) -> str:
        n = len(self.samples_ns)
        rps = n / self.wall_s if self.wall_s > 0 else float("nan")
        mean = statistics.fmean(self.samples_ns) / 1000.0
        return (
            f"{self.name:<34} n={n:<6} p50={self.pct(0.50):9.1f} us  p99={self.pct(0.99):9.1f} us"
            f"  mean={mean:9.1f} us  {rps:10.0f} req/s"
        )


def _timed(name: str, fn: Callable[[], object], n: int, cap_s: float, warmup: int) -> Figures:
    for _ in range(warmup):
        fn()
    samples: list[int] = []
    start = time.perf_counter()
    deadline = start + cap_s
    clock = time.perf_counter_ns
    for _ in range(n):
        t0 = clock()
        fn()
        samples.append(clock() - t0)
        if time.perf_counter() > deadline:
            break
    return Figures(name, samples, time.perf_counter() - start)


def bench_inprocess(state: GatewayState, n: int, cap_s: float) -> Figures:
    """The decision hop without the wire: build_call -> decide -> render."""

    def hop() -> object:
        call = state.build_call(CALL["tool"], CALL["arguments"], "bench")
        return state.render(state.kernel.decide(call))

    return _timed("in-process build+decide+render", hop, n, cap_s, warmup=min(1000, n))


def bench_http_adjudicate(state: GatewayState, n: int, cap_s: float) -> Figures:
    """POST /v1/fak/adjudicate over loopback with a keep-alive client (one connection)."""
    with (
        serve_app(create_app(state)) as url,
        httpx.Client(base_url=url, timeout=10, headers=SESSION) as client,
    ):

        def hop() -> object:
            r = client.post("/v1/fak/adjudicate", json=CALL)
            if r.status_code != 200:
                raise RuntimeError(f"unexpected {r.status_code}: {r.text}")
            return r

        return _timed("HTTP /v1/fak/adjudicate (loopback)", hop, n, cap_s, warmup=min(200, n))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--requests", type=int, default=5000, help="per section (default 5000)")
    parser.add_argument("--time-cap", type=float, default=20.0, help="seconds per section")
    ns = parser.parse_args()
    state = GatewayState(Kernel())
    inproc = bench_inprocess(state, ns.requests * 10, ns.time_cap)
    http = bench_http_adjudicate(state, ns.requests, ns.time_cap)
    print(inproc.line())
    print(http.line())
    print(
        f"{'HTTP hop / in-process hop (p50)':<34} {http.pct(0.5) / inproc.pct(0.5):.1f}x  "
        f"(wire overhead p50 ~ {http.pct(0.5) - inproc.pct(0.5):.1f} us)"
    )
    print("-- proxied chat completion vs the same request sent to the upstream directly")
    from proxy import measure  # benchmarks/proxy.py, beside this script

    measure(min(ns.requests, 1000), ns.time_cap * 3)


if __name__ == "__main__":
    main()
