"""Time `pytest --fak-theorems` on the project's own theorems, and the plugin's overhead.

Prints: the proof run's wall time (``-n 0`` and ``-n 2``) and the share spent in mutant
re-runs and in anchor coverage (measured by re-running with mutants / anchors disabled
through monkeypatched hooks, in separate interpreters); the same for the bundled pack;
and the ratio of a plain `pytest` run with the plugin loaded (proof mode off) against
`-p no:fak` (target < 1.05). Example counts: the project's ``fak_max_examples`` ini
value (30 per witness) and ``--fak-mutant-examples`` (25 per mutant re-run).

The generated-mutant phase (``--fak-mutate``): a full run and a no-change incremental
rerun over the same cache, on the preflight witnesses (A7.1-A7.3) by default or on every
theorem with ``--mutate-all`` (slow: minutes to an hour on 2 cores); printed per theorem:
mutants generated, killed, waived, survived, re-runs, seconds per re-run, and the
rerun's cache hit rate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NO_MUTANTS = (
    "import pytest_fak.proof as p; "
    "p.ProofSession._run_mutants = lambda self, item, ts, base: ({}, None)"
)
NO_ANCHORS = (
    "import pytest_fak.anchors as a; a.AnchorProbe.begin = lambda self, n: None; "
    "a.AnchorProbe.end = lambda self, n: None"
)


def mutation_phase(targets: list[str]) -> None:
    """Full, then incremental with no change, over one fresh cache; print the figures."""
    base = ["-q", "-p", "no:cacheprovider", "--fak-theorems", "--fak-fail-on=none"]
    base += ["-m", "fak_theorem", "-n", "2", *targets]
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as rep:
        runs: list[tuple[float, dict[str, dict[str, float]]]] = []
        for mode in ("full", "incremental"):
            wall = run(
                [
                    *base,
                    f"--fak-mutate={mode}",
                    f"--fak-cache-dir={cache}",
                    f"--fak-report-dir={rep}",
                ]
            )
            doc = json.loads(Path(rep, "verdicts.json").read_text())
            runs.append(
                (
                    wall,
                    {
                        t["id"]: t["generated"]
                        for t in doc["theorems"]
                        if t.get("generated") and t["witnesses"]
                    },
                )
            )
    (full_s, full), (inc_s, inc) = runs
    print(
        f"mutation phase over {' '.join(targets)}: full {full_s:.1f} s, "
        f"no-change incremental {inc_s:.1f} s"
    )
    for tid, g in full.items():
        per = g["seconds"] / g["runs"] if g["runs"] else 0.0
        print(
            f"  {tid}: {g['generated']} generated, {g['killed']} killed, {g['waived']} "
            f"waived, {g['survived']} survived; {g['runs']} witness re-runs, "
            f"{per * 1000:.0f} ms per re-run"
        )
    hits = sum(g["cache_hits"] for g in inc.values())
    fresh = sum(g["runs"] for g in inc.values())
    print(
        f"  no-change rerun: {hits} cache hits, {fresh} re-runs "
        f"(hit rate {hits / max(1, hits + fresh):.0%})"
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
                # CI=true: the tests' derandomised profile, so both sides run the same examples
                env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "CI": "true"},
                capture_output=True,
                check=False,
            )
            best = min(best, time.perf_counter() - start)
            del tmp
    return best


def shares(label: str, base: list[str]) -> float:
    with tempfile.TemporaryDirectory() as rep:
        full = run([*base, f"--fak-report-dir={rep}"])
        no_mut = run([*base, f"--fak-report-dir={rep}"], NO_MUTANTS)
        no_anc = run([*base, f"--fak-report-dir={rep}"], NO_ANCHORS)
    print(f"{label}: {full:.1f} s")
    print(f"  share in mutant re-runs: {max(0.0, full - no_mut) / full:.1%}")
    print(f"  share in anchor coverage: {max(0.0, full - no_anc) / full:.1%}")
    return full


def main() -> None:
    if "--mutate-all" in sys.argv:
        mutation_phase(["tests"])
        return
    mutation_phase(["tests/kernel/test_preflight.py"])
    common = ["-q", "-p", "no:cacheprovider", "--fak-theorems", "--fak-fail-on=none"]
    own = [*common, "-m", "fak_theorem"]
    serial = shares("proof run, project theorems, -n 0", own)
    with tempfile.TemporaryDirectory() as rep:
        parallel = run([*own, "-n", "2", f"--fak-report-dir={rep}"])
    print(f"proof run, project theorems, -n 2: {parallel:.1f} s ({serial / parallel:.2f}x faster)")
    shares(
        "proof run, bundled pack (--fak-pack)",
        [*common, "--fak-pack", "--pyargs", "pytest_fak.pack"],
    )
    # without the plugin its marker and ini keys are unknown: do not let those warnings error
    quiet = ["-q", "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestUnknownMarkWarning"]
    quiet += ["-W", "ignore::pytest.PytestConfigWarning"]
    for target, rounds in (("tests/test_smoke.py", 8), ("tests/kernel", 3)):
        on, off = [], []
        for _ in range(rounds):  # alternate, so drift hits both sides alike
            on.append(run([*quiet, target]))
            off.append(run([*quiet, target, "-p", "no:fak"]))
        print(
            f"plain pytest {target}, plugin loaded vs -p no:fak (best of {rounds}): "
            f"{min(on):.2f} s / {min(off):.2f} s = {min(on) / min(off):.3f}"
        )


if __name__ == "__main__":
    main()
