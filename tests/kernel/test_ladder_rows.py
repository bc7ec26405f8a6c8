"""The ladder's row as a host reads it, and rung 1 with and without ``require_schema``.

A7.1: a catch at rung k is recorded as a row whose record (``NegativeRow.as_dict``) holds
``rung_passed = k-1`` and ``rung_failed = k`` with the call, the verdict and the reason;
the probe set on the ladder sees every rung evaluated. The oracle is the position of the
catching rung the test put in the ladder and the record's fields written out here.

A7.3: a tool with no schema passes rung 1 unless the ladder requires a schema, when it is
refused UNKNOWN_TOOL at rung 1; the oracle is the flag the test set.
"""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core import CallView, Ladder, SchemaRegistry, ToolCall, VerdictKind
from fak_core.preflight import Catch, Rung
from fak_core.reasons import Reason


class _Rung:
    def __init__(self, name: str, cost: float, catches: bool) -> None:
        self.name = name
        self.cost = cost
        self.catches = catches

    def check(self, view: CallView) -> Catch | None:
        return Catch(Reason.POLICY_BLOCK, f"{self.name} caught") if self.catches else None


@pytest.mark.fak_theorem("A7.1")
@settings(max_examples=60, deadline=None)
@given(
    costs=st.lists(st.sampled_from([2.0, 3.0, 5.0, 7.0]), min_size=1, max_size=4, unique=True),
    catcher=st.integers(0, 3),
    args=st.sampled_from(["{}", '{"a": 1}', '{"k": "ü"}']),
)
def test_the_row_record_stamps_the_catching_rung(
    costs: list[float], catcher: int, args: str
) -> None:
    catcher %= len(costs)
    ladder = Ladder(SchemaRegistry())
    for i, cost in enumerate(costs):
        rung = _Rung(f"r{i}", cost, catches=i == catcher)
        assert isinstance(rung, Rung)
        ladder.add_rung(rung)
    seen: list[tuple[int, str]] = []
    ladder.set_probe(lambda number, rung: seen.append((number, rung.name)))
    verdict = ladder.adjudicate(CallView(ToolCall("tool", args, "s")))
    assert verdict.kind == VerdictKind.DENY
    # the built-ins are rungs 0 and 1; user rungs follow in ascending cost
    order = ["parse", "schema", *(f"r{i}" for i, _ in sorted(enumerate(costs), key=lambda t: t[1]))]
    k = order.index(f"r{catcher}")
    assert seen == list(enumerate(order[: k + 1]))
    (row,) = ladder.negatives.rows()
    assert row.as_dict() == {
        "call_hash": "tool:" + hashlib.sha256(args.encode()).hexdigest(),
        "rung_passed": k - 1,
        "rung_failed": k,
        "verdict": "DENY",
        "reason": "POLICY_BLOCK",
        "detail": f"r{catcher} caught",
    }
    ladder.set_probe(None)
    assert ladder.probe is None
    ladder.adjudicate(CallView(ToolCall("tool", args, "s")))
    assert len(seen) == k + 1  # an unset probe sees nothing more


@pytest.mark.fak_theorem("A7.3")
@pytest.mark.parametrize("required", [False, True])
def test_a_tool_without_a_schema_passes_rung_1_unless_one_is_required(required: bool) -> None:
    schemas = SchemaRegistry()
    schemas.register("known", {"type": "object"})
    ladder = Ladder(schemas, require_schema=required)
    unknown = ladder.adjudicate(CallView(ToolCall("unknown", "{}", "s")))
    known = ladder.adjudicate(CallView(ToolCall("known", "{}", "s")))
    assert known.kind == VerdictKind.DEFER
    if required:
        assert unknown.kind == VerdictKind.DENY and unknown.reason == Reason.UNKNOWN_TOOL
        (row,) = ladder.negatives.rows()
        assert (row.rung_passed, row.rung_failed, row.reason) == (0, 1, "UNKNOWN_TOOL")
    else:
        assert unknown.kind == VerdictKind.DEFER
        assert ladder.negatives.rows() == []
