"""The gateway's JSON writer and the depth check, against the standard library.

``dumps`` falls back to its own iterative writer for what orjson refuses (deeper than 254
levels, integers over 64 bits, lone surrogates). The oracle reads the written text back
with ``json`` and compares it with the value (a non-finite float reads back as null), and
the depth check is judged by a depth counted by construction.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core.jsondepth import JsonTooDeep, check_depth, dumps

#: every scalar kind, with the ones orjson refuses: big integers and lone surrogates
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**64, max_value=2**80) | st.integers(max_value=-(2**63) - 1),
    st.floats(),
    st.text(st.characters(codec=None, exclude_categories=()), max_size=6),
    st.integers(0xD800, 0xDFFF).map(chr),
)
#: string keys, and integer keys (written as their decimal string, as ``json`` writes them;
#: seven digits, so never equal to a string key of at most four characters)
KEYS = st.text(st.characters(codec=None, exclude_categories=()), max_size=4) | st.integers(
    10**6, 10**7 - 1
)


def values(leaves: int) -> st.SearchStrategy[Any]:
    return st.recursive(
        SCALARS,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
        max_leaves=leaves,
    )


def expected(value: Any) -> Any:
    """What a JSON reader gets back: a non-finite float is null, a tuple an array, an
    integer key its decimal string."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): expected(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [expected(v) for v in value]
    return value


def same(a: Any, b: Any) -> bool:
    """Equality that tells ``1`` from ``1.0`` and ``True`` from ``1`` (and -0.0 from 0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@pytest.mark.fak_theorem("D10.7")
@given(value=values(12), depth=st.sampled_from([0, 1, 2, 253, 254, 255, 300]))
def test_the_writer_writes_every_value_at_every_depth(value: Any, depth: int) -> None:
    """Wrapped ``depth`` levels deep in alternating arrays and objects (past orjson's 254
    the fallback writes it all), the text reads back as the value."""
    doc: Any = value
    for level in range(depth):
        doc = [doc] if level % 2 else {"k": doc, "n": level}
    out = dumps(doc)
    assert isinstance(out, bytes)
    assert same(json.loads(out), expected(doc)), out[:200]


@pytest.mark.fak_theorem("D10.7")
@given(value=values(12))
def test_the_fallback_writes_compact_ascii_as_the_standard_library_does(value: Any) -> None:
    """Past orjson's depth, the writer's text is the standard library's compact ASCII
    text (non-finite floats written null), character for character."""
    doc: Any = [value, {"a": [True, False, None]}, ()]
    for _ in range(255):
        doc = [doc]
    want = json.dumps(expected(doc), separators=(",", ":"), ensure_ascii=True)
    assert dumps(doc) == want.encode("ascii")


@pytest.mark.fak_theorem("D10.7")
@pytest.mark.parametrize("bad", [object(), {1, 2}, b"x", 1j])
def test_what_is_not_json_data_is_a_type_error_in_the_fallback_too(bad: Any) -> None:
    doc: Any = bad
    for _ in range(300):
        doc = [doc]
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps(doc)
    with pytest.raises(TypeError):
        dumps(bad)


def nested(depth: int, bracket: str) -> str:
    close = {"[": "]", "{": "}"}
    opener = '{"k":' if bracket == "{" else "["
    text = "1"
    for _ in range(depth):
        text = opener + text + close[bracket]
    return text


@pytest.mark.fak_theorem("D10.7")
@given(
    depth=st.integers(0, 12),
    limit=st.integers(0, 12),
    bracket=st.sampled_from(["[", "{"]),
    siblings=st.integers(0, 12),
    as_str=st.booleans(),
    pad=st.sampled_from(["", "\u00e9", "\U0001f600", "[{", '\\"[']),
)
def test_the_depth_check_refuses_exactly_past_the_limit(
    depth: int, limit: int, bracket: str, siblings: int, as_str: bool, pad: str
) -> None:
    """A chain ``depth`` deep beside ``siblings`` shallow arrays (so the bracket count alone
    never decides), with brackets inside a string, in ``str`` or UTF-8 ``bytes``."""
    total = max(depth, 1 if siblings else 0) + 1
    text = "[" + ",".join([nested(depth, bracket), *(["[]"] * siblings)]) + f',"{pad}"]'
    json.loads(text)  # valid JSON, as every caller has checked before
    raw: str | bytes = text if as_str else text.encode("utf-8")
    if total > limit:
        with pytest.raises(JsonTooDeep, match=f"deeper than {limit} levels"):
            check_depth(raw, limit)
    else:
        check_depth(raw, limit)


@pytest.mark.fak_theorem("D10.7")
@pytest.mark.parametrize("value", [2**64, -(2**70), "\ud800", "a\udfffb", [2**64], {"k": 2**65}])
def test_what_orjson_refuses_at_the_top_is_written_too(value: Any) -> None:
    """A lone scalar orjson refuses (an integer over 64 bits, a lone surrogate) is the
    whole document the fallback writes, as is a container holding one."""
    out = dumps(value)
    assert out == json.dumps(value, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    assert same(json.loads(out), value)
