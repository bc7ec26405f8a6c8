"""Verdict words and the rule that turns one run's witness evidence into a verdict.

PROVEN: at least one bound witness ran, all passed, every anchor was executed by a
passing witness, and every declared mutant was killed. REFUTED: a witness failed on
the real code. VACUOUS: a mutant survived, or an anchor was never executed by a passing
witness. OPEN: no witness ran, or the evidence could not be measured. SCOPED-OUT: the
document declares it. STALE: only ``fak proofs check`` gives it. Failure wins; a skip
is never a pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_fak.theorems import Theorem

__all__ = [
    "OPEN",
    "PROVEN",
    "REFUTED",
    "SCOPED_OUT",
    "STALE",
    "VACUOUS",
    "VERDICTS",
    "TheoremVerdict",
    "WitnessEvidence",
    "decide",
]

PROVEN = "PROVEN"
REFUTED = "REFUTED"
VACUOUS = "VACUOUS"
OPEN = "OPEN"
SCOPED_OUT = "SCOPED-OUT"
STALE = "STALE"
VERDICTS = (PROVEN, REFUTED, VACUOUS, OPEN, SCOPED_OUT, STALE)

#: Mutant outcomes recorded per witness.
KILLED = "killed"
SURVIVED = "survived"
INCONCLUSIVE = "inconclusive"
MISSING = "missing"
#: The mutant itself raised while being applied or undone: it broke nothing it meant to.
BROKEN = "broken"


@dataclass
class WitnessEvidence:
    """What one bound test did in this run (merged from its setup/call/teardown reports)."""

    nodeid: str
    outcome: str = "not-run"  # passed | failed | error | skipped | xfailed | not-run
    duration_s: float = 0.0
    examples: int | None = None
    skip_reason: str | None = None
    failure: dict[str, Any] | None = None
    mutants: dict[str, str] = field(default_factory=dict)
    anchors: dict[str, bool | None] = field(default_factory=dict)


@dataclass
class TheoremVerdict:
    theorem: Theorem
    verdict: str
    reasons: list[str]
    witnesses: list[WitnessEvidence]
    mutants: list[dict[str, Any]]
    anchors: list[dict[str, Any]]


def _mutant_rows(t: Theorem, passed: Sequence[WitnessEvidence]) -> list[dict[str, Any]]:
    rows = []
    for m in t.mutants:
        outcomes = {w.nodeid: w.mutants.get(m.id, "not-run") for w in passed}
        killed_by = sorted(n for n, o in outcomes.items() if o == KILLED)
        if BROKEN in outcomes.values():
            status = BROKEN  # a mutant that cannot be applied proves nothing, kills or not
            killed_by = []
        elif killed_by:
            status = KILLED
        elif SURVIVED in outcomes.values():
            status = SURVIVED
        elif MISSING in outcomes.values():
            status = MISSING
        elif INCONCLUSIVE in outcomes.values():
            status = INCONCLUSIVE
        else:
            status = "not-run"
        rows.append(
            {
                "id": m.id,
                "name": m.name,
                "description": m.description,
                "status": status,
                "killed_by": killed_by,
            }
        )
    return rows


def _anchor_rows(t: Theorem, passed: Sequence[WitnessEvidence]) -> list[dict[str, Any]]:
    rows = []
    for a in t.anchors:
        seen = [w.anchors.get(a.symbol) for w in passed]
        if any(s is True for s in seen):
            covered: bool | None = True
        elif any(s is False for s in seen):
            covered = False
        else:
            covered = None
        rows.append({"symbol": a.symbol, "covered": covered, "sha256": a.sha256})
    return rows


def decide(t: Theorem, witnesses: Sequence[WitnessEvidence]) -> TheoremVerdict:
    """The verdict of theorem ``t`` from its bound witnesses' evidence in this run."""
    ws = sorted(witnesses, key=lambda w: w.nodeid)
    passed = [w for w in ws if w.outcome == "passed"]
    mutants = _mutant_rows(t, passed)
    anchors = _anchor_rows(t, passed)
    reasons: list[str] = []
    if t.scoped_out is not None:
        return TheoremVerdict(t, SCOPED_OUT, [t.scoped_out], ws, mutants, anchors)
    failed = [w for w in ws if w.outcome in ("failed", "error")]
    if failed:
        reasons = [f"witness {w.nodeid} {w.outcome} on the real code" for w in failed]
        return TheoremVerdict(t, REFUTED, reasons, ws, mutants, anchors)
    if not ws:
        return TheoremVerdict(
            t, OPEN, ["no test binds this theorem (orphan)"], ws, mutants, anchors
        )
    if not passed:
        reasons = [
            f"witness {w.nodeid} {w.outcome}" + (f": {w.skip_reason}" if w.skip_reason else "")
            for w in ws
        ]
        return TheoremVerdict(t, OPEN, ["no witness ran", *reasons], ws, mutants, anchors)
    vacuous: list[str] = []
    unmeasured: list[str] = []
    for m in mutants:
        if m["status"] == SURVIVED:
            vacuous.append(f"mutant {m['id']} survived: every witness passed on the broken code")
        elif m["status"] != KILLED:
            unmeasured.append(f"mutant {m['id']} is {m['status']}")
    for a in anchors:
        if a["covered"] is False:
            vacuous.append(f"anchor {a['symbol']} was not executed by any passing witness")
        elif a["covered"] is None:
            unmeasured.append(f"anchor {a['symbol']} could not be measured")
    if vacuous:
        return TheoremVerdict(t, VACUOUS, vacuous + unmeasured, ws, mutants, anchors)
    if unmeasured:
        return TheoremVerdict(t, OPEN, unmeasured, ws, mutants, anchors)
    return TheoremVerdict(t, PROVEN, [], ws, mutants, anchors)
