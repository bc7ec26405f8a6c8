"""Replicas: decisions per second through 1, 2 and 4 workers on one Redis, and what the
shared ledger costs per decision against the in-memory one.

The script starts its own ``redis-server`` (Debian's binary, a free loopback port, a
temporary directory, ``appendonly yes``, ``maxmemory-policy noeviction``), then:

1. **In process** (one run, µs per operation, median of ``--repeat`` rounds):
   ``Kernel.decide`` on an egress call (the sink gate reads the session's mark: one Redis
   round trip with the shared ledger), ``Kernel.admit`` of an untrusted result (the atomic
   raise: one round trip), each with the in-memory and the Redis stores; and the gateway's
   decision path (``GatewayState.decide``): inline with the in-memory stores, one thread
   hop to a decision worker with the Redis ones (the stores are not declared
   non-blocking, so the decision runs under the gateway's deadline).
2. **Policy v2 grounding** (in process): a decision on a declared sink whose destination
   must be grounded in the user's words (an e-mail address: one index lookup; a name: the
   session's trusted words searched; an ungrounded one: refused, and the refusal names the
   untrusted result that holds it), with the Redis round trips per decision; recording
   the user's words (one text, and a proxied turn of 40 messages, first and again); and a
   name check as the session's trusted words grow (linear in them).
3. **Identifiers and confidential values** (policy v2, in process): a declared sink whose
   destination an identifier of a bank result grounds and whose arguments are checked
   for the result's cards (a short body, a 4 KiB one, one carrying a card), and the
   admission that records both, with the round trips per operation.
4. **Over HTTP**: ``fak serve`` in memory (the baseline), then
   ``fak serve --state redis://... --workers N`` for N in 1, 2, 4, driven
   by ``--concurrency`` asyncio clients for ``--seconds`` with ``adjudicate`` on an egress
   call over a pool of sessions (every decision reads the shared mark); decisions/s.

The figures depend on the machine (cores, load); the workers share its cores with the
load generator and Redis. Run:
``python benchmarks/replicas.py [--seconds 5] [--concurrency 32] [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from fak_core import Kernel, Policy, Result, Status, Taint, ToolCall, ToolDecl
from fak_core.gateway.replicas import shared_kernel_options
from fak_core.gateway.state import GatewayState
from fak_core.redis_state import RedisState

#: The benchmark's one client: a session token of its own on every request (D12).
SESSION = {"X-Fak-Session": secrets.token_urlsafe(24)}

POLICY = Policy(allow=("send_email", "fetch_url"))
# policy v2: ``mail`` is an egress sink whose ``/to`` must be grounded in the user's words
POLICY_V2 = Policy(
    version="fak-policy/v2",
    allow=("mail", "fetch_url"),
    tools={"mail": ToolDecl("EGRESS", ("/to",))},
)
EGRESS = '{"to": "alice@example.com", "body": "the report"}'
REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis(directory: str) -> tuple[subprocess.Popen[bytes], str]:
    exe = shutil.which("redis-server")
    if exe is None:
        sys.exit("redis-server is not installed: apt-get install -y redis-server")
    port = free_port()
    args = [exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", directory, "--save", ""]
    args += ["--appendonly", "yes", "--maxmemory-policy", "noeviction"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            RedisState(url).client.ping()
            return proc, url
        except Exception:
            time.sleep(0.05)
    proc.kill()
    sys.exit("redis-server did not start")


# ------------------------------------------------------------------ in process
def per_op_us(fn: Callable[[int], Any], n: int, repeat: int) -> float:
    rounds = []
    for _ in range(repeat):
        start = time.perf_counter()
        for i in range(n):
            fn(i)
        rounds.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(rounds)


def _memory_and_redis(url: str, policy: Policy) -> tuple[RedisState, dict[str, Kernel]]:
    """The Redis state at ``url`` (checked) and two kernels under ``policy``: one with the
    in-memory stores, one with the shared ones."""
    shared = RedisState(url)
    shared.check()
    return shared, {
        "memory": Kernel(policy),
        "redis": Kernel(policy, **shared_kernel_options(shared)),
    }


def in_process(url: str, n: int, repeat: int) -> None:
    shared, kernels = _memory_and_redis(url, POLICY)
    print(f"in process, µs per operation (median of {repeat} rounds of {n}):")
    print(f"  {'':34} {'memory':>9} {'redis':>9} {'extra':>9}")

    def each(targets: dict[str, Any], op: Callable[[Any, int], Any]) -> dict[str, float]:
        return {k: per_op_us(lambda i, t=t: op(t, i), n, repeat) for k, t in targets.items()}

    calls = [ToolCall("send_email", EGRESS, f"bench-{i % 512}") for i in range(n)]
    result = Result(Status.OK, "Quarterly numbers: revenue 12, costs 9.", taint=Taint.TAINTED)
    fetches = [ToolCall("fetch_url", "{}", f"bench-admit-{i % 512}") for i in range(n)]
    rows = [
        ("Kernel.decide (egress, reads mark)", each(kernels, lambda k, i: k.decide(calls[i]))),
        ("Kernel.admit (raises mark)", each(kernels, lambda k, i: k.admit(fetches[i], result))),
    ]
    states = {k: GatewayState(kernel) for k, kernel in kernels.items()}
    hop_state = GatewayState(Kernel(POLICY))
    hop_state._inline = lambda call: False  # type: ignore[method-assign]  # force the hop
    try:
        rows.append(
            ("GatewayState.decide (the seam)", each(states, lambda s, i: s.decide(calls[i])))
        )
        hop = per_op_us(lambda i: hop_state.decide(calls[i]), n, repeat)
    finally:
        for s in (*states.values(), hop_state):
            s.close()
    for name, t in rows:
        print(f"  {name:34} {t['memory']:9.1f} {t['redis']:9.1f} {t['redis'] - t['memory']:+9.1f}")
    print(f"  {'memory kernel on a worker (the hop)':34} {hop:9.1f}")
    print(
        "  the Redis seam decides on a worker (its stores are not declared non-blocking): "
        f"the hop alone costs {hop - rows[2][1]['memory']:+.1f} µs per decision"
    )
    shared.close()


class Trips:
    """Counts the Redis round trips (scripts run) of ``state`` until :meth:`remove`."""

    def __init__(self, state: RedisState) -> None:
        self.state = state
        self.count = 0
        self._real = state.run

        def counted(*args: Any) -> Any:
            self.count += 1
            return self._real(*args)

        state.run = counted  # type: ignore[method-assign]

    def remove(self) -> None:
        self.state.run = self._real  # type: ignore[method-assign]

    def of(self, fn: Callable[[], Any]) -> int:
        self.count = 0
        fn()
        return self.count


def decide_rows(
    kernels: dict[str, Kernel],
    cases: list[tuple[str, list[ToolCall], str]],
    trips: Trips,
    n: int,
    repeat: int,
) -> None:
    """One row per case: µs per decision in memory and with Redis, and its round trips."""
    for name, calls, want in cases:
        for kernel in kernels.values():
            assert kernel.decide(calls[0]).kind.name == want, name
        per = trips.of(lambda c=calls: kernels["redis"].decide(c[0]))
        t = {
            k: per_op_us(lambda i, k=k, c=calls: kernels[k].decide(c[i]), n, repeat)
            for k in kernels
        }
        extra = t["redis"] - t["memory"]
        print(f"  {name:36} {t['memory']:9.1f} {t['redis']:9.1f} {extra:+9.1f} {per:6d}")


def grounding(url: str, n: int, repeat: int) -> None:
    """Policy v2's grounded sink: µs per decision and Redis round trips per decision, and
    how a word-sequence check grows with the session's trusted context (linear)."""
    shared, kernels = _memory_and_redis(url, POLICY_V2)
    sessions = 256
    words = "Please pay the invoice to Dana Reyes at dana@corp.example, thanks. "
    page = "Quarterly numbers; write to eve@evil.example for the details."
    for kernel in kernels.values():
        for t in range(sessions):
            trace = f"ground-{t}"
            kernel.admit(ToolCall("fetch_url", "{}", trace), Result(Status.OK, page))
            kernel.record_trusted(trace, words)

    def mail(to: str) -> list[ToolCall]:
        args = '{"to": "%s", "body": "the invoice"}' % to  # noqa: UP031 (a JSON template)
        return [ToolCall("mail", args, f"ground-{i % sessions}") for i in range(n)]

    cases = [
        ("grounded sink: e-mail (ALLOW)", mail("Dana@Corp.Example"), "ALLOW"),
        ("grounded sink: a name (ALLOW)", mail("dana reyes"), "ALLOW"),
        ("ungrounded: refused + origin", mail("eve@evil.example"), "DENY"),
    ]
    trips = Trips(shared)
    print(f"policy v2 grounding, µs per decision (median of {repeat} rounds of {n}):")
    print(f"  {'':36} {'memory':>9} {'redis':>9} {'extra':>9} {'trips':>6}")
    decide_rows(kernels, cases, trips, n, repeat)
    texts = [("user", f"turn {i}: send it to person{i}@corp.example") for i in range(40)]
    for label, items in (("record 1 text", texts[:1]), ("record a 40-message turn", texts)):
        t = {
            k: per_op_us(lambda i, k=k, m=items: kernels[k].record_trusted_many(f"r{i}", m), 200, 3)
            for k in kernels
        }
        first = trips.of(lambda m=items: kernels["redis"].record_trusted_many("rec-trips", m))
        # the next turn: all seen
        again = trips.of(lambda m=items: kernels["redis"].record_trusted_many("rec-trips", m))
        print(
            f"  {label:36} {t['memory']:9.1f} {t['redis']:9.1f} "
            f"{t['redis'] - t['memory']:+9.1f} {first:3d}/{again}"
        )
    # the worst case: both words indexed, never side by side, so every chunk is searched
    print("  an ungrounded name, by the session's trusted words (KiB): µs memory / redis")
    for kib in (1, 16, 64, 192):
        trace = f"scale-{kib}"
        chunk = "the quarterly report for dana and reyes " * 25  # ~1 KiB, both words indexed
        for kernel in kernels.values():
            kernel.admit(ToolCall("fetch_url", "{}", trace), Result(Status.OK, page))
            kernel.record_trusted_many(trace, [("user", f"{j} {chunk}") for j in range(kib)])
        call = ToolCall("mail", '{"to": "Dana Reyes"}', trace)
        t = {k: per_op_us(lambda i, k=k, c=call: kernels[k].decide(c), 100, 5) for k in kernels}
        print(f"  {kib:36d} {t['memory']:9.1f} {t['redis']:9.1f}")
    trips.remove()
    shared.close()


# policy v2 identifiers (C4.9) and confidential values (C4.10): ``bank`` declares both
POLICY_IDS = Policy(
    version="fak-policy/v2",
    allow=("mail", "bank"),
    tools={
        "mail": ToolDecl("EGRESS", ("/to",), content=("/body",)),
        "bank": ToolDecl("NONE", identifiers=("/*/recipient",), confidential=("/*/card",)),
    },
)


def identifiers_and_confidential(url: str, n: int, repeat: int) -> None:
    """A declared sink whose destination is grounded by an identifier and whose arguments
    are checked for confidential values, with the in-memory and the Redis stores: µs and
    Redis round trips per decision (a short body, a 4 KiB one, one carrying a card), and
    per admission of a result that records both."""
    shared, kernels = _memory_and_redis(url, POLICY_IDS)
    sessions = 256
    rows = [{"recipient": f"Payee {j}", "card": f"4237-4252-7456-{j:04d}"} for j in range(4)]
    payload = json.dumps(rows)
    for kernel in kernels.values():
        for s in range(sessions):
            kernel.admit(ToolCall("bank", "{}", f"ids-{s}"), Result(Status.OK, payload))

    def mail(body: str) -> list[ToolCall]:
        args = json.dumps({"to": "payee 2", "body": body})
        return [ToolCall("mail", args, f"ids-{i % sessions}") for i in range(n)]

    cases = [
        ("identifier grounds, no card (ALLOW)", mail("the invoice is paid"), "ALLOW"),
        ("carries a card (DENY)", mail("card 4237 4252 7456 0002"), "DENY"),
    ]
    trips = Trips(shared)
    print(
        f"policy v2 identifiers and confidential values, µs per operation (median of "
        f"{repeat} rounds of {n}):"
    )
    print(f"  {'':36} {'memory':>9} {'redis':>9} {'extra':>9} {'trips':>6}")
    decide_rows(kernels, cases, trips, n, repeat)
    fresh = Result(Status.OK, payload)
    t = {
        k: per_op_us(
            lambda i, k=k: kernels[k].admit(ToolCall("bank", "{}", f"ids-new-{k}-{i}"), fresh),
            200,
            3,
        )
        for k in kernels
    }
    per = trips.of(lambda: kernels["redis"].admit(ToolCall("bank", "{}", "ids-trips"), fresh))
    name = "admit: 4 identifiers + 4 cards"
    extra = t["redis"] - t["memory"]
    print(f"  {name:36} {t['memory']:9.1f} {t['redis']:9.1f} {extra:+9.1f} {per:6d}")
    # the stores alone (a decision's other costs, such as reading a content argument's
    # hosts, are the same with either): the identifier lookup and the confidential check
    long_body = ("the quarterly report, line by line; " * 120)[:4096]
    store_ops: list[tuple[str, Callable[[Kernel, int], Any]]] = [
        ("grounded(identifier)", lambda k, i: k.grounding.grounded(f"ids-{i % 256}", "payee 2")),
        ("carried(short body)", lambda k, i: k.confidential.carried(f"ids-{i % 256}", {"b": "hi"})),
        (
            "carried(4 KiB body)",
            lambda k, i: k.confidential.carried(f"ids-{i % 256}", {"b": long_body}),
        ),
    ]
    for name, op in store_ops:
        t = {k: per_op_us(lambda i, k=k, o=op: o(kernels[k], i), n, repeat) for k in kernels}
        per = trips.of(lambda o=op: o(kernels["redis"], 0))
        extra = t["redis"] - t["memory"]
        print(f"  {name:36} {t['memory']:9.1f} {t['redis']:9.1f} {extra:+9.1f} {per:6d}")
    trips.remove()
    shared.close()


# ------------------------------------------------------------------ over HTTP
def start_gateway(url: str | None, workers: int) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "fak_core.gateway.cli", "--port", "0"]
    if url is not None:
        cmd += ["--state", url, "--replica-id", f"bench{workers}", "--workers", str(workers)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        sys.exit(f"fak serve did not start: {line}")
    return proc, line.split("listening on ", 1)[1].split()[0]


async def drive(base: str, seconds: float, concurrency: int) -> tuple[int, int]:
    done = errors = 0
    stop = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(
        base_url=base, timeout=30, limits=limits, headers=SESSION
    ) as client:

        async def worker(w: int) -> None:
            nonlocal done, errors
            i = 0
            while time.monotonic() < stop:
                body = {
                    "tool": "send_email",
                    "trace_id": f"http-{w}-{i % 64}",
                    "arguments": {"to": "alice@example.com", "body": "hi"},
                }
                r = await client.post("/v1/fak/adjudicate", json=body)
                if r.status_code == 200 and "verdict" in r.json():
                    done += 1
                else:
                    errors += 1
                i += 1

        await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return done, errors


def over_http(url: str, seconds: float, concurrency: int) -> None:
    print(
        f"over HTTP, adjudicate (egress) for {seconds:g} s, {concurrency} clients, "
        f"{os.cpu_count()} cores:"
    )
    for label, state, workers in (
        ("in memory, 1 process", None, 1),
        ("redis, workers 1", url, 1),
        ("redis, workers 2", url, 2),
        ("redis, workers 4", url, 4),
    ):
        proc, base = start_gateway(state, workers)
        try:
            asyncio.run(drive(base, 1.0, concurrency))  # warm-up: every worker imported
            done, errors = asyncio.run(drive(base, seconds, concurrency))
        finally:
            proc.terminate()
            proc.wait(30)
            if proc.stdout is not None:
                proc.stdout.close()
        print(f"  {label:22} {done / seconds:8.0f} decisions/s  ({errors} errors)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("-n", type=int, default=2000, help="operations per in-process round")
    ns = p.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        proc, url = start_redis(directory)
        try:
            in_process(url, ns.n, ns.repeat)
            grounding(url, ns.n, ns.repeat)
            identifiers_and_confidential(url, ns.n, ns.repeat)
            over_http(url, ns.seconds, ns.concurrency)
        finally:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
