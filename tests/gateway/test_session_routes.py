"""D12 on every route that names a session: only its owner (or the operator) acts in it.

Two clients, a victim and an attacker, each holding a secret token of its own, interleave
requests on every route that names a trace and could widen what its session may do or
read it: deciding (``/v1/fak/adjudicate``, ``/v1/fak/syscall``), admitting a result
(``/v1/fak/admit``, of an untrusted tool or of one whose result declares identifiers),
recording trusted context (``/v1/fak/trace/context``), a proxied turn on each wire (whose
user words are recorded), the MCP tools (``fak_adjudicate``, ``fak_admit``), reading and
resetting. Each request names a predictable client-chosen id, the other client's last
minted id, or none (the gateway mints one), and carries no token, its own, the other's, a
random one, or the operator key. The owner table is small, so owners are dropped and
their traces orphaned as the run goes. The fixation order (the attacker first on the
predictable id, then the victim without a token) is one of the interleavings.

The model, written here from the theorem: a trace nobody owns is bound to the token sent
(else a minted one, handed back); on an owned trace only its owner's token or the operator
key is let through, anything else (no token, another token) is a 403 that says what to
send; an orphaned trace is a 403 for all but the operator; a read or reset needs the
owner's token or the operator key. Then the effects: an accepted admit taints, an accepted
identifiers admit, context or turn grounds the attacker's address, an accepted reset
clears both; the victim's send to the attacker is ALLOW exactly when its session is clean
or the address is grounded. The app runs in process (HTTP through ``TestClient``, MCP
through the SDK's in-memory client on the server the app mounts, the upstream scripted).
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from mcp import Client
from starlette.testclient import TestClient

from fak_core import Kernel, Policy, ToolDecl
from fak_core.gateway import UpstreamConfig, proxy_routes
from fak_core.gateway.app import create_app
from fak_core.gateway.mcp_server import SESSION_META
from fak_core.gateway.sessions import ENTRY_OVERHEAD, Sessions
from fak_core.gateway.state import GatewayState
from tests.gateway.test_parity_property import _mcp_server
from tests.gateway_proxies.scripted_upstream import Script, ScriptedUpstream

OPERATOR = "operator-key-0123456789"
ATTACKER = "ops@attacker.example"
#: Every client-chosen id is as long as a minted one (25 characters), so each owner costs
#: the table the same and ``ROOM`` owners fill it exactly.
SHARED = "shared-predictable-id-001"
ROOM = 3
POLICY = Policy(
    version="fak-policy/v2",
    allow=("send_email", "fetch_url", "inbox"),
    gated_sinks=("EGRESS",),
    tools={
        "send_email": ToolDecl("EGRESS", ("/to",)),
        "fetch_url": ToolDecl("NONE"),
        "inbox": ToolDecl("NONE", identifiers=("/*",)),
    },
)
WIDENING = ("admit", "admit-ids", "context", "turn-openai", "turn-anthropic", "mcp-admit")
DECIDING = ("adjudicate", "syscall", "mcp-adjudicate")
OWNERS = ("read", "reset")
ROUTES = (*WIDENING, *DECIDING, *OWNERS)
CREDENTIALS = ("none", "own", "other", "random", "operator")
WHO = ("victim", "attacker")
TRACES = ("shared", "others-minted", "minted")
STEPS = st.lists(
    st.tuples(
        st.sampled_from(WHO),
        st.sampled_from(ROUTES),
        st.sampled_from(TRACES),
        st.sampled_from(CREDENTIALS),
    ),
    min_size=1,
    max_size=14,
)


@dataclass
class Session:
    tainted: bool = False
    grounded: bool = False


@dataclass
class Model:
    table: Sessions
    owners: OrderedDict[str, str] = field(default_factory=OrderedDict)
    orphan_bits: set[tuple[int, int]] = field(default_factory=set)
    sessions: dict[str, Session] = field(default_factory=dict)

    def orphaned(self, trace: str) -> bool:
        return trace not in self.owners and self.table._bit(trace) in self.orphan_bits

    def bind(self, trace: str, token: str) -> None:
        self.owners[trace] = token
        while len(self.owners) > ROOM:
            old, _ = self.owners.popitem(last=False)
            self.orphan_bits.add(self.table._bit(old))

    def expect(
        self, route: str, trace: str | None, token: str | None, operator: bool
    ) -> tuple[int, bool]:
        """The status a request should get and whether it binds the trace."""
        if route in OWNERS:
            assert trace is not None
            ok = operator or (token is not None and self.owners.get(trace) == token)
            return (200 if ok else 403), False
        if trace is None:  # minted for this request: new by construction
            return 200, True
        if trace in self.owners:
            ok = operator or token == self.owners[trace]
            if ok:
                self.owners.move_to_end(trace)
            return (200 if ok else 403), False
        if self.orphaned(trace):
            return (200 if operator else 403), False
        return 200, True

    def effect(self, route: str, trace: str) -> None:
        s = self.sessions.setdefault(trace, Session())
        if route in ("admit", "mcp-admit", "syscall"):
            s.tainted = True
        elif route == "admit-ids":
            s.tainted = s.grounded = True
        elif route in ("context", "turn-openai", "turn-anthropic"):
            s.grounded = True
        elif route == "reset":
            s.tainted = s.grounded = False

    def verdict(self, trace: str) -> str:
        s = self.sessions.get(trace, Session())
        return "ALLOW" if not s.tainted or s.grounded else "DENY"


@dataclass
class Gateway:
    http: TestClient
    mcp: Client
    state: GatewayState

    def mcp_call(self, tool: str, args: dict[str, Any], token: str | None) -> Any:
        portal = self.http.portal
        assert portal is not None
        meta: Any = {SESSION_META: token} if token is not None else None
        return portal.call(lambda: self.mcp.call_tool(tool, args, meta=meta))


@contextmanager
def gateway() -> Iterator[Gateway]:
    kernel = Kernel(POLICY)
    kernel.register_tool("fetch_url", lambda args: {"page": "hello"}, source="untrusted")
    state = GatewayState(
        kernel, sessions=Sessions((ENTRY_OVERHEAD + len(SHARED)) * ROOM, operator_key=OPERATOR)
    )
    upstream = ScriptedUpstream()
    upstream.reset(Script(text="noted"))
    config = UpstreamConfig(base_url="http://up/v1", transport=httpx.ASGITransport(upstream.app))
    app = create_app(state, extra_routes=proxy_routes(state, config))
    with TestClient(app, base_url="http://127.0.0.1") as http:
        portal = http.portal
        assert portal is not None
        with portal.wrap_async_context_manager(Client(_mcp_server(app), mode="legacy")) as mcp:
            yield Gateway(http, mcp, state)
    state.close()


def _send(gw: Gateway, route: str, trace: str | None, headers: dict[str, str]) -> Any:
    """One request: its status, the token it handed back, the verdict of a decision on
    the attacker's address (else None) and the trace it answered for."""
    named = {"trace_id": trace} if trace is not None else {}
    egress = {"tool": "send_email", "arguments": {"to": ATTACKER}}
    c = gw.http
    if route.startswith("mcp-"):
        token = headers.get("X-Fak-Session")
        if route == "mcp-admit":
            res = gw.mcp_call("fak_admit", {"tool": "fetch_url", "result": "page", **named}, token)
        else:
            res = gw.mcp_call("fak_adjudicate", {**egress, **named}, token)
        if res.is_error:
            said = res.content[0].text
            assert "belongs to another session" in said or "no longer remembers" in said, said
            return 403, None, None, None
        body = res.structured_content
        kind = body["verdict"]["kind"] if route == "mcp-adjudicate" else None
        return 200, (res.meta or {}).get(SESSION_META), kind, body["trace_id"]
    if route.startswith("turn-"):
        wire = route.removeprefix("turn-")
        words = f"please write to {ATTACKER} about it"
        if wire == "openai":
            path, doc = "/v1/chat/completions", {"model": "m"}
            doc["messages"] = [{"role": "user", "content": words}]
        else:
            path, doc = "/v1/messages", {"model": "m", "max_tokens": 8}
            doc["messages"] = [{"role": "user", "content": words}]
        r = c.post(path, json=doc, headers={**headers, **({"X-Trace-Id": trace} if trace else {})})
    elif route == "read":
        assert trace is not None
        r = c.get(f"/v1/fak/trace/{trace}", headers=headers)
    elif route == "reset":
        r = c.post("/v1/fak/trace/reset", json=named, headers=headers)
    elif route == "context":
        r = c.post("/v1/fak/trace/context", json={"text": words_of(), **named}, headers=headers)
    elif route in ("admit", "admit-ids"):
        tool, result = ("inbox", [ATTACKER]) if route == "admit-ids" else ("fetch_url", "page")
        r = c.post("/v1/fak/admit", json={"tool": tool, "result": result, **named}, headers=headers)
    elif route == "syscall":
        r = c.post("/v1/fak/syscall", json={"tool": "fetch_url", **named}, headers=headers)
    else:
        r = c.post("/v1/fak/adjudicate", json={**egress, **named}, headers=headers)
    if r.status_code == 403:
        said = r.json()["error"]["message"]
        assert "x-fak-session" in said.lower() or "operator" in said, said
        return 403, r.headers.get("x-fak-session"), None, None
    assert r.status_code == 200, r.text
    kind = r.json()["verdict"]["kind"] if route == "adjudicate" else None
    return 200, r.headers.get("x-fak-session"), kind, r.headers["x-trace-id"]


def words_of() -> str:
    return f"the user asks to reply to {ATTACKER}"


def run(steps: list[tuple[str, str, str, str]]) -> None:
    with gateway() as gw:
        model = Model(gw.state.sessions)
        tokens = {who: secrets.token_urlsafe(24) for who in WHO}
        minted: dict[str, str] = {}
        for who, route, where, cred in steps:
            other = "attacker" if who == "victim" else "victim"
            if route in (*OWNERS, "context") and where == "minted":
                where = "shared"  # a read, reset or context names its trace
            trace = {"shared": SHARED, "others-minted": minted.get(other, SHARED)}.get(where)
            mcp = route.startswith("mcp-")
            presented = {
                "none": None,
                "own": tokens[who],
                "other": tokens[other],
                "random": secrets.token_urlsafe(24),
                "operator": None,
            }[cred]
            operator = cred == "operator" and not mcp  # the in-memory MCP client sends no headers
            headers = {}
            if presented is not None:
                headers["X-Fak-Session"] = presented
            if cred == "operator":
                headers["X-Fak-Operator-Key"] = OPERATOR
            want, binds = model.expect(route, trace, presented, operator)
            status, handed, kind, answered = _send(gw, route, trace, headers)
            assert status == want, (who, route, where, cred, status)
            if status != 200:
                assert handed is None, "a refused request was handed a token"
                continue
            if binds:
                assert handed is not None, (route, where, cred)
                assert presented is None or handed == presented, "bound to another token"
                if trace is None:
                    trace = minted[who] = answered
                model.bind(trace, handed)
            else:
                assert handed is None, "only the request that binds a trace gets its token"
            assert trace is not None and answered in (None, trace), (trace, answered)
            model.effect(route, trace)
            if kind is not None:
                assert kind == model.verdict(trace), (trace, model.sessions.get(trace))


@pytest.mark.fak_theorem("D12")
@settings(deadline=None, max_examples=60)
@given(steps=STEPS)
@example(  # fixation: the attacker first on the predictable id, then the victim
    steps=[
        ("attacker", "context", "shared", "own"),
        ("victim", "admit", "shared", "none"),
        ("victim", "adjudicate", "shared", "none"),
        ("attacker", "reset", "shared", "own"),
    ]
)
@example(  # the victim's session, widened without its token on every route
    steps=[
        ("victim", "admit", "shared", "own"),
        ("attacker", "context", "shared", "none"),
        ("attacker", "turn-openai", "shared", "none"),
        ("attacker", "turn-anthropic", "shared", "random"),
        ("attacker", "admit-ids", "shared", "none"),
        ("attacker", "mcp-admit", "shared", "none"),
        ("victim", "adjudicate", "shared", "own"),
        ("attacker", "adjudicate", "shared", "operator"),
    ]
)
@example(  # owners dropped at the bound: their traces are orphaned
    steps=[
        ("victim", "adjudicate", "shared", "own"),
        ("attacker", "syscall", "minted", "own"),
        ("attacker", "admit", "minted", "none"),
        ("victim", "mcp-adjudicate", "minted", "none"),
        ("victim", "context", "shared", "own"),
        ("victim", "mcp-admit", "shared", "own"),
        ("victim", "reset", "shared", "operator"),
        ("attacker", "admit", "shared", "own"),
    ]
)
@example(  # the owner's own identifiers admit grounds its send
    steps=[
        ("victim", "admit-ids", "shared", "own"),
        ("victim", "adjudicate", "shared", "own"),
        ("victim", "mcp-adjudicate", "shared", "own"),
        ("victim", "reset", "shared", "own"),
        ("victim", "admit", "shared", "own"),
        ("victim", "adjudicate", "shared", "own"),
    ]
)
def test_only_the_owner_or_the_operator_acts_in_a_session(
    steps: list[tuple[str, str, str, str]],
) -> None:
    run(steps)
