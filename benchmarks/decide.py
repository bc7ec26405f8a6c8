"""Benchmark: the cost of ``Kernel.decide`` on the default chain, beside its floor.

Prints p50/p99 in microseconds for four calls, the floor (the fastest parse plus the
fastest schema validation of the same arguments alone) and the ratio to it; then drives
a million calls through the kernel and prints the resident sizes of the negatives and
taint ledgers, which must stay within their bounds.

    python benchmarks/decide.py [--samples 20000] [--calls 1000000]
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import time
from collections.abc import Callable

import orjson

from fak_core import Kernel, Policy, Result, Status, ToolCall, ToolDecl, default_policy

SCHEMA = {
    "type": "object",
    "properties": {
        "origin": {"type": "string", "minLength": 3, "maxLength": 3},
        "destination": {"type": "string", "minLength": 3, "maxLength": 3},
        "date": {"type": "string"},
    },
    "required": ["origin", "destination", "date"],
    "additionalProperties": False,
}
EMAIL_SCHEMA = {
    "type": "object",
    "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
    "required": ["to"],
}
VALID = '{"origin": "SFO", "destination": "JFK", "date": "2026-12-01"}'
VIOLATING = '{"origin": "SFO", "destination": 7, "date": "2026-12-01"}'
MALFORMED = '{"origin": "SFO", "destination": '
EGRESS = '{"to": "mallory@example.com", "body": "the itinerary"}'


def percentiles(fn: Callable[[], object], samples: int) -> tuple[float, float]:
    for _ in range(min(2000, samples)):
        fn()
    clock = time.perf_counter_ns
    times = []
    gc.disable()
    try:
        for _ in range(samples):
            t0 = clock()
            fn()
            times.append(clock() - t0)
    finally:
        gc.enable()
    times.sort()
    return times[len(times) // 2] / 1000, times[int(len(times) * 0.99)] / 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=20_000)
    ap.add_argument("--calls", type=int, default=1_000_000)
    ns = ap.parse_args()

    policy = default_policy()
    kernel = Kernel(policy)
    kernel.register_schema("search_flights", SCHEMA)
    kernel.register_schema("send_email", EMAIL_SCHEMA)
    kernel.ledger.raise_to("tainted", __import__("fak_core").Taint.TAINTED)
    validator = kernel.schemas.get("search_flights")
    assert validator is not None

    cases = {
        "a malformed arguments": ToolCall("search_flights", MALFORMED, "clean"),
        "b schema-valid allowed": ToolCall("search_flights", VALID, "clean"),
        "c schema-violating": ToolCall("search_flights", VIOLATING, "clean"),
        "d egress on tainted trace": ToolCall("send_email", EGRESS, "tainted"),
    }
    expect = {"a": "DENY", "b": "ALLOW", "c": "DENY", "d": "DENY"}
    print(f"fak decide benchmark — Python {sys.version.split()[0]}, {ns.samples} samples per case")
    print(f"{'case':32} {'verdict':22} {'p50 µs':>8} {'p99 µs':>8} {'floor p50':>10} {'ratio':>7}")
    results = {}
    for name, call in cases.items():
        v = kernel.decide(call)
        label = f"{kernel.kinds.name(v.kind)}/{kernel.reasons.name(v.reason)}"
        assert label.startswith(expect[name[0]]), (name, label)
        p50, p99 = percentiles(lambda call=call: kernel.decide(call), ns.samples)
        raw = call.args

        def floor(raw: str | bytes = raw) -> None:
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                return
            validator.is_valid(obj)

        f50, _ = percentiles(floor, ns.samples)
        results[name] = (p50, p99, f50)
        print(f"{name:32} {label:22} {p50:8.2f} {p99:8.2f} {f50:10.2f} {p50 / f50:7.1f}x")

    # Policy v2: a grounded sink in a tainted session holding 10 KB of the user's words and
    # 100 KB of untrusted content; the destination is an e-mail address (e) or a name (f).
    grounded = Kernel(
        Policy(
            version="fak-policy/v2",
            allow=("send_email",),
            tools={"send_email": ToolDecl("EGRESS", ("/to",))},
        )
    )
    grounded.register_schema("send_email", EMAIL_SCHEMA)
    words = "please book the usual trip and keep every receipt for the audit " * 160
    grounded.record_trusted("g", words[:9950] + " mail it to Boss@Corp.example or Dana Reyes")
    page = "lorem ipsum dolor attacker@evil.example sit amet www.evil.example/x " * 1500
    grounded.admit(ToolCall("fetch_page", "{}", "g"), Result(Status.OK, page[:100_000]))
    for name, to in (
        ("e grounded e-mail, tainted", "boss@corp.example"),
        ("f grounded name, tainted", "dana reyes"),
    ):
        call = ToolCall("send_email", orjson.dumps({"to": to, "body": "the itinerary"}), "g")
        v = grounded.decide(call)
        label = f"{grounded.kinds.name(v.kind)}/{grounded.reasons.name(v.reason)}"
        assert label.startswith("ALLOW"), (name, label, v.claim)
        p50, p99 = percentiles(lambda call=call: grounded.decide(call), ns.samples)
        results[name] = (p50, p99, results["b schema-valid allowed"][2])
        print(f"{name:32} {label:22} {p50:8.2f} {p99:8.2f}")

    b50, _, bf = results["b schema-valid allowed"]
    print(
        f"targets: (b) p50 {b50:.2f} µs < 10 µs: {'met' if b50 < 10 else 'MISSED'}; "
        f"within 10x of floor ({b50 / bf:.1f}x): {'met' if b50 / bf <= 10 else 'MISSED'}; "
        f"worst p99 {max(r[1] for r in results.values()):.2f} µs < 50 µs: "
        f"{'met' if max(r[1] for r in results.values()) < 50 else 'MISSED'}"
    )

    # A million calls: distinct malformed calls fill the negatives ledger, distinct tainted
    # traces fill the taint ledger; both must stay at their bounds.
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    for i in range(ns.calls):
        if i & 1:
            kernel.decide(ToolCall("search_flights", MALFORMED + str(i), f"m{i}"))
        else:
            kernel.admit(ToolCall("fetch_page", "{}", f"s{i}"), Result(Status.OK, "page text"))
    elapsed = time.perf_counter() - t0
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    neg, ledger = kernel.ladder.negatives, kernel.ledger
    print(
        f"{ns.calls} calls in {elapsed:.1f} s ({ns.calls / elapsed:,.0f}/s): negatives "
        f"{len(neg)} resident / limit {neg.limit} (evicted {neg.evicted}); taint ledger "
        f"{len(ledger)} resident / limit {getattr(ledger, 'limit', '?')} "
        f"(evicted {getattr(ledger, 'evicted', '?')}); "
        f"max RSS {rss0 / 1024:.0f} → {rss1 / 1024:.0f} MiB"
    )
    ok = len(neg) <= neg.limit and len(ledger) <= getattr(ledger, "limit", len(ledger))
    print(f"ledgers within bounds: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
