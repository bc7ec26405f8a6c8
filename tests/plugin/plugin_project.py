"""Builders of small downstream projects for the plugin's pytester tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

LIB = '''
def clamp(x, lo=0, hi=10):
    """Clamp x into [lo, hi]."""
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def unused():
    return 42
'''

DOC = """# Clamp

**MUTANT-MODULES.**
- `clampmutants`

## CL1.1 — clamp stays in range

**THEOREM.** For every integer x, `clamp(x)` lies in [0, 10].

**REGIME.** A

**PROOF.** `clamplib:clamp` returns a bound whenever x is outside it.

**ANCHORS.**
- `clamplib:clamp`

**MUTANTS.**
- `no-upper` — the upper bound is ignored

**CAVEATS.**
- Only the default bounds are tested.
"""

MUTANTS = """
from unittest import mock
import clamplib
from pytest_fak import mutant

_real = clamplib.clamp

@mutant("CL1.1/no-upper")
def no_upper():
    return mock.patch.object(clamplib, "clamp", lambda x, lo=0, hi=10: max(x, lo))
"""

WITNESS_OK = """
import pytest
from hypothesis import given, strategies as st
import clamplib

@pytest.mark.fak_theorem("CL1.1")
@given(st.integers())
def test_clamp_in_range(x):
    assert 0 <= clamplib.clamp(x) <= 10
"""


def make_project(pytester: pytest.Pytester, witness: str = WITNESS_OK, doc: str = DOC) -> None:
    pytester.syspathinsert()
    # schemathesis (a dev dependency) registers a pytest plugin that blanks Hypothesis'
    # falsifying examples ("x=,"); the inner project turns it off as our own config does.
    pytester.makeini("[pytest]\naddopts = -p no:schemathesis\n")
    pytester.makepyfile(clamplib=LIB, clampmutants=MUTANTS)
    (pytester.path / "theorems").mkdir(exist_ok=True)
    (pytester.path / "theorems" / "clamp.md").write_text(doc, encoding="utf-8")
    pytester.makepyfile(test_clamp=witness)


def make_small_project(
    pytester: pytest.Pytester, doc: str, addopts: str = "", **modules: str
) -> None:
    """A project of ``modules`` (name → source) and one theorems document ``doc``."""
    pytester.syspathinsert()
    pytester.makeini(f"[pytest]\naddopts = -p no:schemathesis {addopts}\n")
    pytester.makepyfile(**modules)
    (pytester.path / "theorems").mkdir(exist_ok=True)
    (pytester.path / "theorems" / "theorems.md").write_text(doc, encoding="utf-8")


def verdicts(pytester: pytest.Pytester, report_dir: str = "proofs") -> dict[str, Any]:
    data = json.loads((Path(pytester.path) / report_dir / "verdicts.json").read_text())
    return {t["id"]: t for t in data["theorems"]}


def stable(path: Path) -> dict[str, Any]:
    """The report with the keys it declares non-deterministic removed."""
    data = json.loads(path.read_text())
    data.pop("generated_at")
    for t in data["theorems"]:
        t.pop("date")
        for w in t["witnesses"]:
            w.pop("duration_s")
    return data
