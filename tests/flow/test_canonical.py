"""The digest: SHA-256 over RFC 8785 canonical JSON (the ``rfc8785`` package).

Cross-checked against an independent serialiser written here from the RFC's rules
(UTF-16 key order, ECMAScript number spelling, minimal escapes), the RFC's own number
vectors, and the invariances a content digest needs.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core.flow import CanonicalError, canonical_bytes, digest, digest_json_text

SAFE = 2**53 - 1
keys = st.text(max_size=6)
finite = st.floats(allow_nan=False, allow_infinity=False)
leaves = st.none() | st.booleans() | st.integers(-SAFE, SAFE) | finite | st.text(max_size=8)
BMP_KEYS = st.text(st.characters(max_codepoint=0xFFFF, exclude_categories=["Cs"]), max_size=6)
docs = st.recursive(
    leaves,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(keys, kids, max_size=4),
    max_leaves=20,
)


def ecma_number(f: float) -> str:
    """ECMAScript Number::toString, from the spec text, via Python's shortest digits."""
    if f == 0:
        return "0"
    if f < 0:
        return "-" + ecma_number(-f)
    _sign, digits, exp = Decimal(repr(f)).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    assert isinstance(exp, int)
    exp += len(digits) - len(ds)  # value = int(ds) * 10**exp
    k, n = len(ds), exp + len(ds)
    if k <= n <= 21:
        return ds + "0" * (n - k)
    if 0 < n <= 21:
        return ds[:n] + "." + ds[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + ds
    e = n - 1
    mant = ds if k == 1 else ds[0] + "." + ds[1:]
    return f"{mant}e{'+' if e > 0 else '-'}{abs(e)}"


def independent(doc: Any) -> str:
    """A second JCS serialiser, written from RFC 8785 without looking at the package."""
    if doc is None or isinstance(doc, bool):
        return json.dumps(doc)
    if isinstance(doc, int):
        return str(doc)
    if isinstance(doc, float):
        return ecma_number(doc)
    if isinstance(doc, str):
        return json.dumps(doc, ensure_ascii=False)
    if isinstance(doc, list):
        return "[" + ",".join(independent(v) for v in doc) + "]"
    items = sorted(doc.items(), key=lambda kv: kv[0].encode("utf-16-be"))
    return "{" + ",".join(f"{independent(k)}:{independent(v)}" for k, v in items) + "}"


@pytest.mark.fak_theorem("F1.1")
@settings(max_examples=150)
@given(docs)
def test_canonicalisation_agrees_with_an_independent_rfc8785_serialiser(doc: Any) -> None:
    assert canonical_bytes(doc) == independent(doc).encode("utf-8")


@pytest.mark.fak_theorem("F1.1")
@settings(max_examples=150)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(-SAFE, SAFE) | st.text(max_size=8),
        lambda kids: st.lists(kids, max_size=4) | st.dictionaries(BMP_KEYS, kids, max_size=4),
        max_leaves=20,
    )
)
def test_without_floats_it_is_sorted_compact_json(doc: Any) -> None:
    """Where both must agree (BMP keys, no floats), JCS equals key-sorted compact json.dumps."""
    expected = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_bytes(doc) == expected.encode("utf-8")


# Number vectors from RFC 8785 Appendix B (IEEE 754 bits -> canonical text).
RFC_VECTORS = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.fak_theorem("F1.1")
@pytest.mark.parametrize(("bits", "text"), RFC_VECTORS)
def test_rfc_number_vectors(bits: str, text: str) -> None:
    value = struct.unpack(">d", bytes.fromhex(bits))[0]
    assert canonical_bytes(value).decode() == text
    assert ecma_number(value) == text  # the independent formatter is right too


def spell_number(value: int | float, draw: Any) -> str:
    """An equivalent spelling of a number (same IEEE double after parsing)."""
    if isinstance(value, int):
        options = [str(value), f"{value}.0", f"{value}e0", f"{value}.000E+0"]
        if value:
            options.append(f"{value}0e-1")
    else:
        options = [repr(value), f"{value:.17e}", f"{value:.17E}", f"{value:.20g}"]
    return str(draw(st.sampled_from(options)))


def spell(doc: Any, draw: Any) -> str:
    """JSON text for ``doc`` with random key order, whitespace and number spelling."""
    ws = draw(st.sampled_from(["", " ", "\n  ", "\t"]))
    if isinstance(doc, bool) or doc is None:
        return json.dumps(doc)
    if isinstance(doc, (int, float)):
        return spell_number(doc, draw)
    if isinstance(doc, str):
        return json.dumps(doc, ensure_ascii=draw(st.booleans()))
    if isinstance(doc, list):
        return "[" + ws + ("," + ws).join(spell(v, draw) for v in doc) + ws + "]"
    items = draw(st.permutations(list(doc.items())))
    body = ("," + ws).join(f"{json.dumps(k)}{ws}:{ws}{spell(v, draw)}" for k, v in items)
    return "{" + ws + body + ws + "}"


@pytest.mark.fak_theorem("F1.1")
@settings(max_examples=100)
@given(docs, st.data())
def test_digest_ignores_key_order_whitespace_and_number_spelling(doc: Any, data: Any) -> None:
    text = spell(doc, data.draw)
    assert digest_json_text(text) == digest(doc)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copy = json.loads(json.dumps(doc))
    node = copy
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    return copy


def _different(old: Any, draw: Any) -> Any:
    new = draw(leaves | st.lists(leaves, max_size=2) | st.dictionaries(keys, leaves, max_size=2))
    same_number = (
        isinstance(old, (int, float))
        and isinstance(new, (int, float))
        and not isinstance(old, bool)
        and not isinstance(new, bool)
        and old == new
    )
    if same_number or json.dumps(new, sort_keys=True) == json.dumps(old, sort_keys=True):
        return [old]  # certainly different
    return new


@pytest.mark.fak_theorem("F1.1")
@settings(max_examples=100)
@given(docs, st.data())
def test_digest_changes_with_any_single_field(doc: Any, data: Any) -> None:
    path = data.draw(st.sampled_from(_paths(doc)))
    node = doc
    for p in path:
        node = node[p]
    changed = _set(doc, path, _different(node, data.draw))
    assert digest(changed) != digest(doc)


@pytest.mark.fak_theorem("F1.1")
@settings(max_examples=100)
@given(st.dictionaries(keys, leaves, min_size=1, max_size=5), st.data())
def test_digest_changes_when_a_key_is_added_removed_or_renamed(
    doc: dict[str, Any], data: Any
) -> None:
    key = data.draw(st.sampled_from(sorted(doc)))
    removed = {k: v for k, v in doc.items() if k != key}
    # a rename to a key the document already has is a removal, not a rename: draw the new
    # name from the whole key domain minus the document's keys (flaky before with
    # {'': True, 'x': True}, where '' renamed to '' + 'x' collided with 'x')
    new = data.draw(keys.filter(lambda k: k not in doc), label="new name")
    renamed = {**removed, new: doc[key]}
    assert len({digest(doc), digest(removed), digest(renamed)}) == 3


@pytest.mark.fak_theorem("F1.1")
@pytest.mark.parametrize(
    "bad", [float("nan"), math.inf, 2**53, -(2**53), {1: 2}, object(), "\ud800"]
)
def test_values_without_a_canonical_form_are_refused(bad: Any) -> None:
    with pytest.raises(CanonicalError):
        digest({"x": bad})


@pytest.mark.fak_theorem("F1.1")
@pytest.mark.parametrize("text", ["NaN", "[Infinity]", "{", "{'a':1}"])
def test_non_json_text_is_refused(text: str) -> None:
    with pytest.raises(CanonicalError):
        digest_json_text(text)


@pytest.mark.fak_theorem("F1.1")
def test_a_value_nested_past_the_interpreters_depth_is_refused_not_digested() -> None:
    deep: list[Any] = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(CanonicalError, match=r"^not a JSON value: "):
        digest({"x": deep})


@pytest.mark.fak_theorem("F1.1")
@settings(max_examples=100)
@given(docs)
def test_digest_is_sha256_over_the_independent_serialisation(doc: Any) -> None:
    expected = "sha256:" + hashlib.sha256(independent(doc).encode("utf-8")).hexdigest()
    assert digest(doc) == expected
    assert digest_json_text(json.dumps(doc)) == expected
