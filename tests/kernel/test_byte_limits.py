"""A7.5: the arguments limit counts bytes of UTF-8, right at the boundary, for str and bytes.

The oracle measures each character from its code point (1, 2, 3 or 4 bytes), never by
encoding, and the texts are built to land exactly on the limit or one byte over it.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fak_core import Kernel, Policy, ToolCall
from fak_core.jsonargs import args_nbytes

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
