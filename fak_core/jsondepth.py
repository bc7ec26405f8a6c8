"""JSON nesting depth: one limit for everything the gateway reads, and a writer that
never fails on depth.

orjson reads 1024 levels but writes only 254, and the MCP SDK's reader stops near 200.
So every JSON document the gateway takes in (request bodies, MCP frames, upstream
responses and stream events) is refused past :data:`MAX_JSON_DEPTH` levels, well below
both, before anything is built from it: :func:`loads` parses with orjson and then checks
the depth of the text with :func:`json_depth`, which is linear in its bytes. Whatever was
read can then be written, with room for the envelopes the gateway wraps around it.
:func:`dumps` writes with orjson and falls back to an iterative writer (no recursion at
all) for what orjson refuses, so a response is never lost to its encoder.

Depth counts nested arrays and objects: ``1`` and ``"x"`` are 0, ``[]`` is 1,
``{"a": [1]}`` is 2.
"""

from __future__ import annotations

import itertools
import json
import math
import operator
import re
from typing import Any

import orjson

__all__ = ["MAX_JSON_DEPTH", "JsonTooDeep", "check_depth", "dumps", "json_depth", "loads"]

#: The deepest JSON any gateway surface reads (orjson writes 254, the MCP SDK reads ~198).
MAX_JSON_DEPTH = 128

_STRING = re.compile(rb'"[^"]*"')
_NOT_BRACKET = bytes(c for c in range(256) if c not in b"[]{}")
_OPEN_IS_ONE = bytes.maketrans(b"[{]}", b"\x01\x01\x00\x00")


class JsonTooDeep(ValueError):
    """A JSON text nested deeper than the limit; the message says how to fix it."""

    def __init__(self, limit: int, what: str = "JSON") -> None:
        super().__init__(
            f"{what} nests deeper than {limit} levels (arrays and objects inside each "
            f"other); send one nested at most {limit} levels deep"
        )
        self.limit = limit


def json_depth(raw: bytes | str) -> int:
    """The nesting depth of a valid JSON text, in time linear in its length.

    Escapes are removed first (``\\\\`` then ``\\"``, so every remaining quote delimits
    a string), then the strings, then everything but brackets; the depth is the highest
    running count of open brackets. Meant for text a JSON parser has accepted.
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else bytes(raw)
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    if b'"' in data:
        data = _STRING.sub(b"", data)
    ones = data.translate(None, _NOT_BRACKET).translate(_OPEN_IS_ONE)
    if not ones:
        return 0
    # depth after k brackets = opens - closes = 2 * opens_k - k
    running = map(operator.lshift, itertools.accumulate(ones), itertools.repeat(1))
    return int(max(map(operator.sub, running, itertools.count(1))))


def check_depth(raw: bytes | str, limit: int = MAX_JSON_DEPTH, what: str = "JSON") -> None:
    """Raise :class:`JsonTooDeep` if the valid JSON text ``raw`` nests deeper than ``limit``."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if data.count(b"[") + data.count(b"{") <= limit:  # cannot be deeper: skip the scan
        return
    if json_depth(data) > limit:
        raise JsonTooDeep(limit, what)


def loads(raw: bytes | str, limit: int = MAX_JSON_DEPTH, what: str = "JSON") -> Any:
    """Parse with orjson and refuse more than ``limit`` levels (:class:`JsonTooDeep`, also
    for text past orjson's own 1024); other bad JSON raises ``orjson.JSONDecodeError``."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc) or "recursion" in str(exc).lower():
            raise JsonTooDeep(limit, what) from None
        raise
    if isinstance(doc, dict | list):
        check_depth(raw, limit, what)
    return doc


def dumps(value: Any) -> bytes:
    """``value`` as compact JSON: orjson, or for what orjson refuses (deeper than 254
    levels, integers over 64 bits, lone surrogates) an iterative writer that cannot
    overflow any stack. Non-finite floats are ``null`` either way (as orjson writes them).
    Raises ``TypeError`` only for a value that is not JSON data at all."""
    try:
        return orjson.dumps(value)
    except TypeError:
        pass
    return "".join(_iter_write(value)).encode("ascii")


_ESCAPE = json.encoder.encode_basestring_ascii


def _scalar(v: Any) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, str):
        return str(_ESCAPE(v))
    if isinstance(v, int):
        return int.__repr__(v)
    if isinstance(v, float):
        return float.__repr__(v) if math.isfinite(v) else "null"
    raise TypeError(f"Type is not JSON serializable: {type(v).__name__}")


def _iter_write(value: Any) -> list[str]:
    out: list[str] = []
    # each frame: an iterator over (key or None, item) pairs and the closing bracket
    stack: list[tuple[Any, str]] = []
    pending: list[Any] = [value]
    first = True
    while True:
        if pending:
            v = pending.pop()
            if isinstance(v, dict):
                out.append("{")
                stack.append((iter(v.items()), "}"))
                first = True
            elif isinstance(v, list | tuple):
                out.append("[")
                stack.append((iter(v), "]"))
                first = True
            else:
                out.append(_scalar(v))
        if not stack:
            return out
        it, close = stack[-1]
        try:
            item = next(it)
        except StopIteration:
            stack.pop()
            out.append(close)
            first = False
            if not stack:
                return out
            continue
        if not first:
            out.append(",")
        first = False
        if close == "}":
            key, item = item
            out.append(str(_ESCAPE(key if isinstance(key, str) else str(key))) + ":")
        pending.append(item)
