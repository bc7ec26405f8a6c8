"""D2.6 beyond the reported shapes: every shape of glob against fnmatch with an exact step
count, the bounded memo of compiled globs, and sink classification (keyed or not) against
the implementation it replaced.

The oracles are the fnmatch-based matcher and the backtracking classifier of
``tests/kernel/test_guards.py`` (written before the linear code, never calling it).
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core import floor, globmatch, selfmodify, sinks
from fak_core.globmatch import compile_glob

from .test_guards import _old_glob_matches, _old_looks_external


def _old_classification(value: str, keyed: bool) -> bool:
    v = value.strip()
    if v and keyed:  # under a destination key anything but a bare word (or a number)
        return not re.fullmatch(r"[^\W_]+", v.replace("_", "").replace("-", "")) or v.isdigit()
    return _old_looks_external(value)


_LITERAL_TOKENS = ("a", "b", "ab", "/", ".", "a.b")
_WILD_TOKENS = ("*", "?", "[ab]", "[!a]", "*/", "/*")
_PATH_TOKENS = st.sampled_from(["a", "b", "/", "x", "./", "../", "\\", "a.b", "ab/"])


@st.composite
def glob_and_path(draw: st.DrawFn, shape: str) -> tuple[str, str]:
    """A glob of ``shape`` and a path that often holds an instance of it (at the start or
    after a part), so matches and near misses are both common."""
    literal = st.lists(st.sampled_from(_LITERAL_TOKENS), min_size=1, max_size=3)
    if shape == "general":
        tokens = draw(st.lists(st.sampled_from(_LITERAL_TOKENS + _WILD_TOKENS), max_size=5))
    else:
        tokens = draw(literal) + {"literal": [], "prefix": ["*"], "dir": ["/"]}[shape]
    fill = {
        "*": st.text(st.sampled_from("ab/"), max_size=3),
        "?": st.sampled_from("ab/"),
        "[ab]": st.sampled_from("ab"),
        "[!a]": st.sampled_from("b/."),
        "*/": st.text(st.sampled_from("ab"), max_size=2).map(lambda t: t + "/"),
        "/*": st.text(st.sampled_from("ab"), max_size=2).map(lambda t: "/" + t),
    }
    instance = "".join(draw(fill[t]) if t in fill else t for t in tokens)
    if draw(st.booleans(), label="near miss"):
        instance = instance[: draw(st.integers(0, len(instance)))] + draw(_PATH_TOKENS)
    before = "".join(draw(st.lists(_PATH_TOKENS, max_size=3)))
    after = "".join(draw(st.lists(_PATH_TOKENS, max_size=2)))
    return "".join(tokens), before + instance + after


@pytest.mark.fak_theorem("D2.6")
@pytest.mark.parametrize("shape", ["literal", "prefix", "dir", "general"])
@given(st.data(), st.booleans())
def test_every_shape_of_glob_means_what_fnmatch_means_in_one_pass(
    shape: str, data: Any, anchored: bool
) -> None:
    glob, path = data.draw(glob_and_path(shape))
    assert floor.glob_matches(path, glob, anchored) == _old_glob_matches(path, glob, anchored)
    # the step count is the characters read: all of them unanchored, at most all anchored
    p = posixpath.normpath(path.replace("\\", "/"))
    steps = compile_glob(selfmodify.glob_pattern(glob)).run(p, anchored)[1]
    assert steps <= len(p) if anchored else steps == len(p)


@pytest.mark.fak_theorem("D2.6")
def test_compiled_globs_are_memoised_within_a_bound() -> None:
    globmatch._compiled.clear()
    first = compile_glob("a*b?")
    assert compile_glob("a*b?") is first  # a policy's glob compiles once
    second = compile_glob("b*")
    assert compile_glob("a*b?") is first and compile_glob("b*") is second
    for i in range(globmatch._MEMO_LIMIT + 3):
        assert compile_glob(f"q{i}*").match(f"q{i}zz")
        assert len(globmatch._compiled) <= globmatch._MEMO_LIMIT
    assert compile_glob("a*b?").match("axxbc") and not compile_glob("a*b?").match("ab")


EXTERNAL_PARTS = st.sampled_from(
    [
        "a",
        "b1",
        "report",
        ".",
        "@",
        ":",
        "/",
        " ",
        "pdf",
        "json",
        "md",
        "com",
        "io",
        "xn--80ak",
        "\u00e9",
        "1",
        "10",
        "-",
        "_",
        "http://",
        "8080",
        "evil.example",
        "user@",
        "a.b",
    ]
)


@pytest.mark.fak_theorem("D2.6")
@given(st.lists(EXTERNAL_PARTS, max_size=7).map("".join), st.booleans())
def test_sink_classification_is_what_the_backtracking_original_said(text: str, keyed: bool) -> None:
    assert sinks.looks_external(text, keyed) == _old_classification(text, keyed), text


# Fixed cases the generators reach rarely: a part that starts after "/" for a general glob,
# bare words and file names under and outside a destination key, numbers a host reader
# takes for addresses.
GLOB_CASES = [
    ("x/ab", "a*b"),
    ("x/axb/c", "a*b/c"),
    ("q/a/zb", "a*b"),
    ("a/b", "b*?"),
    ("zz/ab/ab", "a?/a*"),
    ("ab", "*b"),
    ("x/y", "a*b"),
    ("a/xaxb", "a?b"),
    ("a/b/xaxb", "a*/?axb"),
]


@pytest.mark.fak_theorem("D2.6")
@pytest.mark.parametrize(("path", "glob"), GLOB_CASES)
@pytest.mark.parametrize("anchored", [True, False])
def test_a_general_glob_is_tried_after_every_slash(path: str, glob: str, anchored: bool) -> None:
    assert floor.glob_matches(path, glob, anchored) == _old_glob_matches(path, glob, anchored)


@pytest.mark.fak_theorem("D2.6")
@pytest.mark.parametrize(
    "text",
    [
        "a_b",
        "a-b",
        "ab",
        "123",
        "a.b",
        "a b",
        "_",
        "-",
        "a_b-c",
        "\u00e9_x",
        "x@y",
        "notes.md",
        "report.PDF",
        "a.b.json",
        "docs/a.md",
        "localhost",
        "3232235777",
        "a b.com",
        "evil.example",
        "user@evil.example",
        "http://x",
        "xn--80ak.com",
        "xn--80ak",
        "XN--abc",
        "\u00e9.fr",
    ],
)
@pytest.mark.parametrize("keyed", [True, False])
def test_sink_classification_on_fixed_cases(text: str, keyed: bool) -> None:
    assert sinks.looks_external(text, keyed) == _old_classification(text, keyed), text
