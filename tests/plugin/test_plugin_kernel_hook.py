"""pytester tests: the kernel hook cannot silently be absent (issue 31, item 2).

A proof run names the kernel factory it used; a conftest function whose name nearly
spells one of the plugin's hooks is a usage error naming the right one; a verdict whose
witnesses used a kernel fixture with no ``pytest_fak_make_kernel`` says so; and
``-p no:fak`` starts whether or not the conftest's hook is marked ``optionalhook``.
"""

from __future__ import annotations

import json

import pytest

from .plugin_project import make_project, verdicts

HOOK = """
import pytest

{mark}
def {name}(config):
    return "the project's kernel"
"""

WITNESS = """
import pytest
import clamplib

@pytest.mark.fak_theorem("CL1.1")
def test_clamp_on_the_projects_kernel(fak_kernel):
    assert fak_kernel == "the project's kernel"
    assert 0 <= clamplib.clamp(99) <= 10
"""

PLAIN_WITNESS = """
import pytest
import clamplib

@pytest.mark.fak_theorem("CL1.1")
def test_clamp():
    assert 0 <= clamplib.clamp(99) <= 10
"""


def _conftest(pytester: pytest.Pytester, name: str, optional: bool = True) -> None:
    mark = "@pytest.hookimpl(optionalhook=True)" if optional else ""
    pytester.makeconftest(HOOK.format(mark=mark, name=name))


def test_a_proof_run_names_the_hook_it_used(pytester: pytest.Pytester) -> None:
    make_project(pytester, witness=WITNESS)
    _conftest(pytester, "pytest_fak_make_kernel")
    result = pytester.runpytest("--fak-theorems")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["fak: kernel factory: conftest:pytest_fak_make_kernel"])
    report = json.loads((pytester.path / "proofs" / "verdicts.json").read_text())
    assert report["run"]["kernel_factory"] == "conftest:pytest_fak_make_kernel"
    assert "Kernel factory: `conftest:pytest_fak_make_kernel`" in (
        (pytester.path / "proofs" / "PROOFS.md").read_text()
    )
    assert not any("pytest_fak_make_kernel" in r for r in verdicts(pytester)["CL1.1"]["reasons"])


def test_without_a_hook_the_run_names_the_default(pytester: pytest.Pytester) -> None:
    make_project(pytester, witness=PLAIN_WITNESS)
    result = pytester.runpytest("--fak-theorems")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["fak: kernel factory: fak_core.Kernel() default"])


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("pytest_fak_make_kernal", "pytest_fak_make_kernel"),
        ("pytest_fak_kernel", "pytest_fak_make_kernel"),
        ("pytest_make_kernel", "pytest_fak_make_kernel"),
        ("pytest_fak_theorems_dirs", "pytest_fak_theorem_dirs"),
        ("pytest_fak_modify_reports", "pytest_fak_modify_report"),
    ],
)
@pytest.mark.parametrize("mode", [(), ("--fak-theorems",)])
def test_a_near_miss_of_a_hook_is_a_usage_error(
    pytester: pytest.Pytester, name: str, meant: str, mode: tuple[str, ...]
) -> None:
    make_project(pytester, witness=WITNESS)
    _conftest(pytester, name)
    result = pytester.runpytest(*mode)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines(
        [f"ERROR: *conftest.py: {name} is not a pytest_fak hook*did you mean {meant}?*"]
    )


def test_a_near_miss_in_a_nested_conftest_is_named_too(pytester: pytest.Pytester) -> None:
    make_project(pytester, witness=PLAIN_WITNESS)
    sub = pytester.mkpydir("sub")
    (sub / "conftest.py").write_text(
        HOOK.format(mark="@pytest.hookimpl(optionalhook=True)", name="pytest_fak_make_kernal")
    )
    (sub / "test_sub.py").write_text("def test_nothing():\n    pass\n")
    result = pytester.runpytest("--fak-theorems")
    assert result.ret != 0
    out = result.stdout.str() + result.stderr.str()
    assert "pytest_fak_make_kernal is not a pytest_fak hook" in out
    assert "did you mean pytest_fak_make_kernel?" in out


def test_a_witness_on_the_default_kernel_says_no_hook_exists(pytester: pytest.Pytester) -> None:
    make_project(pytester, witness=WITNESS)
    result = pytester.runpytest("--fak-theorems")
    assert result.ret == 1
    t = verdicts(pytester)["CL1.1"]
    assert t["verdict"] == "REFUTED"
    assert t["reasons"][0].startswith(
        "its witnesses use fak_kernel but no pytest_fak_make_kernel hook is implemented, so "
        "they tested fak_core.Kernel() default"
    )
    assert "failed on the real code" in t["reasons"][1]
    result.stdout.fnmatch_lines(["REFUTED*CL1.1*no pytest_fak_make_kernel hook*"])


@pytest.mark.parametrize("optional", [True, False])
def test_no_fak_starts_with_or_without_optionalhook(
    pytester: pytest.Pytester, optional: bool
) -> None:
    make_project(pytester, witness=PLAIN_WITNESS)
    _conftest(pytester, "pytest_fak_make_kernel", optional)
    result = pytester.runpytest("-p", "no:fak")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1)


def test_without_the_hook_specs_an_unmarked_hook_is_refused(pytester: pytest.Pytester) -> None:
    """The convention the ``fak-hooks`` entry point serves: with the specifications gone too,
    pytest refuses an implementation not marked ``optionalhook``."""
    make_project(pytester, witness=PLAIN_WITNESS)
    _conftest(pytester, "pytest_fak_make_kernel", optional=False)
    result = pytester.runpytest("-p", "no:fak", "-p", "no:fak-hooks")
    assert result.ret != 0
    assert "unknown hook 'pytest_fak_make_kernel'" in result.stdout.str() + result.stderr.str()
