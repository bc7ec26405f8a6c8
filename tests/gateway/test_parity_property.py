"""Property (D10.1): for every generated call, the wire verdict is the in-process verdict.

The reference side builds the :class:`~fak_core.calls.ToolCall` itself, calls
``kernel.decide`` / ``kernel.syscall`` and renders with
:func:`fak_core.gateway.render.render_verdict` directly, never through the gateway's own
helpers (``GatewayState.build_call`` / ``render`` / ``adjudicate``), so a wire path that
decides or renders on its own is caught rather than compared with itself.

The wire side is the real app from :func:`create_app`, driven in process: HTTP through
Starlette's ``TestClient`` (lifespan on), MCP through the official SDK ``Client`` over its
in-memory transport, connected to the very ``Server`` the app mounts at ``/mcp``. Both
are set up once per test, not per example. Taint is per trace, so every side of every
example gets a fresh trace prepared identically (same taint raised through the ledger).
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from mcp import Client
from starlette.routing import Route
from starlette.testclient import TestClient

from fak_core.adjudicators import WitnessOutcome
from fak_core.calls import ToolCall
from fak_core.gateway.app import McpHttpEndpoint, create_app
from fak_core.gateway.render import render_verdict
from fak_core.gateway.state import GatewayState
from fak_core.kernel import Kernel
from fak_core.taint import Taint
from fak_core.verdicts import VerdictKind, frozen_meta
from tests.gateway.support import make_kernel

#: The witness text the test resolver confirms; ``REFUTING`` is refuted, anything else abstains.
CONFIRMING = "two-person rule: approved by bob"
REFUTING = "forged approval"


class _TokenResolver:
    """Confirms a REQUIRE_WITNESS when the call carries the confirming witness text."""

    def resolve(self, call: ToolCall, claim: str) -> WitnessOutcome:
        offered = call.meta.get("witness", "")
        if offered == CONFIRMING:
            return WitnessOutcome.CONFIRMED
        if offered == REFUTING:
            return WitnessOutcome.REFUTED
        return WitnessOutcome.ABSTAIN


def _kernel() -> Kernel:
    """The gateway tests' kernel, plus a runnable ``wire_money`` and a witness resolver, so
    every verdict kind the wire renders (ALLOW, TRANSFORM, REQUIRE_WITNESS, DENY of several
    reasons and dispositions, witnessed ALLOW, refuted DENY) is reachable."""
    kernel = make_kernel()
    kernel.register_tool("wire_money", lambda args: {"sent": args.get("amount")})
    kernel.add_witness_resolver("test/token", _TokenResolver())
    return kernel


# --------------------------------------------------------------------------- strategies
KNOWN_TOOLS = [
    "get_user_details",  # allowed, runnable; TRANSFORM when it carries a redacted field
    "search_flights",  # allowed, schema-checked (origin: string, minLength 3)
    "send_email",  # allowed egress sink: DENY/TRUST_VIOLATION on a tainted trace
    "wire_money",  # REQUIRE_WITNESS from a test adjudicator
    "echo",  # allowed, runnable, untrusted source: its result taints the trace
    "shell_rm_rf",  # policy deny POLICY_BLOCK
    "exfiltrate",  # policy deny SECRET_EXFIL
    "read_notes",  # allowed by prefix, not runnable (UNKNOWN_TOOL on syscall)
]
unknown_tools = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True).filter(
    lambda t: t not in KNOWN_TOOLS and not t.startswith(("read_", "get_"))
)
# about one name in five is unknown to the policy
tools = st.sampled_from([*KNOWN_TOOLS, "", ""]).flatmap(
    lambda t: st.just(t) if t else unknown_tools
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-5, 10_000)
    | st.text("abcxyz@. ", max_size=6)
    | st.sampled_from(["https://evil.example/x", "a@example.com", "LAX"])
)
keys = st.sampled_from(
    ["user_id", "origin", "to", "amount", "body", "url", "password", "api_key", "note"]
)
values = scalars | st.lists(scalars, max_size=2)
objects = st.dictionaries(keys, values, max_size=4) | st.builds(
    lambda d, secret: {**d, "password": secret}, st.dictionaries(keys, values, max_size=2), scalars
)


@dataclass(frozen=True)
class Args:
    """How the client sends arguments: ``wire`` goes in the request, ``text`` is what the
    in-process reference hands the kernel."""

    wire: Any
    text: str


def _compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


arguments = st.one_of(
    objects.map(lambda o: Args(o, _compact(o))),  # a JSON object
    objects.map(lambda o: Args(json.dumps(o), json.dumps(o))),  # its JSON text (OpenAI style)
    st.just(Args(None, "{}")),  # absent: the empty object
    st.sampled_from(['{"user_id": ', "{bad json", "{'a': 1}", "}{"]).map(
        lambda t: Args(t, t)  # malformed JSON text
    ),
    st.sampled_from(["[1, 2]", "3", "null", '"text"', "true"]).map(
        lambda t: Args(t, t)  # JSON, but not an object
    ),
)

TAINTS = [Taint.TRUSTED, Taint.TAINTED, Taint.QUARANTINED]


@dataclass(frozen=True)
class WireCall:
    tool: str
    args: Args
    taint: Taint
    witness: str
    principal: str


calls = st.builds(
    WireCall,
    tool=tools,
    args=arguments,
    taint=st.sampled_from(TAINTS),
    witness=st.sampled_from(["", CONFIRMING, REFUTING]),
    principal=st.sampled_from(["", "alice"]),
)


# --------------------------------------------------------------------------- harness
class Harness:
    """One app, one kernel, an HTTP client and an MCP session, for all examples."""

    def __init__(self, client: TestClient, mcp: Client, state: GatewayState) -> None:
        self.http = client
        self.mcp = mcp
        self.kernel = state.kernel
        self._ids = itertools.count()
        self._run = uuid.uuid4().hex[:8]

    def trace(self, side: str, wc: WireCall) -> str:
        """A fresh trace for one side of one example, with the example's taint raised."""
        trace = f"prop-{self._run}-{next(self._ids)}-{side}"
        self.kernel.reset_trace(trace)
        if wc.taint > Taint.TRUSTED:
            self.kernel.ledger.raise_to(trace, wc.taint)
        return trace

    def reference_call(self, wc: WireCall, trace: str) -> ToolCall:
        meta: dict[str, str] = {}
        if wc.witness:
            meta["witness"] = wc.witness
        if wc.principal:
            meta["principal"] = wc.principal
        return ToolCall(
            wc.tool, wc.args.text, trace, wc.principal, frozen_meta(meta), Taint.TAINTED
        )

    def render(self, verdict: Any, result_meta: Any = None) -> dict[str, Any]:
        return render_verdict(verdict, self.kernel.kinds, self.kernel.reasons, result_meta)

    def body(self, wc: WireCall, trace: str) -> dict[str, Any]:
        body: dict[str, Any] = {"tool": wc.tool, "trace_id": trace}
        if wc.args.wire is not None:
            body["arguments"] = wc.args.wire
        if wc.witness:
            body["witness"] = wc.witness
        if wc.principal:
            body["principal"] = wc.principal
        return body

    def expected_adjudication(self, wc: WireCall, trace: str) -> dict[str, Any]:
        verdict = self.kernel.decide(self.reference_call(wc, trace))
        out: dict[str, Any] = {"verdict": self.render(verdict), "trace_id": trace}
        if verdict.kind == VerdictKind.TRANSFORM and verdict.repaired_args is not None:
            out["repaired_arguments"] = verdict.repaired_args
        return out

    def mcp_adjudicate(self, body: dict[str, Any]) -> dict[str, Any]:
        portal = self.http.portal
        assert portal is not None
        res = portal.call(self.mcp.call_tool, "fak_adjudicate", body)
        assert res.is_error is False, res
        text = json.loads(res.content[0].text)
        assert res.structured_content == text
        return dict(text)

    def check(self, wc: WireCall) -> None:
        kernel = self.kernel
        # 1. decide: in process vs POST /v1/fak/adjudicate vs MCP fak_adjudicate
        expected = self.expected_adjudication(wc, self.trace("ref", wc))
        for side in ("http", "mcp"):
            trace = self.trace(side, wc)
            want = {**expected, "trace_id": trace}
            if side == "http":
                r = self.http.post("/v1/fak/adjudicate", json=self.body(wc, trace))
                assert r.status_code == 200, r.text
                assert r.headers["x-trace-id"] == trace
                got = r.json()
            else:
                got = self.mcp_adjudicate(self.body(wc, trace))
            assert got == want, side

        # 2. decide and run: kernel.syscall vs POST /v1/fak/syscall
        ref_trace = self.trace("ref-sys", wc)
        result, verdict = kernel.syscall(self.reference_call(wc, ref_trace))
        trace = self.trace("http-sys", wc)
        r = self.http.post("/v1/fak/syscall", json=self.body(wc, trace))
        assert r.status_code == 200, r.text
        assert r.json() == {
            "verdict": self.render(verdict, result.meta),
            "result": {
                "status": result.status.value,
                "content": result.payload,
                "meta": dict(result.meta),
            },
            "trace_id": trace,
        }
        # the run's effect on the session is the same too (an untrusted result taints it)
        assert kernel.taint(trace) == kernel.taint(ref_trace)


def _mcp_server(app: Any) -> Any:
    for route in app.routes:
        if isinstance(route, Route) and route.path == "/mcp":
            endpoint = route.endpoint
            assert isinstance(endpoint, McpHttpEndpoint)
            return endpoint.server
    raise AssertionError("create_app mounted no /mcp route")


@contextmanager
def harness() -> Iterator[Harness]:
    state = GatewayState(_kernel())
    app = create_app(state)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        portal = client.portal
        assert portal is not None
        with portal.wrap_async_context_manager(Client(_mcp_server(app), mode="legacy")) as mcp:
            yield Harness(client, mcp, state)


# One explicit example per outcome class, so even the small budget of a mutant re-run
# meets every class; Hypothesis generates the rest.
EXPLICIT = [
    WireCall(
        "get_user_details", Args({"user_id": "u1"}, '{"user_id":"u1"}'), Taint.TRUSTED, "", ""
    ),
    WireCall(
        "get_user_details", Args({"password": "pw"}, '{"password":"pw"}'), Taint.TRUSTED, "", ""
    ),
    WireCall("search_flights", Args({"origin": 7}, '{"origin":7}'), Taint.TRUSTED, "", ""),
    WireCall("echo", Args("{bad json", "{bad json"), Taint.TRUSTED, "", ""),
    WireCall("echo", Args("[1, 2]", "[1, 2]"), Taint.TRUSTED, "", "alice"),
    WireCall("frobnicate", Args({}, "{}"), Taint.TRUSTED, "", ""),
    WireCall("shell_rm_rf", Args(None, "{}"), Taint.TRUSTED, "", ""),
    WireCall("wire_money", Args({"amount": 5}, '{"amount":5}'), Taint.TRUSTED, "", ""),
    WireCall("wire_money", Args({"amount": 5}, '{"amount":5}'), Taint.TRUSTED, CONFIRMING, ""),
    WireCall("wire_money", Args({"amount": 5}, '{"amount":5}'), Taint.TRUSTED, REFUTING, ""),
    WireCall(
        "send_email", Args({"to": "a@example.com"}, '{"to":"a@example.com"}'), Taint.TAINTED, "", ""
    ),
    WireCall("echo", Args({"note": "x"}, '{"note":"x"}'), Taint.QUARANTINED, "", ""),
]


@pytest.mark.fak_theorem("D10.1")
def test_wire_verdict_equals_in_process_verdict_for_all_calls() -> None:
    with harness() as h:
        prop = given(wc=calls)(h.check)
        for wc in reversed(EXPLICIT):
            prop = example(wc=wc)(prop)
        settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])(prop)()


def test_explicit_examples_reach_distinct_outcomes() -> None:
    """The explicit examples are only a floor if their verdicts differ from each other."""
    kernel = _kernel()
    seen = set()
    for i, wc in enumerate(EXPLICIT):
        trace = f"explicit-{i}"
        if wc.taint > Taint.TRUSTED:
            kernel.ledger.raise_to(trace, wc.taint)
        meta = {"witness": wc.witness} if wc.witness else {}
        call = ToolCall(wc.tool, wc.args.text, trace, wc.principal, frozen_meta(meta))
        v = kernel.decide(call)
        _, sv = kernel.syscall(call)
        seen.add(
            (kernel.kinds.name(v.kind), kernel.reasons.name(v.reason), kernel.kinds.name(sv.kind))
        )
    assert len(seen) >= 8, seen
