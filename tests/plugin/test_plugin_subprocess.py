"""pytester tests that need a fresh interpreter: xdist and `fak proofs check` (pytest-cov:
test_plugin_coverage.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .plugin_project import LIB, make_project, stable


def test_xdist_gives_the_same_report_as_a_single_process(pytester: pytest.Pytester) -> None:
    extra = """
@pytest.mark.fak_theorem("CL1.1")
def test_clamp_high():
    assert clamplib.clamp(99) == 10
"""
    from .plugin_project import WITNESS_OK

    make_project(pytester, witness=WITNESS_OK + extra)
    r0 = pytester.runpytest_subprocess("--fak-theorems", "-n", "0", "--fak-report-dir=r0")
    r2 = pytester.runpytest_subprocess("--fak-theorems", "-n", "2", "--fak-report-dir=r2")
    assert r0.ret == r2.ret == 0
    s0, s2 = (
        stable(pytester.path / "r0" / "verdicts.json"),
        stable(pytester.path / "r2" / "verdicts.json"),
    )
    assert s0["theorems"] == s2["theorems"]
    assert s2["theorems"][0]["verdict"] == "PROVEN"
    assert s2["theorems"][0]["mutants"][0]["killed_by"] == [
        "test_clamp.py::test_clamp_high",
        "test_clamp.py::test_clamp_in_range",
    ]


def test_proofs_check_reports_an_edited_anchor_as_stale(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    assert pytester.runpytest_subprocess("--fak-theorems").ret == 0

    def check() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "fak_core.cli", "proofs", "check"],
            cwd=pytester.path,
            capture_output=True,
            text=True,
            timeout=60,
        )

    fresh = check()
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    assert "0 stale of 1" in fresh.stdout
    (pytester.path / "clamplib.py").write_text(LIB.replace("return hi", "return hi - 0"))
    stale = check()
    assert stale.returncode == 1
    assert "STALE CL1.1: the source of anchor clamplib:clamp changed" in stale.stdout
