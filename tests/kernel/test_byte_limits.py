"""A7.5: the arguments limit counts bytes of UTF-8, right at the boundary, for str and bytes.

The oracle measures each character from its code point (1, 2, 3 or 4 bytes), never by
encoding, and the texts are built to land exactly on the limit or one byte over it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fak_core import Kernel, Policy, Reason, ToolCall
from fak_core.jsonargs import ArgsError, args_nbytes, parse_args

# One strategy per UTF-8 width; no quote, backslash or control character (so the text
# stays one JSON string) and no surrogate.
WIDTHS = {
    1: st.characters(min_codepoint=0x20, max_codepoint=0x7E).filter(lambda c: c not in '"\\'),
    2: st.characters(min_codepoint=0xA0, max_codepoint=0x7FF),
    3: st.characters(min_codepoint=0x800, max_codepoint=0xFFFF, exclude_categories=("Cs",)),
    4: st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF),
}
OVERHEAD = len('{"a":""}')


def width(ch: str) -> int:
    cp = ord(ch)
    return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4


@st.composite
def at_the_limit(draw: st.DrawFn) -> tuple[int, str]:
    """(limit, a JSON object text of exactly ``limit`` bytes holding a multi-byte character)."""
    limit = draw(st.integers(OVERHEAD + 4, 300))
    budget = limit - OVERHEAD
    chars = [draw(st.one_of(WIDTHS[2], WIDTHS[3], WIDTHS[4]))]
    used = width(chars[0])
    for c in draw(st.lists(st.one_of(*WIDTHS.values()), max_size=24)):
        if used + width(c) <= budget:
            chars.append(c)
            used += width(c)
    chars.insert(draw(st.integers(0, len(chars))), "x" * (budget - used))  # ASCII to fill
    return limit, '{"a":"' + "".join(chars) + '"}'


def _verdict(k: Kernel, args: str | bytes) -> tuple[str, str, str]:
    v = k.decide(ToolCall("t", args))
    return k.kinds.name(v.kind), k.reasons.name(v.reason), v.claim


@pytest.mark.fak_theorem("A7.5")
@settings(suppress_health_check=[HealthCheck.too_slow])
@given(at_the_limit(), st.booleans(), st.sampled_from(["ascii", "wider"]))
def test_the_limit_is_bytes_exactly_at_the_boundary(
    case: tuple[int, str], as_bytes: bool, grow: str
) -> None:
    limit, text = case
    assert sum(width(c) for c in text) == limit  # the construction, checked by the oracle
    k = Kernel(Policy(allow=("t",)), max_args_bytes=limit)
    fits = text.encode() if as_bytes else text
    assert _verdict(k, fits) == ("ALLOW", "NONE", "")
    # one more byte: an extra ASCII character, or one character a byte wider (same count)
    narrower = [i for i in range(6, len(text) - 2) if width(text[i]) < 4]
    if grow == "ascii" or not narrower:
        over = text[:-2] + "x" + text[-2:]
    else:
        i = narrower[0]
        wider = {1: "\u00e9", 2: "\u20ac", 3: "\U0001f600"}[width(text[i])]
        over = text[:i] + wider + text[i + 1 :]
    assert sum(width(c) for c in over) == limit + 1
    assert len(over) <= limit  # fewer characters than the limit: a count of them passes
    kind, reason, claim = _verdict(k, over.encode() if as_bytes else over)
    assert (kind, reason) == ("DENY", "OVERSIZE")
    assert claim == f"arguments are {limit + 1} bytes, over the {limit}-byte limit: send less"


@pytest.mark.fak_theorem("A7.5")
@pytest.mark.parametrize("w", [1, 2, 3, 4])
def test_the_default_limit_at_one_mebibyte_per_character_width(w: int) -> None:
    ch = {1: "x", 2: "\u00e9", 3: "\u20ac", 4: "\U0001f600"}[w]
    budget = (1 << 20) - OVERHEAD
    body = ch * (budget // w) + "x" * (budget % w)
    text = '{"a":"' + body + '"}'
    k = Kernel(Policy(allow=("t",)))
    assert args_nbytes(text) == 1 << 20 == len(text.encode())
    assert _verdict(k, text)[0] == "ALLOW"
    over = '{"a":"' + body + 'x"}'
    assert _verdict(k, over)[:2] == ("DENY", "OVERSIZE")


@pytest.mark.fak_theorem("A7.5")
@pytest.mark.parametrize("limit", [OVERHEAD + 3, 64, 301])
@pytest.mark.parametrize("at", [0, 1, -1])
def test_a_lone_surrogate_counts_three_bytes(limit: int, at: int) -> None:
    """A lone surrogate (a host's `str`; JSON's "\\ud800" decodes to one) is 3 bytes: at
    the limit it is refused as not UTF-8, never for size; one byte over, for size."""
    budget = limit - OVERHEAD - 3
    body = ["x"] * budget
    body.insert(at % (budget + 1), "\ud800")
    text = '{"a":"' + "".join(body) + '"}'
    assert sum(3 if "\ud800" <= c <= "\udfff" else width(c) for c in text) == limit
    k = Kernel(Policy(allow=("t",)), max_args_bytes=limit)
    kind, reason, _ = _verdict(k, text)
    assert (kind, reason) == ("DENY", "MALFORMED")
    kind, reason, claim = _verdict(k, text[:-2] + "x" + text[-2:])
    assert (kind, reason) == ("DENY", "OVERSIZE")
    assert claim == f"arguments are {limit + 1} bytes, over the {limit}-byte limit: send less"


# -- the limit changes nothing else: every kind of text of exactly L bytes ---------------
def _nest(levels: int) -> str:
    """An object ``levels`` deep: the object, then ``levels - 1`` arrays inside it."""
    return '{"a":' + "[" * (levels - 1) + "]" * (levels - 1) + "}"


def _nest_objects(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


#: (text, what rung 0 says of it under no size pressure); the detail is the documented one
KINDS: list[tuple[str, Any]] = [
    ('{"a": "é€😀", "b": [1, {"c": null}], "d": "x:y"}', "object"),
    ("", {}),
    (_nest(64), "object"),
    (_nest(65), "arguments nest deeper than 64 levels: flatten them"),
    (_nest_objects(64), "object"),
    (_nest_objects(65), "arguments nest deeper than 64 levels: flatten them"),
    ('{"a": "q\\":z", "b": "\\" :"}', "object"),  # key-like text inside values
    ("[" * 1100 + "]" * 1100, "arguments are not valid JSON (nesting deeper than 64 levels)"),
    ('["é"]', "arguments are an array, not a JSON object"),
    ('"é"', "arguments are a string, not a JSON object"),
    ("42", "arguments are a number, not a JSON object"),
    ("4.5", "arguments are a number, not a JSON object"),
    ("true", "arguments are a boolean, not a JSON object"),
    ("null", "arguments are null, not a JSON object"),
    ('{"a": 1, "a": 2}', "arguments repeat a key in one object"),
    ('{"a": {"b": 1, "b": 1}, "c": "::"}', "arguments repeat a key in one object"),
    ('{"a": "x"', "arguments are not valid JSON"),
]


@pytest.mark.fak_theorem("A7.5")
@pytest.mark.parametrize("as_bytes", [False, True])
@pytest.mark.parametrize(("text", "said"), KINDS, ids=[str(i) for i in range(len(KINDS))])
def test_at_the_limit_rung_0_decides_on_content_alone(text: str, said: Any, as_bytes: bool) -> None:
    """Padded with JSON white space to exactly L bytes, each kind of text is decided as
    the standard library and the documented rules say (an object parsed to the value
    `json` reads, anything else refused MALFORMED saying what it is), never OVERSIZE;
    one byte more is OVERSIZE."""
    limit = max(2300, 4 * len(text))
    size = sum(width(c) for c in text)
    padded = text + (" \t\r\n" * limit)[: limit - size]  # every JSON white space
    raw: str | bytes = padded.encode() if as_bytes else padded
    if said == "object" or isinstance(said, dict):
        wanted = said if isinstance(said, dict) else json.loads(text)
        assert parse_args(raw, max_bytes=limit) == wanted
    else:
        with pytest.raises(ArgsError) as err:
            parse_args(raw, max_bytes=limit)
        assert err.value.reason == Reason.MALFORMED and err.value.detail.startswith(said), (
            err.value.detail
        )
        if "nest" not in said:  # the parser's own reason, not another one's
            assert "nesting" not in err.value.detail and "nest " not in err.value.detail
    over = raw + (b" " if as_bytes else " ")
    with pytest.raises(ArgsError) as err:
        parse_args(over, max_bytes=limit)
    assert err.value.reason == Reason.OVERSIZE
    assert (
        err.value.detail
        == f"arguments are {limit + 1} bytes, over the {limit}-byte limit: send less"
    )
