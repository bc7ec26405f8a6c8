"""The airline example from a built wheel in a fresh virtual environment (issue 15).

The wheel (:mod:`tests.packaging.wheelenv`) is installed with only the ``plugin`` extra
(the slim install: no gateway libraries), and the example's README commands run there:
the proof run with the bundled pack and generated mutants (the pack's anchors, in
installed code, are measured but not mutated), then ``fak proofs check``. About a minute
on two cores. Selected with ``-m install``.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.packaging.wheelenv import ROOT, build_wheel, install

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="a POSIX venv layout (bin/)"),
    pytest.mark.install,
]


def test_airline_example_from_a_wheel_in_a_fresh_venv(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    venv = install(wheel, tmp_path, "plugin")
    py = venv.python

    # the slim install: the kernel and the plugin, none of the gateway's libraries
    where = venv.run(
        py, "-c", "import fak_core, pytest_fak; print(fak_core.__file__)", cwd=tmp_path
    )
    assert where.returncode == 0 and str(venv.path) in where.stdout, where.stdout + where.stderr
    for lib in ("starlette", "uvicorn", "httpx", "aiohttp", "mcp"):
        absent = venv.run(py, "-c", f"import {lib}", cwd=tmp_path)
        assert absent.returncode != 0, f"{lib} is installed by the slim install"

    project = tmp_path / "airline"
    shutil.copytree(
        ROOT / "examples" / "airline",
        project,
        ignore=shutil.ignore_patterns("__pycache__", "proofs", ".hypothesis"),
    )
    proof = venv.run(
        py,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "--fak-theorems",
        "--fak-pack",
        # the pack's anchors are installed code: not mutated, but measured (else VACUOUS)
        "--fak-mutate=incremental",
        "--fak-max-examples=15",
        "--fak-mutant-examples=10",
        cwd=project,
    )
    assert proof.returncode == 0, proof.stdout + proof.stderr
    assert proof.stdout.rstrip().splitlines()[-1] == "fak: 6 PROVEN", proof.stdout
    report = json.loads((project / "proofs" / "verdicts.json").read_text())
    assert report["theorem_dirs"] == ["theorems", "module:pytest_fak.pack"]
    assert len(report["run"]["not_mutated"]["symbols"]) > 0

    fak = venv.path / "bin" / "fak"
    check = venv.run(fak, "proofs", "check", cwd=project)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "0 stale of 6 reported theorems" in check.stdout
    serve = venv.run(fak, "serve", cwd=project)
    assert serve.returncode == 2 and "Traceback" not in serve.stderr
    assert "pip install 'pytest-fak[gateway]'" in serve.stderr
