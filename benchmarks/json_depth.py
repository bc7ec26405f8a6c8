"""Benchmark: what the gateway's JSON depth check and the result screen cost.

For bodies up to the gateway's 4 MiB limit, prints the time orjson takes to parse each and
the time of the depth check (``fak_core.jsondepth.check_depth``) beside it, with the ratio;
then the result screen (``ResultScreen.admit``) on ASCII and non-ASCII results of the same
sizes beside a bare regex search of the old literal markers.

    python benchmarks/json_depth.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable

import orjson

from fak_core import ToolCall
from fak_core.admission import INJECTION_MARKERS, ResultScreen
from fak_core.calls import Result, Status
from fak_core.jsondepth import check_depth

MIB = 1 << 20


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def bodies() -> dict[str, bytes]:
    n = 4 * MIB
    return {
        "chat turn (few brackets)": orjson.dumps(
            {"messages": [{"role": "user", "content": "x" * (n - 100)}]}
        ),
        "flat arrays [[],[],...]": b"[" + b",".join([b"[]"] * (n // 3)) + b"]",
        "objects 4 deep": orjson.dumps([{"k": [1, {"a": "b"}]}] * (n // 22)),
        "strings full of brackets": orjson.dumps(['[[{{\\"' * 8] * (n // 70)),
        "128 deep, repeated": b"[" + b",".join([b"[" * 127 + b"]" * 127] * (n // 256)) + b"]",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{'body (~4 MiB)':28} {'orjson ms':>10} {'depth ms':>10} {'ratio':>6}")
    for name, body in bodies().items():
        parse = best(lambda b=body: orjson.loads(b), args.repeat)
        depth = best(lambda b=body: check_depth(b), args.repeat)
        print(f"{name:28} {parse * 1e3:10.1f} {depth * 1e3:10.1f} {depth / parse:6.2f}")

    screen = ResultScreen()
    call = ToolCall("fetch", "{}")
    old = re.compile("|".join(re.escape(m) for m in INJECTION_MARKERS), re.I)
    print(f"\n{'result':28} {'screen ms':>10} {'old regex ms':>12} {'ratio':>6}")
    for name, size in (("ascii 64 KiB", 64 << 10), ("ascii 4 MiB", 4 * MIB)):
        text = ("The quick brown fox. " * (size // 21))[:size]
        for label, t in ((name, text), (name.replace("ascii", "non-ascii"), text + "\u00e9")):
            r = Result(Status.OK, t)
            s = best(lambda r=r: screen.admit(call, r), args.repeat)
            o = best(lambda t=t: old.search(t), args.repeat)
            print(f"{label:28} {s * 1e3:10.1f} {o * 1e3:12.1f} {s / o:6.2f}")


if __name__ == "__main__":
    main()
