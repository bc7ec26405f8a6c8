"""Rung 1's schema compiler (A7.4's anchor `compile_schema`): which validator it picks, and
the error it gives for every schema it refuses."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest

from fak_core.schemas import InvalidSchemaError, compile_schema

DRAFT7 = "http://json-schema.org/draft-07/schema#"


@pytest.mark.fak_theorem("A7.4", "A7.6")
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
        (
            {"properties": {"a/b": {"pattern": "a(?!b)"}}},
            "t",
            "schema for tool 't': the regular expression at /properties/a~1b/pattern "
            "('a(?!b)') cannot be matched in linear time (invalid perl operator: (?!); tool "
            "schema patterns are matched against attacker-controlled arguments in linear time",
        ),
        (
            {"$schema": DRAFT7, "patternProperties": {"(a)\\1": {}}},
            "",
            "schema: the regular expression at /patternProperties/(a)\\1 ('(a)\\\\1') cannot "
            "be matched in linear time (invalid escape sequence: \\1)",
        ),
        (
            {"multipleOf": 1, "patternProperties": {"^a": {}}, "unevaluatedProperties": False},
            "t",
            "schema for tool 't' uses multipleOf, so it is validated exactly by the jsonschema "
            "library, whose unevaluatedProperties matches patternProperties with Python's "
            "backtracking re: use additionalProperties",
        ),
    ],
)
def test_a_refused_schema_says_where_and_why(schema: Any, tool: str, message: str) -> None:
    with pytest.raises(InvalidSchemaError) as err:
        compile_schema(schema, tool)
    assert str(err.value).startswith(message)


@pytest.mark.fak_theorem("A7.4", "A7.6")
def test_the_validator_follows_the_schemas_own_draft_and_formats_only_annotate() -> None:
    # a draft-07 tuple `items` means positions; under 2020-12 the schema would be refused
    tuple_items = compile_schema({"$schema": DRAFT7, "items": [{"type": "string"}]})
    assert (tuple_items.is_valid(["a", 1]), tuple_items.is_valid([1])) == (True, False)
    for schema in ({"format": "email"}, {"$schema": DRAFT7, "format": "email"}):
        assert compile_schema(schema).is_valid("not an email")
    for schema in ({"format": "regex"}, {"format": "regex", "multipleOf": 1}):
        assert compile_schema(schema).is_valid("(a)\\1[")  # no regex runs for a format
    # any mapping and the boolean schemas are schemas
    proxy = compile_schema(MappingProxyType({"type": "string"}))
    assert (proxy.is_valid("a"), proxy.is_valid(1)) == (True, False)
    assert compile_schema(True).is_valid(1) and not compile_schema(False).is_valid(1)


@pytest.mark.fak_theorem("A7.4", "A7.6")
def test_the_exact_path_takes_either_unevaluated_or_pattern_properties_alone() -> None:
    for schema in (
        {"multipleOf": 1, "unevaluatedProperties": {"type": "integer"}},
        {"multipleOf": 1, "patternProperties": {"^a": {"type": "integer"}}},
    ):
        compiled = compile_schema({"type": "object", **schema})
        assert compiled.is_valid({"a": 1}) and not compiled.is_valid({"a": "x"}), schema
