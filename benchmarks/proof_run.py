"""Time `pytest --fak-theorems` on the bundled pack and the plugin's overhead when off.

Prints: the proof run's wall time and the share spent in mutant re-runs and in anchor
coverage (measured by re-running with mutants / anchors disabled through monkeypatched
hooks, in separate interpreters), and the ratio of a plain `pytest` run with the plugin
loaded (proof mode off) against `-p no:fak` (target < 1.05).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NO_MUTANTS = "import pytest_fak.proof as p; p.ProofSession._run_mutants = lambda self, item, ts: {}"
NO_ANCHORS = (
    "import pytest_fak.anchors as a; a.AnchorProbe.begin = lambda self, n: None; "
    "a.AnchorProbe.end = lambda self, n: None"
)


def run(args: list[str], patch: str = "", repeat: int = 1) -> float:
    best = float("inf")
    argv = [*args, "-W", "ignore::pytest.PytestAssertRewriteWarning"]
    code = f"{patch}\nimport sys, pytest\nsys.exit(pytest.main({argv!r}))"
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, "-c", code],
                cwd=ROOT,
                env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
                capture_output=True,
                check=False,
            )
            best = min(best, time.perf_counter() - start)
            del tmp
    return best


def main() -> None:
    base = ["-q", "-p", "no:cacheprovider", "--fak-theorems", "--fak-pack", "--fak-fail-on=none"]
    base += ["--pyargs", "pytest_fak.pack"]
    with tempfile.TemporaryDirectory() as rep:
        full = run([*base, f"--fak-report-dir={rep}"])
        no_mut = run([*base, f"--fak-report-dir={rep}"], NO_MUTANTS)
        no_anc = run([*base, f"--fak-report-dir={rep}"], NO_ANCHORS)
    print(f"proof run (pack, {ROOT.name}): {full:.2f} s")
    print(f"  share in mutant re-runs: {max(0.0, full - no_mut) / full:.1%}")
    print(f"  share in anchor coverage: {max(0.0, full - no_anc) / full:.1%}")
    plain = ["-q", "-p", "no:cacheprovider", "tests/test_smoke.py"]
    on = run(plain, repeat=5)
    off = run([*plain, "-p", "no:fak"], repeat=5)
    print(f"plain pytest, plugin loaded vs -p no:fak: {on:.3f} s / {off:.3f} s = {on / off:.3f}")


if __name__ == "__main__":
    main()
