"""Measure plan preflight and freezing on the shipped example: print figures and ratios.

Run: ``python benchmarks/flow_preflight.py [ROUNDS]``. Every figure is measured in this
run; nothing is asserted.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from fak_core.flow import (
    ExistingFlow,
    FileWorkspace,
    compile_flow,
    digest,
    kernel_policy_for,
    load_flow,
    preflight,
    project,
    revalidate,
)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "flow"


def timed(fn: Callable[[], object], rounds: int) -> float:
    """Median microseconds per call over ``rounds`` calls."""
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(samples)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    flow = load_flow(EXAMPLE / "flow.yaml")
    ws = FileWorkspace.load(EXAMPLE / "workspace.yaml")
    outcome = preflight(ExistingFlow(flow), identity="alice", workspace=ws, task_id="bench")
    assert outcome.manifest is not None
    m = outcome.manifest
    figures = {
        "load flow (yaml)": timed(lambda: load_flow(EXAMPLE / "flow.yaml"), rounds),
        "compile": timed(lambda: compile_flow(flow), rounds),
        "preflight (7 steps, in-memory workspace)": timed(
            lambda: preflight(ExistingFlow(flow), identity="alice", workspace=ws, task_id="b"),
            rounds,
        ),
        "digest (rfc8785 + sha256)": timed(lambda: digest(m.body), rounds),
        "runner revalidate": timed(lambda: revalidate(m, m.digest), rounds),
        "projection": timed(lambda: project(m), rounds),
        "kernel_policy_for(node)": timed(lambda: kernel_policy_for(m, "implement"), rounds),
    }
    size = len(m.to_json().encode())
    print(f"example manifest: {size} bytes, {len(m.node_ids)} nodes, {rounds} rounds (median)")
    for name, us in figures.items():
        print(f"  {name:44s} {us:9.1f} us")
    pre = figures["preflight (7 steps, in-memory workspace)"]
    print(f"  ratio preflight / runner revalidate        {pre / figures['runner revalidate']:9.2f}")
    dig = figures["digest (rfc8785 + sha256)"]
    print(f"  ratio digest / preflight                   {dig / pre:9.2f}")


if __name__ == "__main__":
    main()
