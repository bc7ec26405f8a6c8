"""D2.2, a policy's schemas across a swap: a schema the policy declared for a tool the host
registered none for is gone once a policy that does not name the tool is applied, so the
kernel decides as one built with the new policy (a fresh kernel is the oracle).
"""

from __future__ import annotations

import pytest

from fak_core import Kernel, Policy, ToolCall, VerdictKind

STRICT = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}


@pytest.mark.fak_theorem("D2.2")
@pytest.mark.parametrize("args", ["{}", '{"n": "x"}', '{"n": 1}'])
def test_a_dropped_policy_schema_is_gone(args: str) -> None:
    k = Kernel(Policy(allow=("calc",), schemas={"calc": STRICT}))
    held = k.decide(ToolCall("calc", args, "s")).kind
    assert held == (VerdictKind.ALLOW if args == '{"n": 1}' else VerdictKind.DENY)
    k.set_policy(Policy(allow=("calc",)))
    fresh = Kernel(Policy(allow=("calc",)))
    call = ToolCall("calc", args, "s")
    assert k.decide(call).kind == fresh.decide(call).kind
    assert k.decide(ToolCall("calc", args, "s")).kind == VerdictKind.ALLOW
    assert "calc" not in k.schemas
