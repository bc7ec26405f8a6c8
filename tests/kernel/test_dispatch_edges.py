"""Dispatch and its accounting (D1.2): who is told the call runs, what a tool receives and
returns, what a failing tool or subscriber leaves, and the counters and events of each.

The oracles are written here: whether the tool ran is read from the tool itself, the raw
verdict's "would run" from a rank table written out from D1, the tool's text from the
value the test handed back (``json.loads`` for JSON data), the durations from the wall
clock around the call.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from typing import Any

import pytest

from fak_core import (
    CallView,
    Event,
    EventKind,
    Kernel,
    Policy,
    Reason,
    Status,
    Taint,
    ToolCall,
    Verdict,
    VerdictKind,
    WitnessOutcome,
    parse_policy,
)
from fak_core.verdicts import EXTENSION_KIND_MIN

K = VerdictKind
#: extension kinds falling back to ALLOW (the lowest extension code) and to DENY
ALLOW_EXT, DENY_EXT = EXTENSION_KIND_MIN, EXTENSION_KIND_MIN + 77
RANK: dict[int, int] = {
    K.ALLOW: 0,
    K.TRANSFORM: 20,
    K.QUARANTINE: 30,
    K.REQUIRE_WITNESS: 40,
    K.DENY: 100,
}
RANK |= {ALLOW_EXT: 25, DENY_EXT: 25}
OPINIONS = ("ALLOW", "TRANSFORM", "QUARANTINE", "DENY", "DEFER", "W", "ALLOW_EXT", "DENY_EXT")
ANSWERS = (WitnessOutcome.CONFIRMED, WitnessOutcome.REFUTED, WitnessOutcome.ABSTAIN)


def _opinion(op: str) -> Verdict:
    return {
        "ALLOW": lambda: Verdict.allow("a"),
        "TRANSFORM": lambda: Verdict.transform('{"fixed": 1}', "t"),
        "QUARANTINE": lambda: Verdict.quarantine(Reason.TRUST_VIOLATION, "q"),
        "DENY": lambda: Verdict.deny(Reason.POLICY_BLOCK, "d"),
        "DEFER": lambda: Verdict(K.DEFER, Reason.NONE, "x"),
        "W": lambda: Verdict.require_witness("claim", "w"),
        "ALLOW_EXT": lambda: Verdict(ALLOW_EXT, Reason.NONE, "e"),
        "DENY_EXT": lambda: Verdict(DENY_EXT, Reason.NONE, "e"),
    }[op]()


class Fixed:
    """An adjudicator that always answers the same verdict."""

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict

    def adjudicate(self, view: CallView) -> Verdict:
        return self.verdict


class Told:
    """An adjudicator that asks to be told how the call settles, and has no opinion."""

    def __init__(self) -> None:
        self.told: list[bool] = []

    def adjudicate(self, view: CallView) -> Verdict:
        view.on_settle(self.told.append)
        return Verdict(K.DEFER, Reason.NONE, "told")


class Answer:
    def __init__(self, outcome: WitnessOutcome) -> None:
        self.outcome = outcome

    def resolve(self, call: ToolCall, claim: str) -> WitnessOutcome:
        return self.outcome


def recording(into: list[Any], out: Any) -> Any:
    """A tool that records the arguments it receives and returns ``out``."""

    def tool(args: dict[str, Any]) -> Any:
        into.append(args)
        return out

    return tool


def _kernel(chain: tuple[str, ...], answer: WitnessOutcome) -> tuple[Kernel, Told, list[Any]]:
    k = Kernel(Policy(allow=("t",)))
    k.register_kind(ALLOW_EXT, "ALLOW_EXT", 25, K.ALLOW)
    k.register_kind(DENY_EXT, "DENY_EXT", 25, K.DENY)
    told = Told()
    k.add_adjudicator(told, 1, name="told")
    for i, op in enumerate(chain):
        k.add_adjudicator(Fixed(_opinion(op)), 50 + i, name=op)
    k.add_witness_resolver("r", Answer(answer))
    ran: list[Any] = []
    k.register_tool("t", recording(ran, "done"))
    return k, told, ran


def _would_run(chain: tuple[str, ...]) -> bool:
    """The raw verdict's answer: the winner, or for a REQUIRE_WITNESS the most restrictive
    other opinion (ALLOW when none), runs when it is ALLOW, TRANSFORM or ALLOW_EXT."""
    ops = ["ALLOW", *(o for o in chain if o != "DEFER")]  # the floor allows "t"
    named: dict[str, int] = {"W": K.REQUIRE_WITNESS, "ALLOW_EXT": ALLOW_EXT, "DENY_EXT": DENY_EXT}
    kinds = [named[o] if o in named else int(K.__members__[o]) for o in ops]
    top = max(kinds, key=lambda k: RANK[k])
    if top == K.REQUIRE_WITNESS:
        others = [k for k in kinds if k != K.REQUIRE_WITNESS and RANK[k] > 0]
        top = max(others, key=lambda k: RANK[k]) if others else K.ALLOW
    return top in (K.ALLOW, K.TRANSFORM, ALLOW_EXT)


@pytest.mark.fak_theorem("D1.2")
def test_an_adjudicator_is_told_once_whether_the_call_runs() -> None:
    cases = 0
    for n in (0, 1, 2):
        for chain in itertools.product(OPINIONS, repeat=n):
            for answer in ANSWERS if "W" in chain else ANSWERS[:1]:
                k, told, ran = _kernel(chain, answer)
                k.syscall(ToolCall("t", "{}", "s"))
                assert told.told == [bool(ran)], (chain, answer, told.told, ran)
                k2, told2, _ = _kernel(chain, answer)
                k2.decide(ToolCall("t", "{}", "s"))
                assert told2.told == [_would_run(chain)], (chain, told2.told)
                cases += 1
    assert cases > 80


@pytest.mark.fak_theorem("D1.2")
def test_a_refused_witness_spends_no_rate_limit_budget() -> None:
    """The bug: the view was settled before the witness was asked, so a call refused
    by its witness kept the slot the rate limit had reserved for it."""
    policy = parse_policy({"allow": ["t", "w"], "rate_limit": {"max_calls": 2}})
    k = Kernel(policy)
    k.add_adjudicator(
        lambda view: Verdict.require_witness("c", "w") if view.tool == "w" else Verdict(K.DEFER),
        50,
        name="witness",
    )
    k.add_witness_resolver("r", Answer(WitnessOutcome.REFUTED))
    k.register_tool("t", lambda a: "ok")
    k.register_tool("w", lambda a: "ok")
    for _ in range(4):
        _, v, runnable = k.authorize(ToolCall("w", "{}", "s"))
        assert (v.kind, v.reason, runnable) == (K.DENY, Reason.TRUST_VIOLATION, False)
    kinds: list[int] = [k.syscall(ToolCall("t", "{}", "s"))[1].kind for _ in range(3)]
    assert kinds == [K.ALLOW, K.ALLOW, K.DENY]


# ---------------------------------------------------------------- running the tool
OUTPUTS: list[tuple[Any, str | None]] = [
    ("plain text", "plain text"),
    ("", ""),
    (b"caf\xc3\xa9 \xff", "caf\u00e9 \ufffd"),
    ({"a": [1, 2.5, None, True], "é": "x"}, None),
    ([1, "two"], None),
    (42, None),
    (None, None),
    ({1, 2}, "{1, 2}"),  # not JSON data: its str
    (object.__new__(type("Odd", (), {"__str__": lambda self: "odd!"})), "odd!"),
]


@pytest.mark.fak_theorem("D1.2")
@pytest.mark.parametrize(("out", "text"), OUTPUTS)
def test_a_tools_output_is_the_results_text(out: Any, text: str | None) -> None:
    k = Kernel(Policy(allow=("t",)))
    got: list[Any] = []
    k.register_tool("t", recording(got, out))
    events: list[Event] = []
    k.subscribe(events.append)
    before = time.perf_counter_ns()
    result, v = k.syscall(ToolCall("t", '{"q": [1]}', "s"))
    wall = time.perf_counter_ns() - before
    assert got == [{"q": [1]}] and v.kind == K.ALLOW
    assert result.status is Status.OK
    if text is None:
        assert json.loads(result.payload) == out
    else:
        assert result.payload == text
    complete = [e for e in events if e.kind == EventKind.COMPLETE]
    assert len(complete) == 1 and complete[0].result is not None
    assert complete[0].result.taint is Taint.TRUSTED  # the kernel produced it
    assert complete[0].result.payload == result.payload
    assert 0 <= complete[0].elapsed_ns <= wall  # the tool's run, within the call
    assert k.counters.dispatches == 1 and k.counters.tool_errors == 0


@pytest.mark.fak_theorem("D1.2")
def test_a_tool_always_receives_a_dict() -> None:
    k = Kernel(Policy(allow=("t",)))
    got: list[Any] = []
    k.register_tool("t", recording(got, "ok"))
    _, verdict, _ = k.authorize(ToolCall("t", "{}", "s"))
    for args in ("[1]", "null", ""):
        k.run_authorized(ToolCall("t", args, "s"), verdict)
    assert got == [{}, {}, {}]


@pytest.mark.fak_theorem("D1.2")
@pytest.mark.parametrize("length", [0, 400, 600])
def test_a_raising_tool_is_an_error_result(length: int) -> None:
    k = Kernel(Policy(allow=("t",)))

    def boom(args: dict[str, Any]) -> str:
        raise ValueError("m" * length)

    k.register_tool("t", boom)
    events: list[Event] = []
    k.subscribe(events.append)
    result, _ = k.syscall(ToolCall("t", "{}", "s"))
    wanted = ("tool 't' raised ValueError: " + "m" * length)[:512]
    assert (result.status, result.payload, dict(result.meta)) == (
        Status.ERROR,
        "",
        {"error": wanted},
    )
    assert (k.counters.tool_errors, k.counters.dispatches, k.counters.tool_timeouts) == (1, 1, 0)
    kinds = [e.kind for e in events]
    assert kinds.count(EventKind.DISPATCH) == 1 and kinds.count(EventKind.COMPLETE) == 1
    assert kinds.index(EventKind.DISPATCH) < kinds.index(EventKind.COMPLETE)


@pytest.mark.fak_theorem("D1.2")
def test_a_late_tool_is_an_error_result() -> None:
    release = threading.Event()
    k = Kernel(Policy(allow=("slow",)), tool_timeout=0.05, tool_workers=1)
    k.register_tool("slow", lambda args: release.wait(5) and "late")
    try:
        result, _ = k.syscall(ToolCall("slow", "{}", "s"))
    finally:
        release.set()
        k.close()
    assert (result.status, result.payload, dict(result.meta)) == (
        Status.ERROR,
        "",
        {"error": "tool 'slow' timed out after 0.05s"},
    )
    assert (k.counters.tool_timeouts, k.counters.tool_errors) == (1, 0)


@pytest.mark.fak_theorem("D1.2")
def test_an_unregistered_tool_and_a_gate_refusal_are_denials() -> None:
    k = Kernel(Policy(allow=("t", "ghost")))
    ran: list[Any] = []
    k.register_tool("t", recording(ran, "ok"))
    call, verdict, runnable = k.authorize(ToolCall("ghost", "{}", "s"))
    assert runnable
    result, v = k.run_authorized(call, verdict)
    assert (v.kind, v.reason, v.by) == (K.DENY, Reason.UNKNOWN_TOOL, "kernel")
    assert v.claim == "no tool named 'ghost' is registered"
    assert result.status is Status.ERROR and result.meta["reason"] == "UNKNOWN_TOOL"
    call, verdict, _ = k.authorize(ToolCall("t", "{}", "s"))
    result, v = k.run_authorized(call, verdict)
    assert (result.payload, v) == ("ok", verdict) and len(ran) == 1
    k.add_dispatch_gate(lambda c, v: Verdict.deny(Reason.POLICY_BLOCK, "gate"))
    result, v = k.run_authorized(call, verdict)
    assert (v.kind, v.by, result.status, len(ran)) == (K.DENY, "gate", Status.ERROR, 1)


# ---------------------------------------------------------------- accounting
@pytest.mark.fak_theorem("D1.2")
def test_a_raising_subscriber_stops_nothing() -> None:
    k = Kernel(Policy(allow=("t",)))
    k.register_tool("t", lambda args: "ok")
    seen: list[EventKind] = []

    def broken(event: Event) -> None:
        raise RuntimeError("subscriber down")

    k.subscribe(broken)
    k.subscribe(lambda e: seen.append(e.kind))
    result, v = k.syscall(ToolCall("t", "{}", "s"))
    assert result.payload == "ok" and v.kind == K.ALLOW
    assert seen == [
        EventKind.SUBMIT,
        EventKind.DECIDE,
        EventKind.DISPATCH,
        EventKind.COMPLETE,
        EventKind.ADMIT,
    ]
    assert k.counters.subscriber_errors == len(seen)


@pytest.mark.fak_theorem("D1.2")
@pytest.mark.parametrize("allowed", [True, False])
def test_each_decision_is_counted_with_its_duration(allowed: bool) -> None:
    k = Kernel(Policy(allow=("t",) if allowed else ()))

    def slow(view: CallView) -> Verdict:
        time.sleep(0.002)
        return Verdict(K.DEFER)

    k.add_adjudicator(slow, 50, name="slow")
    events: list[Event] = []
    k.subscribe(events.append)
    total = 0
    for n in range(1, 4):
        before = time.perf_counter_ns()
        v = k.decide(ToolCall("t", "{}", "s"))
        wall = time.perf_counter_ns() - before
        decide = [e for e in events if e.kind == EventKind.DECIDE]
        assert len(decide) == n and decide[-1].verdict == v
        assert 2_000_000 <= decide[-1].elapsed_ns <= wall
        total += decide[-1].elapsed_ns
        assert (k.counters.decisions, k.counters.decide_ns) == (n, total)
        denies = [e for e in events if e.kind == EventKind.DENY]
        assert k.counters.denies == len(denies) == (0 if allowed else n)
        assert all(e.verdict == v for e in denies)
