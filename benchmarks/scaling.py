"""Benchmark: how each check on the decision path scales with the size of the arguments.

For arguments of 1 KiB, 64 KiB and 1 MiB, shaped as the attacks on each check were
(paths of many parts that name a protected glob's pieces without matching it, shell text
full of near-miss words, the ``a@....@`` e-mail shape, thousands of nested keys), prints
the median time of: the preflight ladder (parse and schema), the floor's self-modify guard,
redaction, sink classification, and the whole ``Kernel.decide``; then the time ratio per
doubling of the size (linear is about 2x) over 1 KiB → 64 KiB and 64 KiB → 1 MiB.
The last rows run a catastrophic policy pattern, ``(a+)+$``, on ``aaa…a!`` as an
``arg_rules`` deny_regex (whole ``Kernel.decide``) and as a ``secret_patterns`` entry
(the result screen): policy patterns are compiled with RE2 (theorem D2.6). Then
``^(a+)+$`` as a tool schema's ``pattern`` and ``patternProperties`` key, on both validation
paths (jsonschema-rs, and ``jsonschema`` for a schema with ``multipleOf``): schema regexes
run on the linear Rust ``regex`` engine (theorem A7.6). Last, the schema keywords that
compare or re-read argument values (``uniqueItems``, ``enum``, ``const``, ``contains``,
``unevaluatedItems``, a recursive ``$ref``) on both paths (theorem A7.7). Between 256 KiB
and 2 MiB that engine's time per byte steps up once (as much for ``^a+$`` as for
``^(a+)+$``, and from 2 MiB to 4 MiB it is back to 2x per doubling): a constant, not
backtracking.
The first rows time ``orjson.loads`` alone, for reference: from 64 KiB to 1 MiB the data
stops fitting in the CPU's caches, and C primitives (parsing, ``re.split``,
``os.path.normpath``, substring search) grow by more than 2x per doubling there too, the
``keys`` shape (tens of thousands of small objects) most. That is memory, not an
algorithm: the step counts are linear (theorem D2.6).

    python benchmarks/scaling.py [--min-time 0.3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson

from fak_core import Kernel, Taint, ToolCall, default_policy
from fak_core.argscan import ArgumentScan
from fak_core.calls import Result, Status
from fak_core.policy import load_policy
from fak_core.selfmodify import PathGuard
from fak_core.sinks import classify
from fak_core.view import CallView

SIZES = (1 << 10, 1 << 16, 1 << 20)


def _fill(unit: str, size: int) -> str:
    return unit * max(1, size // len(unit))


def shapes(size: int) -> dict[str, dict[str, Any]]:
    """Arguments of about ``size`` bytes (a little under, to stay within the 1 MiB limit)."""
    n = size - 200
    return {
        "path": {"path": "x/fak_corex/" + _fill("a/", n - 20)},
        "shell": {"command": "'fak_core'" + _fill(" fak_corey/a", n - 20)},
        "email": {"to": "a@" + "." * (n - 10) + "@"},
        "keys": {"items": [{"k": i, "Password_x": "v"} for i in range(n // 30)]},
    }


def _median(fn: Callable[[], object], min_time: float) -> float:
    times: list[float] = []
    spent = 0.0
    while spent < min_time or len(times) < 3:
        t = time.perf_counter()
        fn()
        dt = time.perf_counter() - t
        times.append(dt)
        spent += dt
    return statistics.median(times)


def checks(kernel: Kernel) -> dict[str, Callable[[str, str], Callable[[], object]]]:
    """name → (tool, raw args) → a thunk running that one check."""
    floor = kernel.floor

    def ladder(tool: str, raw: str) -> Callable[[], object]:
        return lambda: kernel.ladder.adjudicate(CallView(ToolCall(tool, raw)))

    def self_modify(tool: str, raw: str) -> Callable[[], object]:
        args = orjson.loads(raw)
        # the floor's walk asking only for paths, with the globs the raw text can name
        scan = ArgumentScan(floor._guard, None, floor._redact).scan
        return lambda: scan(args, floor._guard.candidates(raw), False)

    def redaction(tool: str, raw: str) -> Callable[[], object]:
        args = orjson.loads(raw)
        scan = ArgumentScan(PathGuard(()), None, floor._redact).scan  # only for keys
        return lambda: scan(args, (), True)[2] and floor._redact.redact(args)

    def sinks(tool: str, raw: str) -> Callable[[], object]:
        args = orjson.loads(raw)
        return lambda: classify("send_note", args)

    def decide(tool: str, raw: str) -> Callable[[], object]:
        kernel.ledger.raise_to("bench", Taint.TAINTED)  # so the sink gate classifies too
        call = ToolCall(tool, raw, trace_id="bench")
        return lambda: kernel.decide(call)

    def reference(tool: str, raw: str) -> Callable[[], object]:
        return lambda: orjson.loads(raw)

    return {
        "(orjson.loads alone)": reference,
        "ladder": ladder,
        "floor self-modify": self_modify,
        "redaction": redaction,
        "sink classification": sinks,
        "full decide": decide,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-time", type=float, default=0.3, help="seconds per measurement")
    ns = ap.parse_args(argv)
    kernel = Kernel(default_policy())
    kernel.register_schema("write_file", {"type": "object"})
    tool = "write_file"  # write-shaped and allowed by no rule: every check runs, then DENY
    print(f"fak scaling benchmark — Python {sys.version.split()[0]}, median of >= {ns.min_time}s")
    print(
        f"{'check':<22}{'shape':<8}"
        + "".join(f"{s >> 10:>10} KiB" for s in SIZES)
        + "   x/doubling 1K→64K  64K→1M"
    )
    for name, make in checks(kernel).items():
        for shape in ("path", "shell", "email", "keys"):
            secs = []
            for size in SIZES:
                raw = orjson.dumps(shapes(size)[shape]).decode()
                secs.append(_median(make(tool, raw), ns.min_time))
            lo = (secs[1] / secs[0]) ** (1 / 6)
            hi = (secs[2] / secs[1]) ** (1 / 4)
            cells = "".join(f"{s * 1e3:>11.3f}ms" for s in secs)
            print(f"{name:<22}{shape:<8}{cells}   {lo:>13.2f}x {hi:>7.2f}x")
    _policy_patterns(ns.min_time)
    _schema_patterns(ns.min_time)
    _schema_keywords(ns.min_time)
    return 0


def _policy_patterns(min_time: float) -> None:
    """A catastrophic policy pattern, ``(a+)+$``, as a deny_regex and a secret pattern (RE2)."""
    doc = {
        "allow": ["note"],
        "arg_rules": [{"tool": "note", "arg": "body", "deny_regex": "(a+)+$"}],
        "secret_patterns": ["(a+)+$"],
    }
    kernel = Kernel(load_policy(orjson.dumps(doc).decode(), fmt="json"))

    def deny_regex(n: int) -> Callable[[], object]:
        call = ToolCall("note", orjson.dumps({"body": "a" * n + "!"}).decode())
        return lambda: kernel.decide(call)

    def secret_pattern(n: int) -> Callable[[], object]:
        call, result = ToolCall("read"), Result(Status.OK, "a" * n + "!")
        return lambda: kernel.screen_text(call, result)

    rows = {"policy deny_regex": deny_regex, "policy secret_pattern": secret_pattern}
    _rows(rows, min_time)


def _rows(rows: dict[str, Callable[[int], Callable[[], object]]], min_time: float) -> None:
    """One row per check on ``aaa…a!`` arguments of each size: times and x/doubling."""
    for name, make in rows.items():
        secs = [_median(make(size - 200), min_time) for size in SIZES]
        lo = (secs[1] / secs[0]) ** (1 / 6)
        hi = (secs[2] / secs[1]) ** (1 / 4)
        cells = "".join(f"{s * 1e3:>11.3f}ms" for s in secs)
        print(f"{name:<22}{'a+!':<8}{cells}   {lo:>13.2f}x {hi:>7.2f}x")


def _schema_patterns(min_time: float) -> None:
    """A catastrophic schema pattern, ``^(a+)+$``, on a property value and as a
    ``patternProperties`` key, on both validation paths (theorem A7.6): the compiled
    jsonschema-rs validator, and ``jsonschema`` for a schema with ``multipleOf``."""
    kernel = Kernel(load_policy(orjson.dumps({"allow_prefix": ["s_"]}).decode(), fmt="json"))
    for path in ("fast", "exact"):
        props: dict[str, Any] = {"body": {"type": "string", "pattern": "^(a+)+$"}}
        if path == "exact":
            props["n"] = {"type": "number", "multipleOf": 0.5}
        kernel.register_schema(f"s_value_{path}", {"type": "object", "properties": props})
        kernel.register_schema(
            f"s_key_{path}",
            {
                "type": "object",
                "properties": props,
                "patternProperties": {"^(a+)+$": {"type": "integer"}},
            },
        )

    def value(path: str) -> Callable[[int], Callable[[], object]]:
        def make(n: int) -> Callable[[], object]:
            call = ToolCall(f"s_value_{path}", orjson.dumps({"body": "a" * n + "!"}).decode())
            return lambda: kernel.decide(call)

        return make

    def key(path: str) -> Callable[[int], Callable[[], object]]:
        def make(n: int) -> Callable[[], object]:
            call = ToolCall(f"s_key_{path}", orjson.dumps({"a" * n + "!": "s"}).decode())
            return lambda: kernel.decide(call)

        return make

    _rows(
        {
            "schema pattern fast": value("fast"),
            "schema pattern exact": value("exact"),
            "schema key fast": key("fast"),
            "schema key exact": key("exact"),
        },
        min_time,
    )


#: Keywords that compare or re-read argument values (theorem A7.7), each with arguments of
#: about ``n`` bytes shaped against it: distinct small objects (``uniqueItems`` compares
#: items; the original ``jsonschema`` one compared every pair), one large value against
#: an ``enum``/``const`` that shares its prefix, many items for ``contains`` bounds and
#: ``unevaluatedItems``, nested arrays through a recursive ``$ref``.
_KEYWORD_SCHEMAS: dict[str, tuple[dict[str, Any], Callable[[int], Any]]] = {
    "uniqueItems": (
        {"type": "array", "uniqueItems": True},
        lambda n: [{"k": i} for i in range(n // 16)],
    ),
    "enum": (
        {"enum": [[0] * 64 + [1], "x"]},
        lambda n: [0] * (n // 2),
    ),
    "const": ({"const": {"a": [0] * 64}}, lambda n: {"a": [0] * (n // 2)}),
    "contains": (
        {"contains": {"type": "integer"}, "minContains": 2, "maxContains": 10**9},
        lambda n: list(range(n // 8)),
    ),
    "unevaluatedItems": (
        {"prefixItems": [{}], "contains": {"type": "integer"}, "unevaluatedItems": False},
        lambda n: list(range(n // 8)),
    ),
    "$ref recursion": (
        {
            "$defs": {"t": {"type": "array", "items": {"$ref": "#/properties/v"}}},
            "$ref": "#/properties/v/$defs/t",
        },
        lambda n: [[[]] * 4] * (n // 16),
    ),
}


def _schema_keywords(min_time: float) -> None:
    """Each keyword of :data:`_KEYWORD_SCHEMAS` on both validation paths (rung 1 through
    ``Kernel.decide``; the exact path is ``jsonschema`` for a schema with ``multipleOf``)."""
    kernel = Kernel(load_policy(orjson.dumps({"allow_prefix": ["k_"]}).decode(), fmt="json"))
    rows: dict[str, Callable[[int], Callable[[], object]]] = {}
    for keyword, (schema, value) in _KEYWORD_SCHEMAS.items():
        for path in ("fast", "exact"):
            props: dict[str, Any] = {"v": schema}
            if path == "exact":
                props["n"] = {"type": "number", "multipleOf": 0.5}
            tool = f"k_{keyword}_{path}"
            kernel.register_schema(tool, {"type": "object", "properties": props})

            def make(n: int, tool: str = tool, value: Any = value) -> Callable[[], object]:
                call = ToolCall(tool, orjson.dumps({"v": value(n)}).decode())
                return lambda: kernel.decide(call)

            rows[f"{keyword} {path}"] = make
    _rows(rows, min_time)


if __name__ == "__main__":
    raise SystemExit(main())
