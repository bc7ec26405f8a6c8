"""The kernel the proxy tests run against: a small policy whose verdicts are known.

- ``send_email``, ``fetch_url``, ``get_user`` (and ``wire_money``, ``hold_thing``) are allowed
  by the floor; ``deny_thing`` is denied POLICY_BLOCK; anything else is DEFAULT_DENY.
- ``get_user`` with a ``password`` argument is repaired (TRANSFORM drops the field).
- ``wire_money`` needs a witness (REQUIRE_WITNESS); ``hold_thing`` is QUARANTINEd.
- ``send_email`` to an external address is an EGRESS sink: denied TRUST_VIOLATION on a
  tainted session, allowed on a clean one.
"""

from __future__ import annotations

from fak_core import Kernel, Policy, Reason, Verdict
from fak_core.gateway import GatewayState

ALLOWED = ("send_email", "fetch_url", "get_user", "wire_money", "hold_thing")


def make_kernel() -> Kernel:
    k = Kernel(
        Policy(
            allow=ALLOWED,
            deny={"deny_thing": "POLICY_BLOCK"},
            redact_fields=("password",),
        )
    )
    k.add_adjudicator(
        lambda view: Verdict.require_witness("a human approved the transfer", "test-witness"),
        50,
        tools=["wire_money"],
        name="witness",
    )
    k.add_adjudicator(
        lambda view: Verdict.quarantine(Reason.TRUST_VIOLATION, "test-hold"),
        50,
        tools=["hold_thing"],
        name="hold",
    )
    return k


def make_state() -> GatewayState:
    return GatewayState(make_kernel())
