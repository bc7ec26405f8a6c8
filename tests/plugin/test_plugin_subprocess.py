"""pytester tests that need a fresh interpreter: xdist and `fak proofs check` (pytest-cov:
test_plugin_coverage.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


def _proofs_check(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fak_core.cli", "proofs", "check"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_pack_is_recorded_by_module_and_checks_clean(pytester: pytest.Pytester) -> None:
    """The pack lives outside the project (as in site-packages): the report names it by
    module, and `fak proofs check` finds it where the package is installed."""
    make_project(pytester)
    res = pytester.runpytest_subprocess("--fak-theorems", "--fak-pack")
    assert res.ret == 0, res.stdout.str()
    report = json.loads((pytester.path / "proofs" / "verdicts.json").read_text())
    assert report["theorem_dirs"] == ["theorems", "module:pytest_fak.pack"]
    done = _proofs_check(pytester.path)
    assert done.returncode == 0, done.stdout + done.stderr
    pack = sum(1 for t in report["theorems"] if t["id"] != "CL1.1")
    assert pack > 0
    assert f"0 stale of {pack + 1} reported theorems" in done.stdout


def test_a_document_error_is_not_counted_as_a_theorem(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    assert pytester.runpytest_subprocess("--fak-theorems").ret == 0
    (pytester.path / "theorems" / "broken.md").write_text(
        "# Broken\n\n## BR1.1 — no body\n", encoding="utf-8"
    )
    done = _proofs_check(pytester.path)
    assert done.returncode == 1
    assert "ERROR " in done.stdout and "broken.md" in done.stdout, done.stdout
    assert "0 stale of 1 reported theorems, 1 document errors" in done.stdout, done.stdout
