"""Survivors a user can act on: ``fak mutants list|show``, the waiver to paste, the
terminal and GitHub annotations at the surviving mutant's own line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fak_core.cli import main
from pytest_fak.generated import generate
from pytest_fak.survivors import click_path
from pytest_fak.theorems import parse_document

from .plugin_project import DOC, make_project, verdicts
from .test_plugin_generated import EXACT


def _boundary(pytester: pytest.Pytester) -> dict[str, int]:
    """The two mutants of clamp no witness can kill (x < lo ↔ x <= lo), id → line."""
    return {
        m.id: m.line for m in generate("clamplib:clamp").mutants if m.operator == "compare-boundary"
    }


def _fak(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_survivors_are_listed_shown_and_waived_with_the_snippet_printed(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    make_project(pytester, witness=EXACT)
    result = pytester.runpytest("--fak-theorems", "--fak-mutate=full")
    assert result.ret == 1
    boundary = _boundary(pytester)
    # the terminal lists every survivor at its own line, and where the details are
    for mid, line in boundary.items():
        result.stdout.fnmatch_lines([f"  clamplib.py:{line}: {mid} (compare-boundary; CL1.1)"])
    result.stdout.fnmatch_lines(["*fak mutants list --survivors, fak mutants show ID*"])
    capsys.readouterr()

    code, out, _ = _fak(capsys, "mutants", "list", "--survivors")
    assert code == 0
    listed = [ln for ln in out.splitlines() if not ln.startswith("fak mutants:")]
    assert sorted(listed) == sorted(
        f"{mid}  CL1.1  survived  clamplib.py:{line}" for mid, line in boundary.items()
    )
    code, out, _ = _fak(capsys, "mutants", "list", "--theorem", "CL1.1")
    assert code == 0
    every = {m.id for m in generate("clamplib:clamp").mutants}
    statuses = dict(re.findall(r"^(\S+)  CL1\.1  (\S+)", out, re.M))
    assert set(statuses) == every
    assert {k for k, v in statuses.items() if v == "survived"} == set(boundary)
    assert {v for k, v in statuses.items() if k not in boundary} == {"killed"}

    mid = sorted(boundary)[0]
    code, out, _ = _fak(capsys, "mutants", "show", mid)
    assert code == 0
    assert f"location:  clamplib.py:{boundary[mid]}" in out
    assert "test_clamp.py::test_clamp_exact (survived)" in out
    assert re.search(r"^-\s+if x [<>] (lo|hi):$", out, re.M)
    assert re.search(r"^\+\s+if x [<>]= (lo|hi):$", out, re.M)
    snippet = out[out.index("**EQUIVALENT-MUTANTS.**") :].strip()
    # a killed mutant has no snippet, but names its killer
    killed = next(i for i in sorted(every - set(boundary)))
    code, out, _ = _fak(capsys, "mutants", "show", killed)
    assert "outcome:   killed" in out and "test_clamp_exact (killed)" in out
    assert "EQUIVALENT-MUTANTS" not in out

    # pasted into the theorem as printed, for both survivors, it parses and waives them
    other = sorted(boundary)[1]
    code, out, _ = _fak(capsys, "mutants", "show", other)
    second = out[out.index("**EQUIVALENT-MUTANTS.**") :].strip().splitlines()[1]
    doc = DOC + "\n" + snippet + "\n" + second + "\n"
    (t,) = parse_document("clamp.md", doc)
    assert {w.mutant_id for w in t.equivalent} == set(boundary)
    (pytester.path / "theorems" / "clamp.md").write_text(doc, encoding="utf-8")
    again = pytester.runpytest("--fak-theorems", "--fak-mutate=full")
    assert again.ret == 0, again.stdout.str()
    assert verdicts(pytester)["CL1.1"]["verdict"] == "PROVEN"
    code, out, _ = _fak(capsys, "mutants", "list", "--survivors")
    assert "0 listed, 0 survivors" in out


def test_github_annotates_each_survivor_at_its_own_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    make_project(pytester, witness=EXACT)
    result = pytester.runpytest("--fak-theorems", "--fak-mutate=full")
    for mid, line in _boundary(pytester).items():
        result.stdout.fnmatch_lines(
            [
                f"::error file=clamplib.py,line={line},title=fak surviving mutant of CL1.1::"
                f"{mid} (compare-boundary) survived every witness of CL1.1:%0A*"
            ]
        )


def test_a_path_outside_the_working_directory_is_absolute() -> None:
    here = Path(__file__).resolve()
    assert click_path(str(here), 3, cwd=here.parent) == f"{here.name}:3"
    installed = Path(pytest.__file__).resolve()  # site-packages: not under the project
    assert click_path(str(installed), 7, cwd=here.parent) == f"{installed.as_posix()}:7"


def test_a_report_outside_the_project_is_a_clear_error(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _fak(capsys, "mutants", "list")
    assert code == 2
    assert "cannot read" in err and "--fak-mutate" in err


def test_a_survivor_in_installed_code_is_written_with_its_absolute_path(tmp_path: Path) -> None:
    import fak_core.sinks
    from pytest_fak.report import _relative

    sinks = Path(fak_core.sinks.__file__).resolve()
    row = {"id": "x", "operator": "constant", "status": "survived", "diff": ""}
    gen = {"survivors": [{**row, "where": f"{sinks}:338"}], "unmeasured": []}
    (got,) = _relative(gen, tmp_path)["survivors"]  # type: ignore[index]
    assert got["where"] == f"{sinks.as_posix()}:338"  # not fak_core/sinks.py:338


def test_fail_under_lets_a_project_adopt_generated_mutants_gradually(
    pytester: pytest.Pytester,
) -> None:
    make_project(pytester, witness=EXACT)
    n = len(generate("clamplib:clamp").mutants)
    score = round(100 * (n - 2) / n, 2)  # the two boundary mutants survive
    below = pytester.runpytest("--fak-theorems", "--fak-mutate=full", "--fak-fail-under=100")
    assert below.ret == 1
    below.stdout.fnmatch_lines([f"fak: FAILED: mutation score {score:g}% < 100% (overall) · *"])
    ok = pytester.runpytest("--fak-theorems", "--fak-mutate=incremental", "--fak-fail-under=50")
    assert ok.ret == 0, ok.stdout.str()
    ok.stdout.fnmatch_lines([f"fak: 1 VACUOUS · mutation score {score:g}%"])
    doc = json.loads((pytester.path / "proofs" / "verdicts.json").read_text())
    assert doc["theorems"][0]["verdict"] == "VACUOUS"  # still reported as it is
    assert doc["run"]["fail_under"] == {
        "overall": 50.0,
        "theorems": {},
        "score": score,
        "scores": {"CL1.1": score},
        "below": [],
    }
    per = pytester.runpytest(
        "--fak-theorems",
        "--fak-mutate=incremental",
        "--fak-fail-under=50",
        "--fak-fail-under",
        "CL1.1=99.5",
    )
    assert per.ret == 1
    per.stdout.fnmatch_lines([f"fak: FAILED: mutation score {score:g}% < 99.5% (CL1.1) · *"])
    bad = pytester.runpytest("--fak-theorems", "--fak-fail-under=CL9.9=50")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--fak-fail-under CL9.9=50: no theorem 'CL9.9'*"])
    # no threshold: today's behaviour, a survivor fails the run
    assert pytester.runpytest("--fak-theorems", "--fak-mutate=incremental").ret == 1


def test_code_the_user_does_not_own_is_not_mutated_unless_asked(
    pytester: pytest.Pytester,
) -> None:
    from .plugin_project import LIB

    make_project(pytester, witness=EXACT.replace("clamplib", "extlib"), doc=DOC)
    site = pytester.path / "venv" / "lib" / "site-packages"  # an installed package
    site.mkdir(parents=True)
    (site / "extlib.py").write_text(LIB)
    pytester.syspathinsert(site)
    doc = DOC.replace("clamplib:clamp", "extlib:clamp")
    (pytester.path / "theorems" / "clamp.md").write_text(doc, encoding="utf-8")
    pytester.makepyfile(
        clampmutants=(
            "from unittest import mock\nimport extlib\nfrom pytest_fak import mutant\n\n"
            '@mutant("CL1.1/no-upper")\ndef no_upper():\n'
            '    return mock.patch.object(extlib, "clamp", lambda x, lo=0, hi=10: max(x, lo))\n'
        )
    )
    result = pytester.runpytest("--fak-theorems", "--fak-mutate=full")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "fak: 1 anchors in installed code were not mutated (modules: extlib); they are "
            "installed code, not this project's: pass --fak-mutate-installed *"
        ]
    )
    doc_ = json.loads((pytester.path / "proofs" / "verdicts.json").read_text())
    assert doc_["run"]["not_mutated"]["symbols"] == ["extlib:clamp"]
    assert doc_["theorems"][0]["generated"]["generated"] == 0
    asked = pytester.runpytest("--fak-theorems", "--fak-mutate=full", "--fak-mutate-installed")
    assert asked.ret == 1  # the two boundary survivors
    g = verdicts(pytester)["CL1.1"]["generated"]
    assert g["generated"] == len(generate("extlib:clamp").mutants)
    assert all(s["where"].startswith("venv/lib/site-packages/extlib.py:") for s in g["survivors"])
    asked.stdout.no_fnmatch_line("*were not mutated*")
