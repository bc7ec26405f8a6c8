"""Benchmark: the cost of reading hosts in arguments (``fak_core.hosts``).

Prints p50 in microseconds of ``HostDenyList.check`` for strings of each kind (a word the
quick screen clears, a date, a number, an e-mail address, a URL, an encoded attack, a
64 KiB text) and of ``Kernel.decide`` on the default policy for allowed calls that carry
a URL or an e-mail address.

    python benchmarks/hosts.py [--samples 20000]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from decide import percentiles  # benchmarks/decide.py, beside this script

from fak_core import HostDenyList, Kernel, ToolCall, default_policy


def p50(fn: Callable[[], object], samples: int) -> float:
    return percentiles(fn, samples)[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=20_000)
    ns = ap.parse_args()
    policy = default_policy()
    deny = HostDenyList(policy.deny_hosts)
    values = {
        "word": "SFO",
        "date": "2026-12-01",
        "number": "42",
        "e-mail": "bob@example.com",
        "url": "https://example.com/a/b?c=1",
        "attack": "http://169.254.169.254\\@evil.example/",
        "64 KiB text": "lorem ipsum " * 5461,
    }
    print(f"fak hosts benchmark — Python {sys.version.split()[0]}, {ns.samples} samples")
    for name, value in values.items():
        verdict = deny.check(value) or "allowed"
        print(
            f"check {name:12} {p50(lambda v=value: deny.check(v), ns.samples):8.2f} µs  {verdict}"
        )
    kernel = Kernel(policy)
    calls = {
        "url": ToolCall("get_page", '{"url": "https://example.com/a/b?c=1"}'),
        "e-mail + number": ToolCall("get_user", '{"to": "bob@example.com", "n": "42"}'),
    }
    for name, call in calls.items():
        kind = kernel.kinds.name(kernel.decide(call).kind)
        print(
            f"decide {name:16} {p50(lambda c=call: kernel.decide(c), ns.samples):8.2f} µs  {kind}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
