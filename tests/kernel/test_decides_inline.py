"""D10.1's inline route: ``Kernel.decides_without_waiting`` names exactly the kernels whose
every decision part is declared non-blocking.

A generated kernel (with or without its built-in chain) gets, for each kind of part a
decision may run (an unscoped adjudicator, a scoped one, a plain function adjudicator, a
preflight rung, the ladder's probe, a subscriber, the taint ledger, the grounding store),
none, a declared one or an undeclared one. The oracle is the test's own record of what it
registered: True exactly when it registered nothing undeclared (the kernel's own parts are
declared). A result admitter is not part of a decision and never changes the answer.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core import Kernel, Policy, ToolCall, Verdict, VerdictKind
from fak_core.grounding import GroundingStore
from fak_core.ledger import MemoryLedger
from fak_core.nonblocking import nonblocking
from fak_core.preflight import Catch, Rung
from fak_core.view import CallView

PARTS = ("adjudicator", "scoped", "function", "rung", "probe", "subscriber", "ledger", "grounding")
_STATE = st.sampled_from(["none", "declared", "undeclared"])


class _Adj:
    def adjudicate(self, view: CallView) -> Verdict:
        return Verdict.defer("inline")


class _Rung:
    name = "inline"
    cost = 5.0

    def check(self, view: CallView) -> Catch | None:
        return None


class _Ledger(MemoryLedger):
    """A host's ledger: its own class, not declared unless the host declares it."""

    __fak_nonblocking__ = False


class _Grounding(GroundingStore):
    """A host's grounding store, likewise."""

    __fak_nonblocking__ = False


def _declared(obj: Any, declared: bool) -> Any:
    return nonblocking(obj) if declared else obj


def _make(part: str, declared: bool) -> Any:
    if part in ("adjudicator", "scoped"):
        return _declared(_Adj(), declared)
    if part == "rung":
        return _declared(_Rung(), declared)
    if part == "ledger":
        return _declared(_Ledger(), declared)
    if part == "grounding":
        return _declared(_Grounding(), declared)

    def fn(*args: Any) -> Any:
        return Verdict.defer("inline") if part == "function" else None

    return _declared(fn, declared)


def _kernel(builtin: bool, states: dict[str, str]) -> Kernel:
    made = {p: _make(p, s == "declared") for p, s in states.items() if s != "none"}
    k = Kernel(
        Policy(allow=("t",)),
        builtin_chain=builtin,
        ledger=made.get("ledger"),
        grounding=made.get("grounding"),
    )
    if "adjudicator" in made:
        k.add_adjudicator(made["adjudicator"], 20)
    if "scoped" in made:
        k.add_adjudicator(made["scoped"], 20, tools=["other"])
    if "function" in made:
        k.add_adjudicator(made["function"], 20)
    if "rung" in made:
        assert isinstance(made["rung"], Rung)
        k.add_rung(made["rung"])
    if "probe" in made:
        k.ladder.set_probe(made["probe"])
    if "subscriber" in made:
        k.subscribe(made["subscriber"])
    return k


@pytest.mark.fak_theorem("D10.1")
@settings(max_examples=120, deadline=None)
@given(builtin=st.booleans(), states=st.fixed_dictionaries({p: _STATE for p in PARTS}))
def test_inline_exactly_when_every_part_is_declared(builtin: bool, states: dict[str, str]) -> None:
    k = _kernel(builtin, states)
    expected = all(s != "undeclared" for s in states.values())
    assert k.decides_without_waiting() is expected
    # an undeclared admitter is not a decision part
    k.add_admitter(lambda call, result: Verdict.defer("inline"), 5)
    assert k.decides_without_waiting() is expected
    # the parts still decide (the kernel is usable as built)
    assert k.decide(ToolCall("t", "{}", "s")).kind in {VerdictKind.ALLOW, VerdictKind.DENY}


@pytest.mark.fak_theorem("D10.1")
@pytest.mark.parametrize("part", PARTS)
def test_one_undeclared_part_sends_the_decision_to_a_worker(part: str) -> None:
    states = {p: "declared" for p in PARTS}
    assert _kernel(True, states).decides_without_waiting() is True
    states[part] = "undeclared"
    assert _kernel(True, states).decides_without_waiting() is False
    # an unsubscribed or unset part no longer counts
    if part == "subscriber":
        k = Kernel()
        undo = k.subscribe(lambda event: None)
        assert k.decides_without_waiting() is False
        undo()
        assert k.decides_without_waiting() is True
    if part == "probe":
        k = _kernel(True, states)
        k.ladder.set_probe(None)
        assert k.decides_without_waiting() is True
