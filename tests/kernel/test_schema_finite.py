"""A schema holding NaN or infinity is refused, naming where (A7.4, D2.3).

JSON has no such numbers, yet Python's JSON reader takes ``NaN``, ``Infinity`` and
``1e400``, and TOML has ``nan`` and ``inf``. The two validators read them differently:
jsonschema-rs turns them into ``null`` (so ``{"const": NaN}`` would pass a ``null`` that
``jsonschema`` refuses), and a ``maximum`` of NaN bounds nothing. The generator puts one
or two non-finite numbers at known places in a generated schema; the expected pointer is
the generator's own record of the first place, in document order.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core.policy import PolicyError, load_policy
from fak_core.schemas import InvalidSchemaError, compile_schema

NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf, float("1e400")])
FINITE = st.one_of(st.integers(-(2**70), 2**70), st.floats(allow_nan=False, allow_infinity=False))
#: keywords whose value is a number, and ones that hold any JSON value
NUMERIC = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
ANY_VALUE = ("const", "default")
#: a place that is a number in a valid schema: (path of keys, keyword)
Place = tuple[tuple[str, ...], str]


@st.composite
def schemas(draw: st.DrawFn, bad: int) -> tuple[dict[str, Any], list[str]]:
    """A schema with numbers at generated places, ``bad`` of them not finite; and the
    pointers (``a/b/c``, as the error writes them) of the non-finite ones, in document order."""
    names = draw(st.lists(st.sampled_from(["a", "b", "c/d", "~e"]), unique=True, max_size=3))
    # each number's key is put in place when its slot is made, so the slots are in the
    # order the document spells them, the enum (made last) after every other
    slots: list[tuple[dict[str, Any], tuple[str, ...], str]] = []
    root: dict[str, Any] = {"type": "object"}
    for key in draw(st.lists(st.sampled_from(NUMERIC + ANY_VALUE), unique=True, max_size=2)):
        root[key] = None
        slots.append((root, (), key))
    if names:
        root["properties"] = {}
        for name in names:
            sub: dict[str, Any] = {}
            root["properties"][name] = sub
            keys = draw(st.lists(st.sampled_from(NUMERIC + ANY_VALUE), min_size=1, max_size=2))
            for key in dict.fromkeys(keys):
                sub[key] = None
                slots.append((sub, ("properties", name), key))
    bad_slots = set(draw(st.permutations(range(len(slots))))[:bad])
    pointers: list[str] = []
    for i, (table, path, key) in enumerate(slots):
        if i in bad_slots:
            table[key] = draw(NON_FINITE)
            pointers.append("/".join((*path, key)))
        elif key == "multipleOf":
            table[key] = draw(st.integers(1, 9))
        else:
            table[key] = draw(FINITE)
    if draw(st.booleans()):
        values = draw(st.lists(FINITE, max_size=2))
        if len(pointers) < bad:
            at = draw(st.integers(0, len(values)))
            values.insert(at, draw(NON_FINITE))
            pointers.append(f"enum/{at}")
        root["enum"] = values
    return root, pointers


@pytest.mark.fak_theorem("A7.4")
@settings(max_examples=60, deadline=None)
@given(st.integers(1, 2).flatmap(schemas))
def test_a_schema_holding_a_non_finite_number_is_refused_where_it_is(
    built: tuple[dict[str, Any], list[str]],
) -> None:
    schema, pointers = built
    if not pointers:
        compile_schema(schema, "t")  # no place drew a number: nothing to refuse
        return
    with pytest.raises(InvalidSchemaError) as info:
        compile_schema(schema, "t")
    assert str(info.value) == (
        f"schema for tool 't' holds a number that is not finite at {pointers[0]}: "
        "JSON has no NaN or infinity; write a finite number there"
    )


@pytest.mark.fak_theorem("A7.4")
@settings(max_examples=40, deadline=None)
@given(schemas(0))
def test_a_schema_of_finite_numbers_compiles(built: tuple[dict[str, Any], list[str]]) -> None:
    schema, pointers = built
    assert pointers == []
    compile_schema(schema, "t")


@pytest.mark.fak_theorem("A7.4")
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_schema_is_refused_at_the_root_or_inside_a_list(value: float) -> None:
    for schema, where in (
        ({"const": value}, "const"),
        ({"enum": [None, 1, value]}, "enum/2"),
        ({"allOf": [{}, {"not": {"const": [1, {"x": value}]}}]}, "allOf/1/not/const/1/x"),
    ):
        with pytest.raises(InvalidSchemaError, match=f"not finite at {where}:"):
            compile_schema(schema, "t")


@pytest.mark.fak_theorem("D2.3")
@pytest.mark.parametrize(
    ("fmt", "text"),
    [
        ("toml", 'version = "fak-policy/v1"\n[schemas.t]\nconst = nan\n'),
        ("toml", 'version = "fak-policy/v1"\n[schemas.t.properties.n]\nmaximum = inf\n'),
        ("json", '{"schemas": {"t": {"enum": [1, NaN]}}}'),
        ("json", '{"schemas": {"t": {"minimum": -Infinity}}}'),
        ("json", '{"schemas": {"t": {"maximum": 1e400}}}'),
    ],
)
def test_a_policy_schema_holding_a_non_finite_number_is_refused_naming_it(
    fmt: str, text: str
) -> None:
    with pytest.raises(PolicyError, match=r"policy key 'schemas\.t': .* not finite at "):
        load_policy(text, fmt=fmt)
