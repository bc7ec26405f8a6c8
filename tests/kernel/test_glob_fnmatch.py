"""D2.6 on the compiled glob itself: ``Glob`` against ``fnmatch.fnmatchcase`` on every
bracket shape ``fnmatch`` knows (negated, with ``]`` first, ranges, empty and reversed
ranges, unclosed), the literal pieces the guard's gate reads, and the bounded memory of
character masks.

The oracles never call the code under test: ``fnmatch.fnmatchcase`` decides matches, and a
tokeniser written here (one possessive regular expression, reading brackets as
``fnmatch.translate`` does) finds the literal pieces and the simple shapes.
"""

from __future__ import annotations

import fnmatch
import itertools
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core.globmatch import Glob, compile_glob

MASK_MEMO_BOUND = 4096  # D2.6: the characters one compiled glob remembers the states of
ALPHABET = "ab/.-!]^\\z[c"
LITERALS = ("a", "b", "/", ".", "-", "!", "]", "^", "\\", "z", "ab", "a/b")
WILDS = ("*", "**", "?", "*/", "/*")
BRACKETS = (
    "[ab]",
    "[!a]",
    "[a-c]",
    "[!a-c]",
    "[]a]",
    "[!]a]",
    "[]]",
    "[!]]",
    "[a-]",
    "[-a]",
    "[z-a]",
    "[\\]",
    "[^a]",
    "[[]",
    "[/]",
    "[!/]",
    "[--/]",
)
UNCLOSED = ("[", "[!", "[]", "[!]", "[a", "[!]a")
# a token: a star run, "?", a bracket fnmatch closes (its extent as fnmatch.translate
# finds it: "!" and a "]" right after "[" are part of it; possessive, so an unclosed
# bracket is a literal "["), or one literal character
_TOKEN = re.compile(r"\*+|\?|\[!?+\]?+[^\]]*+\]|.", re.DOTALL)


def _tokens(glob: str) -> list[str]:
    return _TOKEN.findall(glob)


def _is_literal(token: str) -> bool:
    return len(token) == 1 and token not in "*?"


def _pieces(glob: str) -> tuple[str, ...]:
    """The runs of literal characters between wildcards and classes, cut at ``/``."""
    runs = re.split("\x00", "".join(t if _is_literal(t) else "\x00" for t in _tokens(glob)))
    return tuple(p for r in runs for p in r.split("/") if p)


def _simple(glob: str) -> bool:
    """A literal, or a literal followed by one star run."""
    tokens = _tokens(glob)
    if tokens and tokens[-1].startswith("*"):
        tokens = tokens[:-1]
    return all(_is_literal(t) for t in tokens)


def _starts(text: str) -> list[int]:
    return [0] + [i + 1 for i, c in enumerate(text) if c == "/"]


@st.composite
def glob_and_text(draw: st.DrawFn) -> tuple[str, str]:
    """A glob of any shape and a text that is often an instance of it (after a part,
    within noise), so matches, near misses and misses are all common."""
    tokens = draw(st.lists(st.sampled_from(LITERALS + WILDS + BRACKETS + UNCLOSED), max_size=6))
    chars = st.sampled_from(ALPHABET)
    parts: list[str] = []
    for t in tokens:
        if t in WILDS:
            fill = draw(st.text(chars, max_size=3))
            parts.append(t.replace("**", "*").replace("*", fill).replace("?", draw(chars)))
        elif t in BRACKETS:
            members = [c for c in ALPHABET if fnmatch.fnmatchcase(c, t)]
            parts.append(draw(st.sampled_from(members)) if members else draw(chars))
        else:
            parts.append(t)
    instance = "".join(parts)
    if draw(st.booleans(), label="near miss"):
        cut = draw(st.integers(0, len(instance)))
        instance = instance[:cut] + draw(st.text(chars, max_size=2)) + instance[cut + 1 :]
    before = draw(st.sampled_from(["", "/", "a/", "x/../", "[/", "b"]))
    after = draw(st.sampled_from(["", "", "/", "a", "]"]))
    return "".join(tokens), before + instance + after


@pytest.mark.fak_theorem("D2.6")
@given(glob_and_text(), st.booleans())
def test_a_compiled_glob_matches_what_fnmatchcase_matches(
    case: tuple[str, str], fresh: bool
) -> None:
    glob, text = case
    g = Glob(glob) if fresh else compile_glob(glob)
    anchored = fnmatch.fnmatchcase(text, glob)
    anywhere = any(fnmatch.fnmatchcase(text[i:], glob) for i in _starts(text))
    assert g.match(text) == anchored, (glob, text)
    assert g.match(text, anchored=False) == anywhere, (glob, text)
    hit, steps = g.run(text, True)
    assert hit == anchored and steps <= len(text)
    hit, steps = g.run(text, False)
    assert hit == anywhere and steps == len(text)
    # the gate's pieces: exactly the glob's literal runs, each held by every text it matches
    assert g.pieces == _pieces(glob), glob
    if anywhere:
        assert all(p in text for p in g.pieces)
    assert g.simple == _simple(glob), glob


@pytest.mark.fak_theorem("D2.6")
@given(st.sampled_from(BRACKETS + UNCLOSED), st.sampled_from(ALPHABET + "xé"))
def test_every_bracket_shape_reads_one_character_as_fnmatch_does(bracket: str, ch: str) -> None:
    for glob in (bracket, "a" + bracket, bracket + "*", "?" + bracket + "b"):
        for text in (ch, "a" + ch, ch + "zz", "a" + ch + "b", "/" + ch):
            assert Glob(glob).match(text) == fnmatch.fnmatchcase(text, glob), (glob, text)


EDGE_GLOBS = (
    *("", "*", "**", "?", "a", "ab", "a/b", "a*", "ab*", "a**", "**a", "a**b", "a?*", "?a*"),
    *("*a", "*a*", "a*b*a", "*/a", "a/*", "a/**", "??", "a/"),
    *("[", "a[", "[!", "a[!", "[]", "[!]", "[a", "[!a", "[!]a", "a[b"),
    *("[]]", "[!]]", "[]a]", "[!]a]", "[a-b]", "[b-a]", "[!a-b]*", "*[!a]", "a[!/]b"),
    *("[a-]", "[-a]", "[\\]", "[[]", "[!]]*", "[]]*[!]]", "[/]a", "*[]]"),
)
EDGE_TEXTS = tuple(
    "".join(chars) for n in range(4) for chars in itertools.product("ab/]![-", repeat=n)
)


@pytest.mark.fak_theorem("D2.6")
@pytest.mark.parametrize("glob", EDGE_GLOBS)
def test_every_edge_glob_on_every_short_text(glob: str) -> None:
    """Runs of stars, brackets closed, open or empty, ranges forward and reversed, literal
    shapes, on every text of up to three characters over the glob alphabet."""
    g = Glob(glob)
    assert g.pieces == _pieces(glob) and g.simple == _simple(glob)
    for text in EDGE_TEXTS:
        anchored = fnmatch.fnmatchcase(text, glob)
        anywhere = any(fnmatch.fnmatchcase(text[i:], glob) for i in _starts(text))
        assert g.match(text) == anchored, (glob, text)
        assert g.run(text, False) == (anywhere, len(text)), (glob, text)


@pytest.mark.fak_theorem("D2.6")
@pytest.mark.parametrize("glob", ["*[!a]?", "*?x*", "[!a]*b", "?*?"])
def test_a_globs_memory_of_character_masks_is_bounded(glob: str) -> None:
    """More distinct characters than the bound, in one text and then one at a time across
    the bound: the memory stays within it and every answer is still fnmatch's."""
    g = Glob(glob)
    alphabet = [chr(0x4E00 + i) for i in range(MASK_MEMO_BOUND + 37)]
    text = "".join(alphabet[: MASK_MEMO_BOUND - 40]) + "b"
    assert g.match(text) == fnmatch.fnmatchcase(text, glob)
    for ch in alphabet[MASK_MEMO_BOUND - 40 :]:
        for text in (ch, ch + "b", "a" + ch + "x"):
            assert g.match(text) == fnmatch.fnmatchcase(text, glob), text
            assert len(g._memo) <= MASK_MEMO_BOUND
