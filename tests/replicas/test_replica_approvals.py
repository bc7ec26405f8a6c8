"""C4.8 across replicas: an approval token approves one call once, whichever replica sees
it. Spent nonces live in the shared Redis (``fak_core.redis_stores.RedisNonces``), so a
token spent through replica A is refused on replica B; a Redis that cannot be reached
refuses the approval (DENY/STATE_DOWN), it never confirms it.

The oracle is the token's definition, not the code: a token confirms the first time any
replica sees it with its own call, and never again."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core import Kernel, Policy, Reason, Taint, ToolCall, ToolDecl, VerdictKind
from fak_core.approvals import mint_approval
from fak_core.gateway.replicas import shared_kernel_options
from fak_core.redis_state import RedisState
from fak_core.redis_stores import RedisLedger, RedisNonces
from fak_core.statedown import STATE_DOWN, register_state_down

from .support import RedisServer, Replica

KEY = b"r" * 32
POLICY = Policy(
    version="fak-policy/v2",
    allow=("pay",),
    tools={"pay": ToolDecl("SPEND", ("/to",), approve=True)},
    gated_sinks=("SPEND",),
)
ARGS = ({"to": "US133000000121212121212", "amount": 5}, {"to": "DE89370400440532013000"})


def replica(url: str) -> Kernel:
    """One replica: its own kernel and connection, approvals on; only Redis is shared."""
    shared = RedisState(url)
    shared.check()
    kernel = Kernel(POLICY, **shared_kernel_options(shared))
    register_state_down(kernel.reasons)
    assert kernel.enable_approvals(KEY)
    kernel.register_tool("pay", lambda args: "paid")
    return kernel


def close(kernel: Kernel) -> None:
    if isinstance(kernel.ledger, RedisLedger):
        kernel.ledger.state.close()


# A step: which replica, which of the minted tokens, sent with which arguments.
steps = st.lists(
    st.tuples(st.sampled_from("AB"), st.integers(0, 3), st.integers(0, 1)), min_size=1, max_size=10
)


@pytest.mark.fak_theorem("C4.8")
@settings(max_examples=30)
@given(script=steps)
def test_a_token_approves_its_call_once_across_replicas(
    redis_server: RedisServer, script: list[tuple[str, int, int]]
) -> None:
    replicas = {"A": replica(redis_server.url), "B": replica(redis_server.url)}
    trace = "c48-" + uuid.uuid4().hex
    # four tokens: two for each call (the same call may be approved twice, by two tokens)
    tokens = [(mint_approval(KEY, trace, "pay", ARGS[i % 2]), i % 2) for i in range(4)]
    spent: set[int] = set()
    try:
        for kernel in replicas.values():
            kernel.ledger.raise_to(trace, Taint.TAINTED)
        for name, which, args_index in script:
            token, approved_args = tokens[which]
            call = ToolCall.make(
                "pay", json.dumps(ARGS[args_index]), trace, meta={"witness": token}
            )
            result, verdict = replicas[name].syscall(call)
            confirms = args_index == approved_args and which not in spent
            if confirms:
                spent.add(which)
            assert (verdict.kind == VerdictKind.ALLOW) == confirms, (name, which, args_index)
            assert (result.payload == "paid") == confirms
    finally:
        for kernel in replicas.values():
            close(kernel)


@pytest.mark.fak_theorem("C4.8")
def test_an_unreachable_nonce_store_refuses_the_approval(own_redis: RedisServer) -> None:
    # the session's mark in this process, the spent nonces in a Redis that then stops: the
    # refusal can only come from the approval, and it says the state is down
    shared = RedisState(own_redis.url)
    shared.check()
    kernel = Kernel(POLICY, approval_nonces=RedisNonces(shared))
    register_state_down(kernel.reasons)
    assert kernel.enable_approvals(KEY)
    kernel.register_tool("pay", lambda args: "paid")
    trace = "c48-down-" + uuid.uuid4().hex
    kernel.ledger.raise_to(trace, Taint.TAINTED)
    try:
        token = mint_approval(KEY, trace, "pay", ARGS[0])
        call = ToolCall.make("pay", json.dumps(ARGS[0]), trace, meta={"witness": token})
        own_redis.stop()
        result, verdict = kernel.syscall(call)
        assert verdict.kind == VerdictKind.DENY and result.payload == ""
        assert verdict.reason == STATE_DOWN, verdict
        assert verdict.meta.get("witness") == "error"
    finally:
        shared.close()


def test_two_fak_serve_replicas_spend_a_token_once(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """The wire: ``fak serve`` reads FAK_APPROVAL_KEY, and a token spent through one
    replica's ``/v1/fak/syscall`` is refused by the other's."""
    policy = tmp_path / "policy.toml"
    policy.write_text(
        'version = "fak-policy/v2"\nallow = ["echo"]\n'
        '[tools.echo]\nsink = "SPEND"\ndestinations = ["/to"]\napprove = true\n'
    )
    args = ("--policy", str(policy), "--tools", "tests.gateway.sample_tools")
    env = {"FAK_APPROVAL_KEY": KEY.decode()}
    a = Replica(redis_server.url, "AP", *args, env=env)
    b = Replica(redis_server.url, "BP", *args, env=env)
    trace = "c48-wire-" + uuid.uuid4().hex
    try:
        # the echo tool's result is untrusted: the session is tainted after one run
        first = a.post(
            "/v1/fak/syscall", {"tool": "echo", "trace_id": trace, "arguments": {"n": 1}}
        )
        assert first["verdict"]["kind"] == "ALLOW", first
        call: dict[str, Any] = {"tool": "echo", "trace_id": trace, "arguments": {"to": "x@y.z"}}
        held = b.post("/v1/fak/syscall", call)
        assert held["verdict"]["kind"] == "DENY", held
        token = mint_approval(KEY, trace, "echo", call["arguments"])
        ok = a.post("/v1/fak/syscall", {**call, "witness": token})
        assert ok["verdict"]["kind"] == "ALLOW", ok
        replayed = b.post("/v1/fak/syscall", {**call, "witness": token})
        assert replayed["verdict"]["kind"] == "DENY", replayed
        assert replayed["verdict"]["reason"] == Reason.TRUST_VIOLATION.name, replayed
    finally:
        a.stop()
        b.stop()
