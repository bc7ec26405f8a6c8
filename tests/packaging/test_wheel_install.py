"""The airline example from a built wheel in a fresh virtual environment (issue 15).

The wheel is built from a copy of the project's sources, installed with only the
``plugin`` extra (the slim install: no gateway libraries) into a new venv that sees
nothing of this one, and the example's README commands run there: the proof run with
the bundled pack, then ``fak proofs check``. Packages come from the configured index (or
pip's find-links cache), constrained to the versions installed in the environment that
runs the test, so the run is as reproducible as that environment's lock. About a minute
on two cores.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="a POSIX venv layout (bin/)")

SOURCES = ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "fak_core", "pytest_fak")


def _run(*cmd: str | Path, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def _clean_env(venv: Path) -> dict[str, str]:
    """This run's environment, without anything that points Python at this checkout."""
    skip = ("PYTHON", "PYTEST", "VIRTUAL_ENV", "GITHUB_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def _this_environment() -> str:
    """Constraints pinning every package installed here at its version: the wheel's venv
    gets what this run was locked to (``requirements/dev.txt`` in CI, each end's lock under
    ``.ci/ranges``), not whatever the index holds today."""
    pins = {
        d.metadata["Name"].lower(): d.version
        for d in metadata.distributions()
        if d.metadata["Name"] and d.metadata["Name"].lower() != "pytest-fak"
    }
    return "".join(f"{name}=={version}\n" for name, version in sorted(pins.items()))


def test_airline_example_from_a_wheel_in_a_fresh_venv(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCES:
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(p, src / name)
    venv = tmp_path / "venv"
    env = _clean_env(venv)
    built = _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "-q",
        "-w",
        tmp_path / "dist",
        src,
        cwd=tmp_path,
        env=env,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("pytest_fak-*.whl")

    made = _run(sys.executable, "-m", "venv", venv, cwd=tmp_path, env=env)
    assert made.returncode == 0, made.stderr
    py = venv / "bin" / "python"
    pins = tmp_path / "constraints.txt"
    pins.write_text(_this_environment())
    installed = _run(
        py, "-m", "pip", "install", "-q", "-c", pins, f"{wheel}[plugin]", cwd=tmp_path, env=env
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr

    # the slim install: the kernel and the plugin, none of the gateway's libraries
    where = _run(
        py, "-c", "import fak_core, pytest_fak; print(fak_core.__file__)", cwd=tmp_path, env=env
    )
    assert where.returncode == 0 and str(venv) in where.stdout, where.stdout + where.stderr
    for lib in ("starlette", "uvicorn", "httpx", "aiohttp", "mcp"):
        absent = _run(py, "-c", f"import {lib}", cwd=tmp_path, env=env)
        assert absent.returncode != 0, f"{lib} is installed by the slim install"

    project = tmp_path / "airline"
    shutil.copytree(
        ROOT / "examples" / "airline",
        project,
        ignore=shutil.ignore_patterns("__pycache__", "proofs", ".hypothesis"),
    )
    proof = _run(
        py,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "--fak-theorems",
        "--fak-pack",
        "--fak-max-examples=15",
        "--fak-mutant-examples=10",
        cwd=project,
        env=env,
    )
    assert proof.returncode == 0, proof.stdout + proof.stderr
    assert proof.stdout.rstrip().splitlines()[-1] == "fak: 6 PROVEN", proof.stdout
    report = json.loads((project / "proofs" / "verdicts.json").read_text())
    assert report["theorem_dirs"] == ["theorems", "module:pytest_fak.pack"]

    fak = venv / "bin" / "fak"
    check = _run(fak, "proofs", "check", cwd=project, env=env)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "0 stale of 6 reported theorems" in check.stdout
    serve = _run(fak, "serve", cwd=project, env=env)
    assert serve.returncode == 2 and "Traceback" not in serve.stderr
    assert "pip install 'pytest-fak[gateway]'" in serve.stderr
