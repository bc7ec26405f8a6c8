"""Rung 0's documented limits at their boundaries: nesting (the top-level object is level
1) and size in bytes, for str and bytes, against an independent oracle on the standard
library's parse (an audit found that counting the top level as 0 let 65-level arguments
pass the 64-level limit, and nothing noticed)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fak_core.jsonargs import ArgsError, parse_args
from fak_core.reasons import Reason

scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3)


def depth(v: Any) -> int:
    """Nesting levels of a parsed JSON value: a container is one level more than its
    deepest child, a scalar none (so a flat object is 1)."""
    if isinstance(v, dict):
        return 1 + max((depth(x) for x in v.values()), default=0)
    if isinstance(v, list):
        return 1 + max((depth(x) for x in v), default=0)
    return 0


@st.composite
def nested(draw: st.DrawFn, levels: int) -> dict[str, Any]:
    """An object nested exactly ``levels`` deep, objects and arrays mixed, the deep branch
    anywhere among scalar and shallow siblings."""
    value: Any = draw(scalars)
    for _ in range(levels - 1):
        value = {draw(st.text(max_size=2)): value} if draw(st.booleans()) else [value]
        if draw(st.booleans()):  # a shallow sibling
            sib = draw(scalars)
            value = {**value, "~": sib} if isinstance(value, dict) else [sib, *value]
    siblings = draw(st.dictionaries(st.text(min_size=1, max_size=2), scalars, max_size=2))
    top = {**siblings, "deep": value} if draw(st.booleans()) else {"deep": value, **siblings}
    return top


@pytest.mark.fak_theorem("A7.4")
@given(st.data(), st.integers(min_value=1, max_value=70), st.integers(-2, 2), st.booleans())
def test_nesting_limit_is_exact_at_its_boundary(
    data: st.DataObject, max_depth: int, offset: int, as_bytes: bool
) -> None:
    levels = max(1, max_depth + offset)
    doc = data.draw(nested(levels))
    text = json.dumps(doc)
    expected = json.loads(text)
    raw: str | bytes = text.encode() if as_bytes else text
    if depth(expected) > max_depth:
        with pytest.raises(ArgsError) as err:
            parse_args(raw, max_depth=max_depth)
        assert err.value.reason == Reason.MALFORMED
        assert err.value.detail == (f"arguments nest deeper than {max_depth} levels: flatten them")
    else:
        assert parse_args(raw, max_depth=max_depth) == expected


@pytest.mark.fak_theorem("A7.4")
@given(
    st.dictionaries(
        st.text(max_size=4) | st.text("a€😀", min_size=4, max_size=8), scalars, max_size=4
    ),
    st.integers(-1, 1),
    st.booleans(),
)
@example({"😀😀😀😀😀😀": "😀"}, -1, False)  # 15 characters, 36 bytes: over half the limit
def test_size_limit_is_exact_at_its_boundary(
    doc: dict[str, Any], delta: int, as_bytes: bool
) -> None:
    text = json.dumps(doc, ensure_ascii=False)
    raw: str | bytes = text.encode() if as_bytes else text
    size = len(text.encode("utf-8"))  # the limit counts UTF-8 bytes, str or bytes (A7.5)
    limit = size + delta
    if size > limit:
        with pytest.raises(ArgsError) as err:
            parse_args(raw, max_bytes=limit)
        assert err.value.reason == Reason.OVERSIZE
        assert err.value.detail == (
            f"arguments are {size} bytes, over the {limit}-byte limit: send less"
        )
    else:
        assert parse_args(raw, max_bytes=limit) == doc


@pytest.mark.fak_theorem("A7.4")
def test_nesting_past_the_json_readers_own_limit_names_ours() -> None:
    """orjson stops at its own depth (about 1024): the refusal still names our limit."""
    text = '{"a":' * 1100 + "1" + "}" * 1100
    with pytest.raises(ArgsError) as err:
        parse_args(text, max_depth=64)
    assert err.value.detail == (
        "arguments are not valid JSON (nesting deeper than 64 levels): send a JSON object"
    )


@pytest.mark.fak_theorem("A7.4")
@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("null", "null"),
        ("[1]", "an array"),
        ('"s"', "a string"),
        ("1", "a number"),
        ("1.5", "a number"),
        ("true", "a boolean"),
    ],
)
def test_a_top_level_that_is_not_an_object_is_named(text: str, word: str) -> None:
    for raw in (text, text.encode()):
        with pytest.raises(ArgsError) as err:
            parse_args(raw)
        assert err.value.detail == (
            f"arguments are {word}, not a JSON object: wrap them in {{...}}"
        )


@pytest.mark.fak_theorem("A7.4")
def test_blank_arguments_and_containers_only_tops() -> None:
    """JSON white space alone is the empty object; a top level whose every value is a
    container is measured like any other; a syntax error does not blame the nesting."""
    for blank in (" \t\r\n", b" \t\r\n", "", b""):
        assert parse_args(blank) == {}
    for doc in ({"a": {"b": {"c": 1}}}, {"a": [[1]]}, {"a": {}, "b": [[]]}):
        with pytest.raises(ArgsError, match="nest deeper than 2 levels"):
            parse_args(json.dumps(doc), max_depth=2)
        assert parse_args(json.dumps(doc), max_depth=3) == doc
    with pytest.raises(ArgsError) as err:
        parse_args("{bad")
    assert "nesting" not in err.value.detail


@pytest.mark.fak_theorem("A7.4")
def test_a_key_like_text_inside_a_value_is_not_a_duplicate_key() -> None:
    """The duplicate check counts `"…":` patterns first; one inside a string value is not
    a key, and the exact re-read must then find no duplicate."""
    for raw in ('{"a": "\\"k\\": 1"}', b'{"a": "\\"k\\": 1"}'):
        assert parse_args(raw) == {"a": '"k": 1'}
    with pytest.raises(ArgsError, match="repeat a key"):
        parse_args('{"a": "\\"a\\": 1", "a": 2}')
