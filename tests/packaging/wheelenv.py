"""A wheel built from this tree, installed into a fresh virtual environment (issue 15, 31).

The wheel is built from a copy of the project's sources and installed into a new venv
that sees nothing of this one. Packages come from the configured index (or pip's
find-links cache), constrained to the versions installed in the environment that runs the
test, so the run is as reproducible as that environment's lock.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (
    "pyproject.toml",
    "README.md",
    "LICENSE",
    "MANIFEST.in",
    "docs",
    "fak_core",
    "pytest_fak",
)


def run(*cmd: str | Path, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def clean_env(venv: Path) -> dict[str, str]:
    """This run's environment, without anything that points Python at this checkout."""
    skip = ("PYTHON", "PYTEST", "VIRTUAL_ENV", "GITHUB_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def this_environment() -> str:
    """Constraints pinning every package installed here at its version: the wheel's venv
    gets what this run was locked to (``requirements/dev.txt`` in CI, each end's lock under
    ``.ci/ranges``), not whatever the index holds today."""
    pins = {
        d.metadata["Name"].lower(): d.version
        for d in metadata.distributions()
        if d.metadata["Name"] and d.metadata["Name"].lower() != "pytest-fak"
    }
    return "".join(f"{name}=={version}\n" for name, version in sorted(pins.items()))


def build_wheel(tmp: Path) -> Path:
    """A wheel of a copy of this tree's sources, built into ``tmp/dist``."""
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif p.exists():
            shutil.copy2(p, src / name)
    env = clean_env(tmp / "no-venv")
    cmd = (sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp / "dist", src)
    built = run(*cmd, cwd=tmp, env=env)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp / "dist").glob("pytest_fak-*.whl")
    return wheel


@dataclass
class Venv:
    """A fresh venv with the wheel installed (``extras`` selected, none: the base install)."""

    path: Path
    env: dict[str, str]

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def run(self, *cmd: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
        return run(*cmd, cwd=cwd, env=self.env)

    def pytest(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return self.run(self.python, "-m", "pytest", "-p", "no:cacheprovider", *args, cwd=cwd)


def install(wheel: Path, tmp: Path, extras: str = "", also: tuple[str, ...] = ()) -> Venv:
    """The wheel with ``extras``, and the packages ``also`` names (``pytest-xdist``), each
    at this environment's version."""
    venv = tmp / "venv"
    env = clean_env(venv)
    made = run(sys.executable, "-m", "venv", venv, cwd=tmp, env=env)
    assert made.returncode == 0, made.stderr
    pins = tmp / "constraints.txt"
    pins.write_text(this_environment())
    spec = f"{wheel}[{extras}]" if extras else str(wheel)
    py = venv / "bin" / "python"
    installed = run(py, "-m", "pip", "install", "-q", "-c", pins, spec, *also, cwd=tmp, env=env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return Venv(venv, env)


def copy_airline(into: Path) -> Path:
    """A fresh copy of ``examples/airline`` in ``into`` (without its proofs or caches)."""
    project = into / "airline"
    shutil.copytree(
        ROOT / "examples" / "airline",
        project,
        ignore=shutil.ignore_patterns("__pycache__", "proofs", ".hypothesis"),
    )
    return project
