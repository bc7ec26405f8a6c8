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
SCOPED-OUT: the document declares it. STALE: ``fak proofs check`` gives it, and a partial
run to a verdict it carries over whose inputs changed since (:mod:`pytest_fak.report`).
Failure wins (REFUTED before ERROR); a skip is never a pass. A theorem whose own waivers
are wrong (one naming no current mutant, a malformed ``# pragma: fak-equivalent`` in an
anchor, a reason handing the mutant to a theorem that does not anchor its function) is
ERROR, and only that theorem (:func:`decide_all`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_fak.theorems import Theorem
from pytest_fak.waivers import named_theorems

if TYPE_CHECKING:
    from pytest_fak.generated import GeneratedMutant
    from pytest_fak.mutation import GeneratedPhase

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
    "Waivers",
    "WitnessEvidence",
    "decide",
    "decide_all",
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
    #: the fixtures it asked for whose kernel comes from ``pytest_fak_make_kernel``, and
    #: that hook's implementations in its process (empty: the default kernel)
    kernel_fixtures: list[str] = field(default_factory=list)
    kernel_factories: list[str] = field(default_factory=list)
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


@dataclass
class Waivers:
    """One theorem's waivers of generated mutants, as the run settled them."""

    #: mutant id → reason: the waivers that count (the mutant is waived)
    counted: dict[str, str] = field(default_factory=dict)
    #: mutant id → where the waiver is written: ``document`` or ``code`` (a pragma)
    source: dict[str, str] = field(default_factory=dict)
    #: mutant id → the theorems whose claim a counted waiver hands it to (they settled it)
    handed: dict[str, list[str]] = field(default_factory=dict)
    #: mutant id → why its waiver does not count (the mutant is a survivor)
    unconfirmed: dict[str, str] = field(default_factory=dict)
    #: what is wrong with the theorem's waivers: each makes it ERROR
    problems: list[str] = field(default_factory=list)

    @classmethod
    def of_document(cls, t: Theorem) -> Waivers:
        return cls(
            {w.mutant_id: w.reason for w in t.equivalent},
            {w.mutant_id: "document" for w in t.equivalent},
        )


def generated_summary(
    t: Theorem,
    mutants: Sequence[GeneratedMutant],
    passed: Sequence[WitnessEvidence],
    waivers: Waivers | None = None,
) -> dict[str, Any]:
    """The mutation score of ``t``: counts, and every survivor with file:line and diff."""
    wv = waivers if waivers is not None else Waivers.of_document(t)
    counts = {"generated": len(mutants), "killed": 0, "waived": 0, "survived": 0, "other": 0}
    survivors: list[dict[str, Any]] = []
    unmeasured: list[dict[str, Any]] = []
    for m in mutants:
        outs = [o for w in passed if (o := w.generated.get(m.id)) is not None]
        status = "waived" if m.id in wv.counted else _generated_status(outs)
        if m.id in wv.unconfirmed and status not in GEN_KILLED:
            status = SURVIVED  # its own witnesses skipped it: nobody settled it
        row = {
            "id": m.id,
            "operator": m.operator,
            "where": f"{m.filename}:{m.line}",
            "status": status,
            "diff": m.diff,
        }
        if m.id in wv.unconfirmed and status == SURVIVED:
            row["why"] = wv.unconfirmed[m.id]
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
        "waivers": [
            {"id": k, "reason": v, "source": wv.source.get(k, "document")}
            | ({"handed_to": wv.handed[k]} if k in wv.handed else {})
            for k, v in wv.counted.items()
        ],
    }


def decide(
    t: Theorem,
    witnesses: Sequence[WitnessEvidence],
    generated: Sequence[GeneratedMutant] | None = None,
    waivers: Waivers | None = None,
) -> TheoremVerdict:
    """The verdict of theorem ``t`` from its bound witnesses' evidence in this run.

    ``generated`` (the theorem's generated mutants, when ``--fak-mutate`` is on) adds
    the mutation score: a survivor that is not waived makes the theorem VACUOUS.
    ``waivers`` (default: the document's) says which are waived; a problem with them
    makes the theorem ERROR unless a witness failed (REFUTED)."""
    tv = _decide(t, witnesses)
    if generated is not None and tv.verdict != SCOPED_OUT:
        wv = waivers if waivers is not None else Waivers.of_document(t)
        _generated_verdict(t, tv, generated, wv)
        if wv.problems and tv.verdict != REFUTED:
            tv.verdict = ERROR
            tv.reasons = [*wv.problems, *tv.reasons]
    _crash_reasons(tv)
    return tv


def decide_all(
    theorems: Iterable[Theorem],
    evidence: Mapping[str, Sequence[WitnessEvidence]],
    phase: GeneratedPhase | None = None,
) -> list[TheoremVerdict]:
    """Every theorem's verdict (:func:`decide`), its waivers settled across the run.

    A waiver whose reason names another theorem of ``theorems`` hands the mutant to that
    theorem's claim: it is refused (ERROR) unless that theorem anchors the mutated
    function, and it counts only if that theorem killed the mutant (a passing witness of
    its own) or waived it itself (not by handing it on) in this run; otherwise the
    mutant is a survivor. A pragma's reason may name no theorem: it claims equivalence,
    for every theorem anchoring the function."""
    ts = list(theorems)
    if phase is None:
        return [decide(t, evidence.get(t.id, ())) for t in ts]
    anchors = {t.id: {a.symbol for a in t.anchors} for t in ts}
    settled = {t.id: _waivers(t, phase, anchors) for t in ts}

    def settles(h: str, mid: str) -> bool:
        own = settled[h]
        if mid in own.counted and mid not in own.handed and h in phase.waived:
            return True
        return any(
            w.outcome == "passed" and w.generated.get(mid) in GEN_KILLED
            for w in evidence.get(h, ())
        )

    for t in ts:
        wv = settled[t.id]
        for mid, holders in list(wv.handed.items()):
            if not any(settles(h, mid) for h in holders):
                names = " or ".join(holders)
                wv.unconfirmed[mid] = (
                    f"the waiver of {mid} hands it to the claim of {names}, which neither "
                    "killed nor waived it in this run: it counts as a survivor (run "
                    f"{names} with {t.id}, or give a reason that holds for {t.id} alone)"
                )
                del wv.handed[mid], wv.counted[mid]
    return [
        decide(t, evidence.get(t.id, ()), phase.of_theorem.get(t.id, []), settled[t.id]) for t in ts
    ]


def _waivers(t: Theorem, phase: GeneratedPhase, anchors: Mapping[str, set[str]]) -> Waivers:
    """``t``'s waivers as the phase found them, those handing their mutant to another
    theorem marked (or refused: a problem of ``t``)."""
    wv = Waivers(
        dict(phase.waived.get(t.id, {})),
        dict(phase.waiver_source.get(t.id, {})),
        problems=list(phase.problems.get(t.id, [])),
    )
    for mid, reason in list(wv.counted.items()):
        named = named_theorems(reason, anchors, t.id)
        if not named:
            continue
        symbol = phase.by_id[mid].symbol
        if wv.source.get(mid) == "code":
            wv.problems.append(
                f"the `# pragma: fak-equivalent` of {mid} names {', '.join(named)}: an in-code "
                "waiver claims the mutant equivalent for every theorem anchoring "
                f"{symbol}, so its reason cannot rest on a theorem's claim; say why no "
                "input tells the mutant from the code, or waive it in the documents of "
                "the theorems whose claim it is outside"
            )
        elif holders := [h for h in named if symbol in anchors[h]]:
            wv.handed[mid] = holders
            continue
        else:
            names = " or ".join(named)
            wv.problems.append(
                f"the waiver of {mid} hands the mutant to the claim of {names}, which does "
                f"not anchor {symbol}: nothing there keeps that reason true. {names} must "
                f"anchor {symbol} (and kill or waive the mutant itself), or the reason must "
                f"hold for {t.id} alone"
            )
        del wv.counted[mid]
    return wv


def _generated_verdict(
    t: Theorem, tv: TheoremVerdict, generated: Sequence[GeneratedMutant], wv: Waivers
) -> None:
    """Add the mutation score to ``tv``; a survivor that is not waived makes it VACUOUS."""
    passed = [w for w in tv.witnesses if w.outcome == "passed"]
    tv.generated = generated_summary(t, generated, passed, wv)
    if tv.verdict not in (PROVEN, VACUOUS, OPEN) or not passed:
        return
    g = tv.generated
    if g["survived"]:
        first = ", ".join(s["id"] for s in g["survivors"][:3])
        more = f" and {g['survived'] - 3} more" if g["survived"] > 3 else ""
        tv.reasons.append(
            f"{g['survived']} of {g['generated']} generated mutants survived "
            f"(neither killed nor waived): {first}{more} (each with its file:line, diff and "
            f"the waiver to paste: fak mutants list --theorem {t.id} --survivors)"
        )
        tv.reasons += [s["why"] for s in g["survivors"] if "why" in s]
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
