"""A first end-to-end check of the kernel's default chain (the full suites live beside it)."""

from fak_core import Kernel, Reason, ToolCall, VerdictKind


def test_schema_violation_is_denied_malformed_by_preflight() -> None:
    k = Kernel()
    k.register_schema("search_flights", {"type": "object", "required": ["origin"]})
    v = k.decide(ToolCall("search_flights", "{}", "t"))
    assert (v.kind, v.reason, v.by) == (VerdictKind.DENY, Reason.MALFORMED, "preflight")
