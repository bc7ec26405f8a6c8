"""Every schema keyword the exact path runs is linear in the arguments (theorem A7.7).

``uniqueItems`` is generated across its class: arrays of numbers, booleans, strings, null,
arrays and objects, with an equal copy (numbers respelled as JSON Schema calls them
equal: ``1``/``1.0``, ``0``/``-0.0``, big integers and the floats that are exactly them)
inserted at any position. The oracle is a hand-written pairwise JSON Schema equality on
these small arrays; a probe that ``jsonschema``'s sort-then-compare-neighbours answers
wrongly runs first, and a 1 MiB array of distinct objects, which a pairwise comparison
cannot finish in hours, must be decided. No test times anything.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fak_core import Kernel, Reason, ToolCall
from fak_core.schemas import compile_schema

_EXACT = {"type": "array", "uniqueItems": True, "multipleOf": 1}  # multipleOf: exact path
_FAST = {"type": "array", "uniqueItems": True}


def _same(a: Any, b: Any) -> bool:
    """JSON Schema's equality, by hand: no hashing, no sorting, no library."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b  # Python compares int and float by exact value
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _unique(items: list[Any]) -> bool:
    return not any(_same(items[i], items[j]) for i in range(len(items)) for j in range(i))


_NUMBERS = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([2**53, 2**53 + 1, 10**20, -(2**63)]),
    st.floats(allow_nan=False, allow_infinity=False, width=64).filter(lambda f: abs(f) < 1e30),
)
_SCALARS = st.one_of(_NUMBERS, st.booleans(), st.none(), st.sampled_from(["", "1", "a", "true"]))
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("abc"), inner, max_size=3)
    ),
    max_leaves=8,
)


def _respell(value: Any) -> Any:
    """An equal value by JSON Schema, numbers spelled the other way (int ↔ float)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return float(value) if float(value) == value else value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, list):
        return [_respell(v) for v in value]
    return {k: _respell(v) for k, v in reversed(list(value.items()))}


@st.composite
def _arrays(draw: st.DrawFn) -> list[Any]:
    items = draw(st.lists(_VALUES, max_size=6))
    if items and draw(st.booleans()):  # an equal copy of some item at any position
        copy = _respell(draw(st.sampled_from(items)))
        items.insert(draw(st.integers(0, len(items))), copy)
    return items


def _probe() -> None:
    """``jsonschema`` sorts ``[[true], [1], [true]]`` (Python calls ``[True] == [1]``)
    and compares neighbours only, so it misses the repeated ``[true]``: a cheap probe
    that the quadratic original is not back, run before any large array."""
    assert not compile_schema(_EXACT).is_valid([[True], [1], [True]])


@pytest.mark.fak_theorem("A7.7")
@settings(max_examples=300, deadline=None)
@given(_arrays())
@example([1, True])
@example([0, False])
@example([True, False, None, "t", "F", "z", "", 0, 1])
@example([[1], [True]])
@example([{"a": 0}, {"a": False}, {"a": None}])
@example([{"a": 1}, {"a": 1.0}])
def test_unique_items_is_json_schema_equality(items: list[Any]) -> None:
    _probe()
    expected = _unique(items)
    assert compile_schema(_EXACT).is_valid(items) == expected, items
    # without multipleOf too: uniqueItems alone sends a schema to the exact path, as
    # jsonschema-rs took -2**63 and -9.223372036854776e18 for different numbers
    assert compile_schema(_FAST).is_valid(items) == expected, items


@pytest.mark.fak_theorem("A7.7")
@pytest.mark.parametrize("at", [0, 1, "end"])
def test_a_megabyte_of_distinct_objects_is_decided(at: int | str) -> None:
    """About 1 MiB of arguments: ~60,000 distinct objects (a pairwise check compares
    1.8e9 pairs), with a duplicate of item 0 (as ``{"k": 0.0}``) at a position or none."""
    _probe()
    kernel = Kernel()
    kernel.register_schema(
        "t", {"type": "object", "properties": {"v": _EXACT, "n": {"multipleOf": 0.5}}}
    )
    items: list[Any] = [{"k": i} for i in range(60_000)]
    if at != "end":
        items.insert(1 + int(at) * 30_000, {"k": 0.0})
    raw = json.dumps({"v": items})
    assert len(raw.encode()) < 1 << 20
    v = kernel.decide(ToolCall("t", raw))
    refused = v.by == "preflight" and v.reason == Reason.MALFORMED
    assert refused == (at != "end"), v.claim
    if refused:
        assert "uniqueItems" in v.claim and "are equal" in v.claim, v.claim


@pytest.mark.fak_theorem("A7.7")
@pytest.mark.parametrize(
    ("schema", "args", "valid"),
    [
        ({"prefixItems": [{}], "unevaluatedItems": False}, list(range(100_000)), False),
        ({"contains": {"type": "integer"}, "unevaluatedItems": False}, list(range(100_000)), True),
        (
            {"properties": {"p0": {}}, "unevaluatedProperties": False},
            {f"p{i}": i for i in range(50_000)},
            False,
        ),
        (
            {"additionalProperties": True, "unevaluatedProperties": False},
            {f"p{i}": i for i in range(50_000)},
            True,
        ),
    ],
)
def test_unevaluated_keywords_decide_large_arguments(
    schema: dict[str, Any], args: Any, valid: bool
) -> None:
    """``jsonschema``'s unevaluated keywords searched a list per item (156 s for 1 MiB)."""
    compiled = compile_schema({**schema, "multipleOf": 1})
    assert compiled.is_valid(args) == valid
    if not valid:
        assert "nevaluated" in compiled.first_error(args)


@pytest.mark.fak_theorem("A7.7")
@pytest.mark.parametrize(
    ("schema", "instance"),
    [
        ({"prefixItems": [{}], "unevaluatedItems": False}, [1, 2, 3]),
        ({"prefixItems": [{}], "unevaluatedItems": {"type": "string"}}, [1, "a", 3]),
        ({"properties": {"a": {}}, "unevaluatedProperties": False}, {"a": 1, "c": 2, "b": 3}),
        (
            {"properties": {"a": {}}, "unevaluatedProperties": {"type": "string"}},
            {"a": 1, "c": 2, "b": "s", "d": 4},
        ),
        ({"properties": {"a": {}}, "unevaluatedProperties": {"type": "string"}}, {"b": "s"}),
    ],
)
def test_unevaluated_keywords_say_what_jsonschema_says(
    schema: dict[str, Any], instance: Any
) -> None:
    """The same verdicts and messages as ``jsonschema``'s own keywords, on small inputs."""
    import jsonschema

    compiled = compile_schema({**schema, "multipleOf": 1})
    reference = jsonschema.Draft202012Validator(schema)
    assert compiled.is_valid(instance) == reference.is_valid(instance)
    expected = [e.message for e in reference.iter_errors(instance)]
    got = [e.message for e in compiled._exact.iter_errors(instance)]
    assert got == expected
