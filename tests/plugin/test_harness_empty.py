"""H1.7: a proof run that finds no theorem fails unless told none is expected (theorem
documents written to disk and loaded as the run loads them; a document without a theorem
is already an error of its own)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pytest_fak import ci
from pytest_fak.theorems import load_theorems

SECTION = """
## {tid} — a claim

**THEOREM.** Something holds.

**REGIME.** A

**PROOF.** It is so.

**SCOPED-OUT.** Nothing here is witnessed.

**CAVEATS.**
- None tested.
"""


@pytest.mark.fak_theorem("H1.7")
@settings(max_examples=30, deadline=None)
@given(
    docs=st.lists(st.integers(1, 2), max_size=3),
    other=st.booleans(),
    expected=st.booleans(),
    shown=st.integers(0, 2),  # how many directories the run names (none: no theorems/)
)
@example(docs=[], other=False, expected=False, shown=2)  # two directories, both named
@example(docs=[], other=True, expected=False, shown=0)  # no theorems/ directory at all
def test_a_run_with_no_theorem_fails_unless_that_is_expected(
    docs: list[int], other: bool, expected: bool, shown: int
) -> None:
    d = Path(tempfile.mkdtemp(prefix="fak-empty-"))
    n = 0
    if other:  # a file that is not a theorem document
        (d / "notes.txt").write_text("## N1.1 — not a document\n")
    for i, sections in enumerate(docs):
        text = "# Claims\n"
        for _ in range(sections):
            n += 1
            text += SECTION.format(tid=f"E{n}.1")
        (d / f"doc{i}.md").write_text(text)
    index, errors = load_theorems([d])
    assert errors == [] and len(index) == n
    dirs = [str(d), "docs/theorems"][:shown]
    why = ci.nothing_to_prove(len(index), expected, dirs)
    if n or expected:
        assert why is None
    else:
        where = ", ".join(dirs) if dirs else "no theorems/ directory in the rootdir"
        assert why == (  # the whole line a user reads: where it looked, and what to do
            f"fak: FAILED: no theorems found ({where}); write them in theorems/*.md, point "
            "--fak-theorems-dir or ini fak_theorems_dirs at them, or pass "
            "--fak-no-theorems-ok if none is expected; nothing written"
        )
