"""Rung 1's schema compiler (A7.4's anchor `compile_schema`): which validator it picks, and
the error it gives for every schema it refuses."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest

from fak_core.schemas import InvalidSchemaError, compile_schema

DRAFT7 = "http://json-schema.org/draft-07/schema#"


@pytest.mark.fak_theorem("A7.4")
@pytest.mark.parametrize(
    ("schema", "tool", "message"),
    [
        ([1], "t", "schema for tool 't' must be a JSON object or a boolean, not list"),
        ({"type": 5}, "t", "schema for tool 't' is invalid at type: 5 is not valid under"),
        ({"type": 5}, "", "schema is invalid at type: 5 is not valid under"),
        ({"properties": {"a": 1}}, "", "schema is invalid at properties/a: 1 is not of type"),
        ({"$schema": DRAFT7, "minLength": -1}, "", "schema is invalid at minLength: -1 is less"),
        ({"$ref": "#/$defs/missing"}, "t", "schema for tool 't' cannot be compiled: Pointer"),
        (
            {"$schema": "http://json-schema.org/draft-04/schema#", "exclusiveMinimum": True},
            "",
            "schema is invalid at (root): 'minimum' is a dependency of 'exclusiveMinimum'",
        ),
    ],
)
def test_a_refused_schema_says_where_and_why(schema: Any, tool: str, message: str) -> None:
    with pytest.raises(InvalidSchemaError) as err:
        compile_schema(schema, tool)
    assert str(err.value).startswith(message)


@pytest.mark.fak_theorem("A7.4")
def test_the_validator_follows_the_schemas_own_draft_and_formats_only_annotate() -> None:
    # a draft-07 tuple `items` means positions; under 2020-12 the schema would be refused
    tuple_items = compile_schema({"$schema": DRAFT7, "items": [{"type": "string"}]})
    assert (tuple_items.is_valid(["a", 1]), tuple_items.is_valid([1])) == (True, False)
    for schema in ({"format": "email"}, {"$schema": DRAFT7, "format": "email"}):
        assert compile_schema(schema).is_valid("not an email")
    # any mapping and the boolean schemas are schemas
    proxy = compile_schema(MappingProxyType({"type": "string"}))
    assert (proxy.is_valid("a"), proxy.is_valid(1)) == (True, False)
    assert compile_schema(True).is_valid(1) and not compile_schema(False).is_valid(1)
