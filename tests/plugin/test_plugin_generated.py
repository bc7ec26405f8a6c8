"""Generated mutants: each operator's mutant, applying one, and the proof run's use of them
(a survivor is not PROVEN, a waiver, a stale waiver, a timeout, the cache by content)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_fak.generated import GeneratedMutant, generate
from tests.plugin import mutation_sample as sample

from .plugin_project import DOC, make_project, make_small_project, verdicts

SAMPLE = "tests.plugin.mutation_sample"


def _changes(m: GeneratedMutant) -> tuple[list[str], list[str]]:
    lines = m.diff.splitlines()[2:]
    old = [ln[1:].strip() for ln in lines if ln.startswith("-")]
    new = [ln[1:].strip() for ln in lines if ln.startswith("+")]
    return old, new


@pytest.mark.parametrize(
    ("name", "operator", "old", "new"),
    [
        ("compare", "compare-boundary", "return x < 3", "return x <= 3"),
        ("compare", "compare-negate", "return x < 3", "return x >= 3"),
        ("compare", "constant", "return x < 3", "return x < 4"),
        ("compare", "constant", "return x < 3", "return x < 2"),
        ("arith", "arith", "return x + 1", "return x - 1"),
        ("boolean", "boolean", "return a and not b", "return a or not b"),
        ("boolean", "boolean", "return a and not b", "return a and b"),
        ("flag", "boolean", "return True", "return False"),
        ("constant", "constant", 'return "deny"', 'return ""'),
        ("constant", "return-value", 'return "deny"', "return None"),
        ("remove", "remove-statement", "log.append(1)", "pass"),
        ("loop", "break-continue", "break", "continue"),
        ("loop", "negate-condition", "if i < 0:", "if not (i < 0):"),
        ("loop", "arith", "total += i", "total -= i"),
        ("swallow", "swallow-except", "raise LookupError(x) from None", "pass"),
        ("spin", "negate-condition", "while i < n:", "while not (i < n):"),
    ],
)
def test_each_operator_makes_its_mutant(name: str, operator: str, old: str, new: str) -> None:
    gen = generate(f"{SAMPLE}:{name}")
    assert gen.unmutable is None
    found = [_changes(m) for m in gen.mutants if m.operator == operator]
    assert ([old], [new]) in found, found


def test_swap_branches_swaps_if_and_else_bodies() -> None:
    (m,) = [m for m in generate(f"{SAMPLE}:branches").mutants if m.operator == "swap-branches"]
    assert sample.branches(1) == "yes"
    with m.applied():
        assert sample.branches(1) == "no"
        assert sample.branches(0) == "yes"
    assert sample.branches(1) == "yes"


def test_applying_a_mutant_changes_every_caller_and_leaving_restores_it() -> None:
    by_op = {m.operator: m for m in generate(f"{SAMPLE}:swallow").mutants}
    fn = sample.swallow  # a reference taken before the mutant is applied
    with by_op["swallow-except"].applied():
        assert fn("x") is None  # the except block swallowed the refusal
    with pytest.raises(LookupError):
        fn("x")


def test_a_method_mutant_keeps_private_name_mangling_and_its_decorator() -> None:
    (m,) = [m for m in generate(f"{SAMPLE}:Counter.bumped").mutants if m.operator == "arith"]
    c = sample.Counter()
    with m.applied():
        assert c.bumped == -1
    assert c.bumped == 0


def test_mutant_ids_are_stable_and_name_symbol_operator_and_text() -> None:
    a = [m.id for m in generate(f"{SAMPLE}:loop").mutants]
    assert a == [m.id for m in generate(f"{SAMPLE}:loop").mutants]
    assert len(set(a)) == len(a)
    (brk,) = [i for i in a if i.startswith(f"{SAMPLE}:loop/break-continue/")]
    assert len(brk.rsplit("/", 1)[1]) == 8  # the hash of `break` → `continue`, no position
    m = next(m for m in generate(f"{SAMPLE}:loop").mutants if m.operator == "break-continue")
    assert m.filename.endswith("mutation_sample.py")
    assert m.line == sample.loop.__code__.co_firstlineno + 4


# ---------------------------------------------------------------- the proof run

EXACT = """
import pytest
from hypothesis import given, strategies as st
import clamplib

@pytest.mark.fak_theorem("CL1.1")
@given(st.integers(-50, 50))
def test_clamp_exact(x):
    assert clamplib.clamp(x) == min(max(x, 0), 10)
"""


def _boundary_ids(pytester: pytest.Pytester) -> list[str]:
    """The two generated mutants of clamp that no test can kill (x < lo ↔ x <= lo)."""
    ids = [m.id for m in generate("clamplib:clamp").mutants if m.operator == "compare-boundary"]
    assert len(ids) == 2
    return ids


def _generated(pytester: pytest.Pytester, report_dir: str = "proofs") -> dict[str, Any]:
    gen: dict[str, Any] = verdicts(pytester, report_dir)["CL1.1"]["generated"]
    return gen


def _waive(ids: list[str]) -> str:
    why = "equal at the bound: clamp returns x == lo (or hi) either way"
    bullets = "".join(f"- `{i}` — {why}\n" for i in ids)
    return DOC + "\n**EQUIVALENT-MUTANTS.**\n" + bullets


def test_surviving_generated_mutant_makes_the_theorem_vacuous_with_file_line_and_diff(
    pytester: pytest.Pytester,
) -> None:
    make_project(pytester, witness=EXACT)
    result = pytester.runpytest("--fak-theorems", "--fak-mutate=full")
    assert result.ret == 1
    t = verdicts(pytester)["CL1.1"]
    assert t["verdict"] == "VACUOUS"
    g = t["generated"]
    survivors = {s["id"] for s in g["survivors"]}
    assert survivors == set(_boundary_ids(pytester))
    assert g["survived"] == 2
    assert g["killed"] == g["generated"] - 2
    s = g["survivors"][0]
    assert s["operator"] == "compare-boundary"
    assert s["where"].startswith("clamplib.py:")
    assert "-    if x < lo:" in s["diff"] or "-    if x > hi:" in s["diff"]
    assert any("2 of" in r and "generated mutants survived" in r for r in t["reasons"])
    md = (pytester.path / "proofs" / "PROOFS.md").read_text()
    assert "**GENERATED MUTANTS.**" in md
    assert "```diff" in md


def test_waived_equivalent_mutants_let_the_theorem_be_proven(pytester: pytest.Pytester) -> None:
    make_project(pytester, witness=EXACT)
    doc = _waive(_boundary_ids(pytester))
    (pytester.path / "theorems" / "clamp.md").write_text(doc, encoding="utf-8")
    result = pytester.runpytest("--fak-theorems", "--fak-mutate=full")
    assert result.ret == 0, result.stdout.str()
    t = verdicts(pytester)["CL1.1"]
    assert t["verdict"] == "PROVEN"
    g = t["generated"]
    assert (g["waived"], g["survived"], g["score"]) == (2, 0, 1.0)
    assert {w["id"] for w in g["waivers"]} == set(_boundary_ids(pytester))


def test_mutants_on_lines_no_witness_executes_survive_as_uncovered(
    pytester: pytest.Pytester,
) -> None:
    low_only = """
import pytest
import clamplib

@pytest.mark.fak_theorem("CL1.1")
def test_clamp_low():
    assert clamplib.clamp(-5) == 0
"""
    make_project(pytester, witness=low_only)
    pytester.runpytest("--fak-theorems", "--fak-mutate=full")
    g = _generated(pytester)
    status = {s["diff"].splitlines()[-2].strip(): s["status"] for s in g["survivors"]}
    assert status["+        return None"] == "uncovered"  # `return hi`: never reached
    assert verdicts(pytester)["CL1.1"]["verdict"] == "VACUOUS"


def test_a_stale_waiver_makes_its_theorem_error_naming_file_and_line(
    pytester: pytest.Pytester,
) -> None:
    make_project(pytester, witness=EXACT)
    doc = _waive(["clamplib:clamp/compare-boundary/00000000"])
    (pytester.path / "theorems" / "clamp.md").write_text(doc, encoding="utf-8")
    result = pytester.runpytest("--fak-theorems", "--fak-mutate=incremental")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # a verdict, not a stopped run
    t = verdicts(pytester)["CL1.1"]
    assert t["verdict"] == "ERROR"
    assert t["reasons"][0].startswith(
        "the waiver of clamplib:clamp/compare-boundary/00000000 (clamp.md:2"
    )
    assert all(i in t["reasons"][0] for i in _boundary_ids(pytester))  # the ids to copy
    # with the generated phase off the waiver is not checked (nothing was generated)
    assert pytester.runpytest("--fak-theorems").ret == 0


def test_generated_phase_is_off_by_default(pytester: pytest.Pytester) -> None:
    make_project(pytester, witness=EXACT)
    assert pytester.runpytest("--fak-theorems").ret == 0
    t = verdicts(pytester)["CL1.1"]
    assert (t["verdict"], t["generated"]) == ("PROVEN", None)
    assert not (pytester.path / ".fak-cache").exists()


SPIN_LIB = """
def spin(n):
    i = 0
    while i < n:
        i += 1
    return i
"""

SPIN_DOC = """# Spin

## SP1 — spin counts up

**THEOREM.** `spin(n)` returns n for n >= 0.

**REGIME.** A

**PROOF.** `spinlib:spin` counts up to n.

**ANCHORS.**
- `spinlib:spin`

**MUTANTS.**
- `off-by-one` — spin returns n + 1

**CAVEATS.**
- Small n only.
"""

SPIN_TEST = """
from unittest import mock
import pytest
import spinlib
from pytest_fak import mutant

@mutant("SP1/off-by-one")
def off_by_one():
    return mock.patch.object(spinlib, "spin", lambda n: n + 1)

@pytest.mark.fak_theorem("SP1")
def test_spin():
    assert spinlib.spin(3) == 3
"""


def test_a_mutant_that_hangs_is_killed_by_its_deadline(pytester: pytest.Pytester) -> None:
    make_small_project(pytester, SPIN_DOC, spinlib=SPIN_LIB, test_spin=SPIN_TEST)
    result = pytester.runpytest(
        "--fak-theorems", "--fak-mutate=full", "--fak-mutant-timeout=0.3", "--fak-fail-on=none"
    )
    assert result.ret == 0
    g = verdicts(pytester)["SP1"]["generated"]
    hang = next(m for m in generate("spinlib:spin").mutants if "i -= 1" in m.diff)
    assert hang.id not in {s["id"] for s in g["survivors"] + g["unmeasured"]}
    cache = json.loads((pytester.path / ".fak-cache" / "mutants.json").read_text())
    rows = [(k.split("/")[0], r[1]) for k, rs in cache["mutants"].items() for r in rs]
    assert ("spinlib:spin", "timeout") in rows


def test_the_cache_hits_on_unchanged_content_and_misses_on_changed_content(
    pytester: pytest.Pytester,
) -> None:
    make_project(pytester, witness=EXACT)
    (pytester.path / "theorems" / "clamp.md").write_text(
        _waive(_boundary_ids(pytester)), encoding="utf-8"
    )
    args = ("--fak-theorems", "--fak-mutate=incremental", "--fak-report-dir=r")
    assert pytester.runpytest(*args).ret == 0
    first = _generated(pytester, "r")
    assert first["runs"] > 0 and first["cache_hits"] == 0
    # no change: every outcome comes from the cache
    assert pytester.runpytest(*args).ret == 0
    again = _generated(pytester, "r")
    assert again["runs"] == 0
    assert again["cache_hits"] == first["generated"] - first["waived"]
    assert {k: again[k] for k in ("killed", "waived", "survived")} == {
        k: first[k] for k in ("killed", "waived", "survived")
    }
    # a comment in the witness's module changes nothing it runs: still every hit
    test_file = Path(pytester.path / "test_clamp.py")
    test_file.write_text(test_file.read_text() + "\n# edited\n", encoding="utf-8")
    assert pytester.runpytest(*args).ret == 0
    assert _generated(pytester, "r")["runs"] == 0
    # the witness itself changed: its outcomes are recomputed
    test_file.write_text(
        test_file.read_text().replace("min(max(x, 0), 10)", "min(10, max(x, 0))"),
        encoding="utf-8",
    )
    assert pytester.runpytest(*args).ret == 0
    assert _generated(pytester, "r")["runs"] == first["runs"]
    # full ignores the cache
    assert pytester.runpytest("--fak-theorems", "--fak-mutate=full", "--fak-report-dir=r").ret == 0
    assert _generated(pytester, "r")["cache_hits"] == 0


def test_a_downstream_project_mutates_its_own_anchors_with_the_same_cache(
    pytester: pytest.Pytester,
) -> None:
    import shutil

    example = Path(__file__).resolve().parents[2] / "examples" / "airline"
    shutil.copytree(example, pytester.path, dirs_exist_ok=True)
    shutil.rmtree(pytester.path / "proofs", ignore_errors=True)
    pytester.syspathinsert()
    args = ("--fak-theorems", "--fak-mutate=incremental", "--fak-fail-on=none")
    args += ("--fak-max-examples=15", "--fak-mutant-examples=10")
    assert pytester.runpytest(*args).ret == 0
    g = verdicts(pytester)["AIR1.1"]["generated"]
    assert g["generated"] > 10 and g["killed"] > 0 and g["runs"] > 0
    assert {s["id"].split("/")[0] for s in g["survivors"]} <= {
        "airline_rules:BaggageLimit.adjudicate"
    }
    assert (pytester.path / ".fak-cache" / "mutants.json").is_file()
    assert pytester.runpytest(*args).ret == 0
    again = verdicts(pytester)["AIR1.1"]["generated"]
    assert (again["runs"], again["killed"]) == (0, g["killed"])


def test_a_committed_cache_hits_in_a_clean_copy_at_another_path(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The cache is keyed by content and rootdir-relative node ids only: a project and its
    ``.fak-cache/`` copied elsewhere (a clean clone on CI) re-run no mutant."""
    import shutil
    import subprocess
    import sys

    example = Path(__file__).resolve().parents[2] / "examples" / "airline"
    shutil.copytree(example, pytester.path, dirs_exist_ok=True)
    shutil.rmtree(pytester.path / "proofs", ignore_errors=True)
    args = [
        "--fak-theorems",
        "--fak-mutate=incremental",
        "--fak-fail-on=none",
        "-p",
        "no:cacheprovider",
    ]
    args += ["--fak-max-examples=15", "--fak-mutant-examples=10"]
    first = pytester.runpytest_subprocess(*args)
    assert first.ret == 0, first.stdout.str()
    g = verdicts(pytester)["AIR1.1"]["generated"]
    assert g["runs"] > 0 and g["cache_hits"] == 0
    cache = (pytester.path / ".fak-cache" / "mutants.json").read_text()
    assert str(pytester.path) not in cache

    moved = tmp_path_factory.mktemp("elsewhere") / "deeper" / "airline"
    shutil.copytree(pytester.path, moved, ignore=shutil.ignore_patterns("proofs", "__pycache__"))
    again = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=moved,
        capture_output=True,
        text=True,
        check=False,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    t = json.loads((moved / "proofs" / "verdicts.json").read_text())["theorems"]
    h = next(x for x in t if x["id"] == "AIR1.1")["generated"]
    assert h["runs"] == 0
    assert h["cache_hits"] >= g["generated"] - g["waived"]
    assert (h["killed"], h["survived"]) == (g["killed"], g["survived"])


THREAD_LIB = """
import threading

def start(box):
    t = threading.Thread(target=fill, args=(box,))
    t.start()
    t.join()
    return box

def fill(box):
    box.append(int("1"))
"""

THREAD_DOC = SPIN_DOC.replace("SP1 — spin counts up", "TH1 — the thread fills the box")
THREAD_DOC = THREAD_DOC.replace("`spinlib:spin`", "`threadlib:fill`").replace(
    "`off-by-one` — spin returns n + 1", "`empty` — the box stays empty"
)

THREAD_TEST = """
from unittest import mock
import pytest
import threadlib
from pytest_fak import mutant

@mutant("TH1/empty")
def empty():
    return mock.patch.object(threadlib, "fill", lambda box: None)

@pytest.mark.fak_theorem("TH1")
def test_fill():
    assert threadlib.start([]) == [1]
"""


def test_a_thread_a_mutant_crashes_is_not_an_error_of_the_witness(
    pytester: pytest.Pytester,
) -> None:
    """`int("")` under a mutant kills the worker thread; pytest would report that at the
    witness's teardown (an error on the real code, REFUTED) unless the phase keeps it."""
    pytester.syspathinsert()
    pytester.makeini("[pytest]\naddopts = -p no:schemathesis\nfilterwarnings = error\n")
    pytester.makepyfile(threadlib=THREAD_LIB, test_thread=THREAD_TEST)
    (pytester.path / "theorems").mkdir()
    (pytester.path / "theorems" / "th.md").write_text(THREAD_DOC, encoding="utf-8")
    result = pytester.runpytest("--fak-theorems", "--fak-mutate=full", "--fak-fail-on=REFUTED")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=1)
    t = verdicts(pytester)["TH1"]
    crash = next(m for m in generate("threadlib:fill").mutants if 'int("")' in m.diff)
    assert crash.id not in {s["id"] for s in t["generated"]["survivors"]}
    assert t["witnesses"][0]["outcome"] == "passed"
