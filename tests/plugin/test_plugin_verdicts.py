"""pytester tests: each verdict rule of proof mode, in-process."""

from __future__ import annotations

import pytest

from .plugin_project import DOC, make_project, verdicts


def test_passing_witness_with_killed_mutant_and_executed_anchor_is_proven(
    pytester: pytest.Pytester,
) -> None:
    make_project(pytester)
    result = pytester.runpytest("--fak-theorems")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["fak: 1 PROVEN · 0 REFUTED · 0 VACUOUS · 0 OPEN"])
    t = verdicts(pytester)["CL1.1"]
    assert t["verdict"] == "PROVEN"
    assert t["mutants"] == [
        {
            "id": "CL1.1/no-upper",
            "name": "no-upper",
            "description": "the upper bound is ignored",
            "status": "killed",
            "killed_by": ["test_clamp.py::test_clamp_in_range"],
        }
    ]
    assert t["anchors"][0]["covered"] is True
    (w,) = t["witnesses"]
    assert w["outcome"] == "passed"
    assert isinstance(w["examples"], int)
    assert w["examples"] >= 50
    md = (pytester.path / "proofs" / "PROOFS.md").read_text()
    assert "**VERDICT.** PROVEN" in md
    assert "**WITNESS.** `pytest --fak-theorems --fak-theorem 'CL1.1'`" in md


def test_failing_witness_is_refuted_with_the_falsifying_example(pytester: pytest.Pytester) -> None:
    bad = """
import pytest
from hypothesis import given, strategies as st
import clamplib

@pytest.mark.fak_theorem("CL1.1")
@given(st.integers())
def test_clamp_in_range(x):
    assert 0 <= clamplib.clamp(x) <= 9
"""
    make_project(pytester, witness=bad)
    result = pytester.runpytest("--fak-theorems")
    result.assert_outcomes(failed=1)
    t = verdicts(pytester)["CL1.1"]
    assert t["verdict"] == "REFUTED"
    failure = t["witnesses"][0]["failure"]
    assert "x=10" in failure["falsifying_example"]
    assert "@reproduce_failure(" in failure["reproduction"]
    assert "AssertionError" in failure["message"]


def test_surviving_mutant_makes_the_theorem_vacuous(pytester: pytest.Pytester) -> None:
    weak = """
import pytest
import clamplib

@pytest.mark.fak_theorem("CL1.1")
def test_clamp_low():
    assert clamplib.clamp(-5) == 0
"""
    make_project(pytester, witness=weak)
    result = pytester.runpytest("--fak-theorems")
    result.assert_outcomes(passed=1)
    assert result.ret == 1  # VACUOUS fails the run by default
    t = verdicts(pytester)["CL1.1"]
    assert t["verdict"] == "VACUOUS"
    assert t["mutants"][0]["status"] == "survived"
    result.stdout.fnmatch_lines(["VACUOUS*CL1.1*mutant CL1.1/no-upper survived*"])


def test_witness_that_never_reaches_its_anchor_is_not_proven(pytester: pytest.Pytester) -> None:
    doc = DOC.replace("- `clamplib:clamp`\n", "- `clamplib:clamp`\n- `clamplib:unused`\n")
    make_project(pytester, doc=doc)
    result = pytester.runpytest("--fak-theorems")
    result.assert_outcomes(passed=1)
    t = verdicts(pytester)["CL1.1"]
    assert t["verdict"] == "VACUOUS"
    assert {a["symbol"]: a["covered"] for a in t["anchors"]} == {
        "clamplib:clamp": True,
        "clamplib:unused": False,
    }


def test_orphan_and_all_skipped_theorems_are_open(pytester: pytest.Pytester) -> None:
    second = DOC.split("## CL1.1")[1].replace(" — clamp stays in range", "", 1)
    doc = DOC + "\n## CL1.2 — orphan" + second.replace("no-upper", "other")
    skipped = """
import pytest

@pytest.mark.fak_theorem("CL1.1")
def test_skipped():
    pytest.skip("no fixture data here")
"""
    make_project(pytester, witness=skipped, doc=doc)
    result = pytester.runpytest("--fak-theorems", "--fak-fail-on=REFUTED")
    assert result.ret == 0
    vs = verdicts(pytester)
    assert vs["CL1.1"]["verdict"] == "OPEN"
    assert any("no fixture data here" in r for r in vs["CL1.1"]["reasons"])
    assert vs["CL1.2"]["verdict"] == "OPEN"
    assert vs["CL1.2"]["reasons"] == ["no test binds this theorem (orphan)"]
    result.stdout.fnmatch_lines(["fak: 0 PROVEN · 0 REFUTED · 0 VACUOUS · 2 OPEN"])


def test_unknown_theorem_id_is_a_collection_error_naming_file_and_line(
    pytester: pytest.Pytester,
) -> None:
    typo = """
import pytest

@pytest.mark.fak_theorem("CL9.9")
def test_x():
    pass
"""
    make_project(pytester, witness=typo)
    result = pytester.runpytest("--fak-theorems")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["*test_clamp.py:3: test_x: unknown theorem id 'CL9.9'*fix the id*(known: CL1.1)*"]
    )
    assert not (pytester.path / "proofs").exists()


def test_malformed_document_is_a_collection_error_naming_file_and_line(
    pytester: pytest.Pytester,
) -> None:
    make_project(pytester, doc=DOC.replace("**REGIME.** A", "**REGIME.** Z"))
    result = pytester.runpytest("--fak-theorems")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*theorems/clamp.md:10: regime 'Z' is not one of N*"])


def test_missing_mutant_implementation_is_a_collection_error(pytester: pytest.Pytester) -> None:
    make_project(pytester, doc=DOC.replace("- `no-upper`", "- `no-lower`"))
    result = pytester.runpytest("--fak-theorems")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*mutant CL1.1/no-lower (declared at theorems/clamp.md:18)*"])


def test_without_proof_mode_marked_tests_are_ordinary_tests(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert not (pytester.path / "proofs").exists()
    result.stdout.no_fnmatch_line("*fak:*")
    markers = pytester.runpytest("--markers")
    markers.stdout.fnmatch_lines(["@pytest.mark.fak_theorem(id, *more_ids):*"])


def test_junit_properties_carry_theorem_ids(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.runpytest("--fak-theorems", "--junit-xml=out.xml", "-o", "junit_family=xunit1")
    xml = (pytester.path / "out.xml").read_text()
    assert '<property name="fak_theorem" value="CL1.1"' in xml


def test_report_is_deterministic_apart_from_declared_keys(pytester: pytest.Pytester) -> None:
    from .plugin_project import stable

    make_project(pytester)
    pytester.runpytest("--fak-theorems", "--fak-report-dir=r1")
    pytester.runpytest("--fak-theorems", "--fak-report-dir=r2")
    assert stable(pytester.path / "r1" / "verdicts.json") == stable(
        pytester.path / "r2" / "verdicts.json"
    )
    assert (pytester.path / "r1" / "PROOFS.md").read_text() == (
        pytester.path / "r2" / "PROOFS.md"
    ).read_text()


def test_a_mutant_that_cannot_be_applied_is_broken_not_a_kill(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makepyfile(
        clampmutants="""
from pytest_fak import mutant

@mutant("CL1.1/no-upper")
def no_upper():
    raise AttributeError("the code this mutant patches was renamed")
"""
    )
    result = pytester.runpytest("--fak-theorems")
    result.assert_outcomes(passed=1)
    assert result.ret == 1
    t = verdicts(pytester)["CL1.1"]
    assert t["verdict"] == "OPEN"
    assert t["mutants"][0]["status"] == "broken" and t["mutants"][0]["killed_by"] == []
    result.stdout.fnmatch_lines(["*CL1.1*mutant CL1.1/no-upper is broken*"])


def test_mutant_reruns_are_capped_even_for_witnesses_with_their_own_settings(
    pytester: pytest.Pytester,
) -> None:
    # Hypothesis binds @settings at decoration time; proof mode must still cap the
    # examples of every mutant re-run (here 500 requested, --fak-mutant-examples 7).
    make_project(
        pytester,
        witness="""
import pytest
from hypothesis import given, settings, strategies as st
import clamplib

@pytest.mark.fak_theorem("CL1.1")
@settings(max_examples=500)
@given(st.integers(min_value=0, max_value=10**6))
def test_clamp_in_range(x):
    assert clamplib.clamp(x) >= 0
""",
    )
    log = pytester.path / "mutant-calls.log"
    pytester.makepyfile(
        clampmutants=f"""
from unittest import mock
import clamplib
from pytest_fak import mutant

def counted(x, lo=0, hi=10):
    with open({str(log)!r}, "a") as f:
        f.write("x\\n")
    return max(lo, min(x, hi))  # survives: the inputs never exceed the bound

@mutant("CL1.1/no-upper")
def no_upper():
    return mock.patch.object(clamplib, "clamp", counted)
"""
    )
    pytester.runpytest("--fak-theorems", "--fak-mutant-examples", "7")
    calls = len(log.read_text().splitlines())
    assert 1 <= calls <= 7 + 2, f"the mutant re-run tried {calls} examples"


def test_fak_max_examples_caps_witnesses_with_their_own_settings(pytester: pytest.Pytester) -> None:
    make_project(
        pytester,
        witness="""
import pytest
from hypothesis import given, settings, strategies as st
import clamplib

@pytest.mark.fak_theorem("CL1.1")
@settings(max_examples=500)
@given(st.integers())
def test_clamp_in_range(x):
    assert 0 <= clamplib.clamp(x) <= 10
""",
    )
    pytester.runpytest("--fak-theorems", "--fak-max-examples", "5")
    (w,) = verdicts(pytester)["CL1.1"]["witnesses"]
    assert w["outcome"] == "passed" and 1 <= w["examples"] <= 5


def test_fak_max_examples_from_the_ini_file(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makeini("[pytest]\nfak_max_examples = 4\n")
    pytester.runpytest("--fak-theorems")
    (w,) = verdicts(pytester)["CL1.1"]["witnesses"]
    assert 1 <= w["examples"] <= 4
    pytester.makeini("[pytest]\nfak_max_examples = many\n")
    result = pytester.runpytest("--fak-theorems")
    result.stderr.fnmatch_lines(["*fak_max_examples*expected a whole number*"])


def test_the_fak_profile_never_inherits_a_fak_profile_left_loaded(
    pytester: pytest.Pytester,
) -> None:
    """An earlier run in this process that left its ``fak`` profile loaded (15 examples)
    must not hand that count to the next run, which has no cap of its own."""
    from hypothesis import settings

    from pytest_fak import hyp

    before = settings.get_current_profile_name()
    hyp.register_profiles(10, 15)
    hyp.load_profile(hyp.PROFILE)
    try:
        make_project(pytester)
        pytester.runpytest("--fak-theorems").assert_outcomes(passed=1)
    finally:
        settings.load_profile(before)
    (w,) = verdicts(pytester)["CL1.1"]["witnesses"]
    assert w["examples"] >= 50
