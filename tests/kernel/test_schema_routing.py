"""Rung 1 agrees with ``jsonschema`` wherever in a schema an inexact keyword sits.

jsonschema-rs decides ``multipleOf`` in floating point and ``uniqueItems`` with a lossy
number comparison; rung 1 must send every schema that uses either keyword, at any depth
and under any combinator, to the exact validator. The witness hides each keyword at a
generated place (properties, items, prefixItems, allOf/anyOf/oneOf, not, $defs behind
$ref) and checks rung 1 against the reference library on the known counterexamples.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core import compile_schema

# (keyword schema, an instance jsonschema-rs gets wrong, one every validator accepts)
INEXACT: list[tuple[dict[str, Any], Any, Any]] = [
    ({"multipleOf": 5}, 1.416682948592774e17, 1.5e17),  # 141668294859277408 % 5 == 3
    ({"uniqueItems": True}, [-(2**63), -9.223372036854776e18], [1, 2]),  # equal numbers
]

WRAPS = st.sampled_from(["properties", "items", "prefixItems", "allOf", "anyOf", "not-not", "ref"])


def wrap(schema: dict[str, Any], instance: Any, how: str, n: int) -> tuple[dict[str, Any], Any]:
    """``schema`` one level deeper, and the instance that reaches it there (``n`` names
    the ``$anchor`` a ``$ref`` reaches, unique in the document)."""
    if how == "properties":
        return {"type": "object", "properties": {"v": schema}}, {"v": instance}
    if how == "items":
        return {"type": "array", "items": schema}, [instance]
    if how == "prefixItems":
        return {"type": "array", "prefixItems": [True, schema]}, [0, instance]
    if how == "allOf":
        return {"allOf": [True, schema]}, instance
    if how == "anyOf":  # the other branch refuses everything, so this one decides
        return {"anyOf": [False, schema]}, instance
    if how == "not-not":
        return {"not": {"not": schema}}, instance
    anchored = {"$anchor": f"d{n}", **schema}
    return {"$defs": {"d": anchored}, "$ref": f"#d{n}"}, instance  # "ref"


@pytest.mark.fak_theorem("A7.4")
@pytest.mark.parametrize("case", INEXACT, ids=["multipleOf", "uniqueItems"])
@given(path=st.lists(WRAPS, max_size=4))
def test_an_inexact_keyword_anywhere_is_decided_as_jsonschema_decides(
    case: tuple[dict[str, Any], Any, Any], path: list[str]
) -> None:
    keyword, wrong, right = case
    schema, bad, good = dict(keyword), wrong, right
    for n, how in enumerate(path):
        _, good = wrap(schema, good, how, n)
        schema, bad = wrap(schema, bad, how, n)
    schema, bad, good = {"type": "object", "properties": {"v": schema}}, {"v": bad}, {"v": good}
    compiled = compile_schema(schema)
    reference = jsonschema.Draft202012Validator(schema)
    assert compiled.is_valid(bad) == reference.is_valid(bad) is False, schema
    assert compiled.is_valid(good) == reference.is_valid(good) is True, schema


@pytest.mark.fak_theorem("A7.4")
@pytest.mark.parametrize("nested", [False, True])
def test_a_schema_without_inexact_keywords_stays_on_the_compiled_validator(nested: bool) -> None:
    """Only the exact path refuses ``unevaluatedProperties`` beside ``patternProperties``
    (A7.6); a schema with neither inexact keyword compiles, and agrees with the reference."""
    schema: dict[str, Any] = {
        "type": "object",
        "patternProperties": {"^x": {"type": "integer", "minimum": 5}},
        "unevaluatedProperties": False,
    }
    if nested:
        schema = {"type": "object", "properties": {"v": {"allOf": [schema]}}}
    compiled = compile_schema(schema)
    reference = jsonschema.Draft202012Validator(schema)
    for inner in [{"xa": 5}, {"xa": 4}, {"y": 1}, {}]:
        instance = {"v": inner} if nested else inner
        assert compiled.is_valid(instance) == reference.is_valid(instance), instance
