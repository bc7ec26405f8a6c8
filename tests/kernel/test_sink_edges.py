"""Sink gate edges (C4.3): destination keys in any case, every destination listed, and the
gate's policy tables taken from the policy it was built with or given later."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core import Kernel, Policy, Sink, Taint, ToolCall, VerdictKind, classify
from fak_core.ledger import MemoryLedger
from fak_core.reasons import Reason
from fak_core.sinks import SinkGate, external_destinations
from fak_core.view import CallView

# Hand-written: each value is more than one bare word (a space, a plus, a slash) or all
# digits, so under a destination key it names somewhere; under any other key it is text.
KEYED_ONLY = ["bob smith", "bob+tag", "team/ops", "5550123", "a,b"]
# One bare word is a name, never a destination, under any key.
BARE = ["bob", "Alice_B", "ops-team"]
DEST_KEYS = ["to", "TO", "To", "Url", "URL", "Host", "RECIPIENT", "Bcc", "Endpoint", "Server"]


@pytest.mark.fak_theorem("C4.3")
@pytest.mark.parametrize("key", DEST_KEYS)
def test_a_destination_key_in_any_case_makes_more_than_a_word_a_destination(key: str) -> None:
    for value in KEYED_ONLY:
        assert classify("lookup", {key: value}) is Sink.EGRESS, (key, value)
        assert classify("lookup", {"note": value}) is Sink.NONE, value
        assert classify("lookup", {"meta": {key: [value]}}) is Sink.EGRESS, (key, value)
    for value in BARE:
        assert classify("lookup", {key: value}) is Sink.NONE, (key, value)


def _place(draw: Any, leaf: str, depth: int) -> Any:
    """``leaf`` wrapped in ``depth`` random layers of tables (non-destination keys) and lists."""
    out: Any = leaf
    for _ in range(depth):
        if draw(st.booleans()):
            out = {draw(st.sampled_from(["q", "note", "data", "x"])): out}
        else:
            out = [out]
    return out


@st.composite
def args_with_destinations(draw: Any) -> tuple[Any, list[str]]:
    n = draw(st.integers(min_value=0, max_value=6))
    urls = [f"https://h{i}.example/p{i}" for i in range(n)]
    fillers = draw(st.lists(st.sampled_from(["hello", "a b c", "notes.txt", "42", ""]), max_size=4))
    leaves = [(u, draw(st.integers(0, 3))) for u in urls] + [(f, 1) for f in fillers]
    order = draw(st.permutations(leaves))
    return {f"k{i}": _place(draw, leaf, depth) for i, (leaf, depth) in enumerate(order)}, urls


@pytest.mark.fak_theorem("C4.3")
@given(args_with_destinations(), st.sampled_from(["lookup", "calculate"]))
def test_every_destination_in_the_arguments_is_found(
    case: tuple[Any, list[str]], tool: str
) -> None:
    args, urls = case
    assert sorted(external_destinations(args)) == sorted(urls)
    assert classify(tool, args) is (Sink.EGRESS if urls else Sink.NONE)


def _gate_verdict(gate: SinkGate, tool: str, args: str) -> int:
    return gate.adjudicate(CallView(ToolCall(tool, args, "s"))).kind


@pytest.mark.fak_theorem("C4.3")
def test_the_gate_reads_the_policy_it_was_built_with() -> None:
    ledger = MemoryLedger()
    ledger.raise_to("s", Taint.TAINTED)
    shell = '{"cmd": "ls"}'
    assert _gate_verdict(SinkGate(ledger), "run_shell", shell) == VerdictKind.DEFER
    strict = Policy(gated_sinks=("EXEC",))
    assert _gate_verdict(SinkGate(ledger, strict), "run_shell", shell) == VerdictKind.DENY
    gate = SinkGate(ledger)
    gate.set_policy(strict)
    assert _gate_verdict(gate, "run_shell", shell) == VerdictKind.DENY
    gate.set_policy(Policy())
    assert _gate_verdict(gate, "run_shell", shell) == VerdictKind.DEFER
    # a kernel's gate follows the kernel's policy swap too
    k = Kernel(Policy(allow=("run_shell",)))
    k.ledger.raise_to("s", Taint.TAINTED)
    assert k.decide(ToolCall("run_shell", shell, "s")).kind == VerdictKind.ALLOW
    k.set_policy(Policy(allow=("run_shell",), gated_sinks=("EXEC",)))
    v = k.decide(ToolCall("run_shell", shell, "s"))
    assert v.kind == VerdictKind.DENY and v.reason == Reason.TRUST_VIOLATION
