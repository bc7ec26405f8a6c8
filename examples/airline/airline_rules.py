"""The airline's own adjudicator: no booking may carry more than ``max_bags`` bags."""

from __future__ import annotations

from fak_core import Reason, Verdict
from fak_core.view import CallView


class BaggageLimit:
    """DENY/POLICY_BLOCK a ``book_reservation`` whose ``total_baggages`` exceeds the limit."""

    def __init__(self, max_bags: int = 3) -> None:
        self.max_bags = max_bags

    def adjudicate(self, view: CallView) -> Verdict:
        if view.call.tool != "book_reservation":
            return Verdict.defer("baggage")
        args = view.args()
        bags = args.get("total_baggages") if isinstance(args, dict) else None
        if not isinstance(bags, int) or isinstance(bags, bool):
            return Verdict.defer("baggage")  # the schema rung owns type errors
        if bags > self.max_bags:
            return Verdict.deny(
                Reason.POLICY_BLOCK, "baggage", claim=f"{bags} bags exceed {self.max_bags}"
            )
        return Verdict.defer("baggage")


BOOKING_SCHEMA = {
    "type": "object",
    "properties": {
        "user_id": {"type": "string", "minLength": 1},
        "total_baggages": {"type": "integer", "minimum": 0, "maximum": 20},
    },
    "required": ["user_id", "total_baggages"],
    "additionalProperties": False,
}
