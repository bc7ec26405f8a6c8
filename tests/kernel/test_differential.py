"""The fast hot-path parts agree with the reference libraries.

Rung 0 parses with ``orjson``; the reference is the standard library's ``json`` with the
documented rules of :mod:`fak_core.jsonargs` applied. Rung 1 validates with
``jsonschema-rs``; the reference is ``jsonschema``'s Draft 2020-12 validator, on instances
generated from each schema by ``hypothesis-jsonschema`` (valid ones and mutated ones).
"""

from __future__ import annotations

import json
import math
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core import ArgsError, compile_schema, parse_args
from fak_core.jsonargs import DEFAULT_MAX_DEPTH
from pytest_fak.schemas import from_schema


class Refused(Exception):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise Refused("duplicate key")
        out[k] = v
    return out


def _int(text: str) -> int | float:
    v = int(text)
    return v if -(2**63) <= v < 2**64 else float(text)


def _float(text: str) -> float:
    v = float(text)
    if math.isinf(v):
        raise Refused("overflows a double")
    return v


def _constant(text: str) -> Any:
    raise Refused(f"{text} is not JSON")


def _depth_and_unicode(value: Any, depth: int = 1) -> int:
    if isinstance(value, str):
        value.encode("utf-8")  # lone surrogates raise
        return depth - 1
    if isinstance(value, dict):
        for k in value:
            k.encode("utf-8")
        items = list(value.values())
    elif isinstance(value, list):
        items = value
    else:
        return depth - 1
    return max([depth, *(_depth_and_unicode(v, depth + 1) for v in items)])


def reference_parse(raw: str | bytes) -> dict[str, Any] | None:
    """``json`` plus the documented rules; ``None`` means refused."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        text.encode("utf-8")
        if not text.strip(" \t\r\n"):
            return {}
        value = json.loads(
            text,
            object_pairs_hook=_pairs,
            parse_int=_int,
            parse_float=_float,
            parse_constant=_constant,
        )
        if not isinstance(value, dict):
            return None
        if _depth_and_unicode(value) > DEFAULT_MAX_DEPTH:
            return None
        return value
    except (Refused, ValueError, UnicodeError, RecursionError):
        return None


def fast_parse(raw: str | bytes) -> dict[str, Any] | None:
    try:
        return parse_args(raw)
    except ArgsError:
        return None


def same(a: Any, b: Any) -> bool:
    """Equality that also tells 1 from 1.0 and -0.0 from 0.0 (JSON values as parsed)."""
    if isinstance(a, float) or isinstance(b, float):
        return type(a) is type(b) and (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


@st.composite
def json_texts(draw: st.DrawFn) -> str | bytes:
    """Well-formed documents in varied spelling, and their byte-level mutations."""
    value = draw(json_values | st.dictionaries(st.text(max_size=6), json_values, max_size=5))
    text = json.dumps(
        value,
        indent=draw(st.sampled_from([None, 0, 2])),
        ensure_ascii=draw(st.booleans()),
        separators=draw(st.sampled_from([None, (",", ":"), (" , ", " : ")])),
    )
    how = draw(st.sampled_from(["as-is", "bytes", "truncate", "insert", "delete", "dup-key"]))
    if how == "bytes":
        return text.encode("utf-8")
    if how == "truncate" and text:
        return text[: draw(st.integers(0, len(text) - 1))]
    if how == "insert":
        at = draw(st.integers(0, len(text)))
        junk = draw(
            st.sampled_from(['"', ",", "}", "{", ":", "NaN", "\x00", "\\", "\ud800", "1e999"])
        )
        return text[:at] + junk + text[at:]
    if how == "delete" and text:
        at = draw(st.integers(0, len(text) - 1))
        return text[:at] + text[at + 1 :]
    if how == "dup-key" and text.startswith("{") and len(text) > 2:
        return '{"k": 1, "k": 2, ' + text[1:] if text != "{}" else '{"k": 1, "k": 2}'
    return text


@pytest.mark.fak_theorem("A7.4")
@given(json_texts())
def test_rung0_parser_agrees_with_the_standard_library(raw: str | bytes) -> None:
    ref = reference_parse(raw)
    fast = fast_parse(raw)
    if ref is None:
        assert fast is None, f"orjson accepted what the reference refuses: {raw!r}"
    else:
        assert fast is not None, f"orjson refused what the reference accepts: {raw!r}"
        assert same(fast, ref)


@pytest.mark.fak_theorem("A7.4")
@given(st.binary(max_size=40))
def test_rung0_on_arbitrary_bytes(raw: bytes) -> None:
    assert (fast_parse(raw) is None) == (reference_parse(raw) is None)


SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {
            "origin": {"type": "string", "minLength": 3, "maxLength": 3},
            "passengers": {"type": "integer", "minimum": 1, "maximum": 9},
            "cabin": {"enum": ["economy", "business", "first"]},
        },
        "required": ["origin", "passengers"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {
            "tags": {
                "type": "array",
                "items": {"type": "string"},
                "uniqueItems": True,
                "maxItems": 4,
            },
            "pair": {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "boolean"}],
                "items": False,
            },
            "ratio": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5},
        },
        "minProperties": 1,
    },
    {
        "type": "object",
        "$defs": {
            "addr": {
                "type": "object",
                "properties": {"zip": {"type": "string"}},
                "required": ["zip"],
            }
        },
        "properties": {"home": {"$ref": "#/$defs/addr"}, "work": {"$ref": "#/$defs/addr"}},
        "dependentRequired": {"work": ["home"]},
    },
    {
        "type": "object",
        "properties": {"kind": {"const": "email"}, "to": {"type": "string"}},
        "if": {"properties": {"kind": {"const": "email"}}, "required": ["kind"]},
        "then": {"required": ["to"]},
        "else": {"not": {"required": ["to"]}},
    },
    {
        "type": "object",
        "patternProperties": {"^x_[a-z]+$": {"type": "integer"}},
        "propertyNames": {"maxLength": 8},
        "additionalProperties": {"type": "string"},
    },
    {
        "type": "object",
        "properties": {
            "v": {
                "oneOf": [
                    {"type": "integer", "multipleOf": 3},
                    {"type": "integer", "multipleOf": 5},
                ]
            },
            "w": {"anyOf": [{"type": "null"}, {"type": "string", "pattern": "^[a-z]+$"}]},
            "items": {"type": "array", "contains": {"type": "integer"}},
        },
    },
]


_STRATEGIES: dict[int, st.SearchStrategy[Any]] = {}


def _generated(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """``from_schema`` canonicalises its schema each time it is built: build it once."""
    key = id(schema)
    if key not in _STRATEGIES:
        _STRATEGIES[key] = from_schema(schema)
    return _STRATEGIES[key]


def _ecma_dollar(doc: Any) -> Any:
    """``doc`` with each regex's final ``$`` written ``\\Z`` for the reference: ECMA-262's
    ``$`` (rung 1's, A7.6) matches only at the very end, Python's ``re`` also before a
    final newline, so ``"ab\\n"`` would otherwise fail agreement with the reference wrong
    by the spec. The fixed schemas' regexes use no other construct the dialects differ on
    (``[a-z]``, ``^``, literals)."""
    if isinstance(doc, list):
        return [_ecma_dollar(v) for v in doc]
    if not isinstance(doc, dict):
        return doc
    out = {}
    for key, value in doc.items():
        if key == "pattern" and isinstance(value, str):
            out[key] = _end(value)
        elif key == "patternProperties" and isinstance(value, dict):
            out[key] = {_end(p): _ecma_dollar(v) for p, v in value.items()}
        else:
            out[key] = _ecma_dollar(value)
    return out


def _end(pattern: str) -> str:
    return (
        pattern[:-1] + "\\Z" if pattern.endswith("$") and not pattern.endswith("\\$") else pattern
    )


def test_the_reference_reads_dollar_as_ecma_262() -> None:
    schema = {
        "type": "object",
        "patternProperties": {"^x_[a-z]+$": {"type": "integer"}},
        "properties": {"w": {"pattern": "^[a-z]+$"}},
    }
    reference = jsonschema.Draft202012Validator(_ecma_dollar(schema))
    assert not reference.is_valid({"w": "ab\n"}) and reference.is_valid({"w": "ab"})
    assert reference.is_valid({"x_ab\n": "s"}) and not reference.is_valid({"x_ab": "s"})
    assert compile_schema(schema).is_valid({"x_ab\n": "s"})


@pytest.mark.fak_theorem("A7.4")
@pytest.mark.parametrize("schema", SCHEMAS, ids=[f"schema{i}" for i in range(len(SCHEMAS))])
@given(data=st.data())
def test_rung1_fast_validator_agrees_with_jsonschema(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    compiled = compile_schema(schema)
    reference = jsonschema.Draft202012Validator(_ecma_dollar(schema))
    # hypothesis-jsonschema predates a few 2020-12 keywords (dependentRequired, minContains),
    # so its instances are "mostly valid"; the property is agreement on every instance.
    valid = data.draw(_generated(schema), label="generated")
    assert compiled.is_valid(valid) == reference.is_valid(valid), valid
    mutated = data.draw(
        json_values
        | st.dictionaries(st.text(max_size=8), json_values, max_size=4)
        | st.builds(
            lambda v, k, x: {**v, k: x} if isinstance(v, dict) else v,
            st.just(valid),
            st.sampled_from(sorted(schema.get("properties", {"x": 1}))),
            json_values,
        ),
        label="mutated",
    )
    assert compiled.is_valid(mutated) == reference.is_valid(mutated), mutated
