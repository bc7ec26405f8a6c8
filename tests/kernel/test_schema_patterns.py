"""Tool-schema regexes run in linear time on both validation paths (theorem A7.6).

Every place a schema regex applies to argument text is generated (a property value, an
array item, a nested object through ``$defs``/``$ref``, ``patternProperties`` keys, the
``additionalProperties`` that depends on them, ``propertyNames``), on both paths (the
compiled jsonschema-rs validator, and ``jsonschema`` for a schema with ``multipleOf``).
The oracles are written by hand: a string predicate for each catastrophic pattern shape
(no regex engine), the ECMA-262 answers of the JSON Schema Test Suite's
``optional/ecmascript-regex`` cases, and the list of constructs only a backtracking engine
can run. No test times anything.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core import Kernel, PolicyError, Reason, ToolCall
from fak_core.policy import load_policy
from fak_core.schemas import InvalidSchemaError, compile_schema
from tests.kernel.test_policy_patterns import _ADVERSARIAL, _catastrophic, _quantified


# ------------------------------------------------------------- where a regex applies
@dataclass(frozen=True)
class Place:
    """A schema that applies regex ``P`` somewhere, arguments putting ``text`` there, and
    whether the call is valid given whether ``P`` matches ``text``."""

    name: str
    schema: Callable[[str], dict[str, Any]]
    args: Callable[[str], dict[str, Any]]
    valid_if_match: bool  # False: a match makes the call invalid

    def wrap(self, pattern: str, exact: bool) -> dict[str, Any]:
        doc = self.schema(pattern)
        if exact:  # multipleOf sends the schema to the exact (jsonschema) path
            doc.setdefault("properties", {})["n"] = {"type": "number", "multipleOf": 0.5}
        return doc

    def pointer(self, pattern: str) -> str:
        escaped = pattern.replace("~", "~0").replace("/", "~1")
        return {
            "value": "/properties/v/pattern",
            "item": "/properties/v/items/pattern",
            "ref": "/$defs/s/pattern",
            "key": f"/patternProperties/{escaped}",
            "additional": f"/patternProperties/{escaped}",
            "names": "/propertyNames/pattern",
        }[self.name]


PLACES = (
    Place(
        "value",
        lambda p: {"type": "object", "properties": {"v": {"type": "string", "pattern": p}}},
        lambda t: {"v": t},
        True,
    ),
    Place(
        "item",
        lambda p: {
            "type": "object",
            "properties": {"v": {"type": "array", "items": {"pattern": p}}},
        },
        lambda t: {"v": [t]},
        True,
    ),
    Place(
        "ref",
        lambda p: {
            "$defs": {"s": {"type": "string", "pattern": p}},
            "type": "object",
            "properties": {
                "o": {"type": "object", "properties": {"v": {"$ref": "#/$defs/s"}}},
            },
        },
        lambda t: {"o": {"v": t}},
        True,
    ),
    Place(  # a key the pattern matches must hold an integer; others hold strings
        "key",
        lambda p: {
            "type": "object",
            "patternProperties": {p: {"type": "integer"}},
            "additionalProperties": {"type": "string"},
        },
        lambda t: {t: "s"},
        False,
    ),
    Place(
        "additional",
        lambda p: {"type": "object", "patternProperties": {p: {}}, "additionalProperties": False},
        lambda t: {t: 1},
        True,
    ),
    Place(
        "names",
        lambda p: {"type": "object", "propertyNames": {"pattern": p}},
        lambda t: {t: 1},
        True,
    ),
)


def _kernel(place: Place, pattern: str, exact: bool) -> Kernel:
    kernel = Kernel()
    kernel.register_schema("t", place.wrap(pattern, exact))
    return kernel


def _valid(kernel: Kernel, args: dict[str, Any]) -> bool:
    """Whether rung 1 passes the call (a rung-1 catch is DENY/MALFORMED by preflight)."""
    v = kernel.decide(ToolCall("t", json.dumps(args)))
    return not (v.by == "preflight" and v.reason == Reason.MALFORMED)


def _expect(place: Place, matches: bool) -> bool:
    return matches if place.valid_if_match else not matches


def _check_dialect(place: Place, exact: bool) -> None:
    """ECMA-262's ``$`` matches only at the very end, never before a final newline
    (Python's ``re`` does): a cheap probe that the place's regex is not on ``re``."""
    kernel = _kernel(place, "^a$", exact)
    for text, matches in (("a", True), ("a\n", False)):
        assert _valid(kernel, place.args(text)) == _expect(place, matches), (place.name, text)


# -------------------------------------------------- catastrophic patterns, both paths
@pytest.mark.fak_theorem("A7.6")
@settings(max_examples=80, deadline=None)
@given(_catastrophic(), _ADVERSARIAL, st.sampled_from(PLACES), st.booleans())
def test_catastrophic_schema_patterns_decide_as_the_predicate_says(
    case: tuple[str, Any], text: str, place: Place, exact: bool
) -> None:
    pattern, matches = case
    _check_dialect(place, exact)  # before any long text is searched
    kernel = _kernel(place, pattern, exact)
    assert _valid(kernel, place.args(text)) == _expect(place, matches(text)), (pattern, len(text))


# ---------------------------------------------------- refused at every entry, pointer
_BACKTRACKING_ONLY = st.sampled_from(
    [
        r"(a)\1",
        r"(?P<n>a)(?P=n)",
        r"(?=a)b",
        r"(?!a)b",
        r"(?<=a)b",
        r"(?<!a)b",
        r"^(?=(a+)+$)",
        r"(?>a+)b",
        r"a\Z",
    ]
)


@st.composite
def _refused_schema(draw: st.DrawFn) -> tuple[dict[str, Any], str, str]:
    place = draw(st.sampled_from(PLACES))
    bad = draw(st.sampled_from(["", "x", "[ab]"])) + draw(_BACKTRACKING_ONLY)
    return place.wrap(bad, draw(st.booleans())), place.pointer(bad), bad


def _refusal_is_clear(message: str, where: str, bad: str) -> None:
    assert f"at {where} ({bad!r})" in message, message
    assert "linear time" in message and "lookahead" in message, message


@pytest.mark.fak_theorem("A7.6")
@settings(max_examples=80, deadline=None)
@given(_refused_schema(), st.sampled_from(["register_schema", "register_tool", "policy"]))
def test_a_pattern_only_backtracking_can_run_is_refused_where_schemas_enter(
    case: tuple[dict[str, Any], str, str], entry: str
) -> None:
    schema, where, bad = case
    kernel = Kernel()
    enter: dict[str, Callable[[], object]] = {
        "register_schema": lambda: kernel.register_schema("t", schema),
        "register_tool": lambda: kernel.register_tool("t", lambda args: "ok", schema=schema),
        "policy": lambda: load_policy(
            json.dumps({"allow": ["t"], "schemas": {"t": schema}}), fmt="json"
        ),
    }
    with pytest.raises((InvalidSchemaError, PolicyError)) as err:
        enter[entry]()
    if entry == "policy":
        assert "schemas.t" in str(err.value), err.value
    _refusal_is_clear(str(err.value), where, bad)
    assert "t" not in kernel.schemas  # nothing half-registered, no fallback engine


@pytest.mark.fak_theorem("A7.6")
def test_the_exact_path_refuses_unevaluated_properties_beside_pattern_properties() -> None:
    schema = {
        "type": "object",
        "patternProperties": {"^x_": {}},
        "unevaluatedProperties": False,
        "properties": {"n": {"multipleOf": 3}},
    }
    with pytest.raises(InvalidSchemaError, match="use additionalProperties instead"):
        compile_schema(schema, "t")
    del schema["properties"]  # the fast path runs it on the linear engine
    compiled = compile_schema(schema, "t")
    assert compiled.is_valid({"x_1": 1}) and not compiled.is_valid({"y": 1})


@pytest.mark.fak_theorem("A7.6")
@pytest.mark.parametrize(
    ("schema", "where"),
    [
        (  # jsonschema-rs reports paths inside an embedded resource relative to it
            {
                "$defs": {"s": {"$id": "https://example.com/s", "pattern": "a(?=b)"}},
                "properties": {"v": {"$ref": "https://example.com/s"}},
            },
            "/$defs/s/pattern",
        ),
        (
            {
                "$defs": {
                    "s": {
                        "$id": "https://example.com/s",
                        "properties": {"w": {"pattern": "a(?=b)"}},
                    }
                },
                "properties": {"v": {"$ref": "https://example.com/s"}},
            },
            "/$defs/s/properties/w/pattern",
        ),
        (  # the resource-relative path names a root patternProperties without that key
            {
                "$defs": {
                    "s": {"$id": "https://example.com/s", "patternProperties": {"a(?=b)": {}}}
                },
                "patternProperties": {"^ok": {}},
                "properties": {"v": {"$ref": "https://example.com/s"}},
            },
            "/$defs/s/patternProperties/a(?=b)",
        ),
        (  # the same text earlier in the document, where no regex applies: the applied one
            {"examples": [{"pattern": "a(?=b)"}], "properties": {"v": {"pattern": "a(?=b)"}}},
            "/properties/v/pattern",
        ),
        (
            {
                "examples": [{"patternProperties": {"a(?=b)": {}}}],
                "patternProperties": {"a(?=b)": {}},
            },
            "/patternProperties/a(?=b)",
        ),
        (
            {
                "examples": [{"patternProperties": {"a(?=b)": {}}}],
                "properties": {"p": {"patternProperties": {"a(?=b)": {}}}},
            },
            "/properties/p/patternProperties/a(?=b)",
        ),
    ],
)
def test_a_refused_pattern_is_located_where_it_applies(schema: dict[str, Any], where: str) -> None:
    with pytest.raises(InvalidSchemaError) as err:
        compile_schema(schema, "t")
    _refusal_is_clear(str(err.value), where, "a(?=b)")


# ------------------------------------------------- the two paths read the same dialect
_ATOMS = st.sampled_from(
    ["a", "b", "1", ".", r"\d", r"\D", r"\w", r"\W", r"\s", r"\S", "[ab]", "[^a]", r"[\d]", "é"]
)
_PATTERNS = st.tuples(
    st.sampled_from(["", "^"]),
    st.recursive(
        _ATOMS,
        lambda inner: st.one_of(
            _quantified(inner),
            st.lists(inner, min_size=2, max_size=3).map("".join),
            st.lists(inner, min_size=2, max_size=3).map("|".join),
        ),
        max_leaves=5,
    ),
    st.sampled_from(["", "$"]),
).map("".join)
_TEXTS = st.text(alphabet="ab1٣é \n\u00a0\ufeff\t_", max_size=6)


@pytest.mark.fak_theorem("A7.6")
@settings(max_examples=200, deadline=None)
@given(_PATTERNS, _TEXTS, st.sampled_from(PLACES))
def test_both_paths_give_the_same_verdict(pattern: str, text: str, place: Place) -> None:
    fast = compile_schema(place.wrap(pattern, exact=False))
    exact = compile_schema(place.wrap(pattern, exact=True))
    args = place.args(text)
    assert fast.is_valid(args) == exact.is_valid(args), (pattern, text)


# JSON Schema Test Suite, optional/ecmascript-regex (ECMA-262's answers)
_ECMA = [
    ("^abc$", "abc\n", False),
    ("^abc$", "abc", True),
    (r"^\d$", "\u0967", False),  # DEVANAGARI DIGIT ONE: \d is ASCII
    (r"^\w$", "é", False),  # \w is ASCII
    (r"^\W$", "é", True),
    (r"^\s$", "\u00a0", True),  # NO-BREAK SPACE is white space
    (r"^\s$", "\ufeff", True),  # ZERO WIDTH NO-BREAK SPACE too
    (r"^\s$", "\u2029", True),  # PARAGRAPH SEPARATOR is a line terminator
    (r"^\S$", "\u00a0", False),
    (r"^\t$", "\t", True),
    (r"^\u0041$", "A", True),
]


@pytest.mark.fak_theorem("A7.6")
@pytest.mark.parametrize("exact", [False, True], ids=["fast", "exact"])
@pytest.mark.parametrize(("pattern", "text", "matches"), _ECMA)
def test_schema_patterns_follow_ecma_262(
    pattern: str, text: str, matches: bool, exact: bool
) -> None:
    for place in PLACES:
        compiled = compile_schema(place.wrap(pattern, exact))
        assert compiled.is_valid(place.args(text)) == _expect(place, matches), place.name
