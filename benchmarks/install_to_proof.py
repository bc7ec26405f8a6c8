"""Time `pip install pytest-fak` to the airline example's first `fak: 1 PROVEN` (issue 31).

Builds one wheel of this tree, then for the base install and for ``[mutate]``: a fresh
venv (``python -m venv``), ``pip install <wheel>`` pinned to this environment's versions
(:func:`tests.packaging.wheelenv.this_environment`; packages come from the configured
index or pip's cache, so the figure is the warm-cache one), and for the base install the
README walk-through's first command in a copy of ``examples/airline``
(``pytest --fak-theorems``, whose last line must be ``fak: 1 PROVEN``). Prints each
step's wall time, the venv's package count (``pip list``, pip itself included) and its
``site-packages`` size in MB, and the load average before and after (figures are only
comparable at the same load).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.packaging.wheelenv import build_wheel, clean_env, run, this_environment  # noqa: E402


def _size_mb(path: Path) -> float:
    total = sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())
    return total / 1e6


def measure(wheel: Path, tmp: Path, extras: str, prove: bool) -> None:
    venv = tmp / "venv"
    env = clean_env(venv)
    t0 = time.perf_counter()
    made = run(sys.executable, "-m", "venv", venv, cwd=tmp, env=env)
    assert made.returncode == 0, made.stderr
    t1 = time.perf_counter()
    pins = tmp / "constraints.txt"
    pins.write_text(this_environment())
    spec = f"{wheel}[{extras}]" if extras else str(wheel)
    py = venv / "bin" / "python"
    got = run(py, "-m", "pip", "install", "-q", "-c", pins, spec, cwd=tmp, env=env)
    assert got.returncode == 0, got.stdout + got.stderr
    t2 = time.perf_counter()
    name = f"pytest-fak[{extras}]" if extras else "pytest-fak"
    listed = run(py, "-m", "pip", "list", "--format=freeze", cwd=tmp, env=env)
    packages = len([ln for ln in listed.stdout.splitlines() if ln.strip()])
    (site,) = venv.glob("lib/python3*/site-packages")
    print(f"{name}: venv {t1 - t0:.1f} s, pip install {t2 - t1:.1f} s")
    pip_mb = sum(_size_mb(p) for p in site.glob("pip*"))
    print(
        f"  {packages} packages (pip list), site-packages {_size_mb(site):.1f} MB "
        f"({pip_mb:.1f} MB of it pip's own)"
    )
    tops = sorted(((_size_mb(p), p.name) for p in site.iterdir() if p.is_dir()), reverse=True)
    print("  largest: " + ", ".join(f"{n} {mb:.1f} MB" for mb, n in tops[:5]))
    if not prove:
        return
    project = tmp / "airline"
    shutil.copytree(
        ROOT / "examples" / "airline",
        project,
        ignore=shutil.ignore_patterns("__pycache__", "proofs", ".hypothesis"),
    )
    proof = run(py, "-m", "pytest", "--fak-theorems", cwd=project, env=env)
    t3 = time.perf_counter()
    last = proof.stdout.rstrip().splitlines()[-1]
    assert last == "fak: 1 PROVEN", proof.stdout + proof.stderr
    print(f"  first proof run of examples/airline {t3 - t2:.1f} s: {last!r}")
    print(f"  pip install to `fak: 1 PROVEN`: {t3 - t1:.1f} s ({t3 - t0:.1f} s with the venv)")


def main() -> None:
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        t = time.perf_counter()
        wheel = build_wheel(tmp)
        print(f"wheel {wheel.name}: built in {time.perf_counter() - t:.1f} s")
        for extras, prove in (("", True), ("mutate", False)):
            where = tmp / (extras or "base")
            where.mkdir()
            measure(wheel, where, extras, prove)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
