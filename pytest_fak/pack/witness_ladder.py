"""Witnesses of FAK-L1 and FAK-L2 (the preflight ladder), run against ``fak_kernel_factory``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fak_core import Catch, Reason, ToolCall, VerdictKind
from pytest_fak.strategies import malformed_args

TOOL = "fak_pack_probe"
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}


class _CostRung:
    """An extra rung that never catches; only its declared cost matters."""

    def __init__(self, name: str, cost: float) -> None:
        self.name = name
        self.cost = cost

    def check(self, view: Any) -> Catch | None:
        return None


def _probed(kernel: Any) -> list[tuple[int, float]]:
    seen: list[tuple[int, float]] = []
    kernel.ladder.set_probe(lambda number, rung: seen.append((number, float(rung.cost))))
    return seen


@pytest.mark.fak_theorem("FAK-L1")
@given(
    costs=st.lists(st.floats(-5, 5, allow_nan=False), min_size=0, max_size=2),
    args=st.sampled_from(['{"n": 1}', "{}", '{"n": "x"}', "not json"]),
)
@example(costs=[0.5], args='{"n": 1}')
def test_rungs_run_in_ascending_cost(
    fak_kernel_factory: Any, costs: list[float], args: str
) -> None:
    kernel = fak_kernel_factory()
    kernel.register_schema(TOOL, SCHEMA)
    for i, c in enumerate(costs):
        kernel.add_rung(_CostRung(f"extra{i}", c))
    seen = _probed(kernel)
    kernel.decide(ToolCall(TOOL, args, "fak-l1"))
    assert seen, "the ladder evaluated no rung"
    numbers = [n for n, _ in seen]
    assert numbers == list(range(len(seen))), f"rungs evaluated out of order: {numbers}"
    observed = [c for _, c in seen]
    assert observed == sorted(observed), f"costs not ascending: {observed}"
    declared = [float(r.cost) for r in kernel.ladder.rungs]
    assert observed == declared[: len(observed)]


@pytest.mark.fak_theorem("FAK-L2")
@given(args=malformed_args())
@example(args="{")
def test_parse_catch_stops_the_ladder(fak_kernel_factory: Any, args: str | bytes) -> None:
    kernel = fak_kernel_factory()
    kernel.register_schema(TOOL, SCHEMA)
    seen = _probed(kernel)
    caught = kernel.ladder.caught
    rows = len(kernel.ladder.negatives)
    v = kernel.decide(ToolCall(TOOL, args, "fak-l2"))
    assert (v.kind, v.by) == (VerdictKind.DENY, "preflight")
    assert v.reason in (Reason.MALFORMED, Reason.OVERSIZE)
    k = int(v.meta["rung_failed"])
    assert int(v.meta["rung_passed"]) == k - 1
    assert [n for n, _ in seen] == list(range(k + 1)), f"rungs after the catch ran: {seen}"
    assert kernel.ladder.caught == caught + 1
    assert len(kernel.ladder.negatives) == rows + 1
