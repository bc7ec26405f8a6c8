"""``uniqueItems`` at its edges on the exact path (theorem A7.7): ``false``, and instances
that are not arrays (strings, objects, numbers), which the keyword does not constrain.

The oracle is JSON Schema's rule written by hand: an instance fails ``uniqueItems: true``
exactly when it is an array with two items equal by JSON Schema's equality; ``false``
(and any non-array) constrains nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core.schemas import compile_schema


def equal(a: Any, b: Any) -> bool:
    """JSON Schema's equality by hand: booleans apart from numbers, numbers by value."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def valid(unique: bool, instance: Any) -> bool:
    if not unique or not isinstance(instance, list):
        return True
    return not any(equal(instance[i], instance[j]) for j in range(len(instance)) for i in range(j))


SCALARS = st.one_of(
    st.sampled_from([0, 1, -0.0, 1.0, 0.5, -1.5, 1e-05, 2**63, float(2**63), True, False, None]),
    st.sampled_from(["", "a"]),
    st.text(alphabet="ab", max_size=3),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("ab"), inner),
    max_leaves=8,
)


@pytest.mark.fak_theorem("A7.7")
@given(unique=st.booleans(), instance=VALUES)
def test_unique_items_constrains_only_arrays_and_only_when_true(
    unique: bool, instance: Any
) -> None:
    """Instances of every type, strings and objects with repeated characters and values
    included, under ``uniqueItems: true`` and ``false`` (``multipleOf``: the exact path)."""
    compiled = compile_schema({"uniqueItems": unique, "multipleOf": 1})
    number = isinstance(instance, int | float) and not isinstance(instance, bool)
    multiple = not number or float(instance).is_integer()
    assert compiled.is_valid(instance) == (valid(unique, instance) and multiple), instance


@pytest.mark.fak_theorem("A7.7")
@given(items=st.lists(VALUES, max_size=5))
def test_a_refusal_names_the_first_repeat(items: list[Any]) -> None:
    """The message leads with the indexes of the first item equal to an earlier one."""
    compiled = compile_schema({"uniqueItems": True, "multipleOf": 1})
    pairs = [(i, j) for j in range(len(items)) for i in range(j) if equal(items[i], items[j])]
    detail = compiled.first_error(items)
    if not pairs:
        assert compiled.is_valid(items)
        return
    i, j = pairs[0]
    assert detail.startswith(f"$: uniqueItems: items {i} and {j} are equal: "), detail


NUMBERS = st.sampled_from([0, -0.0, 1, 1.0, 0.5, -1.5, 1e-05, 2.5e-300, 2**53, float(2**53), 3])


@pytest.mark.fak_theorem("A7.7")
@given(items=st.lists(NUMBERS, max_size=6))
def test_numbers_are_equal_by_value_alone(items: list[Any]) -> None:
    """Arrays of numbers only, fractions among them: distinct values are never taken for
    a repeat, and an integer and the float that is exactly it always are."""
    compiled = compile_schema({"type": "array", "uniqueItems": True, "multipleOf": 1})
    assert compiled.is_valid(items) == valid(True, items), items
