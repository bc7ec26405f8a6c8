"""Rung 0's parser: tool arguments as a strict JSON object.

What counts as well-formed (documented, and pinned by a differential test against the
standard library's ``json``):

* empty arguments, or JSON white space only (space, tab, CR, LF), are ``{}``;
* the text must be UTF-8 (bytes) or a ``str`` without lone surrogates;
* the top level must be an object: arrays, scalars and ``null`` are refused;
* RFC 8259 only: ``NaN``, ``Infinity`` and numbers that overflow a double are refused;
  integers beyond 64 bits are read as doubles (as ``orjson`` does);
* duplicate keys in any object are refused, so that no later parser can read a
  different value from the one the kernel checked;
* nesting deeper than ``max_depth`` and text longer than ``max_bytes`` are refused; the
  length of a ``str`` is its UTF-8 length in bytes (:func:`args_nbytes`), never its
  number of characters.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from fak_core.reasons import Reason

__all__ = [
    "DEFAULT_MAX_ARGS_BYTES",
    "DEFAULT_MAX_DEPTH",
    "ArgsError",
    "args_nbytes",
    "parse_args",
]

DEFAULT_MAX_ARGS_BYTES = 1 << 20
DEFAULT_MAX_DEPTH = 64

# Every object key ends in a quote followed by optional white space and a colon. Counting
# these over-approximates the keys in the text (a string value may hold the same shape),
# which is all the duplicate check needs: equality with the parsed key count rules
# duplicates out; anything else sends the text to the exact (slower) check.
_KEY_END_STR = re.compile(r'"[ \t\r\n]*+:')
_KEY_END_BYTES = re.compile(rb'"[ \t\r\n]*+:')


class ArgsError(ValueError):
    """Arguments that rung 0 refuses, with the reason code and a detail saying what to fix."""

    def __init__(self, reason: int, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def _shape(value: Any, depth: int, max_depth: int) -> tuple[int, int]:
    """(number of object keys, maximum nesting depth) of a parsed value."""
    if depth > max_depth:
        return 0, depth
    keys = 0
    deepest = depth
    items: Any
    if isinstance(value, dict):
        keys = len(value)
        items = value.values()
    elif isinstance(value, list):
        items = value
    else:
        return 0, depth - 1
    for item in items:
        if isinstance(item, (dict, list)):
            k, d = _shape(item, depth + 1, max_depth)
            keys += k
            if d > deepest:
                deepest = d
    return keys, deepest


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ArgsError(Reason.MALFORMED, f"duplicate key {key!r}: send each key once")
        seen[key] = value
    return seen


def _has_duplicates(text: str | bytes) -> bool:
    import json

    try:
        json.loads(text, object_pairs_hook=_reject_duplicates)
    except ArgsError:
        return True
    return False


def args_nbytes(raw: str | bytes) -> int:
    """The size of arguments in bytes: a ``str`` counts its UTF-8 encoding (a lone
    surrogate, which rung 0 refuses anyway, counts the 3 bytes it would take)."""
    if isinstance(raw, bytes) or raw.isascii():  # isascii is O(1) on a str
        return len(raw)
    return len(raw.encode("utf-8", "surrogatepass"))


def parse_args(
    raw: str | bytes,
    *,
    max_bytes: int = DEFAULT_MAX_ARGS_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> dict[str, Any]:
    """Parse tool arguments; raise :class:`ArgsError` saying what is wrong and how to fix it."""
    # a character is at most 4 bytes: only a text over a quarter of the limit is measured
    if len(raw) > max_bytes >> 2:
        size = args_nbytes(raw)
        if size > max_bytes:
            raise ArgsError(
                Reason.OVERSIZE,
                f"arguments are {size} bytes, over the {max_bytes}-byte limit: send less",
            )
    if not (raw.strip(b" \t\r\n") if isinstance(raw, bytes) else raw.strip(" \t\r\n")):
        return {}  # JSON white space only (str.isspace would also take \x1c and friends)
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        msg = str(exc)
        if "depth limit" in msg:
            msg = f"nesting deeper than {max_depth} levels"
        raise ArgsError(
            Reason.MALFORMED, f"arguments are not valid JSON ({msg}): send a JSON object"
        ) from None
    if not isinstance(value, dict):
        kind = "null" if value is None else type(value).__name__
        kind = {
            "list": "an array",
            "str": "a string",
            "int": "a number",
            "float": "a number",
            "bool": "a boolean",
        }.get(kind, kind)
        raise ArgsError(
            Reason.MALFORMED, f"arguments are {kind}, not a JSON object: wrap them in {{...}}"
        )
    keys = len(value)
    for item in value.values():
        if type(item) is dict or type(item) is list:
            keys, depth = _shape(value, 1, max_depth)
            if depth > max_depth:
                raise ArgsError(
                    Reason.MALFORMED,
                    f"arguments nest deeper than {max_depth} levels: flatten them",
                )
            break
    # Cheapest first: every key is followed by a colon, so equal counts rule duplicates out.
    colon: Any = b":" if isinstance(raw, bytes) else ":"
    if raw.count(colon) != keys:
        pattern = _KEY_END_BYTES if isinstance(raw, bytes) else _KEY_END_STR
        if len(pattern.findall(raw)) != keys and _has_duplicates(raw):  # type: ignore[arg-type]
            raise ArgsError(
                Reason.MALFORMED, "arguments repeat a key in one object: send each key once"
            )
    return value
