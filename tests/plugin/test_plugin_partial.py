"""pytester tests: partial proof runs (-k, node ids, --lf, --fak-theorem, --co) keep the
verdicts of what they did not run, and fail only on what they ran (issue 15)."""

from __future__ import annotations

import json
import shlex

import pytest

from .plugin_project import DOC, make_project, verdicts

# A second theorem, CL1.2, bound to its own witness, with its own mutant.
DOC2 = (
    DOC
    + """
## CL1.2 — clamp keeps the lower bound

**THEOREM.** For every integer x, `clamp(x)` is at least 0.

**REGIME.** A

**PROOF.** `clamplib:clamp` returns the lower bound below it.

**ANCHORS.**
- `clamplib:clamp`

**MUTANTS.**
- `no-lower` — the lower bound is ignored

**CAVEATS.**
- Only the default bounds are tested.
"""
)

MUTANTS2 = """
from unittest import mock
import clamplib
from pytest_fak import mutant

@mutant("CL1.1/no-upper")
def no_upper():
    open("applied-no-upper", "a").close()
    return mock.patch.object(clamplib, "clamp", lambda x, lo=0, hi=10: max(x, lo))

@mutant("CL1.2/no-lower")
def no_lower():
    return mock.patch.object(clamplib, "clamp", lambda x, lo=0, hi=10: min(x, hi))
"""

WITNESSES2 = """
import pytest
import clamplib

@pytest.mark.fak_theorem("CL1.1")
def test_upper():
    assert clamplib.clamp(99) == 10

@pytest.mark.fak_theorem("CL1.2")
def test_lower():
    assert clamplib.clamp(-5) == 0
"""


def project(pytester: pytest.Pytester, witnesses: str = WITNESSES2, doc: str = DOC2) -> None:
    make_project(pytester, witness=witnesses, doc=doc)
    pytester.makepyfile(clampmutants=MUTANTS2)


def backdate(pytester: pytest.Pytester, day: str = "2020-01-02") -> None:
    """Make the committed report look older, so a carried-over date is visible."""
    path = pytester.path / "proofs" / "verdicts.json"
    data = json.loads(path.read_text())
    for t in data["theorems"]:
        t["date"] = day
    data["git"]["commit"] = "a" * 40
    path.write_text(json.dumps(data))


def test_k_runs_one_theorem_and_carries_the_other_over_with_its_date(
    pytester: pytest.Pytester,
) -> None:
    project(pytester)
    assert pytester.runpytest("--fak-theorems").ret == 0
    backdate(pytester)
    result = pytester.runpytest("--fak-theorems", "-k", "test_upper")
    result.assert_outcomes(passed=1, deselected=1)
    assert result.ret == 0
    vs = verdicts(pytester)
    assert vs["CL1.1"]["ran"] is True and vs["CL1.1"]["carried_over"] is None
    assert vs["CL1.1"]["date"] != "2020-01-02"
    old = vs["CL1.2"]
    assert old["verdict"] == "PROVEN" and old["ran"] is False and old["date"] == "2020-01-02"
    assert old["carried_over"]["date"] == "2020-01-02"
    assert old["carried_over"]["commit"] == "a" * 40
    assert "none of its 1 witnesses was selected" in old["carried_over"]["reason"]
    assert old["witnesses"][0]["nodeid"] == "test_clamp.py::test_lower"  # merged, not lost
    data = json.loads((pytester.path / "proofs" / "verdicts.json").read_text())
    assert data["run"]["partial"] is True and data["run"]["not_run"] == 1
    result.stdout.fnmatch_lines(["*fak: 1 PROVEN · 0 REFUTED · 0 VACUOUS · 0 OPEN · 1 not run*"])
    md = (pytester.path / "proofs" / "PROOFS.md").read_text()
    assert "**PROVEN** (carried over, 2020-01-02)" in md
    assert "carried over from the run of 2020-01-02" in md


def test_the_witness_command_is_a_partial_run_of_its_theorem(pytester: pytest.Pytester) -> None:
    project(pytester)
    pytester.runpytest("--fak-theorems")
    backdate(pytester)
    command = verdicts(pytester)["CL1.2"]["witness_command"]
    assert command == "pytest --fak-theorems --fak-theorem 'CL1.2'"
    result = pytester.runpytest(*shlex.split(command)[1:])
    assert result.ret == 0
    vs = verdicts(pytester)
    assert vs["CL1.2"]["ran"] is True
    assert vs["CL1.1"]["carried_over"]["date"] == "2020-01-02"


def test_without_an_earlier_report_a_theorem_not_run_is_open_and_does_not_fail(
    pytester: pytest.Pytester,
) -> None:
    project(pytester)
    result = pytester.runpytest("--fak-theorems", "-k", "test_upper")
    assert result.ret == 0
    t = verdicts(pytester)["CL1.2"]
    assert t["verdict"] == "OPEN" and t["ran"] is False and t["carried_over"] is None
    assert "no earlier verdict to carry over" in t["reasons"][0]


def test_a_partial_run_fails_on_what_it_ran(pytester: pytest.Pytester) -> None:
    project(pytester)
    pytester.runpytest("--fak-theorems")
    pytester.makepyfile(test_clamp=WITNESSES2.replace("== 10", "== 11"))
    result = pytester.runpytest("--fak-theorems", "-k", "test_upper")
    assert result.ret == 1
    vs = verdicts(pytester)
    assert vs["CL1.1"]["verdict"] == "REFUTED"
    assert vs["CL1.2"]["verdict"] == "PROVEN" and vs["CL1.2"]["carried_over"]


def test_only_some_witnesses_of_a_theorem_is_not_a_verdict(pytester: pytest.Pytester) -> None:
    # CL1.1 has two witnesses; only the second kills the mutant. Running the first alone
    # must not make CL1.1 VACUOUS (nor PROVEN): it is carried over.
    two = (
        WITNESSES2
        + """
@pytest.mark.fak_theorem("CL1.1")
def test_upper_weak():
    assert clamplib.clamp(3) == 3
"""
    )
    project(pytester, witnesses=two)
    assert pytester.runpytest("--fak-theorems").ret == 0
    result = pytester.runpytest("--fak-theorems", "-k", "weak")
    assert result.ret == 0
    t = verdicts(pytester)["CL1.1"]
    assert t["verdict"] == "PROVEN" and t["carried_over"]
    assert "only 1 of its 2 witnesses ran" in t["carried_over"]["reason"]


def test_fak_theorem_selects_a_theorem_with_its_witnesses_and_mutants(
    pytester: pytest.Pytester,
) -> None:
    project(pytester)
    pytester.runpytest("--fak-theorems")
    (pytester.path / "applied-no-upper").unlink()
    result = pytester.runpytest("--fak-theorems", "--fak-theorem", "CL1.2")
    result.assert_outcomes(passed=1, deselected=1)
    assert result.ret == 0
    assert not (pytester.path / "applied-no-upper").exists()  # CL1.1's mutant never ran
    vs = verdicts(pytester)
    assert vs["CL1.2"]["ran"] and vs["CL1.2"]["mutants"][0]["status"] == "killed"
    assert vs["CL1.1"]["carried_over"]["reason"] == "not selected by --fak-theorem"
    run = json.loads((pytester.path / "proofs" / "verdicts.json").read_text())["run"]
    assert run["selection"] == ["--fak-theorem CL1.2"]
    glob = pytester.runpytest("--fak-theorems", "--fak-theorem", "CL1.*")
    glob.assert_outcomes(passed=2)
    assert all(t["ran"] for t in verdicts(pytester).values())
    bad = pytester.runpytest("--fak-theorems", "--fak-theorem", "CL9")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--fak-theorem CL9: matches no theorem id*known: CL1.1, CL1.2*"])


def test_fak_theorem_naming_an_orphan_fails(pytester: pytest.Pytester) -> None:
    project(pytester, witnesses=WITNESSES2.split('@pytest.mark.fak_theorem("CL1.2")')[0])
    result = pytester.runpytest("--fak-theorems", "--fak-theorem", "CL1.2")
    assert result.ret == 1
    t = verdicts(pytester)["CL1.2"]
    assert t["verdict"] == "OPEN" and t["ran"] is True
    assert t["reasons"] == ["no test binds this theorem (orphan)"]


def test_an_orphan_in_a_k_run_is_open_but_not_counted_and_fails_a_full_run(
    pytester: pytest.Pytester,
) -> None:
    project(pytester, witnesses=WITNESSES2.split('@pytest.mark.fak_theorem("CL1.2")')[0])
    partial = pytester.runpytest("--fak-theorems", "-k", "upper")
    assert partial.ret == 0
    t = verdicts(pytester)["CL1.2"]
    assert t["verdict"] == "OPEN" and t["ran"] is False
    assert any("an orphan" in r for r in t["reasons"])
    full = pytester.runpytest("--fak-theorems")
    assert full.ret == 1
    full.stdout.fnmatch_lines(["fak: FAILED: 1 OPEN (CL1.2) · 1 PROVEN"])


def test_last_failed_is_a_partial_run(pytester: pytest.Pytester) -> None:
    project(pytester)
    pytester.makepyfile(test_clamp=WITNESSES2.replace("== 10", "== 11"))
    assert pytester.runpytest("--fak-theorems", "-p", "cacheprovider").ret == 1
    pytester.makepyfile(test_clamp=WITNESSES2)
    result = pytester.runpytest("--fak-theorems", "-p", "cacheprovider", "--lf")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    vs = verdicts(pytester)
    assert vs["CL1.1"]["verdict"] == "PROVEN" and vs["CL1.1"]["ran"]
    assert vs["CL1.2"]["verdict"] == "PROVEN" and vs["CL1.2"]["carried_over"]


def test_collect_only_writes_nothing(pytester: pytest.Pytester) -> None:
    project(pytester)
    result = pytester.runpytest("--fak-theorems", "--co")
    assert result.ret == 0
    assert not (pytester.path / "proofs").exists()
    result.stdout.fnmatch_lines(["fak: collect only: no verdicts, nothing written"])
    pytester.runpytest("--fak-theorems")
    before = (pytester.path / "proofs" / "verdicts.json").read_bytes()
    assert pytester.runpytest("--fak-theorems", "--co", "-k", "upper").ret == 0
    assert (pytester.path / "proofs" / "verdicts.json").read_bytes() == before


def test_a_witness_deselected_on_xdist_workers_is_carried_over(pytester: pytest.Pytester) -> None:
    # -m deselects on the workers; the controller learns of it from their output
    project(pytester, witnesses=WITNESSES2.replace('("CL1.2")', '("CL1.2")\n@pytest.mark.slow'))
    pytester.makeini("[pytest]\naddopts = -p no:schemathesis\nmarkers = slow\n")
    assert pytester.runpytest_subprocess("--fak-theorems", "-n", "2").ret == 0
    result = pytester.runpytest_subprocess("--fak-theorems", "-n", "2", "-m", "not slow")
    assert result.ret == 0, result.stdout.str()
    vs = verdicts(pytester)
    assert vs["CL1.1"]["ran"] is True
    assert vs["CL1.2"]["carried_over"]["reason"] == "none of its 1 witnesses was selected"


def test_a_run_stopped_by_x_carries_the_unrun_theorem_over_and_says_partial(
    pytester: pytest.Pytester,
) -> None:
    project(pytester)
    assert pytester.runpytest("--fak-theorems").ret == 0
    backdate(pytester)
    pytester.makepyfile(test_clamp=WITNESSES2.replace("== 10", "== 11"))
    result = pytester.runpytest("--fak-theorems", "-x", "-p", "no:randomly")
    assert result.ret == 1
    result.assert_outcomes(failed=1)
    vs = verdicts(pytester)
    assert vs["CL1.1"]["verdict"] == "REFUTED" and vs["CL1.1"]["ran"] is True
    kept = vs["CL1.2"]
    assert kept["verdict"] == "PROVEN" and kept["ran"] is False  # not OPEN (orphan)
    assert kept["carried_over"]["date"] == "2020-01-02"
    assert kept["carried_over"]["reason"] == "none of its 1 witnesses ran (the run stopped first)"
    run = json.loads((pytester.path / "proofs" / "verdicts.json").read_text())["run"]
    assert run["partial"] is True
    assert "1 collected witnesses did not run (stopping after 1 failures)" in run["selection"]


MANY = WITNESSES2.replace("== 10", "== 11") + "".join(
    f"""

@pytest.mark.fak_theorem("CL1.2")
def test_lower_{i}():
    import time
    time.sleep(0.1)
    assert clamplib.clamp(-{i}) == 0
"""
    for i in range(1, 21)
)


def test_maxfail_on_two_workers_keeps_the_full_report(pytester: pytest.Pytester) -> None:
    # xdist ends a run --maxfail stopped as interrupted: nothing is written, and it says so
    project(pytester, witnesses=MANY.replace("== 11", "== 10"))
    assert pytester.runpytest_subprocess("--fak-theorems", "-n", "2").ret == 0
    report = pytester.path / "proofs" / "verdicts.json"
    before = report.read_bytes()
    pytester.makepyfile(test_clamp=MANY)
    result = pytester.runpytest_subprocess(
        "--fak-theorems", "-n", "2", "--maxfail=1", "-p", "no:randomly"
    )
    assert result.ret != 0
    assert report.read_bytes() == before
    result.stdout.fnmatch_lines(
        ["fak: FAILED: no verdicts (the run stopped); the report is unchanged"]
    )


def test_a_carried_verdict_whose_inputs_changed_is_stale_in_the_partial_run(
    pytester: pytest.Pytester,
) -> None:
    project(pytester)
    assert pytester.runpytest("--fak-theorems").ret == 0
    backdate(pytester)
    # CL1.2's witness changes; the partial run does not run it
    pytester.makepyfile(test_clamp=WITNESSES2.replace("clamp(-5) == 0", "clamp(-6) == 0"))
    result = pytester.runpytest("--fak-theorems", "-k", "test_upper")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "STALE      CL1.2 clamp keeps the lower bound: carried over (PROVEN of 2020-01-02), "
            "but the source of witness test_clamp.py::test_lower changed since*",
            "fak: FAILED: 1 STALE (CL1.2) · 1 PROVEN · 1 not run",
        ]
    )
    kept = verdicts(pytester)["CL1.2"]
    assert kept["verdict"] == "STALE" and kept["carried_over"]["verdict"] == "PROVEN"
    assert (
        pytester.runpytest("--fak-theorems", "-k", "test_upper", "--fak-fail-on=REFUTED").ret == 0
    )
    # put back, the next partial run carries it with its verdict again
    pytester.makepyfile(test_clamp=WITNESSES2)
    assert pytester.runpytest("--fak-theorems", "-k", "test_upper").ret == 0
    kept = verdicts(pytester)["CL1.2"]
    assert kept["verdict"] == "PROVEN" and "verdict" not in kept["carried_over"]
    assert kept["carried_over"]["date"] == "2020-01-02"
