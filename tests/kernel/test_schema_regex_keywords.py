"""The exact path's regex keywords decide and speak as ``jsonschema`` does (theorem A7.6).

The exact path (a schema with ``multipleOf``) replaces ``pattern``, ``patternProperties``
and ``additionalProperties`` with versions that match on the linear engine. On patterns
both dialects read alike (literals, ``^``, character classes, no ``$``), the reference
library is an independent oracle: every error it reports, path, keyword and message, the
exact path must report too, for generated objects over keys that match, miss, or are
named properties, with values of every type.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core.schemaregex import exact_validator_class, linear_pattern
from fak_core.schemas import InvalidSchemaError, compile_schema

KEYS = st.sampled_from(["a", "xa", "xb", "b", "c'", "ya", "n", "x"])
VALUES = st.one_of(
    st.sampled_from(["", "x", "xy", "zz", "Xa", "x\n"]),
    st.integers(-2, 2),
    st.none(),
    st.lists(st.sampled_from(["x", "y", 1]), max_size=2),
    st.dictionaries(KEYS, st.just(1), max_size=2),
)
PATTERN_PROPERTIES = [None, {"^x": {"type": "integer"}}, {"^x": {}, "a$": {"type": "string"}}]
ADDITIONAL = [None, False, True, {"type": "string"}]


def schema_of(patterns: Any, additional: Any, value_pattern: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "type": "object",
        "properties": {"a": {}, "n": {"multipleOf": 1}},  # multipleOf: the exact path
    }
    if patterns is not None:
        doc["patternProperties"] = patterns
    if additional is not None:
        doc["additionalProperties"] = additional
    if value_pattern:
        doc["properties"]["a"] = {"pattern": "^x[a-z]"}
    return doc


def errors(validator: Any, instance: Any) -> list[tuple[str, str, str]]:
    found = [
        ("/".join(map(str, e.absolute_path)), str(e.validator), e.message)
        for e in validator.iter_errors(instance)
    ]
    return sorted(found)


@pytest.mark.fak_theorem("A7.6")
@pytest.mark.parametrize("patterns", PATTERN_PROPERTIES, ids=["no-pp", "pp", "pp2"])
@pytest.mark.parametrize("additional", ADDITIONAL, ids=["no-ap", "ap-false", "ap-true", "ap-str"])
@given(value_pattern=st.booleans(), instance=st.dictionaries(KEYS, VALUES, max_size=5) | VALUES)
def test_the_exact_path_reports_every_error_jsonschema_reports(
    patterns: Any, additional: Any, value_pattern: bool, instance: Any
) -> None:
    # compiled cold, as in a fresh process: no pattern or class cached by an earlier test
    linear_pattern.cache_clear()
    exact_validator_class.cache_clear()
    schema = schema_of(patterns, additional, value_pattern)
    compiled = compile_schema(schema)
    reference = jsonschema.Draft202012Validator(schema)
    assert compiled.is_valid(instance) == reference.is_valid(instance), instance
    assert errors(compiled._exact, instance) == errors(reference, instance), instance


RESOURCE_ITEM = {"pattern": "a(?=b)"}
RESOURCE = {"$id": "https://example.com/s", "properties": {"w": {"pattern": "a(?=b)"}}}


@pytest.mark.fak_theorem("A7.6")
@pytest.mark.parametrize(
    ("schema", "where"),
    [
        (  # decoys first: another pattern, the text as a value, in a string, as a key
            {
                "properties": {
                    "u": {"pattern": "ok", "description": "a(?=b)", "title": "x a(?=b) y"},
                    "a(?=b)": {},
                },
                "$defs": {"s": RESOURCE},
                "allOf": [{"$ref": "https://example.com/s"}],
            },
            "/$defs/s/properties/w/pattern",
        ),
        (  # inside an array of an embedded resource (reported relative to the resource)
            {
                "$defs": {"s": {"$id": "https://example.com/s", "allOf": [True, RESOURCE_ITEM]}},
                "properties": {"v": {"$ref": "https://example.com/s"}},
            },
            "/$defs/s/allOf/1/pattern",
        ),
        ({"patternProperties": {"~/a(?=b)": {}}}, "/patternProperties/~0~1a(?=b)"),
        ({"properties": {"~/": {"pattern": "a(?=b)"}}}, "/properties/~0~1/pattern"),
    ],
    ids=["decoys", "in-array", "escaped-key", "escaped-property"],
)
def test_a_refusal_points_at_the_pattern_past_decoys_and_escapes(
    schema: dict[str, Any], where: str
) -> None:
    """The pointer, written by hand per RFC 6901 (``~`` as ``~0``, ``/`` as ``~1``), of the
    one place the refused regex applies, with look-alikes earlier in the document."""
    with pytest.raises(InvalidSchemaError) as err:
        compile_schema(schema, "t")
    assert f"the regular expression at {where} (" in str(err.value), str(err.value)
