"""Shared pieces for the gateway tests: a policy and a kernel with test tools."""

from __future__ import annotations

import secrets
from typing import Any

from fak_core import Kernel, Verdict, parse_policy
from fak_core.view import CallView

#: A policy for the gateway tests: the built-in shape plus an allowed egress tool.
POLICY_DOC: dict[str, Any] = {
    "version": "fak-policy/v1",
    "allow": ["get_user_details", "search_flights", "send_email", "wire_money", "echo"],
    "allow_prefix": ["read_", "get_"],
    "deny": {"shell_rm_rf": "POLICY_BLOCK", "exfiltrate": "SECRET_EXFIL"},
    "redact_fields": ["password", "api_key"],
}

WITNESS_CLAIM = "a second person approved this transfer"


def require_witness_for_wire_money(view: CallView) -> Verdict:
    """A test adjudicator: wire_money needs a witness (REQUIRE_WITNESS)."""
    return Verdict.require_witness(WITNESS_CLAIM, "test/witness-gate")


def make_kernel() -> Kernel:
    kernel = Kernel(parse_policy(POLICY_DOC))
    kernel.register_tool("echo", lambda args: {"echo": args}, source="untrusted")
    kernel.register_tool("get_user_details", lambda args: {"user": args.get("user_id", "")})
    kernel.register_schema(
        "search_flights",
        {
            "type": "object",
            "required": ["origin"],
            "properties": {"origin": {"type": "string", "minLength": 3}},
        },
    )
    kernel.add_adjudicator(require_witness_for_wire_money, 50, tools=["wire_money"])
    return kernel


__all__ = ["POLICY_DOC", "WITNESS_CLAIM", "make_kernel", "own_session"]


def own_session() -> dict[str, str]:
    """The headers of a client with a session token of its own (a fresh secret), sent on
    every request as a real client of the gateway does: the first request on a trace binds
    the trace to it and every later one is let through (D12)."""
    return {"X-Fak-Session": secrets.token_urlsafe(24)}
