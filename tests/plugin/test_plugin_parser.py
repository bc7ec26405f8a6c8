"""The strict theorem parser: each malformed document is an error naming its line and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_fak import TheoremError, load_theorems, parse_document

GOOD = """# Ladder

## A7.1 — cheapest-first

**THEOREM.** Rungs run in ascending cost.

**REGIME.** A

**PROOF.** `fak_core.preflight:Ladder.add_rung` keeps them sorted.

**ANCHORS.**
- `fak_core.preflight:Ladder.adjudicate`

**MUTANTS.**
- `reversed` — run them backwards

**CAVEATS.**
- Costs are declared.
"""


def test_good_document_parses_with_resolved_anchors() -> None:
    (t,) = parse_document("x.md", GOOD)
    assert (t.id, t.title, t.regime, t.line) == ("A7.1", "cheapest-first", "A", 3)
    assert t.anchors[0].symbol == "fak_core.preflight:Ladder.adjudicate"
    assert t.anchors[0].lines
    assert len(t.anchors[0].sha256) == 64
    assert t.mutants[0].id == "A7.1/reversed"


@pytest.mark.parametrize(
    ("old", "new", "line", "fragment"),
    [
        ("**REGIME.** A", "**REGIME.** Q", 7, "regime 'Q' is not one of"),
        (
            "`fak_core.preflight:Ladder.adjudicate`",
            "`fak_core.preflight:Ladder.nope`",
            12,
            "no attribute 'nope'",
        ),
        ("keeps them sorted.", "see preflight.py:120.", 9, "cite it by symbol"),
        ("**CAVEATS.**", "**VERDICT.** PROVEN\n\n**CAVEATS.**", 17, "computed by the plugin"),
        ("**CAVEATS.**", "**NOTES.**", 17, "unknown field **NOTES.**"),
        ("## A7.1 — cheapest-first", "## A7.1 cheapest-first", 3, "theorem heading"),
        ("- `reversed` — run them backwards", "- `Reversed`", 15, "kebab-case name"),
        ("**MUTANTS.**\n- `reversed` — run them backwards\n", "", 3, "no **MUTANTS.** list"),
        (
            "`fak_core.preflight:Ladder.adjudicate`",
            "`fak_core.preflight:Ladder`",
            12,
            "not a function",
        ),
    ],
)
def test_malformed_documents_name_line_and_fix(
    old: str, new: str, line: int, fragment: str
) -> None:
    with pytest.raises(TheoremError) as err:
        parse_document("theorems/x.md", GOOD.replace(old, new))
    assert err.value.line == line, str(err.value)
    assert fragment in str(err.value)
    assert str(err.value).startswith(f"theorems/x.md:{line}: ")


def test_duplicate_ids_across_documents_are_errors(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text(GOOD)
    (tmp_path / "b.md").write_text(GOOD)
    index, errors = load_theorems([tmp_path])
    assert len(index) == 1
    (err,) = errors
    assert "duplicate theorem id A7.1" in str(err)
    assert "a.md:3" in str(err)


def test_scoped_out_needs_no_anchors_or_mutants() -> None:
    doc = GOOD.split("**ANCHORS.**")[0] + "**CAVEATS.**\n- none\n\n**SCOPED-OUT.** needs a GPU\n"
    (t,) = parse_document("x.md", doc)
    assert t.scoped_out == "needs a GPU"
