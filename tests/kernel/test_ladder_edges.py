"""The ladder's edges: the row's call identity, the ledger's bound, rung 1's named paths.

Oracles are written here, not borrowed from the code under test: a hand-written WTF-8
encoder for the hashed argument bytes, hand-built JSON paths for rung 1's details, and
the plain arithmetic of a FIFO bound.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from fak_core import CallView, Ladder, SchemaRegistry, ToolCall, VerdictKind
from fak_core.preflight import DEFAULT_MAX_NEGATIVES, NegativesLedger

# ------------------------------------------------------------------ the row's call identity


def wtf8(text: str) -> bytes:
    """UTF-8 by code point, a lone surrogate as its 3-byte form (the oracle's own encoder)."""
    out = bytearray()
    for ch in text:
        cp = ord(ch)
        if cp < 0x80:
            out.append(cp)
        elif cp < 0x800:
            out += bytes([0xC0 | cp >> 6, 0x80 | cp & 0x3F])
        elif cp < 0x10000:
            out += bytes([0xE0 | cp >> 12, 0x80 | cp >> 6 & 0x3F, 0x80 | cp & 0x3F])
        else:
            out += bytes(
                [0xF0 | cp >> 18, 0x80 | cp >> 12 & 0x3F, 0x80 | cp >> 6 & 0x3F, 0x80 | cp & 0x3F]
            )
    return bytes(out)


# Every character width, and lone surrogates (rung 0 refuses those), drawn by code point:
# Hypothesis merges a union of ``characters`` strategies and drops the surrogates.
CHARS = st.one_of(
    st.integers(0, 0x7F),
    st.integers(0x80, 0x7FF),
    st.integers(0x800, 0xFFFF),
    st.integers(0x10000, 0x10FFFF),
    st.integers(0xD800, 0xDFFF),
).map(chr)


def _parsed(raw: str) -> Any:
    """The standard library's reading of ``raw``, or None when it is not JSON."""
    try:
        return json.loads(raw)
    except ValueError:
        return None


@pytest.mark.fak_theorem("A7.2")
@given(text=st.lists(CHARS, max_size=12).map("".join), as_bytes=st.booleans())
def test_the_row_names_the_call_by_tool_and_the_sha256_of_its_argument_bytes(
    text: str, as_bytes: bool
) -> None:
    """Every catch, whatever the arguments hold (lone surrogates too), leaves one row whose
    call hash is ``<tool>:<sha256 hex of the argument bytes>``; a ``str`` and the bytes of
    its UTF-8 are the same call."""
    raw = "{" + text
    # rung 0 catches every one that is not a JSON object ("{" + "}" is one)
    assume(not isinstance(_parsed(raw), dict))
    data = wtf8(raw)
    if as_bytes:
        if any(0xD800 <= ord(c) <= 0xDFFF for c in raw):
            return  # bytes cannot carry a lone surrogate
        args: str | bytes = data
    else:
        args = raw
    lad = Ladder()
    v = lad.adjudicate(CallView(ToolCall("t.o:ol", args)))
    assert v.kind == VerdictKind.DENY
    (row,) = lad.negatives.rows()
    assert row.call_hash == "t.o:ol:" + hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------------ the ledger's bound


def fill(lad: Ladder, n: int) -> None:
    for i in range(n):
        lad.adjudicate(CallView(ToolCall("t", "{bad" + str(i))))


@pytest.mark.fak_theorem("A7.3")
@pytest.mark.parametrize("bound", [1, 2, 3])
def test_the_smallest_bounds_hold(bound: int) -> None:
    """A ledger bounded to 1, 2 or 3 rows holds the newest that many and counts the rest."""
    lad = Ladder(max_negatives=bound)
    fill(lad, 7)
    rows = lad.negatives.rows()
    assert len(rows) == len(lad.negatives) == bound
    assert lad.negatives.evicted == 7 - bound
    assert [r.call_hash for r in rows] == [
        "t:" + hashlib.sha256(b"{bad%d" % i).hexdigest() for i in range(7 - bound, 7)
    ]


@pytest.mark.fak_theorem("A7.3")
@pytest.mark.parametrize("bound", [0, -1, -8192])
def test_a_bound_below_one_means_the_default(bound: int) -> None:
    ledger = NegativesLedger(bound)
    assert ledger.limit == 8192


@pytest.mark.fak_theorem("A7.3")
def test_the_default_bound_is_8192_rows() -> None:
    assert DEFAULT_MAX_NEGATIVES == 8192
    lad = Ladder()
    fill(lad, 8192 + 3)
    assert len(lad.negatives.rows()) == 8192
    assert lad.negatives.evicted == 3


# ------------------------------------------------------------------ rung 1's named paths
KEYS = st.text(st.characters(min_codepoint=ord("a"), max_codepoint=ord("z")), min_size=1)
STEPS = st.lists(st.one_of(KEYS, st.integers(min_value=0, max_value=3)), min_size=1, max_size=5)


def nest(steps: list[str | int], leaf_schema: dict[str, Any], leaf: Any) -> tuple[Any, Any]:
    """A schema and an instance that reach ``leaf`` through ``steps`` (keys and indexes)."""
    schema: dict[str, Any] = leaf_schema
    value = leaf
    for step in reversed(steps):
        if isinstance(step, int):
            schema = {"type": "array", "prefixItems": [{}] * step + [schema]}
            value = [0] * step + [value]
        else:
            schema = {"type": "object", "properties": {step: schema}}
            value = {step: value}
    return schema, value


@pytest.mark.fak_theorem("A7.3")
@given(steps=STEPS, exact=st.booleans())
def test_a_rung1_catch_names_the_whole_json_path(steps: list[str | int], exact: bool) -> None:
    """The detail starts with the path to the failing value, written by hand here:
    ``$``, then ``.key`` for a member and ``[i]`` for an item, on both validators."""
    leaf: dict[str, Any] = {"type": "string"}
    if exact:
        leaf = {"type": "string", "multipleOf": 2}  # sends the schema to the exact path
    schema, instance = nest(steps, leaf, 4)
    if not isinstance(instance, dict):
        schema, instance = nest(["top", *steps], leaf, 4)
        steps = ["top", *steps]
    registry = SchemaRegistry()
    compiled = registry.register("t", schema)
    assert registry.get("t") is compiled and compiled.schema == schema
    lad = Ladder(registry)
    v = lad.adjudicate(CallView(ToolCall("t", json.dumps(instance))))
    path = "$" + "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in steps)
    assert v.kind == VerdictKind.DENY
    assert v.claim is not None and v.claim.startswith(f"{path}: type:"), (path, v.claim)


@pytest.mark.fak_theorem("A7.3")
def test_a_schema_needs_a_tool_name() -> None:
    registry = SchemaRegistry()
    with pytest.raises(ValueError, match="a schema needs a tool name"):
        registry.register("", {"type": "object"})
    assert len(registry) == 0
