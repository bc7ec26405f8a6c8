"""C4.7: every session store ``shared_kernel_options`` gives a replica's kernel is the
shared one. Held results: whichever replica held a payload, every replica reads it back,
the stub issued for it (the stub function applied to its id) and whether a text is one
of the stubs still held, as the held store's definition says (a payload held again under
its key replaces it and its stub). The rate limit's budget and the approval tokens'
spent nonces: two replicas' kernels, sent the same calls in turn, answer as one
in-memory kernel does (one budget per trace in all; a token spent on one replica is
refused on the other).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fak_core import Kernel, Policy, Taint, ToolCall, ToolDecl
from fak_core.approvals import mint_approval
from fak_core.gateway.replicas import shared_kernel_options
from fak_core.ratelimit import RateLimit
from fak_core.redis_state import RedisState
from fak_core.redis_stores import RedisHeldStore
from fak_core.statedown import register_state_down

from .support import RedisServer, closing
from .support import close_states as close_states  # autouse: closes the shared states


def shared(url: str) -> dict[str, Any]:
    state = RedisState(url)
    state.check()
    closing(state)
    return shared_kernel_options(state)


def replicas(url: str, policy: Policy) -> dict[str, Kernel]:
    out = {}
    for name in "AB":
        kernel = Kernel(policy, **shared(url))
        register_state_down(kernel.reasons)
        out[name] = kernel
    return out


# ---------------------------------------------------------------------------- held results
# A payload or a stub's note: any text, lone surrogates included (never the id marker).
text = st.text(st.characters(blacklist_categories=()), max_size=30).filter(
    lambda t: "{id}" not in t
)
hold = st.tuples(
    st.sampled_from("AB"),
    text,
    st.one_of(st.none(), st.sampled_from(["sha256:aa", "sha256:bb", "r\udc80"])),
    st.one_of(st.none(), text),
)


def _stub(note: str) -> Callable[[str], str]:
    return lambda key: '{"_held":"' + key + '","note":"' + note + '"}'


@pytest.mark.fak_theorem("C4.7")
@settings(max_examples=30, deadline=None)
@given(holds=st.lists(hold, min_size=1, max_size=8))
@example(
    holds=[
        ("A", "payload \ud800", None, "note \udfff"),
        ("B", "again", "sha256:aa", "first"),
        ("A", "replaced", "sha256:aa", None),
        ("B", "", "sha256:bb", "second \ud800"),
    ]
)
def test_a_result_held_on_one_replica_is_read_on_every_one(
    redis_server: RedisServer, holds: list[tuple[str, str, str | None, str | None]]
) -> None:
    stores = {name: shared(redis_server.url)["held"] for name in "AB"}
    assert all(isinstance(s, RedisHeldStore) for s in stores.values())
    prefix = "c47h-" + uuid.uuid4().hex[:8] + "-"
    model: dict[str, tuple[str, str | None]] = {}  # id -> (payload, stub)
    issued: list[str] = []
    for name, payload, key, note in holds:
        key = None if key is None else prefix + key
        stub = None if note is None else _stub(note)
        got = stores[name].hold(payload, key, stub=stub)
        if key is None:
            assert got not in model, got  # a fresh id
        else:
            assert got == key
        model[got] = (payload, None if stub is None else stub(got))
        if stub is not None:
            issued.append(stub(got))
    current = {s for _, s in model.values() if s is not None}
    for store in stores.values():
        for held, (payload, stub_text) in model.items():
            assert store.get(held) == payload
            assert store.stub(held) == stub_text
        for stub_text in issued:
            assert store.minted(stub_text) == (stub_text in current), stub_text
        assert store.get(prefix + "never") is None and store.stub(prefix + "never") is None


# ---------------------------------------------------------------------------- the budget
@pytest.mark.fak_theorem("C4.7")
@settings(max_examples=10, deadline=None)
@given(order=st.lists(st.sampled_from("AB"), min_size=1, max_size=7), cap=st.integers(1, 3))
def test_a_rate_limit_is_one_budget_across_replicas(
    redis_server: RedisServer, order: list[str], cap: int
) -> None:
    policy = Policy(allow=("get_a",), rate_limit=RateLimit(cap, 60.0, "trace"))
    pair, oracle = replicas(redis_server.url, policy), Kernel(policy)
    trace = "c47r-" + uuid.uuid4().hex
    for name in order:
        got = pair[name].decide(ToolCall("get_a", "{}", trace))
        want = oracle.decide(ToolCall("get_a", "{}", trace))
        assert (got.kind, got.reason) == (want.kind, want.reason), name


# ---------------------------------------------------------------------------- approvals
KEY = b"k" * 32
PAY = Policy(
    version="fak-policy/v2",
    allow=("pay",),
    tools={"pay": ToolDecl("SPEND", ("/to",), approve=True)},
    gated_sinks=("SPEND",),
)


@pytest.mark.fak_theorem("C4.7")
@settings(max_examples=10, deadline=None)
@given(order=st.lists(st.sampled_from("AB"), min_size=1, max_size=4))
def test_an_approval_spent_on_one_replica_is_refused_on_the_other(
    redis_server: RedisServer, order: list[str]
) -> None:
    pair, oracle = replicas(redis_server.url, PAY), Kernel(PAY)
    trace = "c47a-" + uuid.uuid4().hex
    args = json.dumps({"to": "DE89370400440532013000"})
    for kernel in (*pair.values(), oracle):
        assert kernel.enable_approvals(KEY)
        kernel.register_tool("pay", lambda _args: "paid")
        kernel.ledger.raise_to(trace, Taint.TAINTED)
    # minted once the gateways run: the oracle's in-process store refuses earlier tokens
    token = mint_approval(KEY, trace, "pay", json.loads(args))
    for name in order:
        call = ToolCall.make("pay", args, trace, meta={"witness": token})
        got, got_v = pair[name].syscall(call)
        want, want_v = oracle.syscall(ToolCall.make("pay", args, trace, meta={"witness": token}))
        assert (got_v.kind, got_v.reason, got.payload) == (want_v.kind, want_v.reason, want.payload)
