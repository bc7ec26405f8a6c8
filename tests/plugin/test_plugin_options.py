"""pytester tests: issue 31's smaller things (item 5).

``fak_fail_on`` and ``fak_mutant_examples`` are ini options like the others; a mutant
deadline that is not a finite number of seconds above 0 is refused; a ``--hypothesis-profile``
the user gives stays in force under ``fak`` (the header says what ``fak`` sets over it);
a failing explicit ``@example`` is recorded as the falsifying example.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import settings

from .plugin_project import make_project, verdicts

FAILING = """
import pytest
from hypothesis import given, strategies as st
import clamplib

@pytest.mark.fak_theorem("CL1.1")
@given(st.integers())
def test_clamp_in_range(x):
    assert clamplib.clamp(x) < 10
"""

EXPLICIT = """
import pytest
from hypothesis import example, given, strategies as st
import clamplib

@pytest.mark.fak_theorem("CL1.1")
@given(st.integers(min_value=0, max_value=5))
@example(x=77)
def test_clamp_in_range(x):
    assert clamplib.clamp(x) == x
"""


def _ini(pytester: pytest.Pytester, *lines: str) -> None:
    pytester.makeini("\n".join(["[pytest]", "addopts = -p no:schemathesis", *lines]) + "\n")


def test_fak_fail_on_from_the_ini_file(pytester: pytest.Pytester) -> None:
    make_project(pytester, witness=FAILING)
    _ini(pytester, "fak_fail_on = VACUOUS")
    result = pytester.runpytest("--fak-theorems")
    assert verdicts(pytester)["CL1.1"]["verdict"] == "REFUTED"
    assert result.ret == 1  # the witness failed: pytest's own status
    report = json.loads((pytester.path / "proofs" / "verdicts.json").read_text())
    assert report["fail_on"] == ["VACUOUS"]
    result.stdout.fnmatch_lines(["fak: 0 PROVEN*"])  # not "fak: FAILED"
    # the command line wins over the ini file
    result = pytester.runpytest("--fak-theorems", "--fak-fail-on=REFUTED")
    result.stdout.fnmatch_lines(["fak: FAILED: 1 REFUTED (CL1.1)"])


def test_fak_fail_on_ini_is_checked(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    _ini(pytester, "fak_fail_on = REFUTD")
    result = pytester.runpytest("--fak-theorems")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown verdict(s) REFUTD*"])


def test_fak_mutant_examples_from_the_ini_file(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    _ini(pytester, "fak_mutant_examples = 7")
    # (so few examples may miss the declared mutant: only the budget is checked here)
    assert pytester.runpytest("--fak-theorems", "--fak-fail-on=none").ret == 0
    report = json.loads((pytester.path / "proofs" / "verdicts.json").read_text())
    assert report["environment"]["mutant_examples"] == 7
    assert (
        pytester.runpytest("--fak-theorems", "--fak-mutant-examples=3", "--fak-fail-on=none").ret
        == 0
    )
    report = json.loads((pytester.path / "proofs" / "verdicts.json").read_text())
    assert report["environment"]["mutant_examples"] == 3


@pytest.mark.parametrize("raw", ["0", "-2", "many"])
def test_fak_mutant_examples_ini_is_checked(pytester: pytest.Pytester, raw: str) -> None:
    make_project(pytester)
    _ini(pytester, f"fak_mutant_examples = {raw}")
    result = pytester.runpytest("--fak-theorems")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini option fak_mutant_examples*"])


@pytest.mark.parametrize("raw", ["-1", "0", "nan", "inf", "-inf", "soon"])
def test_a_mutant_deadline_must_be_finite_seconds_above_zero(
    pytester: pytest.Pytester, raw: str
) -> None:
    make_project(pytester)
    result = pytester.runpytest("--fak-theorems", f"--fak-mutant-timeout={raw}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--fak-mutant-timeout*{raw!r}*"])


@pytest.mark.parametrize("option", ["--fak-mutant-examples", "--fak-max-examples"])
@pytest.mark.parametrize("raw", ["0", "-1"])
def test_example_budgets_must_be_at_least_one(
    pytester: pytest.Pytester, option: str, raw: str
) -> None:
    make_project(pytester)
    result = pytester.runpytest("--fak-theorems", f"{option}={raw}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{option}*must be at least 1*"])


PROFILE = """
from hypothesis import HealthCheck, settings

settings.register_profile(
    "mine", max_examples=7, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
"""

FIXTURE_WITNESS = """
import pytest
from hypothesis import given, strategies as st
import clamplib

@pytest.fixture
def hi():
    return 10

@pytest.mark.fak_theorem("CL1.1")
@given(st.integers())
def test_clamp_in_range(hi, x):
    assert 0 <= clamplib.clamp(x) <= hi
"""


def test_the_users_hypothesis_profile_stays_in_force(pytester: pytest.Pytester) -> None:
    make_project(pytester, witness=FIXTURE_WITNESS)
    pytester.makeconftest(PROFILE)
    outer = settings.get_current_profile_name()
    try:
        result = pytester.runpytest("--fak-theorems", "--hypothesis-profile=mine")
    finally:  # Hypothesis's own plugin loads "mine" for good: this process's next runs
        settings.load_profile(outer)  # must not inherit its 7 examples
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "fak: proof mode*hypothesis profile 'fak' over 'mine' (fak sets derandomize=True, "
            "database=None, deadline=None, print_blob=True; the rest is 'mine''s)"
        ]
    )
    (w,) = verdicts(pytester)["CL1.1"]["witnesses"]
    assert w["examples"] == 7  # mine's max_examples
    # its suppressed health check stays suppressed: the fixture is not an ERROR
    assert w["outcome"] == "passed"


def test_a_failing_explicit_example_is_the_falsifying_example(pytester: pytest.Pytester) -> None:
    make_project(pytester, witness=EXPLICIT)
    result = pytester.runpytest("--fak-theorems")
    assert result.ret == 1
    t = verdicts(pytester)["CL1.1"]
    assert t["verdict"] == "REFUTED"
    (w,) = t["witnesses"]
    assert w["failure"]["explicit"] is True
    assert "x=77" in w["failure"]["falsifying_example"]
    proofs = (pytester.path / "proofs" / "PROOFS.md").read_text()
    assert "Failing explicit example (test_clamp.py::test_clamp_in_range): `" in proofs
    assert "x=77" in proofs.split("Failing explicit example")[1]
