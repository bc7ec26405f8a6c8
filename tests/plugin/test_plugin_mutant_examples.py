"""A proof run whose witnesses all pass offers no Hypothesis patch: the counterexamples
found while mutants were killed fail mutated code only. A witness that fails on the real
code keeps what Hypothesis noted."""

from __future__ import annotations

from typing import Literal

import _hypothesis_pytestplugin  # type: ignore[import-untyped]
import pytest

from pytest_fak import mutant_examples
from pytest_fak.mutant_examples import FAILING_EXAMPLES_KEY

from .plugin_project import make_project

PATCH_LINE = "*git apply .hypothesis/patches/*"


def test_the_key_is_hypothesis_own() -> None:
    assert FAILING_EXAMPLES_KEY == _hypothesis_pytestplugin.FAILING_EXAMPLES_KEY


def test_a_killed_mutant_leaves_no_patch(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    result = pytester.runpytest_subprocess("--fak-theorems", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["fak: 1 PROVEN*"])
    # the declared mutant was killed by a Hypothesis counterexample, yet no patch is offered
    result.stdout.no_fnmatch_line(PATCH_LINE)
    assert not (pytester.path / ".hypothesis" / "patches").exists()
    # without the plugin's hook, the same run offers the mutant's counterexample
    again = pytester.runpytest_subprocess(
        "--fak-theorems", "-p", "no:cacheprovider", "-p", "no:fak-mutant-examples"
    )
    assert again.ret == 0, again.stdout.str()
    again.stdout.fnmatch_lines([PATCH_LINE])


def test_only_a_passing_call_loses_its_examples(pytester: pytest.Pytester) -> None:
    item = pytester.getitem("def test_func(): pass")
    examples = ["test_func(\n    x=11,\n)"]

    def fails() -> None:
        raise AssertionError("failed on the real code")

    def passes() -> None:
        pass

    for when, fn, kept in (
        ("call", fails, True),  # failed on the real code: Hypothesis offers them
        ("setup", passes, True),  # not the witness's call
        ("call", passes, False),  # passed: they came from mutant re-runs
    ):
        setattr(item, FAILING_EXAMPLES_KEY, examples)
        phase: Literal["setup", "call"] = "call" if when == "call" else "setup"
        mutant_examples.pytest_runtest_makereport(item, pytest.CallInfo.from_call(fn, phase))
        assert (getattr(item, FAILING_EXAMPLES_KEY, None) == examples) is kept, when
