"""What the deadlines cost, measured in one run: each figure with and without its deadline.

- decision: ``GatewayState.decide`` with no deadline (``decide_timeout=None``) against the
  default deadline, for the built-in kernel (every part declared non-blocking, so it still
  decides inline) and for a kernel with one undeclared adjudicator (a DEFER that does
  nothing; under the deadline it decides on a worker thread of the decision pool);
- HTTP: ``POST /v1/fak/adjudicate`` over loopback with each setting;
- tool: ``Kernel.syscall`` of a trivial tool inline against under ``tool_timeout``.

Bounded: a fixed number of iterations per section and a wall-clock cap.
Run: ``python benchmarks/deadlines.py [--requests N] [--time-cap SECONDS]``.
"""

from __future__ import annotations

import argparse
import secrets

import httpx
from gateway import CALL, Figures, _timed  # benchmarks/gateway.py, beside this script

from fak_core import Kernel, ToolCall, Verdict, parse_policy
from fak_core.gateway.app import create_app
from fak_core.gateway.state import DEFAULT_DECIDE_TIMEOUT, GatewayState
from pytest_fak.fixtures import serve_app

#: The benchmark's one client: a session token of its own on every request (D12).
SESSION = {"X-Fak-Session": secrets.token_urlsafe(24)}


def bench_decide(state: GatewayState, label: str, n: int, cap_s: float) -> Figures:
    call = state.build_call(CALL["tool"], CALL["arguments"], "bench")
    return _timed(f"decide ({label})", lambda: state.decide(call), n, cap_s, min(1000, n))


def bench_http(state: GatewayState, label: str, n: int, cap_s: float) -> Figures:
    with (
        serve_app(create_app(state)) as url,
        httpx.Client(base_url=url, timeout=10, headers=SESSION) as client,
    ):

        def hop() -> object:
            r = client.post("/v1/fak/adjudicate", json=CALL)
            if r.status_code != 200 or r.json()["verdict"]["kind"] != "ALLOW":
                raise RuntimeError(f"unexpected {r.status_code}: {r.text}")
            return r

        return _timed(f"HTTP adjudicate ({label})", hop, n, cap_s, min(200, n))


def bench_tool(timeout: float | None, n: int, cap_s: float) -> Figures:
    kernel = Kernel(parse_policy({"version": "fak-policy/v1", "allow": ["noop"]}))
    kernel.register_tool("noop", lambda args: "ok")
    kernel.tool_timeout = timeout
    call = ToolCall("noop", "{}", "bench")
    label = "inline" if timeout is None else f"tool_timeout={timeout:g}s"
    try:
        return _timed(f"syscall noop ({label})", lambda: kernel.syscall(call), n, cap_s, 1000)
    finally:
        kernel.close()


def ratio(name: str, base: Figures, bounded: Figures) -> str:
    b, d = base.pct(0.5), bounded.pct(0.5)
    return f"{name:<34} {d / b:.2f}x  (+{d - b:.1f} us p50)"


def undeclared_kernel() -> Kernel:
    """The built-in kernel plus one adjudicator that is not declared non-blocking."""
    kernel = Kernel()
    kernel.add_adjudicator(lambda view: Verdict.defer("bench"), 50, name="undeclared")
    return kernel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--requests", type=int, default=3000, help="per HTTP section")
    parser.add_argument("--time-cap", type=float, default=15.0, help="seconds per section")
    ns = parser.parse_args()
    n, cap = ns.requests, ns.time_cap
    deadline = f"decide_timeout={DEFAULT_DECIDE_TIMEOUT:g}s"
    builtin, undeclared = Kernel(), undeclared_kernel()
    states = [
        GatewayState(builtin, decide_timeout=None),
        GatewayState(builtin),
        GatewayState(undeclared, decide_timeout=None),
        GatewayState(undeclared),
    ]
    b0, b1, u0, u1 = states
    rows = [
        (
            "built-in: deadline / none",
            bench_decide(b0, "built-in, none", n * 10, cap),
            bench_decide(b1, f"built-in, {deadline}", n * 10, cap),
        ),
        (
            "undeclared: deadline / none",
            bench_decide(u0, "undeclared, none", n * 10, cap),
            bench_decide(u1, f"undeclared, {deadline}", n * 10, cap),
        ),
        (
            "HTTP built-in: deadline / none",
            bench_http(b0, "built-in, none", n, cap),
            bench_http(b1, f"built-in, {deadline}", n, cap),
        ),
        (
            "HTTP undeclared: deadline / none",
            bench_http(u0, "undeclared, none", n, cap),
            bench_http(u1, f"undeclared, {deadline}", n, cap),
        ),
        ("tool deadline / inline", bench_tool(None, n * 10, cap), bench_tool(5.0, n * 10, cap)),
    ]
    for _, base, with_deadline in rows:
        print(base.line())
        print(with_deadline.line())
    for name, base, with_deadline in rows:
        print(ratio(name, base, with_deadline))
    for state in states:
        state.close()


if __name__ == "__main__":
    main()
