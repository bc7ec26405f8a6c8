"""A7.1 through a kernel: rungs a host adds with ``Kernel.add_rung`` join the kernel's own
ladder, evaluated in ascending declared cost after the built-ins (ties in registration
order), and a catching one refuses the call.

The oracle is the cost order the test computes with ``sorted`` over the costs it drew and
the registration index, and the catching rung it placed.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core import Kernel, Policy, ToolCall, VerdictKind

from .test_ladder_rows import _Rung


@pytest.mark.fak_theorem("A7.1")
@settings(max_examples=40, deadline=None)
@given(
    costs=st.lists(st.sampled_from([1.0, 2.0, 3.0]), min_size=1, max_size=4),
    catcher=st.integers(-1, 3),
)
def test_rungs_added_through_the_kernel_run_in_cost_order(costs: list[float], catcher: int) -> None:
    k = Kernel(Policy(allow=("tool",)))
    for i, cost in enumerate(costs):
        k.add_rung(_Rung(f"r{i}", cost, catches=i == catcher))
    seen: list[tuple[int, str]] = []
    k.ladder.set_probe(lambda number, rung: seen.append((number, rung.name)))
    verdict = k.decide(ToolCall("tool", "{}", "s"))
    users = [f"r{i}" for i, _ in sorted(enumerate(costs), key=lambda t: (t[1], t[0]))]
    # a user rung of cost 1 follows the schema rung (cost 1, registered first)
    order = ["parse", "schema", *users]
    if 0 <= catcher < len(costs):
        stop = order.index(f"r{catcher}")
        assert verdict.kind == VerdictKind.DENY and verdict.by == "preflight"
        assert seen == list(enumerate(order[: stop + 1]))
    else:
        assert verdict.kind == VerdictKind.ALLOW
        assert seen == list(enumerate(order))
