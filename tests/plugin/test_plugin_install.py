"""The base install runs a proof; generated mutants need the ``mutate`` extra (issue 31).

A fresh interpreter hides libcst with an import hook, as ``pip install pytest-fak``
without ``[mutate]`` lacks it, and runs the airline example's proof in a copy: declared
mutants work, and each option that generates mutants is a one-line usage error naming
the install. (``tests/packaging/test_wheel_install.py`` does the same from a real wheel.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.packaging.wheelenv import copy_airline

HIDE = """
import importlib.abc, sys
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "libcst":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Hide())
import pytest
raise SystemExit(pytest.main(sys.argv[1:]))
"""


@pytest.fixture
def airline(tmp_path: Path) -> Path:
    return copy_airline(tmp_path)


def _pytest_without_libcst(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = ["-p", "no:cacheprovider", "-p", "no:randomly", "--fak-theorems", *args]
    return subprocess.run(
        [sys.executable, "-c", HIDE, *argv],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_proof_run_needs_no_libcst(airline: Path) -> None:
    run = _pytest_without_libcst(airline, "--fak-max-examples=10")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.rstrip().splitlines()[-1] == "fak: 1 PROVEN", run.stdout
    assert "libcst" not in run.stdout + run.stderr


@pytest.mark.parametrize(
    ("option", "named"),
    [
        ("--fak-mutate=incremental", "--fak-mutate=incremental"),
        ("--fak-mutate=full", "--fak-mutate=full"),
        ("--fak-shard=1/2", "--fak-shard"),
    ],
)
def test_generated_mutants_without_libcst_are_a_usage_error(
    airline: Path, option: str, named: str
) -> None:
    run = _pytest_without_libcst(airline, option)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert run.stderr.strip() == (
        f"ERROR: {named} generates mutants with libcst, which is not installed: "
        "pip install 'pytest-fak[mutate]'"
    )
    assert "Traceback" not in run.stdout + run.stderr


def test_the_ini_default_asks_for_libcst_too(airline: Path) -> None:
    ini = airline / "pytest.ini"
    ini.write_text(ini.read_text() + "fak_mutate = incremental\n")
    run = _pytest_without_libcst(airline)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert "pip install 'pytest-fak[mutate]'" in run.stderr
