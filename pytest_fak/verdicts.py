"""Verdict words and the rule that turns one run's witness evidence into a verdict.

PROVEN: at least one bound witness ran, all passed, every anchor was executed by a
passing witness, every declared mutant was killed, and (with ``--fak-mutate``) every
generated mutant of its anchors was killed or waived as equivalent. REFUTED: a witness failed on
the real code. VACUOUS: a mutant (declared, or generated and not waived) survived, or
an anchor was never executed by a passing witness. OPEN: no witness ran, or the
evidence could not be measured. ERROR: a witness never got to test the code (its
fixtures failed to set up or tear down, Hypothesis refused it in a health check or
could not generate its inputs, or its module failed to collect): a witness that never
ran is not a counterexample, so this is never REFUTED, and never PROVEN either; a witness
whose xdist worker died outside any mutant is ERROR too (a dead process cannot tell a
crash of the code from one of its environment, an OOM kill, a C extension). A mutant
under which the worker died counts as killed (``crashed``), see :mod:`pytest_fak.crash`.
SCOPED-OUT: the document declares it. STALE: only ``fak proofs check`` gives it.
Failure wins (REFUTED before ERROR); a skip is never a pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_fak.theorems import Theorem

if TYPE_CHECKING:
    from pytest_fak.generated import GeneratedMutant

__all__ = [
    "ERROR",
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
ERROR = "ERROR"
VERDICTS = (PROVEN, REFUTED, VACUOUS, OPEN, SCOPED_OUT, STALE, ERROR)

#: Mutant outcomes recorded per witness.
KILLED = "killed"
SURVIVED = "survived"
INCONCLUSIVE = "inconclusive"
MISSING = "missing"
#: The mutant itself raised while being applied or undone: it broke nothing it meant to.
BROKEN = "broken"
#: A generated mutant's re-run exhausted its address-space budget (``MemoryError``): killed.
MEMORY = "memory"
#: The worker process died (segfault, abort) while the mutant was applied: killed (the
#: witness had passed on the real code in that process just before).
CRASHED = "crashed"


@dataclass
class WitnessEvidence:
    """What one bound test did in this run (merged from its setup/call/teardown reports)."""

    nodeid: str
    #: passed | failed | error | skipped | xfailed | not-run; ``error`` is a witness that
    #: never tested the code (setup/teardown, a Hypothesis health check), see ``error_kind``
    outcome: str = "not-run"
    error_kind: str | None = None
    duration_s: float = 0.0
    examples: int | None = None
    skip_reason: str | None = None
    failure: dict[str, Any] | None = None
    mutants: dict[str, str] = field(default_factory=dict)
    anchors: dict[str, bool | None] = field(default_factory=dict)
    generated: dict[str, str] = field(default_factory=dict)
    witness_fp: str | None = None
    generated_hits: int = 0
    generated_runs: int = 0
    generated_seconds: float = 0.0
    #: the witness crashed its xdist worker: ``{"worker", "mutant", "kind"}`` (mutant None:
    #: outside any mutant); see :meth:`pytest_fak.proof.ProofSession.pytest_handlecrashitem`
    crash: dict[str, Any] | None = None


@dataclass
class TheoremVerdict:
    theorem: Theorem
    verdict: str
    reasons: list[str]
    witnesses: list[WitnessEvidence]
    mutants: list[dict[str, Any]]
    anchors: list[dict[str, Any]]
    generated: dict[str, Any] | None = None


def _mutant_rows(t: Theorem, passed: Sequence[WitnessEvidence]) -> list[dict[str, Any]]:
    rows = []
    for m in t.mutants:
        outcomes = {w.nodeid: w.mutants.get(m.id, "not-run") for w in passed}
        killed_by = sorted(n for n, o in outcomes.items() if o in (KILLED, CRASHED))
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


#: generated-mutant statuses that count as killed, and as survivors
GEN_KILLED = (KILLED, "timeout", MEMORY, CRASHED)
GEN_SURVIVORS = (SURVIVED, "uncovered")


def _generated_status(outcomes: Sequence[str]) -> str:
    for status in (*GEN_KILLED, BROKEN, SURVIVED):
        if status in outcomes:
            return status
    if outcomes and all(o == "uncovered" for o in outcomes):
        return "uncovered"
    return INCONCLUSIVE if INCONCLUSIVE in outcomes else "not-run"


def generated_summary(
    t: Theorem, mutants: Sequence[GeneratedMutant], passed: Sequence[WitnessEvidence]
) -> dict[str, Any]:
    """The mutation score of ``t``: counts, and every survivor with file:line and diff."""
    waivers = {w.mutant_id: w.reason for w in t.equivalent}
    counts = {"generated": len(mutants), "killed": 0, "waived": 0, "survived": 0, "other": 0}
    survivors: list[dict[str, Any]] = []
    unmeasured: list[dict[str, Any]] = []
    for m in mutants:
        outs = [o for w in passed if (o := w.generated.get(m.id)) is not None]
        status = "waived" if m.id in waivers else _generated_status(outs)
        row = {
            "id": m.id,
            "operator": m.operator,
            "where": f"{m.filename}:{m.line}",
            "status": status,
            "diff": m.diff,
        }
        if status in GEN_KILLED:
            counts["killed"] += 1
        elif status == "waived":
            counts["waived"] += 1
        elif status in GEN_SURVIVORS:
            counts["survived"] += 1
            survivors.append(row)
        else:
            counts["other"] += 1
            if passed:  # with no passing witness nothing was measured: counts only
                unmeasured.append(row)
    n = counts["generated"]
    score = (counts["killed"] + counts["waived"]) / n if n else 1.0
    return {
        **counts,
        "score": round(score, 4),
        "cache_hits": sum(w.generated_hits for w in passed),
        "runs": sum(w.generated_runs for w in passed),
        "seconds": round(sum(w.generated_seconds for w in passed), 3),
        "survivors": survivors,
        "unmeasured": unmeasured,
        "waivers": [{"id": k, "reason": v} for k, v in waivers.items()],
    }


def decide(
    t: Theorem,
    witnesses: Sequence[WitnessEvidence],
    generated: Sequence[GeneratedMutant] | None = None,
) -> TheoremVerdict:
    """The verdict of theorem ``t`` from its bound witnesses' evidence in this run.

    ``generated`` (the theorem's generated mutants, when ``--fak-mutate`` is on) adds
    the mutation score: a survivor that is not waived makes the theorem VACUOUS."""
    tv = _decide(t, witnesses)
    if generated is not None and tv.verdict != SCOPED_OUT:
        _generated_verdict(t, tv, generated)
    _crash_reasons(tv)
    return tv


def _generated_verdict(
    t: Theorem, tv: TheoremVerdict, generated: Sequence[GeneratedMutant]
) -> None:
    """Add the mutation score to ``tv``; a survivor that is not waived makes it VACUOUS."""
    passed = [w for w in tv.witnesses if w.outcome == "passed"]
    tv.generated = generated_summary(t, generated, passed)
    if tv.verdict not in (PROVEN, VACUOUS, OPEN) or not passed:
        return
    g = tv.generated
    if g["survived"]:
        first = ", ".join(s["id"] for s in g["survivors"][:3])
        more = f" and {g['survived'] - 3} more" if g["survived"] > 3 else ""
        tv.reasons.append(
            f"{g['survived']} of {g['generated']} generated mutants survived "
            f"(neither killed nor waived): {first}{more}"
        )
        tv.verdict = VACUOUS
    elif g["other"] and tv.verdict == PROVEN:
        tv.reasons.append(f"{g['other']} generated mutants could not be measured")
        tv.verdict = OPEN


def _decide(t: Theorem, witnesses: Sequence[WitnessEvidence]) -> TheoremVerdict:
    ws = sorted(witnesses, key=lambda w: w.nodeid)
    passed = [w for w in ws if w.outcome == "passed"]
    mutants = _mutant_rows(t, passed)
    anchors = _anchor_rows(t, passed)
    reasons: list[str] = []
    if t.scoped_out is not None:
        return TheoremVerdict(t, SCOPED_OUT, [t.scoped_out], ws, mutants, anchors)
    failed = [w for w in ws if w.outcome == "failed"]
    if failed:
        reasons = [f"witness {w.nodeid} failed on the real code" for w in failed]
        return TheoremVerdict(t, REFUTED, reasons, ws, mutants, anchors)
    errored = [w for w in ws if w.outcome == "error"]
    if errored:
        reasons = [
            (
                f"witness {w.nodeid} crashed its worker outside any mutant"
                if w.error_kind == "crashed"
                else f"witness {w.nodeid} never tested the code ({w.error_kind or 'error'})"
            )
            + f": {_first_line(w.failure)}"
            for w in errored
        ]
        return TheoremVerdict(t, ERROR, reasons, ws, mutants, anchors)
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


def _crash_reasons(tv: TheoremVerdict) -> None:
    """Name each witness that crashed its worker under a mutant in a verdict that is not
    PROVEN (its other mutant re-runs and examples are lost, which may be why)."""
    if tv.verdict in (PROVEN, SCOPED_OUT):
        return
    for w in tv.witnesses:
        c = w.crash
        if c and c.get("mutant"):
            tv.reasons.append(
                f"witness {w.nodeid} crashed worker {c.get('worker')} under mutant "
                f"{c['mutant']} (counted as killed; its other mutant re-runs were lost)"
            )


def _first_line(failure: dict[str, Any] | None) -> str:
    """The exception line of a failure message (pytest marks it ``E``), else its last line."""
    text = str((failure or {}).get("message") or "no message")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    marked = [ln[1:].strip() for ln in lines if ln.startswith("E ")]
    line = marked[0] if marked else (lines[-1] if lines else "no message")
    return line if len(line) <= 300 else line[:299] + "…"
