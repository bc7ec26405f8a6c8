"""pytester tests that need a fresh interpreter: xdist, pytest-cov, and `fak proofs check`."""

from __future__ import annotations

import json
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


def _total(pytester: pytest.Pytester, *args: str) -> float:
    res = pytester.runpytest_subprocess("--cov=clamplib", "--cov-report=json:cov.json", *args)
    assert res.ret == 0, res.stdout.str()
    data = json.loads((pytester.path / "cov.json").read_text())
    return float(data["totals"]["percent_covered"])


def test_pytest_cov_totals_do_not_drop_and_anchors_are_measured(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    plain = _total(pytester)
    proof = _total(pytester, "--fak-theorems")
    proof_ctx = _total(pytester, "--fak-theorems", "--cov-context=test")
    assert plain > 0
    assert proof >= plain
    assert proof_ctx >= plain
    t = json.loads((pytester.path / "proofs" / "verdicts.json").read_text())["theorems"][0]
    assert t["verdict"] == "PROVEN", t["reasons"]
    env = json.loads((pytester.path / "proofs" / "verdicts.json").read_text())["environment"]
    assert env["anchor_measurement"] == ["shared"]


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
