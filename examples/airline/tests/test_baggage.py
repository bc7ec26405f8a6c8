from typing import Any

import pytest
from airline_rules import BOOKING_SCHEMA
from hypothesis import example, given

from fak_core import VerdictKind
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
