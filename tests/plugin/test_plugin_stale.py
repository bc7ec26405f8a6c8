"""pytester tests: ``fak proofs check`` reports STALE when a verdict's inputs change: the
bound witnesses' source, the declared mutants' source, a **DEPENDS-ON.** file (issue 15)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_fak.cli import check
from pytest_fak.theorems import TheoremError, parse_document

from .plugin_project import DOC, MUTANTS, WITNESS_OK, make_project

DEPS_DOC = DOC.replace(
    "**CAVEATS.**", "**DEPENDS-ON.**\n- `limits.json` — the bounds clamp is about\n\n**CAVEATS.**"
)


def stale(root: Path) -> list[tuple[str, str]]:
    report = json.loads((root / "proofs" / "verdicts.json").read_text())
    found, total = check(report, [root / "theorems"], root)
    assert total == 1
    return found


def test_editing_a_witness_a_mutant_or_a_declared_file_makes_the_verdict_stale(
    pytester: pytest.Pytester,
) -> None:
    make_project(pytester, doc=DEPS_DOC)
    root = pytester.path
    (root / "limits.json").write_text('{"hi": 10}')
    assert pytester.runpytest("--fak-theorems").ret == 0
    rec = json.loads((root / "proofs" / "verdicts.json").read_text())["theorems"][0]
    assert [w["nodeid"] for w in rec["inputs"]["witnesses"]] == [
        "test_clamp.py::test_clamp_in_range"
    ]
    assert all(len(w["sha256"]) == 64 for w in rec["inputs"]["witnesses"])
    assert rec["inputs"]["mutants"][0]["file"] == "clampmutants.py"
    assert rec["inputs"]["files"][0]["path"] == "limits.json"
    assert stale(root) == []

    (root / "test_clamp.py").write_text(WITNESS_OK.replace("<= 10", "<= 10 or True"))
    assert stale(root) == [
        ("CL1.1", "the source of witness test_clamp.py::test_clamp_in_range changed")
    ]
    (root / "test_clamp.py").write_text(WITNESS_OK)
    assert stale(root) == []

    (root / "clampmutants.py").write_text(MUTANTS.replace("max(x, lo)", "max(x, lo + 1)"))
    assert stale(root) == [("CL1.1", "the source of mutant CL1.1/no-upper changed")]
    (root / "clampmutants.py").write_text(MUTANTS.replace("def no_upper", "def renamed"))
    assert stale(root) == [("CL1.1", "mutant CL1.1/no-upper is no longer in clampmutants.py")]
    (root / "clampmutants.py").write_text(MUTANTS)

    (root / "limits.json").write_text('{"hi": 11}')
    assert stale(root) == [("CL1.1", "the file limits.json it depends on changed")]
    (root / "limits.json").unlink()
    assert stale(root) == [("CL1.1", "the file limits.json it depends on is gone")]


@pytest.mark.parametrize("bad", ["../outside.json", "/etc/passwd", "no backticks"])
def test_a_dependency_must_be_a_path_inside_the_project(bad: str) -> None:
    entry = f"`{bad}`" if bad != "no backticks" else bad
    doc = DOC.replace("clamplib:clamp", "json:dumps")  # a symbol that resolves here
    doc = doc.replace("**CAVEATS.**", f"**DEPENDS-ON.**\n- {entry}\n\n**CAVEATS.**")
    with pytest.raises(TheoremError, match="relative to the project root"):
        parse_document("clamp.md", doc)
