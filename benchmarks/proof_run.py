"""Time `pytest --fak-theorems` on the project's own theorems, and the plugin's overhead.

Prints: the proof run's wall time (``-n 0`` and ``-n 2``) and the share spent in mutant
re-runs and in anchor coverage (measured by re-running with mutants / anchors disabled
through monkeypatched hooks, in separate interpreters); the same for the bundled pack;
and the ratio of a plain `pytest` run with the plugin loaded (proof mode off) against
`-p no:fak` (target < 1.05). Example counts: the project's ``fak_max_examples`` ini
value (30 per witness) and ``--fak-mutant-examples`` (25 per mutant re-run).

The generated-mutant phase (``--fak-mutate``): a full run and a no-change incremental
rerun over the same cache, on the preflight witnesses (A7.1-A7.3) and on the downstream
example ``examples/airline`` (its own anchor, AIR1.1) by default, or on every theorem with
``--mutate-all`` (slow: half an hour or more on 2 cores); printed per theorem: mutants
generated, killed, waived, survived, witness re-runs, seconds per re-run and per mutant;
then the totals, the rerun's cache hit rate, and the load average before and after (the
figures are only comparable at the same load). ``--mutation-only`` stops after the
mutation phase (a few minutes); without it the plugin-overhead figures follow.
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
    "import pytest_fak.proof as p; p.ProofSession._run_mutants = lambda self, *a, **k: ({}, None)"
)
NO_ANCHORS = (
    "import pytest_fak.anchors as a; a.AnchorProbe.begin = lambda self, *a, **k: None; "
    "a.AnchorProbe.end = lambda self, *a, **k: None"
)


def mutation_phase(targets: list[str], cwd: Path = ROOT) -> None:
    """Full, then incremental with no change, over one fresh cache; print the figures."""
    load0 = os.getloadavg()
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
                ],
                cwd=cwd,
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
    where = "" if cwd == ROOT else f" (in {cwd.relative_to(ROOT)})"
    print(
        f"mutation phase over {' '.join(targets)}{where}: full {full_s:.1f} s, "
        f"no-change incremental {inc_s:.1f} s"
    )
    for tid, g in full.items():
        per = g["seconds"] / g["runs"] if g["runs"] else 0.0
        per_m = g["seconds"] / g["generated"] if g["generated"] else 0.0
        print(
            f"  {tid}: {g['generated']} generated, {g['killed']} killed, {g['waived']} "
            f"waived, {g['survived']} survived; {g['runs']} witness re-runs, "
            f"{per * 1000:.0f} ms per re-run, {per_m * 1000:.0f} ms per mutant"
        )
    tot = {k: sum(g[k] for g in full.values()) for k in ("generated", "survived", "runs")}
    secs = sum(g["seconds"] for g in full.values())
    vacuous = sum(1 for g in full.values() if g["survived"])
    print(
        f"  total: {tot['generated']} mutants, {tot['survived']} survived "
        f"({vacuous} of {len(full)} theorems with survivors), {tot['runs']} re-runs in "
        f"{secs:.0f} s ({secs / max(1, tot['generated']):.2f} s per mutant)"
    )
    hits = sum(g["cache_hits"] for g in inc.values())
    fresh = sum(g["runs"] for g in inc.values())
    print(
        f"  no-change rerun: {hits} cache hits, {fresh} re-runs "
        f"(hit rate {hits / max(1, hits + fresh):.0%})"
    )
    before, after = (" ".join(f"{x:.2f}" for x in la) for la in (load0, os.getloadavg()))
    print(f"  load average (1, 5, 15 min): before {before}, after {after}")


def run(args: list[str], patch: str = "", repeat: int = 1, cwd: Path = ROOT) -> float:
    best = float("inf")
    argv = [*args, "-W", "ignore::pytest.PytestAssertRewriteWarning"]
    code = f"{patch}\nimport sys, pytest\nsys.exit(pytest.main({argv!r}))"
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, "-c", code],
                cwd=cwd,
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
    mutation_phase(["tests"], cwd=ROOT / "examples" / "airline")
    if "--mutation-only" in sys.argv:
        return
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
