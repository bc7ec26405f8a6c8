"""pytester tests: a witness that never tested the code is ERROR, never REFUTED (issue 15)."""

from __future__ import annotations

import pytest

from .plugin_project import DOC, MUTANTS, make_project, verdicts

BROKEN_FIXTURE = """
import pytest
import clamplib

@pytest.fixture
def data():
    raise RuntimeError("the fixture data file is missing")
"""


def test_a_fixture_that_fails_to_set_up_is_error(pytester: pytest.Pytester) -> None:
    make_project(
        pytester,
        witness=BROKEN_FIXTURE
        + """
@pytest.mark.fak_theorem("CL1.1")
def test_clamp(data):
    assert clamplib.clamp(99) == 10
""",
    )
    result = pytester.runpytest("--fak-theorems")
    result.assert_outcomes(errors=1)
    assert result.ret == 1
    t = verdicts(pytester)["CL1.1"]
    assert t["verdict"] == "ERROR"
    (w,) = t["witnesses"]
    assert w["outcome"] == "error" and w["error_kind"] == "setup"
    assert "never tested the code (setup)" in t["reasons"][0]
    assert "the fixture data file is missing" in t["reasons"][0]
    result.stdout.fnmatch_lines(["fak: FAILED: 1 ERROR (CL1.1)"])


def test_a_hypothesis_health_check_failure_is_error_not_refuted(
    pytester: pytest.Pytester,
) -> None:
    make_project(
        pytester,
        witness="""
import pytest
from hypothesis import given, strategies as st
import clamplib

@pytest.fixture
def bound():
    return 10

@pytest.mark.fak_theorem("CL1.1")
@given(st.integers())
def test_clamp_in_range(bound, x):
    assert 0 <= clamplib.clamp(x) <= bound
""",
    )
    result = pytester.runpytest("--fak-theorems")
    assert result.ret == 1
    t = verdicts(pytester)["CL1.1"]
    assert t["verdict"] == "ERROR", t["reasons"]
    (w,) = t["witnesses"]
    assert w["error_kind"] == "hypothesis: FailedHealthCheck"
    assert "function_scoped_fixture" in w["failure"]["message"]


def test_a_real_failure_beats_an_error(pytester: pytest.Pytester) -> None:
    make_project(
        pytester,
        witness=BROKEN_FIXTURE
        + """
@pytest.mark.fak_theorem("CL1.1")
def test_errors(data):
    pass

@pytest.mark.fak_theorem("CL1.1")
def test_fails():
    assert clamplib.clamp(99) == 9
""",
    )
    pytester.runpytest("--fak-theorems")
    assert verdicts(pytester)["CL1.1"]["verdict"] == "REFUTED"


def test_a_collection_error_is_error_for_theorems_left_without_witnesses(
    pytester: pytest.Pytester,
) -> None:
    second = DOC.split("## CL1.1")[1].replace(" — clamp stays in range", "", 1)
    make_project(pytester, doc=DOC + "\n## CL1.2 — other" + second.replace("no-upper", "x"))
    pytester.makepyfile(
        clampmutants="""
from unittest import mock
import clamplib
from pytest_fak import mutant

@mutant("CL1.1/no-upper")
def no_upper():
    return mock.patch.object(clamplib, "clamp", lambda x, lo=0, hi=10: max(x, lo))

@mutant("CL1.2/x")
def x():
    return mock.patch.object(clamplib, "clamp", lambda x, lo=0, hi=10: max(x, lo))
""",
        test_other="import no_such_module_here\n",
    )
    stopped = pytester.runpytest("--fak-theorems")
    assert stopped.ret == pytest.ExitCode.INTERRUPTED
    assert not (pytester.path / "proofs").exists()
    stopped.stdout.fnmatch_lines(["fak: FAILED: no verdicts (collection failed)*"])
    result = pytester.runpytest("--fak-theorems", "--continue-on-collection-errors")
    assert result.ret == 1
    vs = verdicts(pytester)
    assert vs["CL1.1"]["verdict"] == "PROVEN"
    assert vs["CL1.2"]["verdict"] == "ERROR"
    assert "test_other.py" in vs["CL1.2"]["reasons"][0]


def test_a_mutant_that_makes_hypothesis_refuse_the_witness_is_not_a_kill(
    pytester: pytest.Pytester,
) -> None:
    # under the mutant every example is rejected by assume(): Hypothesis gives up
    # (a health check) and the property is never checked, so the mutant is not killed
    make_project(
        pytester,
        witness="""
import pytest
from hypothesis import assume, given, strategies as st
import clamplib

@pytest.mark.fak_theorem("CL1.1")
@given(st.integers())
def test_clamp_in_range(x):
    y = clamplib.clamp(x)
    assume(y is not None)
    assert 0 <= y <= 10
""",
    )
    pytester.makepyfile(clampmutants=MUTANTS.replace("max(x, lo)", "None"))
    result = pytester.runpytest("--fak-theorems")
    assert result.ret == 1
    t = verdicts(pytester)["CL1.1"]
    assert t["mutants"][0]["status"] == "inconclusive"
    assert t["verdict"] == "OPEN"


def test_a_proof_run_that_finds_no_theorem_fails_unless_told_it_is_expected(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\naddopts = -p no:schemathesis\n")
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest("--fak-theorems")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(
        ["fak: FAILED: no theorems found (no theorems/ directory in the rootdir); *"]
    )
    assert not (pytester.path / "proofs").exists()
    (pytester.path / "theorems").mkdir()
    empty = pytester.runpytest("--fak-theorems")
    assert empty.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    empty.stdout.fnmatch_lines(["fak: FAILED: no theorems found (theorems); *"])
    assert pytester.runpytest("--fak-theorems", "--fak-no-theorems-ok").ret == 0
    pytester.makeini("[pytest]\naddopts = -p no:schemathesis\nfak_no_theorems_ok = true\n")
    assert pytester.runpytest("--fak-theorems").ret == 0
