"""The airline project's hooks: its kernel for pytest_fak, and its own mutant."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from airline_rules import BOOKING_SCHEMA, BaggageLimit

from fak_core import Kernel
from pytest_fak import mutant


# optionalhook: pytest accepts the hook even where pytest-fak is not installed
@pytest.hookimpl(optionalhook=True)
def pytest_fak_make_kernel(config: Any) -> Kernel:
    kernel = Kernel()  # the built-in fail-closed policy already allows book_reservation
    kernel.register_schema("book_reservation", BOOKING_SCHEMA)
    kernel.add_adjudicator(BaggageLimit(max_bags=3), 50, name="baggage")
    return kernel


@mutant("AIR1.1/off-by-one")
def off_by_one() -> Any:
    """The limit check lets max_bags + 1 through."""
    real = BaggageLimit.adjudicate

    def adjudicate(self: BaggageLimit, view: Any) -> Any:
        self.max_bags += 1
        try:
            return real(self, view)
        finally:
            self.max_bags -= 1

    return mock.patch.object(BaggageLimit, "adjudicate", adjudicate)
