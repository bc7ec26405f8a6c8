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
from pathlib import Path

import pytest

from tests.packaging.wheelenv import ROOT, Venv, build_wheel, install

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="a POSIX venv layout (bin/)"),
    pytest.mark.install,
]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    tmp = tmp_path_factory.mktemp("base-install")
    return install(build_wheel(tmp), tmp)


@pytest.fixture
def airline(tmp_path: Path) -> Path:
    project = tmp_path / "airline"
    shutil.copytree(
        ROOT / "examples" / "airline",
        project,
        ignore=shutil.ignore_patterns("__pycache__", "proofs", ".hypothesis"),
    )
    return project


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
