"""``pip install pytest-fak`` (no extra) and a downstream project's proof run (issue 31).

One wheel of this tree is installed without any extra into a fresh venv
(:mod:`tests.packaging.wheelenv`), shared by the tests of this module; each copies the
airline example into a temporary directory and runs pytest there by subprocess, as a
user would. Selected with ``-m install``; each test takes seconds once the venv exists
(about 30 s to build).
"""

from __future__ import annotations

import shutil
import sys
import zipfile
from email.parser import HeaderParser
from pathlib import Path

import pytest

from tests.packaging.wheelenv import Venv, build_wheel, copy_airline, install

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="a POSIX venv layout (bin/)"),
    pytest.mark.install,
]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def base(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    return install(wheel, tmp_path_factory.mktemp("base-install"))


@pytest.fixture
def airline(tmp_path: Path) -> Path:
    return copy_airline(tmp_path)


def test_the_base_install_proves_without_the_mutate_extra(base: Venv, airline: Path) -> None:
    for lib in ("libcst", "starlette", "mcp"):
        absent = base.run(base.python, "-c", f"import {lib}", cwd=airline)
        assert absent.returncode != 0, f"{lib} is installed by the base install"
    proof = base.pytest("--fak-theorems", "--fak-max-examples=10", cwd=airline)
    assert proof.returncode == 0, proof.stdout + proof.stderr
    assert proof.stdout.rstrip().splitlines()[-1] == "fak: 1 PROVEN", proof.stdout

    mutate = base.pytest("--fak-theorems", "--fak-mutate=incremental", cwd=airline)
    assert mutate.returncode == pytest.ExitCode.USAGE_ERROR, mutate.stdout + mutate.stderr
    assert mutate.stderr.strip() == (
        "ERROR: --fak-mutate=incremental generates mutants with libcst, which is not "
        "installed: pip install 'pytest-fak[mutate]'"
    )


def _edit(path: Path, old: str, new: str) -> None:
    """Edit a module; its bytecode goes too (an edit of the same size within the same
    second would leave a cached .pyc looking current)."""
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    shutil.rmtree(path.parent / "__pycache__", ignore_errors=True)


def test_a_proof_run_names_the_conftest_hook_and_no_fak_starts(base: Venv, airline: Path) -> None:
    conftest = airline / "conftest.py"
    proof = base.pytest("--fak-theorems", "--fak-max-examples=5", cwd=airline)
    assert "fak: kernel factory: conftest:pytest_fak_make_kernel" in proof.stdout, proof.stdout
    # the hook without optionalhook: pytest -p no:fak still starts (the fak-hooks entry
    # point keeps its specification known); the witness's fak_kernel_factory is gone
    _edit(conftest, "@pytest.hookimpl(optionalhook=True)\n", "")
    off = base.pytest("-p", "no:fak", cwd=airline)
    assert "unknown hook" not in off.stdout + off.stderr, off.stdout + off.stderr
    assert "fixture 'fak_kernel_factory' not found" in off.stdout, off.stdout
    # misspelt, it would be ignored: a usage error names the hook
    _edit(conftest, "def pytest_fak_make_kernel(", "def pytest_fak_make_kernal(")
    typo = base.pytest("--fak-theorems", cwd=airline)
    assert typo.returncode == pytest.ExitCode.USAGE_ERROR, typo.stdout + typo.stderr
    assert "did you mean pytest_fak_make_kernel?" in typo.stderr


def test_the_wheel_describes_itself_briefly(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        meta = HeaderParser().parsestr(z.read(name).decode())
    classifiers = set(meta.get_all("Classifier") or [])
    for c in (
        "Framework :: Pytest",
        "Typing :: Typed",
        "Topic :: Security",
        "Programming Language :: Python :: 3.11",
    ):
        assert c in classifiers, c
    assert meta["License-Expression"] == "Apache-2.0"
    assert {"pytest", "hypothesis", "mutation-testing", "security"} <= set(
        meta["Keywords"].split(",")
    )
    description = meta.get_payload()
    assert meta["Description-Content-Type"] == "text/markdown"
    assert description.startswith("# pytest-fak") and len(description.splitlines()) < 60
    assert "pip install pytest-fak" in description
