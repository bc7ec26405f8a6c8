import json
from typing import Any

import pytest
from airline_rules import BOOKING_SCHEMA, BaggageLimit
from hypothesis import example, given
from hypothesis import strategies as st

from fak_core import Reason, ToolCall, Verdict, VerdictKind
from fak_core.view import CallView
from pytest_fak.strategies import tool_calls


@pytest.mark.fak_theorem("AIR1.1")
@given(call=tool_calls("book_reservation", BOOKING_SCHEMA))
@example(
    call=__import__("fak_core").ToolCall("book_reservation", '{"user_id":"u","total_baggages":4}')
)
def test_allowed_bookings_carry_at_most_three_bags(fak_kernel_factory: Any, call: Any) -> None:
    kernel = fak_kernel_factory()
    verdict = kernel.decide(call)
    bags = __import__("json").loads(call.args)["total_baggages"]
    if verdict.kind == VerdictKind.ALLOW:
        assert bags <= 3
    else:
        assert bags > 3, f"a legal booking with {bags} bags was refused: {verdict}"


# What the rung's own contract says, computed here from the JSON text (never by the rung):
# DENY/POLICY_BLOCK by "baggage" exactly for a book_reservation whose total_baggages is an
# integer (not a boolean) above the limit; DEFER by "baggage" for every other call.
_BAGS = st.one_of(
    st.integers(-5, 25),
    st.integers(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=3),
    st.none(),
    st.lists(st.integers(), max_size=2),
)
_OBJECTS = st.builds(
    lambda extra, bags, has: {**extra, **({"total_baggages": bags} if has else {})},
    st.dictionaries(st.sampled_from(["user_id", "x", ""]), st.integers() | st.text(max_size=2)),
    _BAGS,
    st.booleans(),
)
_ARGS = st.one_of(
    _OBJECTS.map(json.dumps),
    st.sampled_from(["", "[4]", "4", "null", '"x"', "{", '{"total_baggages": 4']),
)
_TOOLS = st.just("book_reservation") | st.sampled_from(
    ["cancel_reservation", "Book_reservation", ""]
)


@pytest.mark.fak_theorem("AIR1.1")
@given(tool=_TOOLS, args=_ARGS, limit=st.integers(0, 10))
@example(tool="book_reservation", args='{"total_baggages": 4}', limit=3)
@example(tool="book_reservation", args='{"user_id": "u", "total_baggages": 3}', limit=3)
@example(tool="book_reservation", args='{"total_baggages": "9"}', limit=3)
@example(tool="cancel_reservation", args='{"total_baggages": 9}', limit=3)
def test_the_baggage_rung_denies_exactly_ints_over_the_limit(
    tool: str, args: str, limit: int
) -> None:
    try:
        parsed: Any = json.loads(args) if args else {}
    except ValueError:
        parsed = None
    bags = parsed.get("total_baggages") if isinstance(parsed, dict) else None
    over = tool == "book_reservation" and type(bags) is int and bags > limit
    verdict = BaggageLimit(max_bags=limit).adjudicate(CallView(ToolCall(tool, args)))
    assert verdict.by == "baggage", verdict
    if over:
        assert (verdict.kind, verdict.reason) == (VerdictKind.DENY, Reason.POLICY_BLOCK)
        assert f"{bags} bags" in verdict.claim
        assert str(limit) in verdict.claim
    else:
        assert verdict == Verdict.defer("baggage"), verdict
