"""D2.6: a compiled glob's prefilter (``Glob.could_match``) holds exactly when the text
contains each of the glob's literal pieces, so it never rules out a text the glob matches.

The oracles never call the code under test: the pieces come from the tokeniser of
``test_glob_fnmatch`` and matches from ``fnmatch.fnmatchcase``.
"""

from __future__ import annotations

import fnmatch

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core.globmatch import Glob
from tests.kernel.test_glob_fnmatch import _pieces, glob_and_text


@pytest.mark.fak_theorem("D2.6")
@given(glob_and_text(), st.sampled_from(["", "x", "ab", "a/b", "b/a"]))
def test_could_match_is_every_piece_held(case: tuple[str, str], noise: str) -> None:
    glob, text = case
    for candidate in (text, noise, text + noise):
        expected = all(p in candidate for p in _pieces(glob))
        assert Glob(glob).could_match(candidate) is expected, (glob, candidate)
        parts = [0] + [i + 1 for i, c in enumerate(candidate) if c == "/"]
        if any(fnmatch.fnmatchcase(candidate[i:], glob) for i in parts):
            assert expected, (glob, candidate)


@pytest.mark.fak_theorem("D2.6")
@pytest.mark.parametrize(
    ("glob", "text", "expected"),
    [
        ("*", "", True),
        ("", "", True),
        ("src/*.py", "lib/src/x.py", True),
        ("src/*.py", "lib/x.py", False),
        ("src/*.py", "src/x.pyc", True),
        ("a*b*c", "cba", True),
        ("a*b*c", "ab", False),
        ("[ab]x", "y", False),
        ("[ab]x", "x", True),
        (".env", "config/.ENV", False),
    ],
)
def test_could_match_on_hand_picked_globs(glob: str, text: str, expected: bool) -> None:
    assert Glob(glob).could_match(text) is expected
