"""D1.2 and D8 over their whole class: every kind of folded verdict, every witness outcome.

The oracles are written out here from the theorems (which kinds run, which outcome a
sequence of resolvers gives) and from the committed vocabulary (`tests/golden/`), never
read back from the kernel's own tables.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from fak_core import (
    Event,
    EventKind,
    Kernel,
    Policy,
    Reason,
    Status,
    ToolCall,
    Verdict,
    VerdictKind,
    WitnessOutcome,
)
from fak_core.verdicts import EXTENSION_KIND_MIN, QuarantinePayload, TransformPayload

GOLDEN = json.loads((Path(__file__).parents[1] / "golden" / "vocabulary.json").read_text())
DISPOSITION: dict[str, str] = GOLDEN["dispositions"]
REASON_CODE: dict[str, int] = GOLDEN["reasons"]
CORE_KINDS = {name: entry["code"] for name, entry in GOLDEN["verdict_kinds"].items()}
NAME_OF_REASON = {code: name for name, code in REASON_CODE.items()}

# ------------------------------------------------------------------------------ D8
RAISES = "raises"
OUTCOMES = (WitnessOutcome.ABSTAIN, WitnessOutcome.CONFIRMED, WitnessOutcome.REFUTED, RAISES)


class Resolver:
    def __init__(self, rid: str, outcome: Any, asked: list[tuple[str, str]]) -> None:
        self.rid, self.outcome, self.asked = rid, outcome, asked

    def resolve(self, call: ToolCall, claim: str) -> WitnessOutcome:
        self.asked.append((self.rid, claim))
        if self.outcome == RAISES:
            raise RuntimeError("resolver down")
        return self.outcome  # type: ignore[no-any-return]


CLAIM = "payment approved by a human"


def _witness_kernel(outcomes: tuple[Any, ...], subscribe: bool) -> tuple[Kernel, list[Any]]:
    k = Kernel(Policy(allow=("wire",)))
    k.register_tool("wire", lambda a: "sent")
    k.add_adjudicator(
        lambda view: Verdict.require_witness(CLAIM, "reversibility"), 40, name="needs-witness"
    )
    asked: list[tuple[str, str]] = []
    # registered in reverse id order: the kernel must still ask them in id order
    for i in reversed(range(len(outcomes))):
        k.add_witness_resolver(f"r{i}", Resolver(f"r{i}", outcomes[i], asked))
    events: list[Event] = []
    if subscribe:
        k.subscribe(events.append)
    return k, [asked, events]


@pytest.mark.fak_theorem("D8")
@pytest.mark.parametrize("subscribe", [False, True])
def test_every_sequence_of_resolver_outcomes(subscribe: bool) -> None:
    """Every sequence of up to three resolvers, each abstaining, confirming, refuting or
    raising (all 85 of them): the oracle is the theorem's rule, applied in id order."""
    for n in range(4):
        for outcomes in itertools.product(OUTCOMES, repeat=n):
            k, (asked, events) = _witness_kernel(outcomes, subscribe)
            result, v = k.syscall(ToolCall("wire", "{}", "t"))
            first = next((i for i, o in enumerate(outcomes) if o == WitnessOutcome.CONFIRMED), None)
            case = (outcomes, v)
            # the resolvers are asked in id order, up to the first confirmation, with the claim
            stop = n if first is None else first + 1
            assert asked == [(f"r{i}", CLAIM) for i in range(stop)], case
            assert v.by == "witness", case
            if first is not None:
                assert (v.kind, result.status, result.payload) == (
                    VerdictKind.ALLOW,
                    Status.OK,
                    "sent",
                ), case
                assert dict(v.meta) == {
                    "witness": "confirmed",
                    "resolver": f"r{first}",
                    "claim": CLAIM,
                }
                assert k.counters.dispatches == 1 and k.counters.denies == 0, case
                continue
            refuted = WitnessOutcome.REFUTED in outcomes
            reason, word = (
                ("TRUST_VIOLATION", "refuted") if refuted else ("UNWITNESSED", "unwitnessed")
            )
            assert (v.kind, v.reason) == (VerdictKind.DENY, REASON_CODE[reason]), case
            assert dict(v.meta) == {"witness": word, "claim": CLAIM}, case
            assert result.status is Status.ERROR and result.payload == "", case
            assert result.meta["reason"] == reason and result.meta["by"] == "witness", case
            assert k.counters.dispatches == 0 and k.counters.denies == 1, case
            if subscribe:
                denies = [e for e in events if e.kind is EventKind.DENY]
                assert len(denies) == 1 and denies[0].verdict == v, case


# ------------------------------------------------------------------------------ D1.2
EXTENSIONS = {  # code -> (name, rank, fallback)
    EXTENSION_KIND_MIN: ("EXT_ALLOW_AT_MIN", 5, VerdictKind.ALLOW),
    EXTENSION_KIND_MIN + 1: ("EXT_DEFER", 12, VerdictKind.DEFER),
    EXTENSION_KIND_MIN + 2: ("EXT_DENY", 50, VerdictKind.DENY),
    EXTENSION_KIND_MIN + 77: ("EXT_ALLOW", 60, VerdictKind.ALLOW),
}
UNKNOWN_KINDS = (7, 999, EXTENSION_KIND_MIN - 1, EXTENSION_KIND_MIN + 3, 1 << 20)
REASONS = ("NONE", "DEFAULT_DENY", "POLICY_BLOCK", "RATE_LIMITED", "LEASE_HELD", "TRUST_VIOLATION")
ARGS = ('{"x": 1}', '{"a": "é\\u0000", "n": [1, {"b": null}]}', "{}")


def verdict_cases() -> list[tuple[Verdict, str]]:
    """Every verdict an adjudicator can make win the fold over the floor's ALLOW, with
    what the theorem says of it: 'run', 'run-repaired', 'witness' or 'held'."""
    bys = ("gate", "", "x" * 40)
    claims = ("", "why not", "c" * 300)
    metas: tuple[dict[str, str], ...] = (
        {},
        {"retry_after": "3"},
        {"retry_after_ms": "500", "other": "x"},
        {"retry_after": "1", "retry_after_ms": "1000"},
    )
    out: list[tuple[Verdict, str]] = []
    out += [(Verdict.allow(by, meta=meta), "run") for by in bys for meta in metas]
    out += [
        (Verdict.deny(REASON_CODE[r], bys[i % 3], claim=c, meta=m), "held")
        for i, (r, c, m) in enumerate(itertools.product(REASONS, claims, metas))
    ]
    for repaired in (*ARGS, "", None):
        payload = None if repaired is None else TransformPayload(repaired)
        out.append((Verdict(VerdictKind.TRANSFORM, Reason.NONE, "t", payload), "run-repaired"))
    out += [
        (Verdict(VerdictKind.QUARANTINE, REASON_CODE[r], "q", QuarantinePayload(), m), "held")
        for r in REASONS
        for m in metas[:2]
    ]
    out += [(Verdict.require_witness(c or "w", "needs"), "witness") for c in claims]
    for code, (_, _, fallback) in EXTENSIONS.items():
        out.append(
            (
                Verdict(code, Reason.NONE, "ext", None),
                "run" if fallback == VerdictKind.ALLOW else "held",
            )
        )
    out += [
        (Verdict(code, REASON_CODE[r], "odd", None, metas[1]), "held")
        for code in UNKNOWN_KINDS
        for r in REASONS
    ]
    return out


def _kind_name(code: int) -> str:
    names = {v: k for k, v in CORE_KINDS.items()}
    if code in names:
        return names[code]
    if code in EXTENSIONS:
        return EXTENSIONS[code][0]
    return f"KIND_{code}"


@pytest.mark.fak_theorem("D1.2")
def test_every_folded_kind_dispatches_only_as_the_theorem_says() -> None:
    """Every case of :func:`verdict_cases`, with and without a subscriber; a witness
    verdict with each resolver outcome; the arguments, the call's own number and a tool
    that raises rotate through the cases."""
    i = 0
    for case in verdict_cases():
        resolvers = (WitnessOutcome.CONFIRMED, WitnessOutcome.REFUTED, None)
        for resolver in resolvers if case[1] == "witness" else (None,):
            for subscribe in (False, True):
                i += 1
                check_case(
                    case, ARGS[i % 3], resolver, (0, 1, 7, 1 << 40)[i % 4], subscribe, i % 5 == 0
                )


def check_case(
    case: tuple[Verdict, str],
    args: str,
    resolver: WitnessOutcome | None,
    seq: int,
    subscribe: bool,
    tool_raises: bool,
) -> None:
    verdict, expect = case
    k = Kernel(Policy(allow=("echo",)))
    for code, (name, rank, fallback) in EXTENSIONS.items():
        k.register_kind(code, name, rank, fallback)
    received: list[dict[str, Any]] = []

    def echo(a: dict[str, Any]) -> Any:
        received.append(a)
        if tool_raises:
            raise ValueError("the tool broke")
        return "ran"

    k.register_tool("echo", echo)
    k.add_adjudicator(lambda view: verdict, 50, name="generated")
    if resolver is not None:
        k.add_witness_resolver("r", Resolver("r", resolver, []))
    events: list[Event] = []
    if subscribe:
        k.subscribe(events.append)

    result, final = k.syscall(ToolCall("echo", args, "t", seq=seq))

    runs = expect in ("run", "run-repaired") or (
        expect == "witness" and resolver == WitnessOutcome.CONFIRMED
    )
    if expect == "run-repaired":
        repaired = verdict.repaired_args
        wanted = json.loads(repaired) if repaired else {}
    else:
        wanted = json.loads(args)
    assert received == ([wanted] if runs else []), (verdict, received)
    assert k.counters.dispatches == int(runs)
    assert k.counters.submits == 1
    assert k.counters.denies == int(not runs)
    assert k.counters.transforms == int(expect == "run-repaired")
    if runs:
        if tool_raises:
            assert result.status is Status.ERROR and "ValueError" in result.meta["error"]
        else:
            assert (result.status, result.payload) == (Status.OK, "ran")
    else:
        # the refusal is a value: its metadata says what was refused, why, and by whom
        reason = NAME_OF_REASON.get(final.reason, "NONE")
        reason = "DEFAULT_DENY" if reason == "NONE" else reason
        wanted_meta = {
            "verdict": "deny",
            "kind": _kind_name(final.kind),
            "reason": reason,
            "disposition": DISPOSITION[reason],
            "by": final.by,
        }
        if final.claim:
            wanted_meta["claim"] = final.claim
        if DISPOSITION[reason] == "WAIT":
            wanted_meta |= {
                key: final.meta[key]
                for key in ("retry_after", "retry_after_ms")
                if key in final.meta
            }
        assert (result.status, result.payload) == (Status.ERROR, ""), final
        assert dict(result.meta) == wanted_meta, (final, dict(result.meta))
        if expect == "held":
            assert final == verdict
    if subscribe:
        kinds = [e.kind for e in events]
        assert kinds.count(EventKind.SUBMIT) == 1
        assert kinds.count(EventKind.DENY) == int(not runs), kinds
        assert kinds.count(EventKind.DISPATCH) == int(runs), kinds
        # the call is numbered once: its own number kept, or the kernel's first
        assert {e.call.seq for e in events} == {seq or 1}, kinds
