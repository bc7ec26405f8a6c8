"""A model of C4.9's bounds, written from the theorem's words, never from the code under
test: which identifiers of one result a session keeps, and which results it still holds.

A value's canonical form is its case-folded words joined by one space (callers draw values
from letters NFKC leaves alone, with no dot, ``@``, ``:`` or digit, so no other rule
applies, or lower-case ASCII addresses, whose canonical form is themselves), none when it
is blank or longer than 2048 characters; its cost is the UTF-8 length of that form counted
from the code points (a lone surrogate, which JSON can carry, as three bytes) plus 48. The
distinct forms of one result are kept in order while their costs fit in a quarter of the
session's trusted bound less 96; a result's chunk costs its forms' costs plus 96 (the
store counts a form's characters there: the callers that model eviction use ASCII), and
chunks leave the session oldest first once it passes the bound; a result of one tool
whose kept forms the session holds from that tool is not recorded again.
"""

from __future__ import annotations

MAX_CHARS = 2048
PER_VALUE = 48
PER_RESULT = 96

__all__ = ["MAX_CHARS", "PER_RESULT", "PER_VALUE", "canon", "kept", "replay", "utf8_len"]


def utf8_len(text: str) -> int:
    """UTF-8's length by code point ranges (a surrogate, below 0x10000, takes three)."""
    return sum(
        1 if n < 0x80 else 2 if n < 0x800 else 3 if n < 0x10000 else 4 for n in map(ord, text)
    )


def canon(value: str) -> str | None:
    if len(value) > MAX_CHARS:
        return None
    return " ".join(value.casefold().split()) or None


def kept(values: list[str], trusted_bytes: int) -> list[str]:
    """The distinct forms kept from one result, in order."""
    room = trusted_bytes // 4 - PER_RESULT
    out: list[str] = []
    for v in values:
        c = canon(v)
        if c is None or c in out:
            continue
        if utf8_len(c) + PER_VALUE > room:
            break
        room -= utf8_len(c) + PER_VALUE
        out.append(c)
    return out


def replay(results: list[tuple[str, list[str]]], trusted_bytes: int) -> list[set[str]]:
    """The forms a session holds after each ``(tool, values)`` result, for ASCII values."""
    live: list[tuple[str, frozenset[str], int]] = []  # (tool, forms, cost), oldest first
    held: list[set[str]] = []
    for origin, values in results:
        forms = frozenset(kept(values, trusted_bytes))
        if forms and (origin, forms) not in {(o, f) for o, f, _ in live}:
            live.append((origin, forms, PER_RESULT + sum(len(c) + PER_VALUE for c in forms)))
            while sum(cost for _, _, cost in live) > trusted_bytes:
                live.pop(0)
        held.append(set().union(*(f for _, f, _ in live)))
    return held
