"""The generated-mutant re-runs of a witness that uses fixtures (``monkeypatch``,
``tmp_path``, a wider-scoped patch of the anchor itself) give exactly the verdict of the
witnesses that kill: nothing is hidden from the witnesses that run after it, and no
mutant goes into a spy that replaced the anchor."""

from __future__ import annotations

import pytest

from pytest_fak.generated import generate

from .plugin_project import make_project, verdicts

HEAD = """
import os
import pytest
from hypothesis import given, strategies as st
import clamplib
"""

# kills every generated mutant of clamp but the two at the bounds (x < lo vs x <= lo)
EXACT = """
@pytest.mark.fak_theorem("CL1.1")
@given(st.integers(-50, 50))
def test_z_exact(x):
    assert clamplib.clamp(x) == min(max(x, 0), 10)
"""

MONKEYPATCH = """
@pytest.mark.fak_theorem("CL1.1")
def test_a_monkeypatch(monkeypatch):
    monkeypatch.setenv("FAK_RERUN_PROBE", "1")
    monkeypatch.setattr(clamplib, "LIMIT", 10, raising=False)
    monkeypatch.delattr(clamplib, "unused")  # raises if a re-run finds it still deleted
    assert 0 <= clamplib.clamp(5) <= 10
"""

TMP_PATH = """
@pytest.mark.fak_theorem("CL1.1")
def test_a_tmp_path(tmp_path):
    (tmp_path / "out").mkdir()  # fails if the re-run gets the same directory
    (tmp_path / "out" / "x").write_text(str(clamplib.clamp(5)))
    assert 0 <= clamplib.clamp(5) <= 10
"""

SPY = """
@pytest.mark.fak_theorem("CL1.1")
def test_a_spy(monkeypatch):
    real = clamplib.clamp
    calls = []

    def spy(*a, **k):  # a closure: a mutant swapped into it cannot compile
        calls.append(a)
        return real(*a, **k)

    monkeypatch.setattr(clamplib, "clamp", spy)
    assert 0 <= clamplib.clamp(5) <= 10
    assert calls == [(5,)]
"""

MODULE_SPY = """
@pytest.fixture(scope="module", autouse=True)
def spied():
    real = clamplib.clamp
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(clamplib, "clamp", lambda *a, **k: real(*a, **k))
        yield
"""


def _boundary_ids() -> set[str]:
    ids = {m.id for m in generate("clamplib:clamp").mutants if m.operator == "compare-boundary"}
    assert len(ids) == 2
    return ids


@pytest.mark.parametrize(
    "first",
    [MONKEYPATCH, TMP_PATH, SPY, MODULE_SPY],
    ids=["monkeypatch", "tmp_path", "spy-of-the-anchor", "module-scoped-spy"],
)
def test_a_witness_using_fixtures_does_not_change_what_the_exact_witness_kills(
    pytester: pytest.Pytester, first: str
) -> None:
    make_project(pytester, witness=HEAD + first + EXACT)
    result = pytester.runpytest("--fak-theorems", "--fak-mutate=full")
    result.assert_outcomes(passed=2 if first is not MODULE_SPY else 1)
    t = verdicts(pytester)["CL1.1"]
    g = t["generated"]
    # exactly what test_z_exact alone gives: the two bound mutants survive, all else killed
    assert {s["id"] for s in g["survivors"]} == _boundary_ids()
    assert g["unmeasured"] == [], g["unmeasured"]
    assert g["killed"] == g["generated"] - 2
    assert t["verdict"] == "VACUOUS"


SAMPLE = "tests.plugin.mutation_sample"


def test_a_mutant_goes_into_the_real_function_even_when_its_name_is_patched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.plugin import mutation_sample as sample

    (m,) = [m for m in generate(f"{SAMPLE}:arith").mutants if m.operator == "arith"]
    real = sample.arith
    own = real.__code__

    def spy(x: int) -> int:  # a closure over `real`
        return real(x)

    monkeypatch.setattr(sample, "arith", spy)
    with m.applied():
        assert real(1) == 0  # x + 1 became x - 1 in the function generate() found
        assert spy(1) == 0
        assert spy.__code__ is not real.__code__
    assert real.__code__ is own
    assert real(1) == 2


def test_a_mutant_refuses_a_function_that_is_not_running_its_own_code() -> None:
    from pytest_fak.generated import MutantApplyError

    first, second = [m for m in generate(f"{SAMPLE}:compare").mutants][:2]
    with (
        first.applied(),
        pytest.raises(MutantApplyError, match="not running its own code"),
        second.applied(),
    ):
        pass  # pragma: no cover
