"""D9.1 in process: whose budget each key charges, and what the gateway stamps on a call.

The key oracle is the rule of `fak_core.ratelimit`'s docstring written out here as a
tuple (category, value), so two callers share a budget exactly when the rule says so,
whatever text their values hold (values are chosen to look like another category's key).
The call oracle is `GatewayState.build_call`'s contract: the caller's address and
credential come from the middleware's context, never from the body.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from fak_core import Kernel, Policy, Reason, ToolCall, VerdictKind
from fak_core.gateway.sessions import CALLER
from fak_core.gateway.state import BLANK, GatewayState, WireError
from fak_core.ratelimit import RateLimit
from fak_core.taint import Taint

MODES = ("credential", "client", "trace", "tool", "global")
#: values that spell another category's key: a key without its category would collide
VALUES = ("a", "client:a", "principal:a", "trace:a", "credential:a", "tool:a")


def oracle_key(mode: str, call: ToolCall) -> tuple[str, ...]:
    credential, client = call.meta.get("credential"), call.meta.get("client")
    if mode == "tool":
        return ("tool", call.tool)
    if mode == "global":
        return ("global",)
    if mode == "credential" and credential:
        return ("credential", credential)
    if mode in ("credential", "client") and client:
        return ("client", client)
    if mode == "credential" and call.principal:
        return ("principal", call.principal)
    return ("trace", call.trace_id)


def shapes() -> list[ToolCall]:
    """Calls of every category, each with every value, and pairs that share one field."""
    out: list[ToolCall] = []
    for i, v in enumerate(VALUES):
        tool = ("get_a", "get_b")[i % 2]
        out += [
            ToolCall(tool, "{}", v),
            ToolCall(tool, "{}", "t-p", principal=v),
            ToolCall(tool, "{}", "t-c", meta={"client": v}),
            ToolCall(tool, "{}", "t-c", principal="p", meta={"client": v}),
            ToolCall(tool, "{}", "t-k", meta={"credential": v}),
            ToolCall(tool, "{}", "t-k", principal="p", meta={"credential": v, "client": "a"}),
            ToolCall(tool, "{}", "t-k2", meta={"credential": v, "client": "b"}),
        ]
    return out


@pytest.mark.fak_theorem("D9.1")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("reverse", [False, True])
def test_each_key_charges_exactly_the_callers_its_rule_names(mode: str, reverse: bool) -> None:
    """A cap of one per window: a call passes exactly when no earlier call had its key."""
    k = Kernel(Policy(allow=("get_a", "get_b"), rate_limit=RateLimit(1, 60.0, mode)))
    seen: set[tuple[str, ...]] = set()
    calls = shapes()[::-1] if reverse else shapes()
    for call in calls:
        key = oracle_key(mode, call)
        v = k.decide(call)
        if key in seen:
            assert (v.kind, v.reason) == (VerdictKind.DENY, Reason.RATE_LIMITED), (mode, call)
        else:
            assert v.kind == VerdictKind.ALLOW, (mode, call, v)
        seen.add(key)


@contextmanager
def caller(client: str, credential: str) -> Iterator[None]:
    token = CALLER.set((client, credential))
    try:
        yield
    finally:
        CALLER.reset(token)


@pytest.mark.fak_theorem("D9.1")
@pytest.mark.parametrize("client", ["", "127.0.0.1", "principal:x"])
@pytest.mark.parametrize("credential", ["", "sha256:abc"])
def test_the_gateway_stamps_its_caller_on_every_call(client: str, credential: str) -> None:
    state = GatewayState(Kernel(Policy(allow=("get_a",))))
    fields = [
        ("get_a", None, "", "", ""),
        (" get_a\u3000", {"x": 1}, "t1", "alice", "w"),
        ("get_a", '{"client": "evil"}', "", "bob", ""),
        ("get_a", "{}", "t2", "", "human approved"),
    ]
    minted: set[str] = set()
    with caller(client, credential):
        for tool, args, trace, principal, witness in fields:
            call = state.build_call(tool, args, trace, principal=principal, witness=witness)
            assert call.tool == tool.strip(BLANK) == "get_a"
            assert call.principal == principal and call.args_taint is Taint.TAINTED
            wanted = {
                key: value
                for key, value in (
                    ("witness", witness),
                    ("principal", principal),
                    ("client", client),
                    ("credential", credential),
                )
                if value
            }
            assert dict(call.meta) == wanted, (call.meta, wanted)
            if trace:
                assert call.trace_id == trace
            else:  # a fresh trace for every call that names none
                assert call.trace_id and call.trace_id not in minted
                minted.add(call.trace_id)
        for bad in (None, 5, ["get_a"], "", " ", BLANK):
            with pytest.raises(WireError, match="missing tool name"):
                state.build_call(bad)
