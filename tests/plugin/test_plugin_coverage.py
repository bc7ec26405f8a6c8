"""pytester tests (subprocess): proof mode measures anchors whatever the user's coverage
settings are, and leaves the user's coverage data exactly as it is without proof mode
(issue 15)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .plugin_project import DOC, make_project

# the user's own package: the witness calls it; one line only a mutant reaches
MYPKG = """
def double(x):
    return 2 * x


def only_under_the_mutant():
    return "the mutant ran me"


def never():
    return 0
"""

MUTANTS = """
from unittest import mock
import clamplib
import mypkg
from pytest_fak import mutant

@mutant("CL1.1/no-upper")
def no_upper():
    def broken(x, lo=0, hi=10):
        mypkg.only_under_the_mutant()
        return max(x, lo)
    return mock.patch.object(clamplib, "clamp", broken)
"""

WITNESS = """
import pytest
from hypothesis import given, strategies as st
import clamplib
import mypkg

@pytest.mark.fak_theorem("CL1.1")
@given(st.integers())
def test_clamp_in_range(x):
    assert 0 <= clamplib.clamp(mypkg.double(x)) <= 10

def test_plain():
    assert mypkg.double(2) == 4
"""


def _project(pytester: pytest.Pytester) -> None:
    make_project(pytester, witness=WITNESS, doc=DOC)
    pytester.makepyfile(clampmutants=MUTANTS)
    pkg = pytester.path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(MYPKG, encoding="utf-8")


def _coverage(pytester: pytest.Pytester, name: str, *args: str) -> dict[str, Any]:
    res = pytester.runpytest_subprocess(f"--cov-report=json:{name}.json", *args)
    assert res.ret == 0, res.stdout.str()
    data = json.loads((pytester.path / f"{name}.json").read_text())
    root = str(pytester.path)
    # the user's files (bare --cov also measures the plugin's own code when it is not
    # installed in site-packages, as in this repository's tests)
    files = {
        f: {k: v for k, v in d.items() if k != "functions" and k != "classes"}
        for f, d in data["files"].items()
        if not Path(f).is_absolute() or f.startswith(root)
    }
    return files


@pytest.mark.parametrize(
    "cov_args",
    [("--cov=mypkg",), ("--cov",), ("--cov", "--cov-branch"), ("--cov=mypkg", "--cov-branch")],
    ids=["cov-pkg", "bare-cov", "bare-cov-branch", "cov-pkg-branch"],
)
def test_anchors_are_measured_and_user_coverage_is_unchanged(
    pytester: pytest.Pytester, cov_args: tuple[str, ...]
) -> None:
    _project(pytester)
    plain = _coverage(pytester, "plain", *cov_args)
    proof = _coverage(pytester, "proof", "--fak-theorems", *cov_args)
    assert "mypkg/__init__.py" in plain
    assert proof == plain
    summary = plain["mypkg/__init__.py"]["summary"]
    assert summary["missing_lines"] == 2, summary  # the mutant's line and never()
    t = json.loads((pytester.path / "proofs" / "verdicts.json").read_text())
    (theorem,) = t["theorems"]
    assert theorem["verdict"] == "PROVEN", theorem["reasons"]
    assert [(a["symbol"], a["covered"]) for a in theorem["anchors"]] == [("clamplib:clamp", True)]
    assert t["environment"]["anchor_measurement"] == ["nested"]


def test_per_test_contexts_are_kept(pytester: pytest.Pytester) -> None:
    """With --cov-context=test the witness's lines land under its own context."""
    _project(pytester)
    args = ("--cov=mypkg", "--cov-context=test", "--cov-report=")
    assert pytester.runpytest_subprocess("--fak-theorems", *args).ret == 0
    import coverage

    data = coverage.CoverageData(basename=str(pytester.path / ".coverage"))
    data.read()
    (f,) = [f for f in data.measured_files() if f.endswith("__init__.py")]
    contexts = data.contexts_by_lineno(f)
    double = next(n for n, line in enumerate(MYPKG.splitlines(), 1) if "return 2 * x" in line)
    assert "test_clamp.py::test_clamp_in_range|run" in contexts[double]
    assert not any("fak" in c for cs in contexts.values() for c in cs)
