"""pytester tests: verdicts CI can read (last line, JUnit, GitHub Actions, --fak-compare,
the report's JSON Schema) and what the report says (issue 15)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from pytest_fak.report import schema_errors

from .plugin_project import make_project, verdicts

WEAK = """
import pytest
import clamplib

@pytest.mark.fak_theorem("CL1.1")
def test_clamp_low():
    assert clamplib.clamp(-5) == 0
"""


def last_line(result: pytest.RunResult) -> str:
    return [ln for ln in result.stdout.lines if ln.strip()][-1]


def test_the_last_line_says_failed_and_why_or_the_count(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    ok = pytester.runpytest("--fak-theorems")
    assert last_line(ok) == "fak: 1 PROVEN"
    make_project(pytester, witness=WEAK)
    bad = pytester.runpytest("--fak-theorems")
    bad.assert_outcomes(passed=1)  # pytest's own line counts tests: "1 passed"
    assert bad.ret == 1
    assert last_line(bad) == "fak: FAILED: 1 VACUOUS (CL1.1)"


def test_junit_has_a_testcase_per_theorem_with_its_verdict(pytester: pytest.Pytester) -> None:
    make_project(pytester, witness=WEAK)
    pytester.runpytest("--fak-theorems", "--junit-xml=out.xml", "-o", "junit_family=xunit1")
    root = ET.parse(pytester.path / "out.xml").getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    theorem = cases["CL1.1"]
    assert theorem.get("classname") == "theorems.clamp.md"
    assert theorem.find("failure") is not None
    props = {p.get("name"): p.get("value") for p in theorem.iter("property")}
    assert props["fak_verdict"] == "VACUOUS"
    assert props["fak_mutants_killed"] == "0/1"
    assert props["fak_witnesses"] == "1"
    witness = {p.get("name"): p.get("value") for p in cases["test_clamp_low"].iter("property")}
    assert witness["fak_theorem"] == "CL1.1"
    assert witness["fak_mutants_killed"] == ""


def test_github_step_summary_and_error_annotations(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = pytester.path / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    make_project(pytester, witness=WEAK)
    result = pytester.runpytest("--fak-theorems")
    result.stdout.fnmatch_lines(
        ["::error file=theorems/clamp.md,line=6,title=fak VACUOUS CL1.1::clamp stays in range*"]
    )
    text = summary.read_text()
    assert text.startswith("earlier step\n## fak proofs")  # appended, not overwritten
    assert "**fak: FAILED: 1 VACUOUS (CL1.1)**" in text
    assert "| CL1.1 | VACUOUS | mutant CL1.1/no-upper survived" in text


def test_no_github_output_outside_github_actions(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    make_project(pytester, witness=WEAK)
    result = pytester.runpytest("--fak-theorems")
    result.stdout.no_fnmatch_line("::error*")


def test_fak_compare_prints_the_transitions(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.runpytest("--fak-theorems")
    committed = json.loads((pytester.path / "proofs" / "verdicts.json").read_text())
    gone = dict(committed["theorems"][0], id="CL0.9")
    committed["theorems"].append(gone)
    (pytester.path / "committed.json").write_text(json.dumps(committed))
    make_project(pytester, witness=WEAK)
    result = pytester.runpytest("--fak-theorems", "--fak-compare", "committed.json")
    result.stdout.fnmatch_lines(
        [
            "fak: against committed.json: 2 changes",
            "  CL1.1: PROVEN -> VACUOUS",
            "  CL0.9: removed (was PROVEN)",
        ]
    )
    missing = pytester.runpytest("--fak-theorems", "--fak-compare", "nope.json")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*--fak-compare*nope.json: cannot read it*"])


def test_the_written_report_matches_the_shipped_schema(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.runpytest("--fak-theorems")
    doc = json.loads((pytester.path / "proofs" / "verdicts.json").read_text())
    assert schema_errors(doc) == []
    doc["theorems"][0]["verdict"] = "MAYBE"
    assert any("MAYBE" in e for e in schema_errors(doc))


def test_a_report_hook_that_breaks_the_schema_writes_nothing(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makeconftest(
        """
def pytest_fak_modify_report(config, report):
    report["theorems"][0]["verdict"] = "PROBABLY"
"""
    )
    result = pytester.runpytest("--fak-theorems")
    assert result.ret == 1
    assert not (pytester.path / "proofs").exists()
    assert last_line(result).startswith("fak: FAILED: no report written: the report does not")


def test_the_report_names_killers_idle_witnesses_budget_and_versions(
    pytester: pytest.Pytester,
) -> None:
    make_project(pytester)
    pytester.makepyfile(
        test_weak="""
import pytest
import clamplib

@pytest.mark.fak_theorem("CL1.1")
def test_clamp_low():
    assert clamplib.clamp(-5) == 0
"""
    )
    pytester.runpytest("--fak-theorems", "--fak-mutant-examples=9")
    t = verdicts(pytester)["CL1.1"]
    assert t["verdict"] == "PROVEN"
    assert t["idle_witnesses"] == ["test_weak.py::test_clamp_low"]
    doc = json.loads((pytester.path / "proofs" / "verdicts.json").read_text())
    assert doc["environment"]["mutant_examples"] == 9
    md = (pytester.path / "proofs" / "PROOFS.md").read_text()
    assert "the upper bound is ignored): killed, by `test_clamp.py::test_clamp_in_range`" in md
    assert "Witnesses that killed no declared mutant: `test_weak.py::test_clamp_low`." in md
    assert "each re-run under a mutant at most 9" in md
    from importlib import metadata

    hv = metadata.version("hypothesis")
    assert f"pytest-fak 0.1.0, pytest {pytest.__version__}, Hypothesis {hv}, Python 3." in md


@pytest.mark.parametrize("form", ["space", "equals", "space-n2"])
def test_fak_compare_with_a_path_outside_the_project_keeps_the_rootdir(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, form: str
) -> None:
    make_project(pytester)
    pytester.runpytest("--fak-theorems")
    artifact = tmp_path_factory.mktemp("ci-artifact") / "prev.json"
    artifact.write_text((pytester.path / "proofs" / "verdicts.json").read_text())
    if form.startswith("space"):
        opt = ["--fak-compare", str(artifact)]
    else:
        opt = [f"--fak-compare={artifact}"]
    if form.endswith("n2"):
        result = pytester.runpytest_subprocess("--fak-theorems", "-n", "2", *opt)
    else:
        result = pytester.runpytest("--fak-theorems", *opt)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [f"rootdir: {pytester.path}*", f"fak: against {artifact}: no change"]
    )
    assert verdicts(pytester)["CL1.1"]["verdict"] == "PROVEN"
